"""Binomial intervals for a rate: Clopper-Pearson (exact) and Wilson score.

Both come from `scipy.stats.binomtest(k, n).proportion_ci`, so the arithmetic is scipy's; this
module chooses the form, records it in an `Interval`, and refuses n = 0 instead of inventing one.
`scipy.stats` is imported on first use, not with this module: `figures` (and through it `gates`
and the spec) import this module, and `trustbench run`, which computes no interval, would
otherwise pay scipy's ~1.8 s import on every start (issue 35).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# ------------------------------------------------------------------------------------------------
# The `Interval` record every statistic attaches to a figure (kept apart so `_intervals` can build
# it).
#
# `figures` re-exports `Interval` and `Sidedness`; this module exists so the statistics modules and
# the figure contract do not import each other.

Sidedness = Literal["two_sided", "upper", "lower"]
"""Two-sided interval, or a one-sided upper (lower) confidence bound."""


class _Contract(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid", frozen=True)


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


_SCIPY_METHOD = {"clopper_pearson": "exact", "wilson": "wilson"}
# scipy's `alternative` names the alternative hypothesis: "less" gives the interval [0, U]
# (a one-sided upper bound), "greater" gives [L, 1].
_ALTERNATIVE = {"two_sided": "two-sided", "upper": "less", "lower": "greater"}


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
    if method not in _SCIPY_METHOD:
        known = sorted(_SCIPY_METHOD)
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
    """The bounds scipy gives k/n, each set of arguments computed once per process.

    One `binomtest(...).proportion_ci` is about 2 ms, and a report asks for the same few counts
    over and over (every rate of every configuration at the same case count): the workflow
    demo's report spent 10 of its 27 s here.
    """
    from scipy.stats import binomtest

    ci = binomtest(k, n, alternative=_ALTERNATIVE[sidedness]).proportion_ci(
        confidence_level=confidence, method=_SCIPY_METHOD[method]
    )
    return float(ci.low), float(ci.high)
