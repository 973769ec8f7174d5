"""The `Interval` record every statistic attaches to a figure (kept apart so `_stats` can build it).

`figures` re-exports `Interval` and `Sidedness`; this module exists so the statistics modules and
the figure contract do not import each other.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

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
