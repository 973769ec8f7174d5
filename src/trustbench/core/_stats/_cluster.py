"""Clustered intervals for a ratio of sums: cluster-robust t and seeded cluster bootstrap.

Both treat the cluster (domain group, trace) as the independent unit: sixty cases in ten groups
run ten times are ten independent draws, not six hundred ("Report Uncertainty Without
Multiplying the Case Count"). The estimand is the ratio R = sum(y_g) / sum(m_g) of per-cluster
sums: a rate when y counts events among m trials, a mean when m counts items.
"""

from __future__ import annotations

import math

import numpy as np

from trustbench.core._stats._groups import FloatArray
from trustbench.core.figures import Interval, Sidedness

DEFAULT_CHUNK_ELEMENTS = 1 << 22
"""Default cap on resample-by-cluster entries held at once (4,194,304 entries, ~16 MiB of
int32 indices): the bootstrap's working memory, whatever the number of resamples."""


EQUAL_RATIOS = (
    "every cluster has the same ratio (e.g. no events anywhere), so the between-cluster "
    "variance is 0 and a clustered interval would have zero width; use an exact interval"
)
"""Reason given when all clusters agree exactly: a zero-width interval would claim certainty."""


def equal_ratios(y: FloatArray, m: FloatArray) -> bool:
    """Whether every cluster with a positive denominator has the same ratio y_g / m_g."""
    positive = m > 0
    if not np.any(positive):
        return False
    ratios = y[positive] / m[positive]
    return bool(np.all(np.abs(ratios - ratios[0]) <= 1e-12 * max(1.0, abs(ratios[0]))))


def _clip(value: float | None, bounds: tuple[float, float] | None) -> float | None:
    if value is None or bounds is None:
        return value
    return min(max(value, bounds[0]), bounds[1])


def cluster_robust_interval(
    y: FloatArray,
    m: FloatArray,
    *,
    confidence: float = 0.95,
    sidedness: Sidedness = "two_sided",
    clip: tuple[float, float] | None = None,
) -> Interval:
    """Cluster-robust interval for R = sum(y) / sum(m), with t on G - 1 degrees of freedom.

    Linearised (Taylor) variance of a ratio estimator over G sampled clusters (Cochran 1977,
    Sampling Techniques §6.4; the CR1 small-sample factor G/(G-1) as in Cameron & Miller 2015,
    "A Practitioner's Guide to Cluster-Robust Inference" §II.C):

        Var(R) = G / (G - 1) * sum_g (y_g - R m_g)^2 / (sum_g m_g)^2

    and R ± t_{G-1} * sqrt(Var(R)): with few clusters the t reference on G - 1 degrees of
    freedom is what keeps coverage near nominal (Cameron & Miller §VI). With every m_g = 1 this
    is the usual mean ± t * s / sqrt(G) of cluster values.

    Args:
        y: Per-cluster numerator sums.
        m: Per-cluster denominator sums.
        confidence: Confidence level.
        sidedness: `two_sided`, `upper` or `lower`.
        clip: Natural range of the estimand (e.g. (0, 1) for a rate); the ends are clipped to
            it and the interval notes it. The unbounded side of a one-sided bound takes the
            range's limit when given, else `None`.

    Returns:
        The `Interval` (method `cluster_robust_t`). It is `not_computable` with fewer than two
        clusters, a zero total denominator, or a zero estimated variance (e.g. no events in
        any cluster), because a zero-width interval would claim certainty the data lack.
    """
    groups = int(y.size)
    base = {"method": "cluster_robust_t", "confidence": confidence, "sidedness": sidedness}
    total = float(m.sum())
    if groups < 2 or total <= 0:
        reason = "fewer than two clusters" if groups < 2 else "total denominator is 0"
        return Interval(**base, lower=None, upper=None, groups=groups, not_computable=reason)
    ratio = float(y.sum()) / total
    variance = groups / (groups - 1) * float(np.sum((y - ratio * m) ** 2)) / total**2
    if variance <= 0.0:
        return Interval(**base, lower=None, upper=None, groups=groups, not_computable=EQUAL_RATIOS)
    alpha = 1.0 - confidence
    tail = alpha / 2 if sidedness == "two_sided" else alpha
    from scipy.stats import t as student_t  # on first use: `run` imports this module

    half = float(student_t.ppf(1.0 - tail, groups - 1)) * math.sqrt(variance)
    lower: float | None = ratio - half
    upper: float | None = ratio + half
    if sidedness == "upper":
        lower = clip[0] if clip else None
    elif sidedness == "lower":
        upper = clip[1] if clip else None
    clipped_lower, clipped_upper = _clip(lower, clip), _clip(upper, clip)
    note = None
    if (clipped_lower, clipped_upper) != (lower, upper):
        note = f"clipped to the estimand's range [{clip[0]}, {clip[1]}]" if clip else None
    return Interval(**base, lower=clipped_lower, upper=clipped_upper, groups=groups, note=note)


def bootstrap_ratio_distribution(
    y: FloatArray,
    m: FloatArray,
    *,
    seed: int,
    resamples: int,
    chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
) -> tuple[FloatArray, int]:
    """Draw the cluster-bootstrap distribution of sum(y)/sum(m), in fixed-size chunks.

    Each resample draws G clusters with replacement (Efron & Tibshirani 1993 ch. 6; resampling
    whole clusters as in Field & Welsh 2007). Resamples are generated a chunk at a time, so
    working memory is bounded by `chunk_elements` entries plus one float per resample, never
    resamples x G. The generator is numpy's PCG64 seeded with `seed`; chunks consume its
    stream in order, so the result does not depend on the chunk size.

    Two exact ways to draw, chosen from the data alone (so a seed always means one thing):

    - few distinct clusters (K distinct (y_g, m_g) pairs with 4K <= G, e.g. 0/1 outcomes per
      case): a resample only matters through how many of its G draws fall on each distinct
      pair, and those counts are Multinomial(G, n_k / G) with n_k the pairs' multiplicities.
      Drawing the counts directly gives the same distribution in O(K) per resample;
    - otherwise: draw G cluster indices per resample and sum y and m over them.

    Args:
        y: Per-cluster numerator sums.
        m: Per-cluster denominator sums.
        seed: Generator seed (recorded in the interval).
        resamples: Number of bootstrap resamples.
        chunk_elements: Most resample-by-cluster (or resample-by-pair) entries held at once.

    Returns:
        (statistics, chunks): one statistic per resample (NaN where a resample's denominator
        is 0) and the number of chunks processed.
    """
    if resamples < 1:
        raise ValueError("resamples must be >= 1")
    groups = int(y.size)
    rng = np.random.default_rng(seed)
    pairs, multiplicity = np.unique(np.stack([y, m], axis=1), axis=0, return_counts=True)
    few = 4 * pairs.shape[0] <= groups
    width = pairs.shape[0] if few else groups
    rows = max(1, chunk_elements // width)
    index_type = np.int32 if groups < 2**31 else np.int64
    # With equal cluster sizes the resampled denominator is always G * m_0: skip its gather.
    constant_m = bool(np.all(m == m[0]))
    statistics = np.empty(resamples, dtype=np.float64)
    chunks = 0
    for start in range(0, resamples, rows):
        count = min(rows, resamples - start)
        if few:
            draws = rng.multinomial(groups, multiplicity / groups, size=count)
            numerator = draws @ pairs[:, 0]
            denominator = draws @ pairs[:, 1]
        else:
            picks = rng.integers(0, groups, size=(count, groups), dtype=index_type)
            numerator = y[picks].sum(axis=1)
            denominator = (
                np.full(count, groups * float(m[0])) if constant_m else m[picks].sum(axis=1)
            )
        with np.errstate(invalid="ignore", divide="ignore"):
            statistics[start : start + count] = np.where(
                denominator > 0, numerator / np.where(denominator > 0, denominator, 1.0), np.nan
            )
        chunks += 1
    return statistics, chunks


def cluster_bootstrap_interval(
    y: FloatArray,
    m: FloatArray,
    *,
    seed: int,
    resamples: int = 10_000,
    confidence: float = 0.95,
    sidedness: Sidedness = "two_sided",
    chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
) -> Interval:
    """Seeded cluster-bootstrap percentile interval for R = sum(y) / sum(m).

    Percentile interval: the alpha/2 and 1 - alpha/2 quantiles of the bootstrap distribution
    (Efron & Tibshirani 1993 §13.3); one-sided bounds use the alpha or 1 - alpha quantile. Its
    bounds stay inside the estimand's range automatically. With few clusters it under-covers;
    report it beside `cluster_robust_interval`, not instead of an exact method.

    Args:
        y: Per-cluster numerator sums.
        m: Per-cluster denominator sums.
        seed: Generator seed (recorded).
        resamples: Number of resamples (recorded).
        confidence: Confidence level.
        sidedness: `two_sided`, `upper` or `lower`.
        chunk_elements: Working-memory cap, see `bootstrap_ratio_distribution`.

    Returns:
        The `Interval` (method `cluster_bootstrap_percentile`), with seed and resamples.
    """
    groups = int(y.size)
    base = {
        "method": "cluster_bootstrap_percentile",
        "confidence": confidence,
        "sidedness": sidedness,
        "seed": seed,
        "resamples": resamples,
        "groups": groups,
    }
    if groups < 2:
        return Interval(**base, lower=None, upper=None, not_computable="fewer than two clusters")
    if equal_ratios(y, m):
        return Interval(**base, lower=None, upper=None, not_computable=EQUAL_RATIOS)
    statistics, _ = bootstrap_ratio_distribution(
        y, m, seed=seed, resamples=resamples, chunk_elements=chunk_elements
    )
    undefined = int(np.isnan(statistics).sum())
    kept = statistics[~np.isnan(statistics)]
    if kept.size == 0:
        return Interval(
            **base, lower=None, upper=None, not_computable="every resample had denominator 0"
        )
    alpha = 1.0 - confidence
    if sidedness == "two_sided":
        low, high = np.quantile(kept, [alpha / 2, 1 - alpha / 2])
        lower, upper = float(low), float(high)
    elif sidedness == "upper":
        lower, upper = None, float(np.quantile(kept, 1 - alpha))
    else:
        lower, upper = float(np.quantile(kept, alpha)), None
    note = (
        f"{undefined} of {resamples} resamples had denominator 0 and were left out"
        if undefined
        else None
    )
    return Interval(**base, lower=lower, upper=upper, note=note)
