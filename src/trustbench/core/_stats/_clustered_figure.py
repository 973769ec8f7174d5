"""Build a `Figure` for a ratio of sums over clusters, with clustered intervals attached."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from trustbench.core._stats._cluster import cluster_bootstrap_interval, cluster_robust_interval
from trustbench.core._stats._groups import cluster_sums
from trustbench.core.figures import Figure, FigureKind, FigureUnit


def clustered_figure(
    name: str,
    numerators: Sequence[float],
    denominators: Sequence[float] | None,
    clusters: Sequence[Hashable],
    *,
    description: str,
    cluster: str,
    kind: FigureKind = "rate",
    unit: FigureUnit = "case",
    confidence: float = 0.95,
    seed: int = 0,
    resamples: int = 10_000,
) -> Figure:
    """A rate or mean over items grouped in clusters, with clustered intervals.

    Attaches cluster-robust t and seeded bootstrap intervals: the cluster, not the item, is the
    independent unit.

    Typical uses: a false-approval rate over deny-reference cases clustered by domain group
    (numerators = per-case 0/1 or per-case trial mean, denominators `None`), or events over
    trials per case (numerators = events, denominators = trials) clustered by group.

    Args:
        name: Figure name.
        numerators: Per item, the event count or value.
        denominators: Per item, the trials behind the numerator; `None` for one per item.
        clusters: Cluster label per item.
        description: What the denominator counts.
        cluster: What a cluster is (e.g. `domain_group`).
        kind: `rate` (intervals clipped to [0, 1]) or `mean`.
        unit: What one item is.
        confidence: Confidence level.
        seed: Bootstrap seed (recorded).
        resamples: Bootstrap resamples (recorded).

    Returns:
        The `Figure`; `not_applicable` when the total denominator is 0.
    """
    y, m = cluster_sums(numerators, denominators, clusters)
    total = float(m.sum())
    if total <= 0:
        return Figure(
            name=name,
            kind=kind,
            status="not_applicable",
            numerator=float(y.sum()),
            denominator=0,
            unit=unit,
            unit_count=len(numerators),
            cluster=cluster,
            description=description,
            reason="denominator is 0",
        )
    clip = (0.0, 1.0) if kind == "rate" else None
    numerator = float(y.sum())
    return Figure(
        name=name,
        kind=kind,
        numerator=int(numerator) if numerator.is_integer() else numerator,
        denominator=int(total) if total.is_integer() else total,
        estimate=numerator / total,
        unit=unit,
        unit_count=len(numerators),
        cluster=cluster,
        description=description,
        intervals=[
            cluster_robust_interval(y, m, confidence=confidence, clip=clip),
            cluster_bootstrap_interval(y, m, seed=seed, resamples=resamples, confidence=confidence),
        ],
    )
