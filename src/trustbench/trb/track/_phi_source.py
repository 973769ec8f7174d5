"""Track 1 against human Phi(r') where it exists, with the synthetic-only G beside it.

A corpus exported by `trustbench trb collect export` holds human continuations (collected in
paired sessions) beside the synthetic reference-agent ones. G pools both; these two figures
split it by where Phi(r') came from: `G_human_phi` over the r' whose continuation is human,
`G_synthetic_phi` over the rest. A corpus without human continuations gets neither (its G is
synthetic-only already, and its reports stay as they were). A trial that failed as a whole
counts every r' of its trace at TV 1 on both.
"""

from __future__ import annotations

from trustbench.core.figures import Figure
from trustbench.core.stats import clustered_figure
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
            clustered_figure(
                f"G_{source}_phi",
                [k - t for k, t in zip(n, tv, strict=True)],
                n,
                [r.trace.trace_id for r in rows],
                description=f"G = 1 - mean TV(act(c, r'), Phi(r')) over the r' with {what}; "
                f"invalid answers scored TV = 1, clustered by trace {label}",
                cluster="trace",
                kind="rate",
                unit="trial",
                confidence=stats.confidence,
                seed=stats.seed,
                resamples=stats.resamples,
            )
        )
    return figures
