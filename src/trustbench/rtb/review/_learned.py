"""Learned surface attackers: can a fitted model with no policy reach the reference decisions?

A hand-written shortcut rule tests one guess about how a corpus leaks; a learner tests every guess
its features can express. Each attacker here is a scikit-learn model fitted on the generic
features of `_features.py` (counts, presence, lengths, tokens of every id and string, raw and
normalised equality of every pair of fields, timestamps compared as strings and as times, record
order), computed from the exported candidate inputs alone, never the answer key.

Scoring is leave-one-domain-group-out: fit on every group but one, predict the held-out group,
pool the held-out predictions over all groups. A group's related variants are never on both sides,
so an attacker cannot win by remembering a sibling case. Every model is seeded; the same corpus
gives the same figures.

A corpus on which any attacker exceeds chance + margin held-out (chance = majority-class share) is
*saturated*: a candidate's score there may be surface pattern matching, not review. An attacker
that could not run (fewer than two groups, a single label) fails too: an unrun check is no pass.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, computed_field

from trustbench.rtb.review._ceiling import CeilingAudit
from trustbench.rtb.review._features import (
    Document,
    FeatureSpace,
    all_features,
    structure_features,
    text_of,
)

DEFAULT_MARGIN = 0.15
"""Points above chance an attacker may score held-out before the corpus counts as saturated."""


class AttackerScore(BaseModel):
    """One learned attacker's held-out accuracy on a corpus."""

    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True)

    attacker: str
    """Attacker name, e.g. `logistic-regression`."""
    description: str
    """Model and feature view, in words."""
    correct: int | None
    """Held-out predictions equal to the reference decision, pooled over groups; None: not run."""
    cases: int | None
    """Held-out predictions made (every case once); None when not run."""
    detail: str
    """Worst and best group, or why the attacker did not run."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def accuracy(self) -> float | None:
        """Pooled held-out accuracy (None when not run)."""
        return None if not self.cases or self.correct is None else self.correct / self.cases


class LearnedReport(CeilingAudit):
    """Every learned attacker's held-out accuracy, the ceiling, and the verdict."""

    model_config = ConfigDict(use_attribute_docstrings=True, frozen=True)

    cases: int
    """Cases in the corpus."""
    groups: int
    """Domain groups (folds of the leave-one-group-out split)."""
    chance: float | None
    """Majority-class share of the corpus; None for no cases."""
    margin: float
    """Declared points above chance an attacker may reach (0.15 = 15 points)."""
    seed: int
    """Seed of every model."""
    attackers: list[AttackerScore]
    """Every attacker, in a fixed order."""

    def scores(self) -> list[tuple[str, float | None]]:
        """Every attacker's `(name, held-out accuracy)`."""
        return [(a.attacker, a.accuracy) for a in self.attackers]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def saturating(self) -> list[str]:
        """Attackers above the ceiling."""
        return self.above()


def _models(seed: int) -> dict[str, tuple[str, str, Callable[[], Any]]]:
    """Name -> (description, feature view, model factory); imported lazily (scikit-learn)."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MaxAbsScaler

    def logistic() -> Any:
        return make_pipeline(MaxAbsScaler(), LogisticRegression(C=1.0, max_iter=500, tol=1e-3))

    return {
        "logistic-regression": (
            "L2 logistic regression over every feature (scaled)",
            "all",
            logistic,
        ),
        "logistic-regression-relations": (
            "L2 logistic regression over counts, lengths, order, pairwise equality and time "
            "comparisons (no tokens)",
            "structure",
            logistic,
        ),
        "random-forest": (
            "random forest, 100 trees, over every feature",
            "all",
            lambda: RandomForestClassifier(n_estimators=100, random_state=seed, n_jobs=1),
        ),
        "knn": (
            "5 nearest neighbours (cosine) over counts, lengths, order, equality and times",
            "structure",
            lambda: make_pipeline(
                MaxAbsScaler(), KNeighborsClassifier(n_neighbors=5, metric="cosine")
            ),
        ),
        "tfidf-linear": (
            "TF-IDF of every word (bare and with its field name), + logistic regression",
            "text",
            lambda: make_pipeline(
                TfidfVectorizer(token_pattern=r"\S+", sublinear_tf=True),
                LogisticRegression(C=10.0, max_iter=500, tol=1e-3),
            ),
        ),
    }


def _views(documents: Sequence[Document]) -> dict[str, Any]:
    from sklearn.feature_extraction import DictVectorizer

    space = FeatureSpace.infer(documents)
    views: dict[str, Any] = {"text": [text_of(space, d) for d in documents]}
    for name, extract in (("all", all_features), ("structure", structure_features)):
        rows = [extract(space, d) for d in documents]
        # Features seen in a single input cannot generalise across groups; dropping them keeps
        # the matrices small without hiding anything a held-out group could share.
        seen = Counter(key for row in rows for key in row)
        rows = [{k: v for k, v in row.items() if seen[k] >= 2} for row in rows]
        views[name] = DictVectorizer(sparse=True).fit_transform(rows)
    return views


def _held_out(
    make: Callable[[], Any], x: Any, labels: Sequence[str], groups: Sequence[str]
) -> tuple[int, list[tuple[str, int, int]]]:
    correct = 0
    per_group: list[tuple[str, int, int]] = []
    for group in sorted(set(groups)):
        test = [i for i, g in enumerate(groups) if g == group]
        train = [i for i, g in enumerate(groups) if g != group]
        train_labels = [labels[i] for i in train]
        if len(set(train_labels)) < 2:
            predicted = [train_labels[0]] * len(test)
        else:
            model = make()
            if "kneighborsclassifier__n_neighbors" in model.get_params():
                # A small corpus has fewer training inputs than neighbours asked for.
                k = model.get_params()["kneighborsclassifier__n_neighbors"]
                model.set_params(kneighborsclassifier__n_neighbors=min(k, len(train)))
            model = model.fit(_rows(x, train), train_labels)
            predicted = list(model.predict(_rows(x, test)))
        hits = sum(p == labels[i] for p, i in zip(predicted, test, strict=True))
        correct += hits
        per_group.append((group, hits, len(test)))
    return correct, per_group


def _rows(x: Any, index: list[int]) -> Any:
    return [x[i] for i in index] if isinstance(x, list) else x[index]


def learned_audit(
    documents: Sequence[Document],
    labels: Sequence[str],
    groups: Sequence[str],
    *,
    margin: float = DEFAULT_MARGIN,
    seed: int = 0,
) -> LearnedReport:
    """Score every learned attacker leave-one-group-out on a corpus's exported inputs.

    Args:
        documents: Each case's candidate-visible input as exported JSON: all the attackers see.
        labels: Each case's reference decision (grader side; used only to fit and to score).
        groups: Each case's domain group (the unit held out).
        margin: Points above chance an attacker may reach.
        seed: Seed for every model.

    Returns:
        The report; `ok` is False when an attacker exceeds chance + margin or could not run.
    """
    majority = Counter(labels).most_common(1)[0][1] / len(labels) if labels else None
    attackers: list[AttackerScore] = []
    runnable = len(set(groups)) >= 2 and len(set(labels)) >= 2
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):  # one BLAS thread: several threads only contend on small fits
        views = _views(documents) if runnable else {}
        attackers += [
            _score(name, spec, views, labels, groups, runnable)
            for name, spec in _models(seed).items()
        ]
    return LearnedReport(
        cases=len(labels),
        groups=len(set(groups)),
        chance=majority,
        margin=margin,
        seed=seed,
        attackers=attackers,
    )


def _score(
    name: str,
    spec: tuple[str, str, Callable[[], Any]],
    views: dict[str, Any],
    labels: Sequence[str],
    groups: Sequence[str],
    runnable: bool,
) -> AttackerScore:
    description, view, make = spec
    if not runnable:
        return AttackerScore(
            attacker=name,
            description=description,
            correct=None,
            cases=None,
            detail="not run: needs at least two domain groups and two decisions",
        )
    correct, per_group = _held_out(make, views[view], labels, groups)
    worst = min(per_group, key=lambda g: g[1] / g[2])
    best = max(per_group, key=lambda g: g[1] / g[2])
    return AttackerScore(
        attacker=name,
        description=description,
        correct=correct,
        cases=len(labels),
        detail=f"{correct}/{len(labels)} held out over {len(per_group)} groups; "
        f"worst group {worst[0]} {worst[1]}/{worst[2]}, best {best[0]} {best[1]}/{best[2]}",
    )


__all__ = ["DEFAULT_MARGIN", "AttackerScore", "LearnedReport", "learned_audit"]
