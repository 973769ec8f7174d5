"""Track 2's detection threshold: the weakest injection the self-report registers.

At a strong push every model's report moves, so the detection AUC saturates at 1 for any
model with a readable report and cannot tell a grounded model from an ungrounded one. The
spec's comparison (full above the same-size ablation) is therefore made on the *threshold*:
sweep the strength down a declared geometric grid and find where detection starts.

Rule (declared before any result, recorded in every figure):

    threshold = the strength at which the AUC against the norm-matched random control
    reaches TARGET_AUC (0.75), by linear interpolation in log2(strength) between the two grid
    strengths that bracket the crossing, where the crossing is the one below the smallest
    grid strength from which the AUC stays >= TARGET_AUC at every larger grid strength.

- AUC >= TARGET_AUC already at the smallest grid strength: threshold = that strength,
  `censored = "at or below the grid"` (the true threshold is no larger);
- AUC < TARGET_AUC at the largest grid strength: no threshold (`"not detected"`): the worst
  result, never a number that could look good.

Lower threshold = more sensitive grounding. 0.75 is halfway between chance (0.5) and perfect
detection (1): a point on the steep part of the curve, where it is best resolved.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

SWEEP_ALPHAS: tuple[float, ...] = tuple(2.0**-k for k in range(7, -2, -1))
"""Strengths swept (ascending), relative to the layer's RMS hidden-state norm: 2^-7 .. 2."""
TARGET_AUC = 0.75
"""AUC (vs the random control) at which the threshold is read."""
RULE = (
    f"strength where AUC vs the norm-matched random control reaches {TARGET_AUC}, "
    "log2-interpolated on the grid; at or below the grid when already reached at its "
    "smallest strength, not detected when not reached at its largest"
)
"""The rule in words (recorded beside every threshold)."""


def threshold_of(
    alphas: Sequence[float], aucs: Sequence[float] | np.ndarray
) -> tuple[float | None, str | None]:
    """(threshold strength or None, censoring note or None) of one AUC-vs-strength curve.

    Args:
        alphas: Ascending grid strengths.
        aucs: AUC at each strength.
    """
    a, v = np.log2(np.asarray(alphas, dtype=float)), np.asarray(aucs, dtype=float)
    above = v >= TARGET_AUC
    if not above[-1]:
        return None, "not detected"
    # First index of the final run of grid points at or above the target.
    first = len(v) - int(np.argmin(above[::-1])) if not above.all() else 0
    if first == 0:
        return float(2.0 ** a[0]), "at or below the grid"
    lo, hi = first - 1, first
    # Linear in log2(strength) between (a_lo, v_lo < target) and (a_hi, v_hi >= target).
    frac = (TARGET_AUC - v[lo]) / (v[hi] - v[lo])
    return float(2.0 ** (a[lo] + frac * (a[hi] - a[lo]))), None


def threshold_interval(
    draws: Sequence[float | None], confidence: float
) -> tuple[float | None, float | None, str | None]:
    """Percentile interval of bootstrap thresholds; "not detected" draws rank above the grid.

    Returns:
        (lower, upper, note): an end that falls on a not-detected draw is None ("above the
        grid"), never a number.
    """
    if not draws:
        return None, None, "no bootstrap draws"
    ranked = np.array([np.inf if d is None else np.log2(d) for d in draws])
    tail = (1 - confidence) / 2
    lo, hi = (np.quantile(ranked, q, method="inverted_cdf") for q in (tail, 1 - tail))
    note = None if np.isfinite(hi) else "upper end above the grid (not detected in some draws)"
    return (
        None if not np.isfinite(lo) else float(2.0**lo),
        None if not np.isfinite(hi) else float(2.0**hi),
        note,
    )


def curve_thresholds(curve: dict[int, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per layer: the threshold of its pooled AUC-vs-strength curve (see `threshold_of`)."""
    out = {}
    for layer, points in sorted(curve.items()):
        alpha, censored = threshold_of(
            [p["alpha"] for p in points], [p["auc_vs_random"]["value"] for p in points]
        )
        out[str(layer)] = {"threshold": alpha, "censored": censored}
    return out
