"""Collapse item-level values to per-cluster sums, the input of every clustered method."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]


def cluster_sums(
    numerators: Sequence[float] | FloatArray,
    denominators: Sequence[float] | FloatArray | None = None,
    clusters: Sequence[Hashable] | None = None,
) -> tuple[FloatArray, FloatArray]:
    """Sum item numerators and denominators within each cluster.

    A clustered analysis treats the cluster (a domain group, a trace) as the independent unit,
    so everything downstream works on one (sum of numerators, sum of denominators) pair per
    cluster. Clusters are ordered by first appearance, which keeps seeded resampling
    reproducible for the same input order.

    Args:
        numerators: One value per item (an event count, a 0/1 outcome, a score, a difference).
        denominators: One weight per item (trials behind the numerator); all ones if `None`.
        clusters: One cluster label per item; each item is its own cluster if `None`.

    Returns:
        (y, m): per-cluster numerator sums and denominator sums.

    Raises:
        ValueError: Lengths differ, there are no items, or a value is not finite.
    """
    y_items = np.asarray(numerators, dtype=np.float64)
    m_items = (
        np.ones_like(y_items) if denominators is None else np.asarray(denominators, np.float64)
    )
    if y_items.ndim != 1 or y_items.shape != m_items.shape:
        raise ValueError("numerators and denominators must be 1-d and of equal length")
    if y_items.size == 0:
        raise ValueError("no items to analyse")
    if not (np.all(np.isfinite(y_items)) and np.all(np.isfinite(m_items))):
        raise ValueError("numerators and denominators must be finite (no NaN: missing is not 0)")
    if np.any(m_items < 0):
        raise ValueError("denominators must be non-negative")
    if clusters is None:
        return y_items, m_items
    if len(clusters) != y_items.size:
        raise ValueError("one cluster label per item is required")
    index: dict[Hashable, int] = {}
    codes = np.fromiter((index.setdefault(c, len(index)) for c in clusters), dtype=np.int64)
    # With weights, bincount sums in float64 (numpy's stub declares the unweighted int result).
    y = np.asarray(np.bincount(codes, weights=y_items, minlength=len(index)), dtype=np.float64)
    m = np.asarray(np.bincount(codes, weights=m_items, minlength=len(index)), dtype=np.float64)
    return y, m
