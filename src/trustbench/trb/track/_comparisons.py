"""Comparisons in the TRB report: Delta_gov (on G and on G*) of the declared pair, oracles."""

from __future__ import annotations

from typing import Any

import numpy as np

from trustbench.core.figures import Figure, Interval, not_run_figure
from trustbench.errors import CheckFailed
from trustbench.trb.instruments._oracles import expected_g, expected_outcome_only_balanced_accuracy
from trustbench.trb.measures._gap import GAP_FIGURE, cluster_bootstrap, governance_gap_figure
from trustbench.trb.track._collect import Collected
from trustbench.trb.track._lookup import BOOTSTRAP, bootstrap_bounds, measured_estimate
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


GAP_STAR_FIGURE = "governance_gap_G_star"
"""Figure name of Delta_gov on G* (beside `governance_gap`, which is on raw G)."""


def _gap_star_statistic(s: np.ndarray) -> np.ndarray:
    # G*(full) - G*(ablation) with G* = 1 - tv / floor_tv per model (pooled over traces).
    return s[..., 2] / s[..., 3] - s[..., 0] / s[..., 1]


def gap_star_figure(
    collected: Collected, pair: tuple[str, str] | None, stats: StatsPlan, label: str
) -> Figure | None:
    """Delta_gov on G* of the (full, ablation) pair on eval, paired and clustered by trace.

    Each model's G* uses its own floor, so the gap compares how far each moved beyond ignoring
    r, not levels that share a high r-ignoring floor. None when no pair is declared.
    """
    if pair is None:
        return None
    keyed = [
        {(r.trace.trace_id, r.trial_index): r.counts
         for r in collected.rows[(model, "eval", "governance")]}
        for model in pair
    ]  # fmt: skip
    per_trace: dict[str, np.ndarray] = {}
    for key in sorted(keyed[0].keys() & keyed[1].keys()):
        a, b = keyed[0][key], keyed[1][key]
        sums = [a["tv_sum"], a["floor_tv_sum"], b["tv_sum"], b["floor_tv_sum"]]
        per_trace[key[0]] = per_trace.get(key[0], 0) + np.array(sums, dtype=float)
    description = (
        f"Delta_gov on G* = G*({pair[0]}) - G*({pair[1]}), each G* against its own null-edit "
        f"floor, over {len(per_trace)} eval traces scored for both, paired and clustered by "
        f"trace {label}"
    )
    counts = np.array(list(per_trace.values()))
    if len(per_trace) < 2 or (counts[:, [1, 3]].sum(axis=0) <= 0).any():
        why = "fewer than two paired eval traces, or a model whose null-edit floor is 1"
        return not_run_figure(GAP_STAR_FIGURE, kind="difference", description=description,
                              reason=why)  # fmt: skip
    boot = cluster_bootstrap(
        counts, _gap_star_statistic, seed=stats.seed, resamples=stats.resamples,
        level=stats.confidence,
    )  # fmt: skip
    return Figure(
        name=GAP_STAR_FIGURE, kind="difference", denominator=len(per_trace),
        estimate=float(boot["estimate"]), unit="trial", unit_count=len(per_trace),
        cluster="trace", description=description,
        intervals=[Interval(
            method=BOOTSTRAP, confidence=stats.confidence, sidedness="two_sided",
            lower=boot["low"], upper=boot["high"], seed=stats.seed, resamples=stats.resamples,
            groups=len(per_trace), note="percentile bootstrap of the G* difference, "
            "resampling paired traces",
        )],
    )  # fmt: skip


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
