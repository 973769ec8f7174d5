"""A tiny CART classifier (Gini impurity, axis-aligned thresholds) for the shortcut audit.

scikit-learn is not a dependency, and the audit needs only a shallow tree over a few hundred
cases, so this is the textbook algorithm (Breiman et al. 1984) in numpy: at each node, every
feature's sorted values are scanned at once (cumulative class counts give the left/right class
counts at every cut), the cut with the lowest weighted Gini impurity
`(n_l * G_l + n_r * G_r) / n`, `G = 1 - sum_c p_c^2`, is kept if it lowers the node's impurity,
and growth stops at `max_depth`, at a pure node or when a child would hold fewer than
`min_leaf` rows. Ties go to the first cut in (row position, feature index) order, so a fit is
deterministic for a given feature order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class _Node:
    label: int
    """Majority class of the training rows that reached this node."""
    feature: int = -1
    """Split feature index; -1 for a leaf."""
    threshold: float = 0.0
    """Rows with `x[feature] <= threshold` go left."""
    left: _Node | None = None
    right: _Node | None = None


def _majority(counts: npt.NDArray[np.float64]) -> int:
    return int(np.argmax(counts))  # first class on ties: deterministic


def _gini(counts: npt.NDArray[np.float64], totals: npt.NDArray[np.float64]) -> npt.NDArray:
    with np.errstate(invalid="ignore", divide="ignore"):
        shares = counts / totals[..., None]
    return 1.0 - np.nansum(shares**2, axis=-1)


def _best_split(
    x: npt.NDArray[np.float64], y: npt.NDArray[np.int64], classes: int, min_leaf: int
) -> tuple[int, float, float] | None:
    """(feature, threshold, weighted impurity) of the best cut, or None when none is allowed."""
    m = len(y)
    order = np.argsort(x, axis=0, kind="stable")
    sorted_x = np.take_along_axis(x, order, axis=0)
    onehot = np.eye(classes)[y]  # (m, C)
    left = np.cumsum(onehot[order], axis=0)[:-1]  # (m-1, f, C): counts left of cut i|i+1
    total = onehot.sum(axis=0)
    right = total - left
    n_left = np.arange(1, m, dtype=float)[:, None]
    n_right = m - n_left
    impurity = (
        n_left * _gini(left, np.broadcast_to(n_left, left.shape[:2]))
        + n_right * _gini(right, np.broadcast_to(n_right, right.shape[:2]))
    ) / m
    allowed = (sorted_x[:-1] < sorted_x[1:]) & (n_left >= min_leaf) & (n_right >= min_leaf)
    if not allowed.any():
        return None
    impurity = np.where(allowed, impurity, np.inf)
    row, feature = np.unravel_index(int(np.argmin(impurity)), impurity.shape)
    threshold = float((sorted_x[row, feature] + sorted_x[row + 1, feature]) / 2)
    return int(feature), threshold, float(impurity[row, feature])


class DecisionTree:
    """A fitted shallow classification tree over named numeric features."""

    def __init__(self, *, max_depth: int = 3, min_leaf: int = 2) -> None:
        self.max_depth = max_depth
        self.min_leaf = min_leaf
        self.features: list[str] = []
        self.labels: list[str] = []
        self._root: _Node | None = None

    def fit(self, rows: Sequence[Mapping[str, float]], labels: Sequence[str]) -> DecisionTree:
        """Fit on feature dicts (a feature absent from a row is 0) and their class labels."""
        self.features = sorted({name for row in rows for name in row})
        self.labels = sorted(set(labels))
        x = self._matrix(rows)
        y = np.array([self.labels.index(label) for label in labels], dtype=np.int64)
        self._root = self._grow(x, y, 0)
        return self

    def _matrix(self, rows: Sequence[Mapping[str, float]]) -> npt.NDArray[np.float64]:
        return np.array(
            [[float(row.get(name, 0.0)) for name in self.features] for row in rows],
            dtype=np.float64,
        ).reshape(len(rows), len(self.features))

    def _grow(self, x: npt.NDArray[np.float64], y: npt.NDArray[np.int64], depth: int) -> _Node:
        counts = np.bincount(y, minlength=len(self.labels)).astype(float)
        label = _majority(counts)
        parent = float(_gini(counts[None, :], np.array([len(y)], dtype=float))[0])
        if depth >= self.max_depth or parent == 0.0 or x.shape[1] == 0:
            return _Node(label)
        split = _best_split(x, y, len(self.labels), self.min_leaf)
        if split is None or split[2] >= parent - 1e-12:
            return _Node(label)
        feature, threshold, _ = split
        goes_left = x[:, feature] <= threshold
        return _Node(
            label,
            feature,
            threshold,
            self._grow(x[goes_left], y[goes_left], depth + 1),
            self._grow(x[~goes_left], y[~goes_left], depth + 1),
        )

    def predict(self, row: Mapping[str, float]) -> str:
        """The class label the tree assigns to one feature dict."""
        if self._root is None:
            raise RuntimeError("DecisionTree.predict called before fit")
        node = self._root
        while node.left is not None and node.right is not None:
            value = float(row.get(self.features[node.feature], 0.0))
            node = node.left if value <= node.threshold else node.right
        return self.labels[node.label]

    def rules(self) -> list[str]:
        """The fitted splits as readable lines (for the report's detail column)."""
        lines: list[str] = []

        def walk(node: _Node, prefix: str) -> None:
            if node.left is None or node.right is None:
                lines.append(f"{prefix or 'always'} -> {self.labels[node.label]}")
                return
            name = self.features[node.feature]
            walk(node.left, f"{prefix}{' & ' if prefix else ''}{name}<={node.threshold:g}")
            walk(node.right, f"{prefix}{' & ' if prefix else ''}{name}>{node.threshold:g}")

        if self._root is not None:
            walk(self._root, "")
        return lines
