"""Trace-clustered intervals for TRB: the governance gap on core's paired statistics.

Steps of one trace share an episode, so they are not independent; every interval here treats
the trace as the independent unit (a cluster) and every statistic is a function of per-trace
sums.

- `governance_gap` (Delta_gov = G(full) - G(ablation), spec §5) uses the shared paired
  statistics of `trustbench.core.stats`: the seeded cluster-bootstrap percentile interval, the
  cluster-robust t interval, and the sign-flip test and interval, all over per-trace summed
  differences. It no longer carries its own bootstrap.
- `cluster_bootstrap` remains for statistics that are not a ratio of two sums (balanced
  accuracy is the mean of two ratios), which core's ratio bootstrap does not cover. It also
  still serves the direct `summarize_*` helpers of `_tracks` used by `trb smoke` and the audit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from trustbench.core.figures import Figure
from trustbench.core.stats import (
    cluster_bootstrap_interval,
    cluster_robust_interval,
    sign_flip_interval,
    sign_flip_test,
)

BOOTSTRAP_METHOD = "trace-clustered percentile bootstrap"
"""Method label of `cluster_bootstrap` (non-ratio statistics)."""
GAP_FIGURE = "governance_gap"
"""Figure name of Delta_gov in the record (gates read it by this name)."""


def cluster_bootstrap(
    counts: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    *,
    seed: int,
    resamples: int = 2000,
    level: float = 0.95,
) -> dict[str, Any]:
    """Percentile interval of `statistic(summed counts)` resampling clusters.

    Efron & Tibshirani 1993 §13.3 percentile interval; whole clusters are drawn with
    replacement. Used only where the statistic is not a ratio of two sums (balanced accuracy);
    ratios go through `trustbench.core.stats.cluster_bootstrap_interval`.

    Args:
        counts: Array (n_clusters, k) of per-cluster additive counts (e.g. [tp, pos, tn, neg]).
        statistic: Maps summed counts (..., k) to the statistic (...), vectorised.
        seed: Seed of the resampling generator (recorded).
        resamples: Number of bootstrap resamples (recorded).
        level: Two-sided coverage.

    Returns:
        estimate, low, high, method, seed, resamples, level, clusters.
    """
    counts = np.asarray(counts, dtype=float)
    n = counts.shape[0]
    estimate = float(statistic(counts.sum(axis=0)))
    out: dict[str, Any] = {
        "estimate": estimate,
        "low": None,
        "high": None,
        "method": BOOTSTRAP_METHOD,
        "seed": seed,
        "resamples": resamples,
        "level": level,
        "clusters": n,
    }
    if n < 2 or resamples < 1:
        return out
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    with np.errstate(divide="ignore", invalid="ignore"):
        draws = statistic(counts[idx].sum(axis=1))
    draws = draws[np.isfinite(draws)]
    if draws.size == 0:
        return out
    alpha = (1.0 - level) / 2
    out["low"] = float(np.quantile(draws, alpha))
    out["high"] = float(np.quantile(draws, 1.0 - alpha))
    return out


def ratio(summed: np.ndarray) -> np.ndarray:
    """Statistic for counts [numerator, denominator]."""
    return summed[..., 0] / summed[..., 1]


def governance_gap_figure(
    tv_full: np.ndarray | list[float],
    tv_ablation: np.ndarray | list[float],
    n_items: np.ndarray | list[float],
    *,
    seed: int,
    resamples: int = 2000,
    level: float = 0.95,
    description: str = "paired counterfactual interventions (step, r'), clustered by trace",
) -> tuple[Figure, dict[str, Any]]:
    """Delta_gov = G(full) - G(ablation) on the same items, paired and clustered by trace.

    Per trace i with n_i items (both models scored on the same n_i interventions), the paired
    difference of summed TV is d_i = TV_ablation_i - TV_full_i (G = 1 - mean TV, so a smaller
    TV sum means a larger G), and Delta = sum_i d_i / sum_i n_i: the item-level mean paired
    difference. Core's statistics take exactly these per-trace sums (y = d, m = n):

    - seeded cluster-bootstrap percentile interval (method, seed, resamples recorded);
    - cluster-robust t interval on (traces - 1) degrees of freedom;
    - sign-flip interval and test: under "the two models are exchangeable within a trace" each
      d_i's sign is equally likely (exact enumeration up to 16 traces, else seeded Monte Carlo
      with p = (1 + #{|T*| >= |T|}) / (1 + B)).

    Args:
        tv_full: Per-trace sum of TV for the full model.
        tv_ablation: Per-trace sum of TV for the ablation, same items.
        n_items: Per-trace item counts.
        seed: Seed of the bootstrap and of the Monte Carlo sign patterns (recorded).
        resamples: Bootstrap resamples and sign patterns (recorded).
        level: Confidence level.
        description: What the figure's denominator counts.

    Returns:
        The `Figure` (name `governance_gap`, kind `difference`) and the sign-flip test as JSON.
    """
    d = np.asarray(tv_ablation, dtype=float) - np.asarray(tv_full, dtype=float)
    n = np.asarray(n_items, dtype=float)
    intervals = [
        cluster_bootstrap_interval(d, n, seed=seed, resamples=resamples, confidence=level),
        cluster_robust_interval(d, n, confidence=level),
        sign_flip_interval(d, n, confidence=level, seed=seed, resamples=resamples),
    ]
    test = sign_flip_test(d, n, seed=seed, resamples=resamples)
    figure = Figure(
        name=GAP_FIGURE,
        kind="difference",
        numerator=float(d.sum()),
        denominator=float(n.sum()),
        estimate=float(d.sum() / n.sum()),
        unit="trial",
        unit_count=int(d.size),
        cluster="trace",
        description=description,
        intervals=intervals,
    )
    return figure, test.model_dump(mode="json")


def governance_gap(
    tv_full: np.ndarray | list[float],
    tv_ablation: np.ndarray | list[float],
    n_items: np.ndarray | list[float],
    *,
    seed: int,
    resamples: int = 2000,
    level: float = 0.95,
) -> dict[str, Any]:
    """Delta_gov as a flat dict (the `trb smoke` result format), via core's statistics.

    Same quantity as `governance_gap_figure`; `low`/`high` are core's cluster-bootstrap
    percentile interval over traces (`interval_method` names core's method, `method` keeps this
    module's label) and `sign_flip_p` the sign-flip test's two-sided p-value. The interval equals
    the earlier in-module bootstrap's to float rounding (same seed, same index draws), except
    when at most a quarter of the traces have distinct (d_i, n_i): core then draws multinomial
    counts (same distribution, another random stream). The sign-flip p-value is now core's
    (exact up to 16 traces, else Monte Carlo with the seed itself, not seed + 1).

    Args:
        tv_full: Per-trace sum of TV for the full model.
        tv_ablation: Per-trace sum of TV for the ablation, same items.
        n_items: Per-trace item counts.
        seed: Seed for both the bootstrap and the sign flips (recorded).
        resamples: Bootstrap resamples and sign-flip draws (recorded).
        level: Interval coverage.

    Returns:
        estimate, low, high, method, interval_method, seed, resamples, level, clusters,
        not_computable, sign_flip_p, sign_flip_method, sign_flip_draws, sign_flip_seed,
        paired_by.
    """
    figure, test = governance_gap_figure(
        tv_full, tv_ablation, n_items, seed=seed, resamples=resamples, level=level
    )
    boot = figure.intervals[0]
    return {
        "estimate": figure.estimate,
        "low": boot.lower,
        "high": boot.upper,
        "method": BOOTSTRAP_METHOD,
        "interval_method": boot.method,
        "seed": boot.seed,
        "resamples": boot.resamples,
        "level": level,
        "clusters": boot.groups,
        "not_computable": boot.not_computable,
        "sign_flip_p": test["p_value"],
        "sign_flip_method": test["method"],
        "sign_flip_draws": test["patterns"],
        "sign_flip_seed": test["seed"],
        "paired_by": "trace",
    }
