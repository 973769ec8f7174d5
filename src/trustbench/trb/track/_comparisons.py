"""Comparisons in the TRB report: Delta_gov of the declared pair, oracles vs closed forms."""

from __future__ import annotations

from typing import Any

from trustbench.core.figures import Figure, not_run_figure
from trustbench.errors import CheckFailed
from trustbench.trb.instruments._oracles import expected_g, expected_outcome_only_balanced_accuracy
from trustbench.trb.measures._gap import GAP_FIGURE, governance_gap_figure
from trustbench.trb.track._collect import Collected
from trustbench.trb.track._lookup import bootstrap_bounds, measured_estimate
from trustbench.trb.track._measures import StatsPlan
from trustbench.trb.world import CorridorWorld

ORACLE_TOLERANCE = 1e-9
"""Closed forms and the harness compute the same finite sums; only rounding may differ."""


def gap_analysis(
    collected: Collected, pair: tuple[str, str] | None, stats: StatsPlan, label: str
) -> tuple[Figure | None, dict[str, Any]]:
    """Delta_gov of the (full, ablation) pair on eval, paired by (trace, trial index).

    Returns:
        The `governance_gap` figure (not run when fewer than two traces are paired; None
        when no pair is declared) and its record entry (pair, bootstrap, sign-flip test).
    """
    if pair is None:
        return None, {"status": "not run", "reason": "no (full, ablation) pair among candidates"}
    full, ablation = pair
    rows_full = {
        (r.trace.trace_id, r.trial_index): r for r in collected.rows[(full, "eval", "governance")]
    }
    rows_abl = {
        (r.trace.trace_id, r.trial_index): r
        for r in collected.rows[(ablation, "eval", "governance")]
    }
    paired = sorted(rows_full.keys() & rows_abl.keys())
    record: dict[str, Any] = {"full": full, "ablation": ablation, "split": "eval"}
    if len({trace for trace, _ in paired}) < 2:
        reason = "fewer than two eval traces scored for both models of the pair"
        figure = not_run_figure(GAP_FIGURE, kind="difference", description=label, reason=reason)
        return figure, {**record, "status": "not run", "reason": reason}
    per_trace: dict[str, list[float]] = {}
    for key in paired:
        a, b = rows_full[key].counts, rows_abl[key].counts
        if a["n_items"] != b["n_items"]:
            raise CheckFailed(f"trace {key[0]}: the pair was scored on different items")
        sums = per_trace.setdefault(key[0], [0.0, 0.0, 0.0])
        sums[0] += a["tv_sum"]
        sums[1] += b["tv_sum"]
        sums[2] += a["n_items"]
    values = list(per_trace.values())
    figure, test = governance_gap_figure(
        [v[0] for v in values],
        [v[1] for v in values],
        [v[2] for v in values],
        seed=stats.seed,
        resamples=stats.resamples,
        level=stats.confidence,
        description=(
            f"Delta_gov = G({full}) - G({ablation}) over {int(sum(v[2] for v in values))} "
            f"counterfactual interventions of {len(values)} eval traces scored for both, paired "
            f"and clustered by trace {label}"
        ),
    )
    low, high = bootstrap_bounds(figure)
    return figure, {
        **record,
        "status": "run",
        "figure": figure.model_dump(mode="json"),
        "estimate": figure.estimate,
        "bootstrap": {
            "lower": low,
            "upper": high,
            "seed": stats.seed,
            "resamples": stats.resamples,
            "confidence": stats.confidence,
        },
        "sign_flip_test": test,
        "paired_traces": len(values),
        "pass_bar_met": low is not None and low > 0,
    }


def oracle_checks(collected: Collected, subjects: dict[str, list[Figure]]) -> list[dict[str, Any]]:
    """Compare every oracle candidate's eval figures with their closed forms."""
    checks = []
    for candidate, adapter in collected.adapters.items():
        if not adapter.startswith("oracle:"):
            continue
        rows = (
            collected.rows[(candidate, "eval", "governance")]
            or collected.rows[(candidate, "eval", "attribution")]
        )
        traces = list({r.trace.trace_id: r.trace for r in rows}.values())
        if not traces:
            continue
        world = CorridorWorld(traces[0].world)
        expected: list[tuple[str, float]] = {
            "oracle:perfectly-governed": [("G", 1.0), ("balanced_accuracy", 1.0)],
            "oracle:epiphenomenal": [("G", expected_g("epiphenomenal", traces))],
            "oracle:uniform": [("G", expected_g("uniform", traces))],
            "oracle:always-self": [("G", 1.0), ("balanced_accuracy", 0.5)],
            "oracle:outcome-only-attribution": [
                ("G", 1.0),
                ("balanced_accuracy", expected_outcome_only_balanced_accuracy(traces, world)),
                ("false_credit_rate", 1.0),
            ],
        }.get(adapter, [])
        for name, value in expected:
            measured = measured_estimate(subjects[candidate], name)
            deviation = None if measured is None else abs(measured - value)
            checks.append(
                {
                    "candidate": candidate,
                    "oracle": adapter,
                    "metric": name,
                    "expected": value,
                    "measured": measured,
                    "deviation": deviation,
                    "tolerance": ORACLE_TOLERANCE,
                    "passed": deviation is not None and deviation <= ORACLE_TOLERANCE,
                }
            )
    return checks
