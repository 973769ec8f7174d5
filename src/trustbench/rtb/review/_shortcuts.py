"""Shortcut audit: can a rule with no domain understanding reach the reference decisions?

If a three-line rule over surface features (a status word, a parameter diff, how often a revision
string occurs, where the policy record sits) reproduces the answer key, a high score on the corpus
says nothing about review ability: the corpus is *saturated*. This module runs a family of such
rules over the candidate-visible inputs (`CandidateInput` JSON, never the answer key) and reports
each rule's accuracy against the authored reference decisions as "corpus saturation".

Fixed rules are scored on every case. Fitted rules (a lookup on record order, a keyword tree and a
small decision tree over every surface feature; see below) are cross-fitted
on two halves split by domain group, so a group's related variants are never on both sides: fit
on half A, score half B, and vice versa; the reported accuracy is the mean of the two halves.

Ceiling: chance + `DEFAULT_MARGIN` (15 points), where chance is the majority-class share of the
corpus (the accuracy of always answering its most common reference decision). A rule above the
ceiling fails the audit; a rule that could not run (e.g. fewer than two domain groups to split)
also fails it, since an unrun check is not a pass.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise
from operator import attrgetter
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic import BaseModel, computed_field

from trustbench._docstrings import documented
from trustbench.rtb.corpus._export import new_evaluation_id, to_candidate_input
from trustbench.rtb.corpus._load import Corpus
from trustbench.rtb.corpus._models import Decision
from trustbench.rtb.corpus._normalise import equivalent
from trustbench.rtb.policy._protocol import AuthoredCase

__all__ = [
    "DEFAULT_MARGIN",
    "SaturationReport",
    "ShortcutRule",
    "corpus_saturation",
    "shortcut_audit",
]


# ------------------------------------------------------------------------------------------------
# A tiny CART classifier (Gini impurity, axis-aligned thresholds) for the shortcut audit.
#
# scikit-learn is not a dependency, and the audit needs only a shallow tree over a few hundred
# cases, so this is the textbook algorithm (Breiman et al. 1984) in plain Python: at each node,
# every feature's distinct values are scanned in order (cumulative class counts give the
# left/right class counts at every cut between two distinct values), the cut with the lowest
# weighted Gini impurity `(n_l * G_l + n_r * G_r) / n`, `G = 1 - sum_c p_c^2`, is kept if it
# lowers the node's impurity, and growth stops at `max_depth`, at a pure node or when a child
# would hold fewer than `min_leaf` rows. Ties go to the cut with the fewest rows on its left,
# then to the first feature in name order, so a fit is deterministic for a given feature order.
#
# Rows are sparse (an input holds a few hundred of a corpus's thousands of words), so a node
# scans only the values its rows hold and counts every other row at 0. The dense numpy matrix
# this replaces (rows x features x classes per node) made the whole audit take 1.03 s on the
# shipped 240-case corpus (5,237 features), 1.37 s on the 528-case one and 0.41 s on the
# 180-case one; now 0.32, 0.60 and 0.12 s; on `bench.report_speed`'s 50 starter cases 22 ms,
# now 20 ms (best of 3 to 15, both in one process, load 2; issue 55). Sums run in class order
# as numpy's did, so every split and threshold is the same to the bit, and the audit imports
# no numpy.

Row = Mapping[str, float]
"""A row's feature values by feature name; an absent feature is 0."""


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


class _Split(NamedTuple):
    """A candidate cut of one node.

    Splits compare in order of preference: lowest impurity, then fewest rows on the left, then
    the first feature by name (as numpy's `argmin` over (cut, feature) chose before).
    """

    impurity: float
    """Weighted Gini impurity of the two children."""
    cut: int
    """Rows left of the cut, minus one: its position among the feature's sorted values."""
    feature: str
    threshold: float


def _class_counts(labels: Sequence[int], classes: int) -> list[int]:
    counts = [0] * classes
    for label in labels:
        counts[label] += 1
    return counts


def _majority(counts: Sequence[int]) -> int:
    return max(range(len(counts)), key=counts.__getitem__)  # first class on ties: deterministic


def _gini(counts: Sequence[int], total: int) -> float:
    """1 - sum_c (n_c / n)^2, summed in class order; 1 for no rows."""
    if total == 0:
        return 1.0
    squares = 0.0
    for count in counts:
        share = count / total
        squares += share * share
    return 1.0 - squares


def _counts_by_value(
    rows: Sequence[Row], labels: Sequence[int], classes: int
) -> dict[str, dict[float, list[int]]]:
    """Class counts per distinct value held, for every feature some row holds.

    One `Counter` of (feature, value) pairs per class counts the rows' entries in C: a node of
    the 528-case shipped corpus's audit holds up to 80,000 of them.
    """
    by_class = [Counter[tuple[str, float]]() for _ in range(classes)]
    for row, label in zip(rows, labels, strict=True):
        by_class[label].update(row.items())
    by_feature: dict[str, dict[float, list[int]]] = {}
    for label, pairs in enumerate(by_class):
        for (feature, value), count in pairs.items():
            by_value = by_feature.setdefault(feature, {})
            counts = by_value.get(value)
            if counts is None:
                counts = by_value[value] = [0] * classes
            counts[label] = count
    return by_feature


def _cut(
    feature: str, left: list[int], totals: Sequence[int], low: float, high: float, min_leaf: int
) -> _Split | None:
    """The cut between values `low` and `high` with class counts `left` below it, if allowed."""
    rows = sum(totals)
    n_left = sum(left)
    n_right = rows - n_left
    if n_left < min_leaf or n_right < min_leaf:
        return None
    right = [total - count for total, count in zip(totals, left, strict=True)]
    impurity = (n_left * _gini(left, n_left) + n_right * _gini(right, n_right)) / rows
    return _Split(impurity, n_left - 1, feature, (low + high) / 2)


def _best_cut(
    feature: str, held: dict[float, list[int]], totals: Sequence[int], min_leaf: int
) -> _Split | None:
    """The lowest-impurity cut of one feature between two distinct values, or None.

    `held` counts the rows that hold the feature; the others are at 0.
    """
    absent = list(totals)
    for counts in held.values():
        absent = [rest - count for rest, count in zip(absent, counts, strict=True)]
    if len(held) == 1 and any(absent):  # most features: a word some rows hold, one cut
        ((value, counts),) = held.items()
        if value > 0:
            return _cut(feature, absent, totals, 0.0, value, min_leaf)
        return _cut(feature, counts, totals, value, 0.0, min_leaf) if value < 0 else None
    if any(absent):
        zeros = held.get(0.0, [0] * len(totals))
        held = {**held, 0.0: [rest + count for rest, count in zip(absent, zeros, strict=True)]}
    left = [0] * len(totals)
    best: _Split | None = None
    values = sorted(held)
    for low, high in pairwise(values):
        left = [before + count for before, count in zip(left, held[low], strict=True)]
        cut = _cut(feature, left, totals, low, high, min_leaf)
        if cut is not None and (best is None or cut.impurity < best.impurity):
            best = cut
    return best


def _best_split(
    rows: Sequence[Row], labels: Sequence[int], classes: int, min_leaf: int
) -> _Split | None:
    """The best cut over every feature, or None when none is allowed.

    Features are scanned in name order, and a feature whose rows hold the same values with the
    same class counts as an earlier one's is skipped: its cuts are the same, and ties go to
    the first name (most words of a small corpus share their class counts with another).
    """
    totals = _class_counts(labels, classes)
    by_feature = _counts_by_value(rows, labels, classes)
    scanned: set[tuple[tuple[float, tuple[int, ...]], ...]] = set()
    best: _Split | None = None
    for feature in sorted(by_feature):
        held = by_feature[feature]
        signature = tuple(sorted((value, tuple(counts)) for value, counts in held.items()))
        if signature in scanned:
            continue
        scanned.add(signature)
        cut = _best_cut(feature, held, totals, min_leaf)
        if cut is not None and (best is None or cut < best):
            best = cut
    return best


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
        classes = {label: index for index, label in enumerate(self.labels)}
        self._root = self._grow(rows, [classes[label] for label in labels], 0)
        return self

    def _grow(self, rows: Sequence[Row], labels: Sequence[int], depth: int) -> _Node:
        counts = _class_counts(labels, len(self.labels))
        label = _majority(counts)
        parent = _gini(counts, len(labels))
        if depth >= self.max_depth or parent == 0.0 or not self.features:
            return _Node(label)
        split = _best_split(rows, labels, len(self.labels), self.min_leaf)
        if split is None or split.impurity >= parent - 1e-12:
            return _Node(label)
        goes_left = [row.get(split.feature, 0.0) <= split.threshold for row in rows]
        return _Node(
            label,
            self.features.index(split.feature),
            split.threshold,
            self._grow(
                [r for r, left in zip(rows, goes_left, strict=True) if left],
                [y for y, left in zip(labels, goes_left, strict=True) if left],
                depth + 1,
            ),
            self._grow(
                [r for r, left in zip(rows, goes_left, strict=True) if not left],
                [y for y, left in zip(labels, goes_left, strict=True) if not left],
                depth + 1,
            ),
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


# ------------------------------------------------------------------------------------------------
# The chance + margin ceiling the shortcut audit judges by.
#
# The audit scores named surface predictors against the reference decisions and fails the corpus
# when one is above chance + margin or did not run (an unrun check is no pass). (The learned
# attackers read the fields the policy rules read: since issue 51 their accuracy is reported, not
# held to this ceiling; see `_learning_audit.py`.)

_TOLERANCE = 1e-12
"""An accuracy must exceed the ceiling by more than float noise to count as above it."""


def percent(share: float | None) -> str:
    """A share as a percentage with one decimal, or `not run`."""
    return "not run" if share is None else f"{100 * share:.1f}%"


def verdict_cell(accuracy: float | None, above: bool, above_word: str) -> str:
    """A predictor's verdict as a rich table cell: not run, `above_word` (red) or at or below."""
    if accuracy is None:
        return "[bold red]NOT RUN[/]"
    return f"[bold red]{above_word}[/]" if above else "[green]at or below[/]"


class CeilingAudit(BaseModel):
    """Base of an audit report: the ceiling, the predictors above it, the pass verdict.

    A subclass declares the fields `cases`, `chance` and `margin` and lists its predictors'
    `(name, accuracy)` in `scores`; its computed field naming the offenders returns `above`.
    """

    if TYPE_CHECKING:  # declared (as fields, in their own order) by each subclass
        cases: int
        chance: float | None
        margin: float

    def scores(self) -> list[tuple[str, float | None]]:
        """Every predictor's `(name, accuracy)`, accuracy None when it did not run."""
        raise NotImplementedError

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ceiling(self) -> float | None:
        """Chance + margin (capped at 1); a predictor above it means the corpus is saturated."""
        return None if self.chance is None else min(1.0, self.chance + self.margin)

    def above(self) -> list[str]:
        """Names of the predictors above the ceiling, in their order."""
        ceiling = self.ceiling
        return [
            name
            for name, accuracy in self.scores()
            if ceiling is not None and accuracy is not None and accuracy > ceiling + _TOLERANCE
        ]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        """True only when every predictor ran and none exceeds the ceiling."""
        ran = self.cases > 0 and all(accuracy is not None for _, accuracy in self.scores())
        return ran and not self.above()


# ------------------------------------------------------------------------------------------------
# Surface features of a candidate-visible input, read generically from its JSON.
#
# The shortcut audit asks whether a rule with no understanding of the domain can reach the
# reference decisions. Such a rule must see exactly what a candidate sees, so every feature here is
# computed from the exported `CandidateInput` JSON (never the answer key), and generically: records
# are any objects in `evidence`, their `kind` and `status` are whatever strings they carry, and the
# proposal's parameters are compared with whichever evidence object shares the most keys with
# them. The same code therefore runs on any corpus version whose input has a `proposal` and an
# `evidence` list. `evaluation_id` is ignored (it is random per export and carries no signal).

_WORD = re.compile(r"[a-z][a-z0-9_-]{2,}")
_UNAVAILABLE = frozenset({"unavailable", "degraded"})


def _visible(document: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in document.items() if key != "evaluation_id"}


def _records(document: dict[str, Any]) -> list[dict[str, Any]]:
    evidence = document.get("evidence")
    return [r for r in evidence if isinstance(r, dict)] if isinstance(evidence, list) else []


def _objects(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _objects(item)
    elif isinstance(value, list):
        for item in value:
            yield from _objects(item)


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def statuses(document: dict[str, Any]) -> list[str]:
    """The `status` string of every evidence record that has one, in order."""
    return [r["status"] for r in _records(document) if isinstance(r.get("status"), str)]


def parameter_differences(document: dict[str, Any]) -> int:
    """Proposal parameters that differ from the evidence object sharing the most keys with them.

    No domain knowledge: the counterpart is found by key overlap alone (ties: first in document
    order), and values compare under the policy normalisation. 0 when nothing overlaps.
    """
    proposal = document.get("proposal")
    parameters = proposal.get("parameters") if isinstance(proposal, dict) else None
    if not isinstance(parameters, dict) or not parameters:
        return 0
    best: dict[str, Any] | None = None
    best_overlap = 0
    for candidate in _objects(_records(document)):
        overlap = len(set(candidate) & set(parameters))
        if overlap > best_overlap:
            best, best_overlap = candidate, overlap
    if best is None:
        return 0
    keys = set(parameters) | set(best)
    return sum(
        1
        for key in keys
        if key not in parameters or key not in best or not equivalent(parameters[key], best[key])
    )


def revision_occurrences(document: dict[str, Any]) -> int:
    """How often the proposal's `resource_revision` string occurs in the serialised input."""
    proposal = document.get("proposal")
    revision = proposal.get("resource_revision") if isinstance(proposal, dict) else None
    if not isinstance(revision, str) or not revision:
        return 0
    return json.dumps(_visible(document), sort_keys=True).count(revision)


def record_kinds(document: dict[str, Any]) -> list[str]:
    """The `kind` of every evidence record, in presentation order (`?` when absent)."""
    return [str(r.get("kind", "?")) for r in _records(document)]


def word_features(document: dict[str, Any]) -> dict[str, float]:
    """Presence (1.0) of every lower-case word of 3+ characters in any string of the input."""
    words = {w for text in _strings(_visible(document)) for w in _WORD.findall(text.casefold())}
    return {f"word:{w}": 1.0 for w in sorted(words)}


def structure_features(document: dict[str, Any]) -> dict[str, float]:
    """Counts by kind and status, parameter differences, revision counts, record positions."""
    return Surface(document).structure


def surface_features(document: dict[str, Any]) -> dict[str, float]:
    """Every surface feature of one input: structure plus word presence."""
    return Surface(document).features


class Surface:
    """One candidate-visible input and its surface facts, each computed at most once.

    The rules read the same few facts of every input (its statuses, parameter differences,
    revision count, record kinds and words), and a fitted rule reads an input's features
    once to fit and once to score. Computed per rule and per use, that was four word scans
    and six key-overlap searches of each input: the audit in the `report` of
    `bench.report_speed`'s 50-case run took 36 ms CPU, 17 ms since (81 and 32 ms at load 5).
    Each fact is the function of the same name applied to `document`, which no rule changes.
    """

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        """The exported candidate input (JSON mode)."""

    @cached_property
    def statuses(self) -> list[str]:
        """`statuses(document)`."""
        return statuses(self.document)

    @cached_property
    def parameter_differences(self) -> int:
        """`parameter_differences(document)`."""
        return parameter_differences(self.document)

    @cached_property
    def revision_occurrences(self) -> int:
        """`revision_occurrences(document)`."""
        return revision_occurrences(self.document)

    @cached_property
    def record_kinds(self) -> list[str]:
        """`record_kinds(document)`."""
        return record_kinds(self.document)

    @cached_property
    def words(self) -> dict[str, float]:
        """`word_features(document)`."""
        return word_features(self.document)

    @cached_property
    def structure(self) -> dict[str, float]:
        """Counts by kind and status, parameter differences, revision counts, record positions."""
        kinds = self.record_kinds
        features: dict[str, float] = {"records": float(len(kinds))}
        for index, (kind, record) in enumerate(zip(kinds, _records(self.document), strict=True)):
            features[f"kind:{kind}"] = features.get(f"kind:{kind}", 0.0) + 1
            status = record.get("status")
            if isinstance(status, str):
                features[f"status:{status}"] = features.get(f"status:{status}", 0.0) + 1
                features[f"kind:{kind}&status:{status}"] = (
                    features.get(f"kind:{kind}&status:{status}", 0.0) + 1
                )
            # Relative position of the first record of each kind (0 = first, 1 = last).
            features.setdefault(f"position:{kind}", index / max(len(kinds) - 1, 1))
        if kinds:
            features[f"first:{kinds[0]}"] = 1.0
            features[f"last:{kinds[-1]}"] = 1.0
        differences = self.parameter_differences
        features["parameter_differences"] = float(differences)
        features["any_parameter_differs"] = float(differences > 0)
        features["revision_occurrences"] = float(self.revision_occurrences)
        return features

    @cached_property
    def features(self) -> dict[str, float]:
        """Every surface feature: structure plus word presence."""
        return {**self.structure, **self.words}


def is_unavailable(status: str) -> bool:
    """True for a status word that says a service could not be consulted."""
    return status in _UNAVAILABLE


DEFAULT_MARGIN = 0.15
"""Points above chance a surface rule may score before the corpus counts as saturated."""

Document = dict[str, Any]
_PERMIT, _DENY, _HOLD = Decision.PERMIT.value, Decision.DENY.value, Decision.HOLD.value


def status_only(surface: Surface) -> str:
    """Revoked status -> deny; an unavailable/degraded status -> hold; else permit."""
    seen = surface.statuses
    if "revoked" in seen:
        return _DENY
    return _HOLD if any(is_unavailable(s) for s in seen) else _PERMIT


def parameter_diff(surface: Surface) -> str:
    """A proposal parameter differs from its best-matching evidence object -> deny; else permit."""
    return _DENY if surface.parameter_differences else _PERMIT


def revision_count(surface: Surface) -> str:
    """The starter's three-check rule: revision seen < 3 times -> hold; revoked or diff -> deny."""
    if surface.revision_occurrences < 3:
        return _HOLD
    if "revoked" in surface.statuses or surface.parameter_differences:
        return _DENY
    return _PERMIT


def revision_count_deny_first(surface: Surface) -> str:
    """The three checks with deny first (the policy's precedence): revoked or diff, then count."""
    if "revoked" in surface.statuses or surface.parameter_differences:
        return _DENY
    return _HOLD if surface.revision_occurrences < 3 else _PERMIT


def revision_count_only(surface: Surface) -> str:
    """Revision string seen fewer than 3 times -> hold; else permit."""
    return _HOLD if surface.revision_occurrences < 3 else _PERMIT


FIXED_RULES: dict[str, Callable[[Surface], str]] = {
    "status-only": status_only,
    "parameter-diff": parameter_diff,
    "revision-count": revision_count,
    "revision-count-deny-first": revision_count_deny_first,
    "revision-count-only": revision_count_only,
}
"""Rules scored on every case as written."""


class _OrderLookup:
    """Majority decision per (first record kind, last record kind), fitted on training cases."""

    def fit(self, surfaces: Sequence[Surface], labels: Sequence[str]) -> _OrderLookup:
        self.default = Counter(labels).most_common(1)[0][0]
        by_key: dict[tuple[str, str], Counter[str]] = {}
        for surface, label in zip(surfaces, labels, strict=True):
            by_key.setdefault(self._key(surface), Counter())[label] += 1
        self.table = {key: counts.most_common(1)[0][0] for key, counts in by_key.items()}
        return self

    @staticmethod
    def _key(surface: Surface) -> tuple[str, str]:
        kinds = surface.record_kinds or ["none"]
        return kinds[0], kinds[-1]

    def predict(self, surface: Surface) -> str:
        return self.table.get(self._key(surface), self.default)


class _TreeRule:
    def __init__(self, features: Callable[[Surface], dict[str, float]]) -> None:
        self.features = features

    def fit(self, surfaces: Sequence[Surface], labels: Sequence[str]) -> _TreeRule:
        self.tree = DecisionTree(max_depth=3, min_leaf=2).fit(
            [self.features(s) for s in surfaces], labels
        )
        return self

    def predict(self, surface: Surface) -> str:
        return self.tree.predict(self.features(surface))


FITTED_RULES: dict[str, tuple[str, Callable[[], Any]]] = {
    "record-order": (
        "majority decision per (kind of first record, kind of last record)",
        _OrderLookup,
    ),
    "keyword": (
        "depth-3 tree over word presence in every visible string",
        lambda: _TreeRule(attrgetter("words")),
    ),
    "surface-tree": (
        "depth-3 tree over record counts by kind/status, parameter diff, revision-string count, "
        "record positions and word presence",
        lambda: _TreeRule(attrgetter("features")),
    ),
}
"""Rules fitted on one half of the groups, scored on the other: name -> (description, factory).
A rule fits on and scores each case's `Surface`."""


class ShortcutRule(BaseModel):
    """One surface rule's score on a corpus."""

    model_config = documented(frozen=True)

    rule: str
    """Rule name, e.g. `revision-count`."""
    description: str
    """What the rule looks at, in words."""
    fitted: bool
    """True when cross-fitted on group halves (accuracy is the mean of the two halves)."""
    correct: int | None
    """Cases decided as the reference (pooled over both halves for a fitted rule); None: not run."""
    cases: int | None
    """Cases scored; None when the rule did not run."""
    accuracy: float | None
    """Share of reference decisions reproduced (fitted: mean over halves); None when not run."""
    detail: str
    """Per-half scores, or why the rule did not run."""


class SaturationReport(CeilingAudit):
    """Every shortcut rule's accuracy on a corpus, the declared ceiling, and the verdict."""

    model_config = documented(frozen=True)

    cases: int
    """Cases in the corpus."""
    majority_decision: str | None
    """The most common reference decision (chance = always answering it); None for no cases."""
    chance: float | None
    """Majority-class share of the corpus; None for no cases."""
    margin: float
    """Declared points above chance a rule may reach (0.15 = 15 points)."""
    rules: list[ShortcutRule]
    """Every rule, fixed then fitted."""

    def scores(self) -> list[tuple[str, float | None]]:
        """Every rule's `(name, accuracy)`."""
        return [(r.rule, r.accuracy) for r in self.rules]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def saturated_rules(self) -> list[str]:
        """Rules scoring above the ceiling."""
        return self.above()


def _halves(groups: Sequence[str]) -> list[set[str]]:
    """Two halves of the sorted group names, alternating, so both halves mix the groups."""
    ordered = sorted(set(groups))
    return [set(ordered[0::2]), set(ordered[1::2])]


def _fitted(
    name: str,
    description: str,
    factory: Callable[[], Any],
    surfaces: Sequence[Surface],
    labels: Sequence[str],
    groups: Sequence[str],
) -> ShortcutRule:
    halves = _halves(groups)
    if not halves[1]:
        return ShortcutRule(
            rule=name,
            description=description,
            fitted=True,
            correct=None,
            cases=None,
            accuracy=None,
            detail="not run: cross-fitting needs at least two domain groups",
        )
    scores: list[tuple[int, int]] = []
    for held_out in halves:
        train = [i for i, g in enumerate(groups) if g not in held_out]
        test = [i for i, g in enumerate(groups) if g in held_out]
        model = factory().fit([surfaces[i] for i in train], [labels[i] for i in train])
        scores.append((sum(model.predict(surfaces[i]) == labels[i] for i in test), len(test)))
    accuracy = sum(c / n for c, n in scores) / len(scores)
    return ShortcutRule(
        rule=name,
        description=description,
        fitted=True,
        correct=sum(c for c, _ in scores),
        cases=sum(n for _, n in scores),
        accuracy=accuracy,
        detail="halves (fit on the other): " + ", ".join(f"{c}/{n}" for c, n in scores),
    )


def shortcut_audit(
    cases: Sequence[AuthoredCase], documents: Sequence[Document], *, margin: float = DEFAULT_MARGIN
) -> SaturationReport:
    """Score every shortcut rule on a corpus.

    Args:
        cases: The authored cases (grader side: only their reference decision and group are read).
        documents: Each case's candidate-visible input as exported JSON (`CandidateInput` dumped
            in JSON mode), in the same order: the only thing the rules see.
        margin: Points above chance a rule may reach before the corpus counts as saturated.

    Returns:
        The report; `ok` is False when any rule exceeds chance + margin or could not run.
    """
    labels = [case.expectations.reference_decision.value for case in cases]
    groups = [case.group for case in cases]
    surfaces = [Surface(document) for document in documents]  # each fact computed once
    rules: list[ShortcutRule] = []
    for name, rule in FIXED_RULES.items():
        correct = sum(rule(s) == label for s, label in zip(surfaces, labels, strict=True))
        rules.append(
            ShortcutRule(
                rule=name,
                description=(rule.__doc__ or "").strip().rstrip("."),
                fitted=False,
                correct=correct if cases else None,
                cases=len(cases) if cases else None,
                accuracy=correct / len(cases) if cases else None,
                detail=f"{correct}/{len(cases)} cases" if cases else "not run: no cases",
            )
        )
    for name, (description, factory) in FITTED_RULES.items():
        rules.append(_fitted(name, description, factory, surfaces, labels, groups))
    majority = Counter(labels).most_common(1)[0] if labels else None
    return SaturationReport(
        cases=len(cases),
        majority_decision=majority[0] if majority else None,
        chance=majority[1] / len(labels) if majority else None,
        margin=margin,
        rules=rules,
    )


def corpus_saturation(corpus: Corpus, *, margin: float = DEFAULT_MARGIN) -> SaturationReport:
    """Score the shortcut rules on `corpus`'s exported candidate inputs (see `shortcut_audit`).

    Inputs are exported with fresh evaluation ids, which no feature reads, so the result does
    not depend on them.
    """
    documents = [
        to_candidate_input(case, new_evaluation_id()).model_dump(mode="json")
        for case in corpus.cases
    ]
    return shortcut_audit(corpus.cases, documents, margin=margin)


def chance_line(report: SaturationReport) -> str:
    """How chance and the ceiling were computed, with their denominators."""
    if report.chance is None:
        return "No cases: chance and ceiling are undefined; the shortcut audit did not run."
    majority = round(report.chance * report.cases)
    return (
        f"Chance = majority-class share (always answering {report.majority_decision}): "
        f"{majority}/{report.cases} = {percent(report.chance)}; ceiling = chance + "
        f"{100 * report.margin:g} points = {percent(report.ceiling)}."
    )


def rule_line(report: SaturationReport, rule: ShortcutRule) -> str:
    """One rule's saturation with its verdict against the ceiling."""
    if rule.accuracy is None:
        verdict = "NOT RUN (fails the audit: an unrun check is not a pass)"
    elif rule.rule in report.saturated_rules:
        verdict = "ABOVE the ceiling"
    else:
        verdict = "at or below the ceiling"
    return f"{rule.rule}: {percent(rule.accuracy)} ({rule.detail}); {verdict}. {rule.description}."


def verdict_line(report: SaturationReport) -> str:
    """One line: saturated (naming the rules) or not."""
    if report.saturated_rules:
        saturated = set(report.saturated_rules)
        named = ", ".join(
            f"{r.rule} {percent(r.accuracy)}" for r in report.rules if r.rule in saturated
        )
        return (
            f"corpus saturated: {len(report.saturated_rules)} of {len(report.rules)} surface rules "
            f"score above the ceiling {percent(report.ceiling)} ({named}); a score on this corpus "
            "is not evidence of review ability"
        )
    if not report.ok:
        return "corpus saturation not established: a shortcut rule could not run"
    return (
        f"corpus not saturated: all {len(report.rules)} surface rules at or below the ceiling "
        f"{percent(report.ceiling)}"
    )
