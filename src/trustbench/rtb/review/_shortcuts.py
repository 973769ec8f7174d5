"""Shortcut audit: can a rule with no domain understanding reach the reference decisions?

If a three-line rule over surface features (a status word, a parameter diff, how often a revision
string occurs, where the policy record sits) reproduces the answer key, a high score on the corpus
says nothing about review ability: the corpus is *saturated*. This module runs a family of such
rules over the candidate-visible inputs (`CandidateInput` JSON, never the answer key) and reports
each rule's accuracy against the authored reference decisions as "corpus saturation".

Fixed rules are scored on every case. Fitted rules (a lookup on record order, a keyword tree and a
small decision tree over every surface feature; see `_surface.py`, `_cart.py`) are cross-fitted
on two halves split by domain group, so a group's related variants are never on both sides: fit
on half A, score half B, and vice versa; the reported accuracy is the mean of the two halves.

Ceiling: chance + `DEFAULT_MARGIN` (15 points), where chance is the majority-class share of the
corpus (the accuracy of always answering its most common reference decision). A rule above the
ceiling fails the audit; a rule that could not run (e.g. fewer than two domain groups to split)
also fails it, since an unrun check is not a pass.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, computed_field

from trustbench.rtb.corpus._export import new_evaluation_id, to_candidate_input
from trustbench.rtb.corpus._load import Corpus
from trustbench.rtb.corpus._models import Decision
from trustbench.rtb.policy._protocol import AuthoredCase
from trustbench.rtb.review._cart import DecisionTree
from trustbench.rtb.review._ceiling import CeilingAudit, percent
from trustbench.rtb.review._surface import (
    is_unavailable,
    parameter_differences,
    record_kinds,
    revision_occurrences,
    statuses,
    surface_features,
    word_features,
)

DEFAULT_MARGIN = 0.15
"""Points above chance a surface rule may score before the corpus counts as saturated."""

Document = dict[str, Any]
_PERMIT, _DENY, _HOLD = Decision.PERMIT.value, Decision.DENY.value, Decision.HOLD.value


def status_only(document: Document) -> str:
    """Revoked status -> deny; an unavailable/degraded status -> hold; else permit."""
    seen = statuses(document)
    if "revoked" in seen:
        return _DENY
    return _HOLD if any(is_unavailable(s) for s in seen) else _PERMIT


def parameter_diff(document: Document) -> str:
    """A proposal parameter differs from its best-matching evidence object -> deny; else permit."""
    return _DENY if parameter_differences(document) else _PERMIT


def revision_count(document: Document) -> str:
    """The starter's three-check rule: revision seen < 3 times -> hold; revoked or diff -> deny."""
    if revision_occurrences(document) < 3:
        return _HOLD
    if "revoked" in statuses(document) or parameter_differences(document):
        return _DENY
    return _PERMIT


def revision_count_deny_first(document: Document) -> str:
    """The three checks with deny first (the policy's precedence): revoked or diff, then count."""
    if "revoked" in statuses(document) or parameter_differences(document):
        return _DENY
    return _HOLD if revision_occurrences(document) < 3 else _PERMIT


def revision_count_only(document: Document) -> str:
    """Revision string seen fewer than 3 times -> hold; else permit."""
    return _HOLD if revision_occurrences(document) < 3 else _PERMIT


FIXED_RULES: dict[str, Callable[[Document], str]] = {
    "status-only": status_only,
    "parameter-diff": parameter_diff,
    "revision-count": revision_count,
    "revision-count-deny-first": revision_count_deny_first,
    "revision-count-only": revision_count_only,
}
"""Rules scored on every case as written."""


class _OrderLookup:
    """Majority decision per (first record kind, last record kind), fitted on training cases."""

    def fit(self, documents: Sequence[Document], labels: Sequence[str]) -> _OrderLookup:
        self.default = Counter(labels).most_common(1)[0][0]
        by_key: dict[tuple[str, str], Counter[str]] = {}
        for document, label in zip(documents, labels, strict=True):
            by_key.setdefault(self._key(document), Counter())[label] += 1
        self.table = {key: counts.most_common(1)[0][0] for key, counts in by_key.items()}
        return self

    @staticmethod
    def _key(document: Document) -> tuple[str, str]:
        kinds = record_kinds(document) or ["none"]
        return kinds[0], kinds[-1]

    def predict(self, document: Document) -> str:
        return self.table.get(self._key(document), self.default)


class _TreeRule:
    def __init__(self, features: Callable[[Document], dict[str, float]]) -> None:
        self.features = features

    def fit(self, documents: Sequence[Document], labels: Sequence[str]) -> _TreeRule:
        self.tree = DecisionTree(max_depth=3, min_leaf=2).fit(
            [self.features(d) for d in documents], labels
        )
        return self

    def predict(self, document: Document) -> str:
        return self.tree.predict(self.features(document))


FITTED_RULES: dict[str, tuple[str, Callable[[], Any]]] = {
    "record-order": (
        "majority decision per (kind of first record, kind of last record)",
        _OrderLookup,
    ),
    "keyword": (
        "depth-3 tree over word presence in every visible string",
        lambda: _TreeRule(word_features),
    ),
    "surface-tree": (
        "depth-3 tree over record counts by kind/status, parameter diff, revision-string count, "
        "record positions and word presence",
        lambda: _TreeRule(surface_features),
    ),
}
"""Rules fitted on one half of the groups, scored on the other: name -> (description, factory)."""


class ShortcutRule(BaseModel):
    """One surface rule's score on a corpus."""

    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True)

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

    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True)

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
    documents: Sequence[Document],
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
        model = factory().fit([documents[i] for i in train], [labels[i] for i in train])
        scores.append((sum(model.predict(documents[i]) == labels[i] for i in test), len(test)))
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
    rules: list[ShortcutRule] = []
    for name, rule in FIXED_RULES.items():
        correct = sum(rule(d) == label for d, label in zip(documents, labels, strict=True))
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
        rules.append(_fitted(name, description, factory, documents, labels, groups))
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


__all__ = [
    "DEFAULT_MARGIN",
    "SaturationReport",
    "ShortcutRule",
    "corpus_saturation",
    "shortcut_audit",
]
