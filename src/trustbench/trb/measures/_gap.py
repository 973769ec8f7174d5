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
from numpy.typing import ArrayLike

from trustbench.core.figures import Figure, Interval
from trustbench.core.stats import (
    cluster_bootstrap_interval,
    cluster_robust_interval,
    difference_figure,
    sign_flip_interval,
    sign_flip_test,
)

BOOTSTRAP_METHOD = "trace-clustered percentile bootstrap"
"""Method label of `cluster_bootstrap` (non-ratio statistics)."""
GAP_FIGURE = "governance_gap"
"""Figure name of Delta_gov in the record (gates read it by this name)."""
SEED_GAP_FIGURE = "governance_gap_seeds"
"""Figure name of Delta_gov averaged over training seeds, with its seed-and-trace interval."""
SEED_TRACE_METHOD = "seed_and_trace_bootstrap_percentile"
"""Interval method label of `seed_trace_gap_figure`."""


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
    figure = difference_figure(
        GAP_FIGURE,
        d,
        n,
        intervals=intervals,
        unit="trial",
        unit_count=int(d.size),
        cluster="trace",
        description=description,
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


def seed_trace_gap_figure(
    tv_full: ArrayLike,
    tv_ablation: ArrayLike,
    n_items: ArrayLike,
    *,
    seed: int,
    resamples: int = 2000,
    level: float = 0.95,
    description: str,
) -> Figure:
    """Delta_gov averaged over training seeds, with a two-level (seed, trace) bootstrap.

    Rows are seeds, columns eval traces: tv_full[s, t] is the summed TV of the full model
    trained with seed s on trace t's n_items[t] interventions, tv_ablation[s, t] the same for
    the ablation trained with the same seed (same initialisation and data order, differing
    only in L_gov). Every model is scored on the same traces, so seeds and traces are crossed.
    The estimate is the seed-mean gap

        Delta = (1/S) sum_s [G_full(s) - G_abl(s)] = sum_t dbar_t / sum_t n_t,
        dbar_t = (1/S) sum_s (tv_abl[s, t] - tv_full[s, t]).

    One resample draws S seed pairs with replacement (the training-seed level: how much the
    gap moves with the seed a lab happened to use), then T traces with replacement, shared by
    every drawn seed (the eval-set level; crossed design, so the same draw applies to each
    seed), and recomputes Delta on the draw. The percentile interval of the draws covers both
    sources (Davison & Hinkley 1997 §3.8, bootstrap for hierarchical data: resampling at the
    top level carries most of the between-seed variance; the trace level adds the eval-set
    noise the single-seed interval already shows). Seed pairs are resampled together: full
    and ablation of one seed share their initialisation, so treating them as independent
    would overstate the variance.

    Args:
        tv_full: (seeds, traces) summed TV of the full models.
        tv_ablation: (seeds, traces) summed TV of the ablations, same seeds and items.
        n_items: (traces,) interventions per trace.
        seed: Seed of the bootstrap draws (recorded).
        resamples: Bootstrap resamples (recorded).
        level: Confidence level.
        description: What the figure's denominator counts.

    Returns:
        The `Figure` (name `governance_gap_seeds`, kind `difference`); its interval is
        `not_computable` with fewer than two seeds or two traces.
    """
    d = np.asarray(tv_ablation, dtype=float) - np.asarray(tv_full, dtype=float)
    n = np.asarray(n_items, dtype=float)
    if d.ndim != 2 or d.shape[1] != n.size:
        raise ValueError(f"tv arrays must be (seeds, traces) with {n.size} traces; got {d.shape}")
    n_seeds, n_traces = d.shape
    dbar_per_trace = d.mean(0)
    why = None
    if n_seeds < 2:
        why = "fewer than two training seeds"
    elif n_traces < 2:
        why = "fewer than two eval traces"
    low = high = None
    if why is None:
        rng = np.random.default_rng(seed)
        seeds = rng.integers(0, n_seeds, size=(resamples, n_seeds))
        traces = rng.integers(0, n_traces, size=(resamples, n_traces))
        # Per resample b: dbar*_t = mean over drawn seeds of d[s, t] (all traces), then the
        # ratio over drawn traces. (resamples, traces) -> gather -> sums.
        dbar = d[seeds].mean(axis=1)  # (resamples, traces)
        rows = np.arange(resamples)[:, None]
        draws = dbar[rows, traces].sum(1) / n[traces].sum(1)
        tail = (1 - level) / 2
        low, high = float(np.quantile(draws, tail)), float(np.quantile(draws, 1 - tail))
    interval = Interval(
        method=SEED_TRACE_METHOD,
        confidence=level,
        sidedness="two_sided",
        lower=low,
        upper=high,
        seed=seed,
        resamples=resamples,
        groups=n_traces,
        not_computable=why,
        note=f"percentile bootstrap over {n_seeds} training-seed pairs, then over "
        f"{n_traces} eval traces (crossed); see trb.measures._gap.seed_trace_gap_figure",
    )
    return difference_figure(
        SEED_GAP_FIGURE,
        dbar_per_trace,
        n,
        intervals=[interval],
        unit="trial",
        unit_count=n_traces,
        cluster="trace",
        description=description,
    )
