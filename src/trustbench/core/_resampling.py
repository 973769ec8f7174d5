"""Clustered and paired figures behind `trustbench.core.stats` (import them from there).

Cluster-robust and bootstrap intervals for a ratio of sums and the figures built from them,
sign-flip tests, and paired comparisons of two configurations on the same cases.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel

from trustbench._docstrings import documented
from trustbench.core._distributions import binomial_cdf, student_t_quantile
from trustbench.core._intervals import FloatArray, cluster_sums
from trustbench.core.figures import Figure, FigureKind, FigureUnit, Interval, Sidedness

# ------------------------------------------------------------------------------------------------
# Clustered intervals for a ratio of sums: cluster-robust t and seeded cluster bootstrap.
#
# Both treat the cluster (domain group, trace) as the independent unit: sixty cases in ten groups
# run ten times are ten independent draws, not six hundred ("Report Uncertainty Without
# Multiplying the Case Count"). The estimand is the ratio R = sum(y_g) / sum(m_g) of per-cluster
# sums: a rate when y counts events among m trials, a mean when m counts items.

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
    # Student's t quantile (`scipy.stats.t.ppf`'s value), in pure Python: a reviewer report
    # imports no scipy (`_distributions`).
    half = student_t_quantile(groups - 1, 1.0 - tail) * math.sqrt(variance)
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


# ------------------------------------------------------------------------------------------------
# Build a `Figure` for a ratio of sums over clusters, with clustered intervals attached.


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
    bounds: tuple[float, float] | None = None,
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
        bounds: The estimand's natural range when it is a proportion reported as a `mean` (a
            reach probability, a share of episodes): the cluster-robust t interval, symmetric
            about the estimate, can leave the range near 0 or 1, and is clipped to it with a
            note saying so; the bootstrap percentile interval stays inside by construction.
            A `rate` is bounded by (0, 1) whatever is given; leave it `None` for a figure that
            is not a proportion (a difference, a ratio), which is never clipped.

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
    clip = (0.0, 1.0) if kind == "rate" else bounds
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


# ------------------------------------------------------------------------------------------------
# Sign-flip (randomisation) test and interval for a paired difference over clusters.
#
# Under the null hypothesis that the two configurations are exchangeable within each cluster,
# swapping them in a cluster flips the sign of that cluster's summed difference D_g, so every one
# of the 2^G sign patterns is equally likely (Fisher 1935 §21; for clustered data, Canay, Romano
# & Shaikh 2017, "Randomization Tests Under an Approximate Symmetry Assumption"). The statistic
# is the pooled mean difference T = sum_g s_g D_g / sum_g n_g.
#
# G <= 16 clusters: all 2^G patterns are enumerated and the p-value is exact. More clusters: B
# seeded random patterns, p = (1 + #{|T*| >= |T|}) / (1 + B), which is a valid p-value for any B
# (Phipson & Smyth 2010). Random patterns are drawn in chunks, keeping only two numbers per
# pattern, so memory does not grow with G x B.

Alternative = Literal["two_sided", "greater", "less"]
"""Alternative hypothesis of a test: difference != 0, > 0, or < 0."""

MAX_EXACT_CLUSTERS = 16
"""Up to this many clusters every sign pattern is enumerated (2^16 = 65,536 patterns)."""

_CHUNK_ELEMENTS = 1 << 22
# Relative tolerance for ties between |T*| and |T|: floating sums of the same numbers in a
# different order may differ in the last bits, and a tie must count as "at least as extreme".
_TIE = 1e-9


class SignFlipResult(BaseModel):
    """Outcome of a sign-flip test of "no difference" (two-sided unless stated)."""

    model_config = documented(extra="forbid", frozen=True)

    statistic: float
    """Observed pooled mean difference sum(D_g) / sum(n_g)."""

    p_value: float
    """Share of sign patterns at least as extreme as the observed one (see module notes)."""

    method: str
    """`sign_flip_exact` (all 2^G patterns) or `sign_flip_monte_carlo` (seeded random ones)."""

    groups: int
    """Number of clusters G."""

    patterns: int
    """Sign patterns evaluated: 2^G when exact, else the number of random patterns B."""

    seed: int | None
    """Seed of the random patterns; `None` when exact."""

    alternative: Alternative
    """`two_sided` (difference != 0), `greater` (> 0) or `less` (< 0)."""


class _Patterns:
    """Per-pattern sums a_s = sum s_g D_g / N and b_s = sum s_g n_g / N.

    T_s(delta) for the shifted differences D_g - delta n_g is then a_s - delta b_s, so a shift
    is tested without revisiting the data.
    """

    def __init__(self, d: FloatArray, n: FloatArray, *, seed: int | None, resamples: int) -> None:
        groups = d.size
        total = float(n.sum())
        self.exact = groups <= MAX_EXACT_CLUSTERS
        if self.exact:
            codes = np.arange(2**groups, dtype=np.int64)[:, None]
            signs = ((codes >> np.arange(groups)) & 1) * -2 + 1
            self.a = signs @ d / total
            self.b = signs @ n / total
        else:
            rng = np.random.default_rng(seed)
            rows = max(1, _CHUNK_ELEMENTS // groups)
            self.a = np.empty(resamples)
            self.b = np.empty(resamples)
            for start in range(0, resamples, rows):
                count = min(rows, resamples - start)
                signs = rng.integers(0, 2, size=(count, groups), dtype=np.int8) * -2 + 1
                self.a[start : start + count] = signs @ d / total
                self.b[start : start + count] = signs @ n / total
        self.estimate = float(d.sum()) / total

    def p_value(self, delta: float, alternative: Alternative) -> float:
        observed = self.estimate - delta
        flipped = self.a - delta * self.b
        scale = _TIE * max(1.0, abs(observed))
        if alternative == "two_sided":
            extreme = np.abs(flipped) >= abs(observed) - scale
        elif alternative == "greater":  # a large T is evidence for a positive difference
            extreme = flipped >= observed - scale
        else:
            extreme = flipped <= observed + scale
        return self._share(int(extreme.sum()))

    def _share(self, count: int) -> float:
        if self.exact:
            return count / self.a.size
        return (1 + count) / (1 + self.a.size)

    def limit_p_value(self, alternative: Alternative) -> float:
        """p-value as delta moves infinitely far out.

        Only patterns with |b_s| = 1 (every weighted cluster flipped alike) keep up, so no
        shift can be rejected below this value.
        """
        if alternative == "two_sided":
            return self._share(int(np.sum(np.abs(self.b) >= 1 - 1e-12)))
        return self._share(int(np.sum(self.b >= 1 - 1e-12)))


def _check(d: FloatArray, n: FloatArray) -> None:
    if d.ndim != 1 or d.shape != n.shape or d.size == 0:
        raise ValueError("need one difference and one weight per cluster, at least one cluster")
    if float(n.sum()) <= 0:
        raise ValueError("total weight must be positive")


def _checked_patterns(
    d: FloatArray, n: FloatArray | None, seed: int | None, resamples: int
) -> tuple[FloatArray, _Patterns]:
    """The weights (all ones when `n` is None) and the sign patterns of checked input.

    The test and the interval refuse the same input in the same words.
    """
    weights = np.ones_like(d) if n is None else n
    _check(d, weights)
    if d.size > MAX_EXACT_CLUSTERS and seed is None:
        raise ValueError(f"more than {MAX_EXACT_CLUSTERS} clusters: give a seed")
    return weights, _Patterns(d, weights, seed=seed, resamples=resamples)


def sign_flip_test(
    d: FloatArray,
    n: FloatArray | None = None,
    *,
    seed: int | None = None,
    resamples: int = 10_000,
    alternative: Alternative = "two_sided",
) -> SignFlipResult:
    """Sign-flip test that the pooled mean difference is 0.

    Args:
        d: Per-cluster summed differences D_g (configuration A minus B).
        n: Per-cluster item counts n_g; all ones (a mean of cluster values) if `None`.
        seed: Seed for random patterns; required when G > 16.
        resamples: Random patterns B when G > 16.
        alternative: `two_sided`, `greater` (difference > 0) or `less` (difference < 0).

    Returns:
        The `SignFlipResult`.
    """
    _, patterns = _checked_patterns(d, n, seed, resamples)
    return SignFlipResult(
        statistic=patterns.estimate,
        p_value=patterns.p_value(0.0, alternative),
        method="sign_flip_exact" if patterns.exact else "sign_flip_monte_carlo",
        groups=int(d.size),
        patterns=int(patterns.a.size),
        seed=None if patterns.exact else seed,
        alternative=alternative,
    )


def _endpoint(patterns: _Patterns, alpha: float, alternative: Alternative, direction: int) -> float:
    """Outermost delta on one side of the estimate that the test does not reject.

    Bisection between the estimate (never rejected: p = 1) and a point far enough out to be
    rejected. It assumes the rejection region on each side is a half-line, which holds for the
    mean statistic up to isolated ties; the bracket is shrunk to 1e-12 of the data scale.
    """
    scale = max(float(np.max(np.abs(patterns.a))), abs(patterns.estimate), 1e-12)
    inside = patterns.estimate
    outside = inside + direction * scale
    for _ in range(200):
        if patterns.p_value(outside, alternative) <= alpha:
            break
        inside, outside = outside, outside + direction * (abs(outside - inside) * 2)
    for _ in range(200):
        middle = (inside + outside) / 2
        if patterns.p_value(middle, alternative) > alpha:
            inside = middle
        else:
            outside = middle
        if abs(outside - inside) <= 1e-12 * scale:
            break
    return inside


def sign_flip_interval(
    d: FloatArray,
    n: FloatArray | None = None,
    *,
    confidence: float = 0.95,
    sidedness: Sidedness = "two_sided",
    seed: int | None = None,
    resamples: int = 10_000,
) -> Interval:
    """Interval for the pooled mean difference by inverting the sign-flip test.

    The interval is every shift delta for which the test of "difference = delta" (flipping
    D_g - delta n_g) is not rejected at 1 - confidence (Lehmann & Romano 2005 §3.5 on test
    inversion). With G clusters the smallest attainable exact two-sided p-value is 2 / 2^G;
    when that exceeds 1 - confidence the interval is unbounded and reported as not computable.

    Args:
        d: Per-cluster summed differences D_g.
        n: Per-cluster item counts n_g; all ones if `None`.
        confidence: Confidence level.
        sidedness: `two_sided`, `upper` or `lower` bound.
        seed: Seed for random patterns; required when G > 16.
        resamples: Random patterns when G > 16.

    Returns:
        The `Interval` (method `sign_flip_exact` or `sign_flip_monte_carlo`).
    """
    weights, patterns = _checked_patterns(d, n, seed, resamples)
    exact = patterns.exact
    base: dict[str, Any] = {
        "method": "sign_flip_exact" if exact else "sign_flip_monte_carlo",
        "confidence": confidence,
        "sidedness": sidedness,
        "seed": None if exact else seed,
        "resamples": None if exact else resamples,
        "groups": int(d.size),
    }
    if equal_ratios(d, weights):
        return Interval(**base, lower=None, upper=None, not_computable=EQUAL_RATIOS)
    alpha = 1.0 - confidence
    # An upper bound rejects shifts the data say are too large (alternative "less"), a lower
    # bound shifts that are too small ("greater"); two-sided rejects both.
    sides: dict[int, Alternative] = {}
    if sidedness in ("two_sided", "lower"):
        sides[-1] = "two_sided" if sidedness == "two_sided" else "greater"
    if sidedness in ("two_sided", "upper"):
        sides[+1] = "two_sided" if sidedness == "two_sided" else "less"
    smallest = max(patterns.limit_p_value(alternative) for alternative in sides.values())
    if smallest > alpha:
        return Interval(
            **base,
            lower=None,
            upper=None,
            not_computable=f"with {d.size} clusters the smallest attainable p-value is "
            f"{smallest:.4g} > {alpha:.4g}; the interval is unbounded at this level",
        )
    ends = {side: _endpoint(patterns, alpha, alt, side) for side, alt in sides.items()}
    return Interval(**base, lower=ends.get(-1), upper=ends.get(+1))


# ------------------------------------------------------------------------------------------------
# Paired comparisons of two configurations on the same cases: McNemar and clustered differences.
#
# Paired comparison is the default way two candidates are compared: the same cases, trials and
# clusters on both sides, so case difficulty cancels out of the difference.


class McNemarResult(BaseModel):
    """Exact McNemar test of two configurations' binary outcomes on the same cases."""

    model_config = documented(extra="forbid", frozen=True)

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
    Binomial(b + c, 1/2); the two-sided p-value is the exact binomial test's. Concordant pairs
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
    # Binomial(n, 1/2) is symmetric, so the exact two-sided p-value (`scipy.stats.binomtest`'s:
    # the outcomes no likelier than the observed one) is twice the smaller tail, at most 1.
    smaller = min(first_only, second_only)
    p_value = 1.0 if discordant == 0 else 2.0 * binomial_cdf(smaller, discordant, 0.5)
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
