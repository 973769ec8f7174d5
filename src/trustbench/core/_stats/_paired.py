"""Paired comparisons of two configurations on the same cases: McNemar and clustered differences.

Paired comparison is the default way two candidates are compared: the same cases, trials and
clusters on both sides, so case difficulty cancels out of the difference.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

from trustbench.core._stats._cluster import cluster_bootstrap_interval, cluster_robust_interval
from trustbench.core._stats._groups import cluster_sums
from trustbench.core._stats._signflip import (
    Alternative,
    SignFlipResult,
    sign_flip_interval,
    sign_flip_test,
)
from trustbench.core.figures import Figure, FigureUnit, Interval


class McNemarResult(BaseModel):
    """Exact McNemar test of two configurations' binary outcomes on the same cases."""

    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid", frozen=True)

    both: int
    """Cases where both configurations had the outcome."""

    first_only: int
    """Cases where only the first configuration had it (discordant)."""

    second_only: int
    """Cases where only the second configuration had it (discordant)."""

    neither: int
    """Cases where neither had it."""

    p_value: float
    """Two-sided exact p-value: binomial test of first_only among the discordant pairs
    against 1/2. It is 1.0 when there are no discordant pairs (no evidence either way)."""

    method: str = "mcnemar_exact"
    """Always `mcnemar_exact` (binomial on discordant pairs, no continuity correction)."""


def mcnemar_exact(first: Sequence[bool], second: Sequence[bool]) -> McNemarResult:
    """Exact McNemar test on paired binary outcomes.

    McNemar 1947; the exact form is the conditional binomial test on discordant pairs
    (Agresti 2013 §11.1).

    Given b = first-only and c = second-only discordant pairs, under "no difference" b is
    Binomial(b + c, 1/2); the two-sided p-value is scipy's exact binomial test. Concordant pairs
    carry no information about the difference. It treats cases as independent: with related
    variants (a domain group), prefer `paired_difference` with clusters.

    Args:
        first: Outcome per case for the first configuration (e.g. "false approval").
        second: Outcome per case for the second, in the same case order.

    Returns:
        The `McNemarResult` with the 2x2 counts.
    """
    if len(first) != len(second):
        raise ValueError("paired outcomes need the same cases on both sides")
    a = np.asarray(first, dtype=bool)
    b = np.asarray(second, dtype=bool)
    first_only = int(np.sum(a & ~b))
    second_only = int(np.sum(~a & b))
    discordant = first_only + second_only
    from scipy.stats import binomtest  # on use: `run` imports no scipy

    p_value = 1.0 if discordant == 0 else float(binomtest(first_only, discordant, 0.5).pvalue)
    return McNemarResult(
        both=int(np.sum(a & b)),
        first_only=first_only,
        second_only=second_only,
        neither=int(np.sum(~a & ~b)),
        p_value=min(1.0, p_value),
    )


def _diff_sums(
    a: Sequence[float], b: Sequence[float], clusters: Sequence[Hashable] | None
) -> tuple[np.ndarray, np.ndarray]:
    if len(a) != len(b):
        raise ValueError("paired values need the same items on both sides")
    diffs = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    return cluster_sums(diffs, None, clusters)


def paired_cluster_bootstrap_ci(
    a: Sequence[float],
    b: Sequence[float],
    clusters: Sequence[Hashable] | None,
    seed: int,
    resamples: int = 10_000,
    *,
    confidence: float = 0.95,
) -> Interval:
    """Seeded cluster-bootstrap percentile interval for the mean paired difference mean(a - b).

    Clusters (e.g. traces) are resampled whole, so items of one cluster stay together; the
    statistic per resample is sum of differences / number of items. Used for TRB's governance
    gap (G(full) - G(ablation) per intervention, clustered by trace).

    Args:
        a: Value per item under configuration A.
        b: Value per item under configuration B, same items in the same order.
        clusters: Cluster label per item; each item its own cluster if `None`.
        seed: Generator seed (recorded).
        resamples: Bootstrap resamples (recorded).
        confidence: Confidence level.

    Returns:
        The two-sided `Interval` (method `cluster_bootstrap_percentile`).
    """
    y, m = _diff_sums(a, b, clusters)
    return cluster_bootstrap_interval(y, m, seed=seed, resamples=resamples, confidence=confidence)


def sign_flip_pvalue(
    diffs_per_cluster: Sequence[float],
    items_per_cluster: Sequence[float] | None = None,
    *,
    seed: int | None = None,
    resamples: int = 10_000,
    alternative: Alternative = "two_sided",
) -> SignFlipResult:
    """Sign-flip test of "no difference" from per-cluster differences.

    Args:
        diffs_per_cluster: Per cluster, the summed difference (with `items_per_cluster`) or
            the cluster's mean difference (without, giving each cluster equal weight).
        items_per_cluster: Items behind each summed difference; `None` weighs clusters equally.
        seed: Seed for random sign patterns (required above 16 clusters).
        resamples: Random patterns above 16 clusters.
        alternative: `two_sided`, `greater` or `less`.

    Returns:
        The `SignFlipResult` (exact enumeration up to 16 clusters).
    """
    d = np.asarray(diffs_per_cluster, dtype=np.float64)
    n = None if items_per_cluster is None else np.asarray(items_per_cluster, dtype=np.float64)
    return sign_flip_test(d, n, seed=seed, resamples=resamples, alternative=alternative)


def paired_difference(
    name: str,
    a: Sequence[float],
    b: Sequence[float],
    *,
    clusters: Sequence[Hashable] | None,
    description: str,
    cluster: str | None = None,
    unit: FigureUnit = "case",
    confidence: float = 0.95,
    seed: int = 0,
    resamples: int = 10_000,
) -> tuple[Figure, SignFlipResult]:
    """Mean paired difference mean(a - b) with clustered intervals and a sign-flip test.

    Attaches three intervals: cluster-robust t on G - 1 df, the sign-flip interval (exact up
    to 16 clusters) and the seeded cluster bootstrap. The figure's unit count is the number of
    items; its `cluster` names what the G clusters are.

    Args:
        name: Figure name, e.g. `false_approval_rate_difference`.
        a: Per-item values under configuration A (e.g. 1.0 if a case was falsely approved).
        b: Per-item values under configuration B, same items and order.
        clusters: Cluster label per item (e.g. domain group); each item alone if `None`.
        description: What the items are.
        cluster: What a cluster is, e.g. `domain_group`.
        unit: What one item is.
        confidence: Confidence level of every interval.
        seed: Seed for the bootstrap and any Monte Carlo sign patterns (recorded).
        resamples: Bootstrap resamples and Monte Carlo patterns (recorded).

    Returns:
        (figure, test): the difference `Figure` (kind `difference`) and the sign-flip test.
    """
    y, m = _diff_sums(a, b, clusters)
    intervals = [
        cluster_robust_interval(y, m, confidence=confidence),
        sign_flip_interval(y, m, confidence=confidence, seed=seed, resamples=resamples),
        cluster_bootstrap_interval(y, m, seed=seed, resamples=resamples, confidence=confidence),
    ]
    figure = difference_figure(
        name,
        y,
        m,
        intervals=intervals,
        unit=unit,
        unit_count=len(a),
        cluster=cluster,
        description=description,
    )
    return figure, sign_flip_test(y, m, seed=seed, resamples=resamples)


def difference_figure(
    name: str,
    y: np.ndarray,
    m: np.ndarray,
    *,
    intervals: list[Interval],
    unit: FigureUnit,
    unit_count: int,
    cluster: str | None,
    description: str,
) -> Figure:
    """The `difference` figure sum(y) / sum(m) of per-cluster sums, with its given intervals.

    Every clustered paired difference (`paired_difference`, a suite's own paired design such as
    TRB's governance gap) reads its estimate off the same sums its intervals are computed from,
    so the figure is built here once; the caller chooses the intervals and their order.

    Args:
        name: Figure name.
        y: Per-cluster sums of the paired differences.
        m: Per-cluster item counts (the weights of `y`).
        intervals: The intervals to attach, in the order they are recorded.
        unit: What one item is.
        unit_count: How many items the sums hold.
        cluster: What a cluster is.
        description: What the items are.
    """
    return Figure(
        name=name,
        kind="difference",
        numerator=float(y.sum()),
        denominator=float(m.sum()),
        estimate=float(y.sum() / m.sum()),
        unit=unit,
        unit_count=unit_count,
        cluster=cluster,
        description=description,
        intervals=intervals,
    )
