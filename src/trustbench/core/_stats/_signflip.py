"""Sign-flip (randomisation) test and interval for a paired difference over clusters.

Under the null hypothesis that the two configurations are exchangeable within each cluster,
swapping them in a cluster flips the sign of that cluster's summed difference D_g, so every one
of the 2^G sign patterns is equally likely (Fisher 1935 §21; for clustered data, Canay, Romano
& Shaikh 2017, "Randomization Tests Under an Approximate Symmetry Assumption"). The statistic
is the pooled mean difference T = sum_g s_g D_g / sum_g n_g.

G <= 16 clusters: all 2^G patterns are enumerated and the p-value is exact. More clusters: B
seeded random patterns, p = (1 + #{|T*| >= |T|}) / (1 + B), which is a valid p-value for any B
(Phipson & Smyth 2010). Random patterns are drawn in chunks, keeping only two numbers per
pattern, so memory does not grow with G x B.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from trustbench.core._stats._cluster import EQUAL_RATIOS, equal_ratios
from trustbench.core._stats._groups import FloatArray
from trustbench.core.figures import Interval, Sidedness

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

    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid", frozen=True)

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
