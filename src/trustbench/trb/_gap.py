"""Trace-clustered bootstrap intervals, the governance gap and its sign-flip test (numpy).

Steps of one trace share an episode, so they are not independent; every interval here
resamples whole traces (clusters) with replacement, and every statistic is a function of
per-trace counts summed over the resampled traces. Intervals are percentile intervals
(Efron & Tibshirani 1993, §13.3): simple, transformation-respecting, adequate at these sizes.
The method, seed and number of resamples are returned with every interval.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

BOOTSTRAP_METHOD = "trace-clustered percentile bootstrap"


def cluster_bootstrap(
    counts: np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    *,
    seed: int,
    resamples: int = 2000,
    level: float = 0.95,
) -> dict[str, Any]:
    """Percentile interval of `statistic(summed counts)` resampling clusters.

    Args:
        counts: Array (n_clusters, k) of per-cluster additive counts (e.g. [sum TV, n items]).
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


def governance_gap(
    tv_full: np.ndarray,
    tv_ablation: np.ndarray,
    n_items: np.ndarray,
    *,
    seed: int,
    resamples: int = 2000,
    level: float = 0.95,
) -> dict[str, Any]:
    """Delta_gov = G(full) - G(ablation) on the same items, paired by trace.

    Per trace i with n_i items, the paired difference in summed TV is
    d_i = TV_ablation_i - TV_full_i (G = 1 - mean TV, so a smaller TV sum means larger G), and
    Delta = sum_i d_i / sum_i n_i. The interval resamples traces; the sign-flip test
    (a paired randomization test, Good 2005 §3) flips the sign of each d_i independently under
    the null that the two models are exchangeable within a trace, and reports the two-sided
    p = (1 + #{|Delta*| >= |Delta|}) / (1 + R).

    Args:
        tv_full: Per-trace sum of TV for the full model.
        tv_ablation: Per-trace sum of TV for the ablation, same items.
        n_items: Per-trace item counts.
        seed: Seed for both the bootstrap and the sign flips (recorded).
        resamples: Bootstrap resamples and sign-flip draws (recorded).
        level: Interval coverage.
    """
    d = np.asarray(tv_ablation, dtype=float) - np.asarray(tv_full, dtype=float)
    n = np.asarray(n_items, dtype=float)
    interval = cluster_bootstrap(
        np.stack([d, n], axis=1), ratio, seed=seed, resamples=resamples, level=level
    )
    observed = float(d.sum() / n.sum())
    rng = np.random.default_rng(seed + 1)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(resamples, d.size))
    flipped = (signs * d).sum(axis=1) / n.sum()
    exceed = int(np.sum(np.abs(flipped) >= abs(observed) - 1e-15))
    return {
        **interval,
        "estimate": observed,
        "sign_flip_p": (1 + exceed) / (1 + resamples),
        "sign_flip_draws": resamples,
        "sign_flip_seed": seed + 1,
        "paired_by": "trace",
    }
