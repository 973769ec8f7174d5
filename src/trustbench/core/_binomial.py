"""Binomial intervals for a rate: Clopper-Pearson (exact) and Wilson score.

Both are the closed forms `scipy.stats.binomtest(k, n).proportion_ci` solves for: the Beta
quantile for Clopper-Pearson, the normal quantile for Wilson. This module chooses the form,
records it in an `Interval`, and refuses n = 0 instead of inventing one. The quantiles come from
`_distributions` (pure Python), not scipy: `trustbench report` of a reviewer run imported
`scipy.special` for them and a few other values, about 0.23 s of its 2.2 s on the 2,000-trial run
of `python -m bench.report_speed` (issue 55; `scipy.stats`, before it, cost 1.1 s more). The Beta
quantile B(q; a, b) with integer a, b is the root x of I_x(a, b) = q, and I_x(a, b) is then the
binomial tail P[Bin(a + b - 1, x) >= a] (Abramowitz & Stegun 26.5.24); it is found to within a
few units in the last place, and within 1e-13 of `scipy.special.betaincinv` on every count up to
n = 200 and a sample up to 10^6 (`tests/core/test_stats_distributions.py`).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, Field

from trustbench._docstrings import documented
from trustbench.core._distributions import beta_quantile, normal_quantile

# ------------------------------------------------------------------------------------------------
# The `Interval` record every statistic attaches to a figure (kept apart so `_intervals` can build
# it).
#
# `figures` re-exports `Interval` and `Sidedness`; this module exists so the statistics modules and
# the figure contract do not import each other.

Sidedness = Literal["two_sided", "upper", "lower"]
"""Two-sided interval, or a one-sided upper (lower) confidence bound."""


class _Contract(BaseModel):
    model_config = documented(extra="forbid", frozen=True)


class Interval(_Contract):
    """A confidence interval or one-sided bound, with everything needed to recompute it."""

    method: str
    """Method name, e.g. `clopper_pearson`, `wilson`, `cluster_robust_t`,
    `cluster_bootstrap_percentile`, `sign_flip_exact`, `sign_flip_monte_carlo`,
    `kappa_asymptotic_normal` (see `trustbench.core.stats`)."""

    confidence: float = Field(gt=0.0, lt=1.0)
    """Confidence level, e.g. 0.95."""

    sidedness: Sidedness
    """`two_sided`, or `upper` / `lower` for a one-sided bound (the other side is then the
    parameter's natural limit, e.g. 0 for a rate, or `None` when it is unbounded)."""

    lower: float | None
    """Lower end; `None` when unbounded on that side or when `not_computable` is set."""

    upper: float | None
    """Upper end; `None` when unbounded on that side or when `not_computable` is set."""

    seed: int | None = None
    """Seed of the random generator, for resampled and Monte Carlo methods; else `None`."""

    resamples: int | None = None
    """Number of resamples or random sign flips drawn; `None` for exact or analytic methods."""

    groups: int | None = None
    """Number of clusters the interval was computed over, for clustered methods."""

    not_computable: str | None = None
    """Why no interval could be given (e.g. fewer than two clusters); `None` when computed."""

    note: str | None = None
    """Anything a reader needs to interpret this interval (e.g. clipping to [0, 1])."""


_METHODS = ("clopper_pearson", "wilson")


def binomial_interval(
    k: int,
    n: int,
    method: str = "clopper_pearson",
    confidence: float = 0.95,
    *,
    sidedness: Sidedness = "two_sided",
) -> Interval:
    """Interval for a binomial proportion k/n.

    Clopper-Pearson (method `clopper_pearson`) inverts two one-sided binomial tests, so its
    coverage is at least the nominal level for every true rate (Clopper & Pearson 1934; NIST/
    SEMATECH e-Handbook §7.2.4.1). The two-sided bounds are the Beta quantiles

        L = B(alpha/2; k, n-k+1),  U = B(1-alpha/2; k+1, n-k),

    and a one-sided bound puts all of alpha on one side. With k = 0 the one-sided upper bound
    solves (1-U)^n = alpha, i.e. U = 1 - alpha^(1/n): 0/100 at 95% gives 0.0295.

    Wilson (method `wilson`) inverts the normal score test (Wilson 1927); it is shorter, and
    its coverage is close to nominal on average but can dip below it for some rates. It is
    reported beside the exact interval, never instead of it in a gate unless declared.

    Args:
        k: Units with the event.
        n: Units evaluated.
        method: `clopper_pearson` or `wilson`.
        confidence: Confidence level in (0, 1).
        sidedness: `two_sided`, `upper` (bound U of [0, U]) or `lower` (bound L of [L, 1]).

    Returns:
        The `Interval`; when n = 0 it carries `not_computable` and no bounds.

    Raises:
        ValueError: Unknown method, or counts outside 0 <= k <= n.
    """
    if method not in _METHODS:
        known = sorted(_METHODS)
        raise ValueError(f"unknown binomial interval method {method!r}; use one of {known}")
    if k < 0 or n < 0 or k > n:
        raise ValueError(f"binomial interval needs 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return Interval(
            method=method,
            confidence=confidence,
            sidedness=sidedness,
            lower=None,
            upper=None,
            not_computable="no units evaluated (n = 0)",
        )
    lower, upper = _bounds(k, n, method, confidence, sidedness)
    return Interval(
        method=method,
        confidence=confidence,
        sidedness=sidedness,
        lower=lower,
        upper=upper,
    )


def zero_failure_upper_bound(n: int, confidence: float = 0.95) -> float:
    """Exact one-sided upper bound on a failure rate after 0 failures in n independent trials.

    From P(0 failures | p) = (1-p)^n = alpha: U = 1 - alpha^(1/n) (the spec's illustration:
    n = 100, 95% -> 0.0295). It equals the Clopper-Pearson one-sided bound at k = 0 and shows
    why a small error-free sample does not establish a very low failure rate. It assumes
    independent trials with a common rate, which related templates may not satisfy.

    Args:
        n: Independent trials, all without failure (n >= 1).
        confidence: Confidence level in (0, 1).

    Returns:
        The upper bound U.
    """
    if n < 1:
        raise ValueError("zero_failure_upper_bound needs n >= 1")
    return 1.0 - (1.0 - confidence) ** (1.0 / n)


@lru_cache(maxsize=65536)
def _bounds(
    k: int, n: int, method: str, confidence: float, sidedness: Sidedness
) -> tuple[float, float]:
    """The bounds of k/n, each set of arguments computed once per process.

    A report asks for the same few counts over and over (every rate of every configuration at
    the same case count): the workflow demo's report once spent 10 of its 27 s here.
    """
    if method == "wilson":
        return _wilson(k, n, confidence, sidedness)
    # Clopper-Pearson: a two-sided interval leaves alpha/2 in each tail, a one-sided bound all of
    # alpha on its side; the other end is the rate's natural limit, as at k = 0 (L = 0) or k = n
    # (U = 1), where the Beta quantile is undefined.
    tail = (1.0 - confidence) / 2 if sidedness == "two_sided" else 1.0 - confidence
    lower = 0.0 if k == 0 or sidedness == "upper" else beta_quantile(k, n - k + 1, tail)
    upper = 1.0 if k == n or sidedness == "lower" else beta_quantile(k + 1, n - k, 1 - tail)
    return lower, upper


def _wilson(k: int, n: int, confidence: float, sidedness: Sidedness) -> tuple[float, float]:
    """Wilson's score interval in Newcombe's (1998) form, as scipy's `proportion_ci` writes it.

    centre = (2np + z^2) / (2(n + z^2)), half-width = z sqrt(4npq + z^2) / (2(n + z^2)), with z
    the normal quantile of the confidence (two-sided: of (1 + confidence) / 2); an end at k = 0
    or k = n, or on the open side of a one-sided bound, is the rate's natural limit.
    """
    z = normal_quantile(0.5 + 0.5 * confidence if sidedness == "two_sided" else confidence)
    p = k / n
    denominator = 2 * (n + z**2)
    centre = (2 * n * p + z**2) / denominator
    half = z / denominator * math.sqrt(4 * n * p * (1 - p) + z**2)
    lower = 0.0 if k == 0 or sidedness == "upper" else centre - half
    upper = 1.0 if k == n or sidedness == "lower" else centre + half
    return lower, upper
