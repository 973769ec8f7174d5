"""Tracks 1 and 3 against human paired data where it exists, the synthetic-only figure beside.

A corpus exported by `trustbench trb collect export` holds human continuations (collected in
paired sessions) beside the synthetic reference-agent ones. G pools both; these two figures
split it by where Phi(r') came from: `G_human_phi` over the r' whose continuation is human,
`G_synthetic_phi` over the rest. A corpus without human continuations gets neither (its G is
synthetic-only already, and its reports stay as they were). A trial that failed as a whole
counts every r' of its trace at TV 1 on both.

Track 3: `by_session` adds balanced accuracy over the outcome traces of human paired sessions
(`Trace.session` set: the participant's move and the protocol's exogenous change caused the
labelled outcome) beside balanced accuracy over the reference-agent traces, when a run has both.
"""

from __future__ import annotations

from collections.abc import Callable

from trustbench.core.figures import Figure, not_run_figure
from trustbench.trb.track._lookup import measured_estimate
from trustbench.trb.track._measure_common import trace_figure
from trustbench.trb.track._measures import MeasureRow, StatsPlan

SOURCES = {"human": "human Phi(r') (paired sessions)", "synthetic": "synthetic Phi(r') only"}
"""Figure suffix -> what its items are."""


def _items(row: MeasureRow, source: str) -> int:
    return sum(
        (cf.continuation_source == "human") == (source == "human")
        for step in row.trace.steps
        for cf in step.counterfactuals
    )


def phi_source_figures(rows: list[MeasureRow], stats: StatsPlan, label: str) -> list[Figure]:
    """`G_human_phi` and `G_synthetic_phi` when any row's trace holds a human continuation."""
    if not any(_items(r, "human") for r in rows):
        return []
    figures = []
    for source, what in SOURCES.items():
        n = [float(_items(r, source)) for r in rows]
        tv = [float(r.counts.get(f"{source}_phi_tv_sum", k)) for r, k in zip(rows, n, strict=True)]
        figures.append(
            trace_figure(
                f"G_{source}_phi", rows, [k - t for k, t in zip(n, tv, strict=True)], n, stats,
                f"G = 1 - mean TV(act(c, r'), Phi(r')) over the r' with {what}; "
                f"invalid answers scored TV = 1, clustered by trace {label}",
            )
        )  # fmt: skip
    return figures


BalancedFigure = Callable[[list[MeasureRow], StatsPlan, str], Figure]
"""Track 3's balanced-accuracy figure over some rows (`AttributionMeasure._balanced_figure`)."""


def by_session(
    balanced: BalancedFigure, rows: list[MeasureRow], stats: StatsPlan, label: str
) -> list[Figure]:
    """Balanced accuracy on human-session outcome traces beside the reference traces' figure."""
    if not any(r.trace.session for r in rows):
        return []
    parts = (
        ("balanced_accuracy_human_sessions", [r for r in rows if r.trace.session],
         "outcome traces of human paired sessions"),
        ("balanced_accuracy_reference_traces", [r for r in rows if not r.trace.session],
         "reference-agent traces (synthetic only)"),
    )  # fmt: skip
    out = []
    for name, part, what in parts:
        text = f"over the {what} {label}"
        if not part:
            out.append(not_run_figure(name, description=text, reason=f"no {what} in this run"))
            continue
        out.append(balanced(part, stats, text).model_copy(update={"name": name}))
    return out


def _beside(figures: list[Figure], name: str, other: str, missing: str) -> tuple[float, str] | None:
    """`name`'s estimate and `other`'s formatted (or `missing`); None if `name` is unmeasured."""
    value = measured_estimate(figures, name)
    if value is None:
        return None
    beside = measured_estimate(figures, other)
    return value, missing if beside is None else f"{beside:.3f}"


def paired_data_flags(candidate: str, figures: list[Figure]) -> list[str]:
    """Report flags: G against human Phi(r') and Track 3 on human sessions, figures beside."""
    flags = []
    g = _beside(figures, "G_human_phi", "G_synthetic_phi", "no synthetic r'")
    if g is not None:
        flags.append(f"{candidate}: G against human Phi(r') {g[0]:.3f}; synthetic-only G {g[1]}")
    ba = _beside(
        figures, "balanced_accuracy_human_sessions", "balanced_accuracy_reference_traces",
        "not measured",
    )  # fmt: skip
    if ba is not None:
        flags.append(
            f"{candidate}: Track 3 balanced accuracy on human-session outcomes {ba[0]:.3f}; "
            f"on the reference traces {ba[1]}"
        )
    return flags
