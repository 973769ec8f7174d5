"""The audit that learns, on one corpus: learned attackers and the artifact scan, with their tables.

`trustbench rtb audit` runs these beside the fixed shortcut rules (`_shortcuts.py`). Both read the
corpus's exported candidate inputs, produced by its policy exactly as a real export does, and use
the answer key only to fit and to score.

The two differ in what their figure means (issue 51). The artifact scan tests token classes no
policy rule reads (ids, shapes, record order): a class carrying the label is an authoring artefact,
so it GATES. The learned attackers read the values and the pairwise relations of the very fields
the policy rules read: their held-out accuracy says how much of the policy a shallow learner
recovers, which a corpus built from minimal pairs teaches by design, so it is REPORTED (with the
rules its errors fall on), never a failing check. What gates for them is that none passes the
policy's review gates: a shallow learner that would be released as a reviewer is a broken corpus.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, computed_field
from rich.markup import escape
from rich.table import Table

from trustbench._docstrings import documented
from trustbench.rtb.corpus._export import new_evaluation_id, to_candidate_input
from trustbench.rtb.corpus._load import Corpus
from trustbench.rtb.corpus._models import Decision
from trustbench.rtb.policy._registry import policy_for
from trustbench.rtb.review._audit import gate_results, gates_file
from trustbench.rtb.review._rows import Outcome, ReviewTrialRow
from trustbench.rtb.review._shortcuts import percent

__all__ = [
    "DEFAULT_MARGIN",
    "REPORTED_WHY",
    "ArtifactReport",
    "AttackerScore",
    "LearnedReport",
    "LearningAudit",
    "Role",
    "Scoring",
    "TokenClassScore",
    "artifact_scan",
    "artifact_table",
    "corpus_scoring",
    "count_features",
    "failed_gates",
    "held_out_predictions",
    "learned_audit",
    "learned_table",
    "recovery_line",
    "rule_errors",
    "rule_errors_text",
    "run_learning_audit",
    "verdict_lines",
]


# ------------------------------------------------------------------------------------------------
# Generic features of exported candidate inputs, for the learned attackers and the artifact scan.
#
# An attacker that reads the answer key is not an attacker; one that knows the policy is a reviewer.
# The learned surface attackers and the artifact scan (both below) must see
# exactly what a candidate sees and know nothing of what it means, so every feature here is read
# from the exported JSON without naming a single field: the same code runs on any corpus version.
#
# The only structure inferred is how to tell the objects of a list apart: for each list of objects
# (e.g. `evidence`), the *discriminator* is the string key present in (nearly) every element whose
# values take the fewest distinct values (at least two) across the corpus: in the shipped corpora
# that is `kind`, but it is found, not named. A path then reads `evidence[approval].status`.
#
# Feature families (each a name -> number, aggregated over repeated paths by counting):
#
# - `n:` leaves per path and elements per discriminator; `len:` shortest and longest string per
#   path;
# - `v:` a short value at a path; `w:` a word of a string at a path; `s:` a string's shape (letters
#   to `a`/`A`, digits to `0`, runs collapsed: `APR-0048-A` -> `A-0-A`);
# - `eq:` / `neq:` raw / normalised equality of every pair of leaves in different parts of the
#   input (top-level fields, list elements): e.g. the proposal's revision against a record's;
# - `lt:` / `slt:` / `dt:` timestamps compared as times, as strings, and their gap in hours;
# - `first:` / `last:` / `next:` / `pos:` record order; `k0:` which key an object lists first.
#
# `evaluation_id` is ignored (random per export). Token families (`v w s first last next k0`) are
# what the artifact scan tests; relation families (`eq neq lt slt dt`) feed only the learners.

Document = dict[str, Any]
Leaf = tuple[str, str, Any]
"""(part, path, value): `part` names the top-level field or list element the leaf lives in."""

IGNORED = frozenset({"evaluation_id"})
"""Top-level keys no feature reads: random per export."""

TOKEN_FAMILIES = ("v", "w", "s", "first", "last", "next", "k0")
"""Feature families that are tokens (tested by the artifact scan)."""

_WORD = re.compile(r"[A-Za-z0-9]+")
_TIMESTAMP = re.compile(
    r"^\s*\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?\s*$"
)
_SHORT = 40
"""Strings up to this length are also taken whole as a value token."""
_PAIR_MAX = 80
"""Strings longer than this (prose, policy text) are left out of pairwise equality."""


def _shape(text: str) -> str:
    out: list[str] = []
    for char in text:
        mark = "0" if char.isdigit() else "a" if char.islower() else "A" if char.isupper() else char
        if not out or out[-1] != mark:
            out.append(mark)
    return "".join(out)


def _normalised(value: Any) -> Any:
    """A generic normalisation (trim, case, trailing dot, digit strings, list order)."""
    if isinstance(value, str):
        text = value.strip().casefold().rstrip(".")
        return int(text) if text.isdigit() else text
    if isinstance(value, list):
        return tuple(sorted(repr(_normalised(v)) for v in value))
    return value


def _as_time(value: Any) -> float | None:
    if not isinstance(value, str) or not _TIMESTAMP.match(value):
        return None
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


@dataclass
class FeatureSpace:
    """The discriminator of each list path, inferred from the corpus's inputs (no labels read)."""

    discriminators: dict[str, str] = field(default_factory=dict)
    """List path -> the key that tells its objects apart."""

    @classmethod
    def infer(cls, documents: Sequence[Document]) -> FeatureSpace:
        """Choose, per list of objects, the near-universal string key with fewest values (>= 2)."""
        elements: dict[str, list[dict[str, Any]]] = {}
        for document in documents:
            for path, items in _lists({k: v for k, v in document.items() if k not in IGNORED}):
                elements.setdefault(path, []).extend(i for i in items if isinstance(i, dict))
        chosen: dict[str, str] = {}
        for path, items in elements.items():
            keys = Counter(k for item in items for k, v in item.items() if isinstance(v, str))
            best: tuple[int, str] | None = None
            for key, present in keys.items():
                distinct = len({item.get(key) for item in items if isinstance(item.get(key), str)})
                if present >= 0.95 * len(items) and distinct >= 2:
                    best = min(best or (distinct, key), (distinct, key))
            if best:
                chosen[path] = best[1]
        return cls(chosen)

    def leaves(self, document: Document) -> Iterator[Leaf]:
        """Every scalar of the input with the part it belongs to and its discriminated path."""
        for key, value in document.items():
            if key not in IGNORED:
                yield from self._walk(value, key, key)

    def _walk(self, value: Any, path: str, part: str) -> Iterator[Leaf]:
        if isinstance(value, dict):
            for key, item in value.items():
                yield from self._walk(item, f"{path}.{key}", part)
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            key = self.discriminators.get(_plain(path))
            for index, item in enumerate(value):
                tag = str(item.get(key, "?")) if key else ""
                yield from self._walk(item, f"{path}[{tag}]", f"{part}#{index}")
        elif isinstance(value, list):
            for item in value:
                yield from self._walk(item, f"{path}[]", part)
        else:
            yield part, path, value

    def tagged_lists(self, document: Document) -> Iterator[tuple[str, list[str]]]:
        """Each list of objects as (path, discriminator values in presentation order)."""
        for path, items in _lists({k: v for k, v in document.items() if k not in IGNORED}):
            key = self.discriminators.get(path)
            if key:
                yield path, [str(i.get(key, "?")) if isinstance(i, dict) else "?" for i in items]


def _plain(path: str) -> str:
    return re.sub(r"\[[^\]]*\]", "[]", path)


def _lists(value: Any, path: str = "") -> Iterator[tuple[str, list[Any]]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _lists(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        if value and all(isinstance(v, dict) for v in value):
            yield path, value
        for item in value:
            yield from _lists(item, f"{path}[]")


def _objects(value: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(value, dict):
        yield path, value
        for key, item in value.items():
            yield from _objects(item, f"{path}.{key}" if path else key)
    elif isinstance(value, list):
        for item in value:
            yield from _objects(item, f"{path}[]")


def token_features(space: FeatureSpace, document: Document) -> Counter[str]:
    """Value, word and shape tokens per path, record order and first keys (the token classes)."""
    features: Counter[str] = Counter()
    for _, path, value in space.leaves(document):
        if isinstance(value, str):
            if len(value) <= _SHORT:
                features[f"v:{path}={value}"] += 1
            for word in _WORD.findall(value.casefold()):
                features[f"w:{path} :: {word}"] += 1
            features[f"s:{path} :: {_shape(value)}"] += 1
        elif value is None or isinstance(value, bool | int | float):
            features[f"v:{path}={value!r}"] += 1
    for path, tags in space.tagged_lists(document):
        features[f"first:{path}={tags[0]}"] += 1
        features[f"last:{path}={tags[-1]}"] += 1
        for a, b in itertools.pairwise(tags):
            features[f"next:{path}={a}>{b}"] += 1
    for path, obj in _objects({k: v for k, v in document.items() if k not in IGNORED}):
        if obj:
            features[f"k0:{_plain(path)}={next(iter(obj))}"] += 1
    return features


def structure_features(space: FeatureSpace, document: Document) -> dict[str, float]:
    """Counts, lengths, positions, pairwise equalities and timestamp comparisons."""
    leaves = list(space.leaves(document))
    out = count_features(space, document, leaves)
    out.update(_pair_features(leaves))
    return out


def count_features(
    space: FeatureSpace, document: Document, leaves: list[Leaf] | None = None
) -> dict[str, float]:
    """Counts (leaves per path, records per kind), string lengths and record positions.

    `structure_features` without the pairwise comparisons; `leaves`: the input's leaves, when
    already listed.
    """
    features: Counter[str] = Counter()
    lengths: dict[str, list[int]] = {}
    for _, path, value in space.leaves(document) if leaves is None else leaves:
        features[f"n:{path}"] += 1
        if isinstance(value, str):
            lengths.setdefault(path, []).append(len(value))
    out: dict[str, float] = dict(features)
    for path, values in lengths.items():
        out[f"len-min:{path}"] = float(min(values))
        out[f"len-max:{path}"] = float(max(values))
    for path, tags in space.tagged_lists(document):
        out[f"n:{path}"] = float(len(tags))
        for tag in set(tags):
            out[f"n:{path}[{tag}]"] = float(tags.count(tag))
            out[f"pos:{path}[{tag}]"] = tags.index(tag) / max(len(tags) - 1, 1)
    return out


def _pair_features(leaves: list[Leaf]) -> dict[str, float]:
    comparable = [
        (part, path, value)
        for part, path, value in leaves
        if (isinstance(value, str) and 0 < len(value) <= _PAIR_MAX)
        or (isinstance(value, int | float) and not isinstance(value, bool))
    ]
    normal = [_normalised(v) for _, _, v in comparable]
    times = [_as_time(v) for _, _, v in comparable]
    out: Counter[str] = Counter()
    gaps: dict[str, list[float]] = {}
    for i, (part_a, path_a, value_a) in enumerate(comparable):
        for j in range(i + 1, len(comparable)):
            part_b, path_b, value_b = comparable[j]
            if part_a == part_b:
                continue
            a, b = sorted((path_a, path_b))
            pair = f"{a}~{b}"
            time_a, time_b = (times[i], times[j]) if path_a == a else (times[j], times[i])
            if time_a is not None and time_b is not None:
                out[f"lt:{pair}"] += time_a < time_b
                out[f"teq:{pair}"] += time_a == time_b
                first, second = (value_a, value_b) if path_a == a else (value_b, value_a)
                # Only strings parse as times (`_as_time`), so both values are strings here.
                out[f"slt:{pair}"] += str(first) < str(second)
                gaps.setdefault(pair, []).append((time_b - time_a) / 3600)
                continue
            if value_a == value_b and type(value_a) is type(value_b):
                out[f"eq:{pair}"] += 1
            if normal[i] == normal[j]:
                out[f"neq:{pair}"] += 1
    result: dict[str, float] = {k: float(v) for k, v in out.items() if v}
    for pair, values in gaps.items():
        # Signed log-hours keep a 3-day gap and a 30-day gap apart without letting years dominate.
        result[f"dt-min:{pair}"] = math.copysign(math.log1p(abs(min(values))), min(values))
        result[f"dt-max:{pair}"] = math.copysign(math.log1p(abs(max(values))), max(values))
    return result


def text_of(space: FeatureSpace, document: Document) -> str:
    """The input as one token stream for a bag-of-words model: `path:word` and bare words."""
    words: list[str] = []
    for _, path, value in space.leaves(document):
        leaf = _plain(path).rsplit(".", 1)[-1]
        for word in _WORD.findall(str(value).casefold()):
            words += [word, f"{leaf}:{word}"]
    return " ".join(words)


def all_features(
    space: FeatureSpace, document: Document, structure: dict[str, float] | None = None
) -> dict[str, float]:
    """Token and structure features together (what the learners are fitted on).

    `structure`: the input's `structure_features`, when already computed (they are the costly
    part, and the relation learners' view is the same rows).
    """
    return {
        **{k: float(v) for k, v in token_features(space, document).items()},
        **(structure_features(space, document) if structure is None else structure),
    }


# ------------------------------------------------------------------------------------------------
# Learned surface attackers: can a fitted model with no policy reach the reference decisions?
#
# A hand-written shortcut rule tests one guess about how a corpus leaks; a learner tests every guess
# its features can express. Each attacker here is a scikit-learn model fitted on the generic
# features above (counts, presence, lengths, tokens of every id and string, raw and
# normalised equality of every pair of fields, timestamps compared as strings and as times, record
# order), computed from the exported candidate inputs alone, never the answer key.
#
# Scoring is leave-one-domain-group-out: fit on every group but one, predict the held-out group,
# pool the held-out predictions over all groups. A group's related variants are never on both sides,
# so an attacker cannot win by remembering a sibling case. Every model is seeded; the same corpus
# gives the same figures.
#
# Every feature view here includes the values or the relations of the fields the policy rules read
# (a token `v:evidence[approval].status=revoked`, an equality of the proposal's revision with a
# record's), so a high held-out accuracy is part of the policy recovered by a shallow reader, which
# a corpus of minimal pairs teaches by design, not an artefact. The accuracy is REPORTED, with the
# rules the learner's errors fall on (from the rule ablation). What GATES is the policy's review
# gates, on the most favourable reading of a learner (a right decision counted as supported): a
# corpus on which a shallow learner would be released as a reviewer fails. A learner that could
# not run (fewer than two groups, a single label) fails too: an unrun check is no pass.

DEFAULT_MARGIN = 0.15
"""Points either side of chance a policy-blind attacker may score (`_unfiltered_attackers`), and
above chance a surface rule may (`_shortcuts`)."""

Role = Literal["gated", "reported"]
"""Whether an attacker's accuracy is a check or a figure: `gated` when it reads nothing a policy
rule reads (a label it finds is an authoring artefact), `reported` when it reads the fields the
rules read (what it finds is part of the policy). Passing the review gates fails either."""

REPORTED_WHY = (
    "it reads values or relations of fields the policy rules read, so its accuracy is how much of "
    "the policy a shallow learner recovers; passing the review gates fails"
)
"""Why a learner of the fields the rules read is reported (the tables say it)."""

WITHIN_CORPUS = "corpus, leave one domain group out"
"""Where the learned attackers are fitted and scored."""


@dataclass(frozen=True)
class Scoring:
    """What every attacker's predictions are scored against (grader side)."""

    labels: Sequence[str]
    """Each corpus case's reference decision."""
    case_ids: Sequence[str]
    """Each corpus case's id."""
    groups: Sequence[str]
    """Each corpus case's domain group."""
    gates: Path
    """The policy's review gates file."""
    deciding: Mapping[str, tuple[str, ...]]
    """Case id -> the rules that decide it (from the rule ablation)."""


def corpus_scoring(corpus: Corpus, deciding: Mapping[str, tuple[str, ...]]) -> Scoring:
    """A corpus's answer key, cases, groups and its policy's review gates, in case order."""
    return Scoring(
        labels=[case.expectations.reference_decision.value for case in corpus.cases],
        case_ids=[case.case_id for case in corpus.cases],
        groups=[case.group for case in corpus.cases],
        gates=gates_file(policy_for(corpus.policy_id)),
        deciding=deciding,
    )


def failed_gates(predicted: Sequence[str], scoring: Scoring) -> tuple[str, ...]:
    """The review gates a reader answering `predicted` fails, each right decision counted supported.

    The most favourable reading of an attacker: what fails a gate here fails it whatever findings
    the attacker wrote, so a corpus that passes this check passes it for every such reader.
    """
    rows = [
        ReviewTrialRow(
            case_id=case_id,
            group=group,
            variant="",
            reference=Decision(label),
            observed=Outcome(prediction),
            supported=prediction == label,
        )
        for case_id, group, label, prediction in zip(
            scoring.case_ids, scoring.groups, scoring.labels, predicted, strict=True
        )
    ]
    return tuple(g.spec.label for g in gate_results(rows, scoring.gates) if g.status != "passed")


def rule_errors(predicted: Sequence[str], scoring: Scoring) -> tuple[tuple[str, int, int], ...]:
    """(rule id, wrong, cases the rule decides) per rule, the largest share wrong first.

    Which part of the policy a reader does not recover: the rules deciding the cases it gets wrong.
    """
    wrong = Counter[str]()
    decided = Counter[str]()
    for case_id, label, prediction in zip(scoring.case_ids, scoring.labels, predicted, strict=True):
        for rule in scoring.deciding.get(case_id, ()):
            decided[rule] += 1
            wrong[rule] += prediction != label
    return tuple(
        sorted(
            ((rule, wrong[rule], decided[rule]) for rule in decided),
            key=lambda e: (-e[1] / e[2], -e[2], e[0]),
        )
    )


def rule_errors_text(errors: Sequence[tuple[str, int, int]], shown: int = 4) -> str:
    """`. Wrong on the cases these rules decide: rule wrong/cases, ...` (empty without errors)."""
    if not errors:
        return ""
    worst = ", ".join(f"{rule} {wrong}/{cases}" for rule, wrong, cases in errors[:shown])
    return f". Wrong on the cases these rules decide: {worst}"


REPORTED_MARK = "reported: "
"""How every reported (never gated) learner's line starts (`recovery_line`)."""


def recovery_line(
    attacker: str, fitted_on: str, correct: int, cases: int, errors: Sequence[tuple[str, int, int]]
) -> str:
    """The reported line of a learner of the fields the rules read (issue 51's wording)."""
    return (
        f"{REPORTED_MARK}a shallow learner ({attacker}, fitted on {fitted_on}) recovers "
        f"{percent(correct / cases if cases else None)} of the policy's decisions ({correct} of "
        f"{cases})" + rule_errors_text(errors, 3).replace(". Wrong", "; wrong", 1)
    )


class AttackerScore(BaseModel):
    """One learned attacker's held-out accuracy on a corpus, its gates and its rule errors."""

    model_config = documented(frozen=True)

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
    failed_gates: tuple[str, ...] | None = None
    """Review gates its held-out predictions fail (a right decision counted as supported); empty:
    it passes every gate, which fails the corpus; None: not run."""
    rule_errors: tuple[tuple[str, int, int], ...] = ()
    """(rule id, wrong, cases the rule decides), the largest share wrong first."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def accuracy(self) -> float | None:
        """Pooled held-out accuracy (None when not run)."""
        return None if not self.cases or self.correct is None else self.correct / self.cases

    @computed_field  # type: ignore[prop-decorator]
    @property
    def role(self) -> Role:
        """`reported`: every view of these learners reads fields the policy rules read."""
        return "reported"


class LearnedReport(BaseModel):
    """Every learned attacker's held-out accuracy (reported) and review gates (gated)."""

    model_config = documented(frozen=True)

    cases: int
    """Cases in the corpus."""
    groups: int
    """Domain groups (folds of the leave-one-group-out split)."""
    chance: float | None
    """Majority-class share of the corpus; None for no cases."""
    seed: int
    """Seed of every model."""
    attackers: list[AttackerScore]
    """Every attacker, in a fixed order."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def passing_gates(self) -> list[str]:
        """Attackers whose held-out predictions pass every review gate."""
        return [a.attacker for a in self.attackers if a.failed_gates == ()]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        """Every attacker ran and none passes the review gates (accuracy is never a check here)."""
        ran = self.cases > 0 and all(a.correct is not None for a in self.attackers)
        return ran and not self.passing_gates


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
    # `all_features` is tokens + structure: the structure rows (pairwise comparisons, the costly
    # part) are computed once and reused for both views.
    structure = [structure_features(space, d) for d in documents]
    every = [all_features(space, d, row) for d, row in zip(documents, structure, strict=True)]
    for name, rows in (("all", every), ("structure", structure)):
        # Features seen in a single input cannot generalise across groups; dropping them keeps
        # the matrices small without hiding anything a held-out group could share.
        seen = Counter(key for row in rows for key in row)
        rows = [{k: v for k, v in row.items() if seen[k] >= 2} for row in rows]
        views[name] = DictVectorizer(sparse=True).fit_transform(rows)
    return views


def held_out_predictions(
    make: Callable[[], Any], x: Any, labels: Sequence[str], folds: Sequence[str]
) -> list[str]:
    """Each input's prediction by a model fitted on every fold but its own.

    Args:
        make: A fresh model.
        x: The inputs' features (a matrix, or a list of texts), one row per input.
        labels: Each input's reference decision (to fit).
        folds: Each input's fold (its domain group, or its family).
    """
    predicted = [""] * len(labels)
    for fold in sorted(set(folds)):
        test = [i for i, f in enumerate(folds) if f == fold]
        train = [i for i, f in enumerate(folds) if f != fold]
        train_labels = [labels[i] for i in train]
        if len(set(train_labels)) < 2:
            answers = [train_labels[0]] * len(test)
        else:
            model = make()
            if "kneighborsclassifier__n_neighbors" in model.get_params():
                # A small corpus has fewer training inputs than neighbours asked for.
                k = model.get_params()["kneighborsclassifier__n_neighbors"]
                model.set_params(kneighborsclassifier__n_neighbors=min(k, len(train)))
            model = model.fit(_rows(x, train), train_labels)
            answers = [str(p) for p in model.predict(_rows(x, test))]
        for i, answer in zip(test, answers, strict=True):
            predicted[i] = answer
    return predicted


def _rows(x: Any, index: list[int]) -> Any:
    return [x[i] for i in index] if isinstance(x, list) else x[index]


def learned_audit(
    documents: Sequence[Document], scoring: Scoring, *, seed: int = 0
) -> LearnedReport:
    """Fit and score every learned attacker leave-one-group-out on a corpus's exported inputs.

    Args:
        documents: Each case's candidate-visible input as exported JSON: all the attackers see.
        scoring: The answer key (used only to fit and to score), groups (the unit held out), the
            review gates and the rules deciding each case.
        seed: Seed for every model.

    Returns:
        The report; `ok` is False when an attacker passes the review gates or could not run.
    """
    labels, groups = scoring.labels, scoring.groups
    majority = Counter(labels).most_common(1)[0][1] / len(labels) if labels else None
    runnable = len(set(groups)) >= 2 and len(set(labels)) >= 2
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):  # one BLAS thread: several threads only contend on small fits
        views = _views(documents) if runnable else {}
        attackers = [
            _score(name, spec, views, scoring, runnable) for name, spec in _models(seed).items()
        ]
    return LearnedReport(
        cases=len(labels), groups=len(set(groups)), chance=majority, seed=seed, attackers=attackers
    )


def _score(
    name: str,
    spec: tuple[str, str, Callable[[], Any]],
    views: dict[str, Any],
    scoring: Scoring,
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
    labels, groups = scoring.labels, scoring.groups
    predicted = held_out_predictions(make, views[view], labels, groups)
    per_group: list[tuple[str, int, int]] = []
    for group in sorted(set(groups)):
        members = [i for i, g in enumerate(groups) if g == group]
        per_group.append((group, sum(predicted[i] == labels[i] for i in members), len(members)))
    correct = sum(hits for _, hits, _ in per_group)
    worst = min(per_group, key=lambda g: g[1] / g[2])
    best = max(per_group, key=lambda g: g[1] / g[2])
    return AttackerScore(
        attacker=name,
        description=description,
        correct=correct,
        cases=len(labels),
        detail=f"{correct}/{len(labels)} held out over {len(per_group)} groups; "
        f"worst group {worst[0]} {worst[1]}/{worst[2]}, best {best[0]} {best[1]}/{best[2]}",
        failed_gates=failed_gates(predicted, scoring),
        rule_errors=rule_errors(predicted, scoring),
    )


# ------------------------------------------------------------------------------------------------
# Artifact scan: does any class of candidate-visible token carry information about the label?
#
# Authoring leaves traces: an id suffix per generator role, a timestamp format used only by one
# variant, a record always listed last in deny cases. Each token of `_features.token_features`
# (`v:` value, `w:` word, `s:` shape, record order, first key) belongs to a *class*: its family and
# path with the discriminator kept, e.g. `s:evidence[approval].approval_id`. For every token seen in
# at least `MIN_DOCUMENTS` inputs (and not in all but that many) the scan computes the mutual
# information, in bits, between the token's presence and the reference decision; a class's
# statistic is its most informative token.
#
# Many tokens are tested, so some will look informative by chance. The threshold is therefore
# calibrated by permutation: the labels are shuffled within each domain group (keeping each group's
# decision mix, which is what an honest corpus may share with its tokens), the *largest* token MI
# over every class is recorded, and the threshold is the `1 - ALPHA` quantile of those maxima. A
# class above it carries label information with family-wise error `ALPHA` under the null that no
# token does. The statistic (a max over tokens) is the same under the permutations as on the real
# labels, so a class of unique tokens (random ids) is not flagged for its size: the test can pass
# honestly, and a planted artifact fails it honestly. Seeded.

MIN_DOCUMENTS = 3
"""A token must occur in at least this many inputs (and miss at least this many) to be tested."""
ALPHA = 0.01
"""Family-wise error of the scan under the permutation null."""
PERMUTATIONS = 400
"""Label permutations that calibrate the threshold."""


class TokenClassScore(BaseModel):
    """One token class's most label-informative token."""

    model_config = documented(frozen=True)

    token_class: str
    """Family and path, e.g. `s:evidence[approval].approval_id`."""
    tokens: int
    """Tokens of this class tested."""
    top_token: str
    """The class's most informative token."""
    mutual_information_bits: float
    """MI between that token's presence and the reference decision, in bits."""
    documents: int
    """Inputs holding the top token."""


class ArtifactReport(BaseModel):
    """Every tested token class, the permutation threshold, and the verdict."""

    model_config = documented(frozen=True)

    cases: int
    """Inputs scanned."""
    threshold_bits: float | None
    """The `1 - alpha` quantile of the permuted maximum token MI; None when the scan did not run."""
    alpha: float
    """Family-wise error of the threshold."""
    permutations: int
    """Permutations behind the threshold."""
    seed: int
    """Seed of the permutations."""
    classes: list[TokenClassScore]
    """Every tested class, most informative first."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def carrying(self) -> list[str]:
        """Token classes above the threshold: they carry label information."""
        if self.threshold_bits is None:
            return []
        return [
            c.token_class
            for c in self.classes
            if c.mutual_information_bits > self.threshold_bits + 1e-12
        ]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        """True only when the scan ran and no class is above the threshold."""
        return self.threshold_bits is not None and not self.carrying


def _token_class(token: str) -> str:
    family, rest = token.split(":", 1)
    if family in ("v", "first", "last", "next", "k0"):
        return f"{family}:{rest.split('=', 1)[0]}"
    return f"{family}:{rest.split(' :: ', 1)[0]}"


def _mutual_information(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """MI in bits between each binary column of `x` (n x t) and the one-hot labels `y` (n x k).

    From the 2 x k contingency table of each token: sum p(x, y) log2(p(x, y) / (p(x) p(y))),
    with 0 log 0 = 0.
    """
    n = x.shape[0]
    with_token = x.T @ y  # t x k counts
    without = y.sum(axis=0)[None, :] - with_token
    p_token = x.sum(axis=0)[:, None] / n
    p_label = y.sum(axis=0)[None, :] / n
    total = np.zeros(x.shape[1])
    for counts, p_x in ((with_token, p_token), (without, 1 - p_token)):
        joint = counts / n
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(joint > 0, joint * np.log2(joint / (p_x * p_label)), 0.0)
        total += terms.sum(axis=1)
    return total


def artifact_scan(
    documents: Sequence[Document],
    labels: Sequence[str],
    groups: Sequence[str],
    *,
    seed: int = 0,
    alpha: float = ALPHA,
    permutations: int = PERMUTATIONS,
) -> ArtifactReport:
    """Test every candidate-visible token class for label information.

    Args:
        documents: Each case's exported candidate input.
        labels: Each case's reference decision (grader side).
        groups: Each case's domain group: labels are permuted within groups.
        seed: Seed of the permutations.
        alpha: Family-wise error of the threshold.
        permutations: Label permutations that calibrate the threshold.

    Returns:
        The report; `ok` is False when a class is above the threshold or nothing could be tested.
    """
    space = FeatureSpace.infer(documents)
    present = [set(token_features(space, d)) for d in documents]
    n = len(documents)
    counts: dict[str, int] = {}
    for tokens in present:
        for token in tokens:
            counts[token] = counts.get(token, 0) + 1
    tested = sorted(t for t, c in counts.items() if MIN_DOCUMENTS <= c <= n - MIN_DOCUMENTS)
    decisions = sorted(set(labels))
    if not tested or len(decisions) < 2:
        return ArtifactReport(
            cases=n,
            threshold_bits=None,
            alpha=alpha,
            permutations=permutations,
            seed=seed,
            classes=[],
        )
    column = {t: i for i, t in enumerate(tested)}
    x = np.zeros((n, len(tested)))
    for row, tokens in enumerate(present):
        for token in tokens:
            if token in column:
                x[row, column[token]] = 1.0
    label_index = np.array([decisions.index(label) for label in labels])
    observed = _mutual_information(x, np.eye(len(decisions))[label_index])
    rng = np.random.default_rng(seed)
    members = [np.flatnonzero(np.array(groups) == g) for g in sorted(set(groups))]
    maxima = np.empty(permutations)
    for p in range(permutations):
        shuffled = label_index.copy()
        for index in members:
            shuffled[index] = rng.permutation(label_index[index])
        maxima[p] = _mutual_information(x, np.eye(len(decisions))[shuffled]).max()
    threshold = float(np.quantile(maxima, 1 - alpha))
    best: dict[str, tuple[float, str, int]] = {}
    sizes: dict[str, int] = {}
    for token, mi in zip(tested, observed, strict=True):
        name = _token_class(token)
        sizes[name] = sizes.get(name, 0) + 1
        if name not in best or mi > best[name][0]:
            best[name] = (float(mi), token, counts[token])
    classes = sorted(
        (
            TokenClassScore(
                token_class=name,
                tokens=sizes[name],
                top_token=token,
                mutual_information_bits=round(mi, 6),
                documents=docs,
            )
            for name, (mi, token, docs) in best.items()
        ),
        key=lambda c: (-c.mutual_information_bits, c.token_class),
    )
    return ArtifactReport(
        cases=n,
        threshold_bits=round(threshold, 6),
        alpha=alpha,
        permutations=permutations,
        seed=seed,
        classes=classes,
    )


_SHOWN_CLASSES = 8
"""Token classes shown in the artifact table (every class above the threshold is shown)."""


@dataclass(frozen=True)
class LearningAudit:
    """Both learning checks on one corpus."""

    learned: LearnedReport
    """Every learned attacker's held-out accuracy (reported) and review gates (gated)."""
    artifacts: ArtifactReport
    """Every token class's label information against the permutation threshold."""

    @property
    def ok(self) -> bool:
        """True when no learned attacker passes the gates and no token class carries the label."""
        return self.learned.ok and self.artifacts.ok


def run_learning_audit(
    corpus: Corpus, deciding: Mapping[str, tuple[str, ...]], *, seed: int = 0
) -> LearningAudit:
    """Export every case as a candidate would see it, then attack the export.

    Evaluation ids are fresh and never read by a feature, so the result does not depend on them.

    Args:
        corpus: The corpus audited.
        deciding: Case id -> the rules that decide it (`_audit.deciding_rules` of its ablation),
            where each learner's errors are reported.
        seed: Seed of every model and of the artifact scan's permutations.
    """
    documents = [
        to_candidate_input(case, new_evaluation_id()).model_dump(mode="json")
        for case in corpus.cases
    ]
    scoring = corpus_scoring(corpus, deciding)
    return LearningAudit(
        learned=learned_audit(documents, scoring, seed=seed),
        artifacts=artifact_scan(documents, scoring.labels, scoring.groups, seed=seed),
    )


def learned_table(report: LearnedReport) -> Table:
    """Each learned attacker's held-out accuracy (reported) and its review gates (gated)."""
    table = Table(
        title="Learned attackers of the fields the rules read (candidate-visible input only; "
        f"leave one domain group out, seed {report.seed})",
        caption=f"chance = majority-class share {percent(report.chance)}; {report.groups} groups; "
        f"accuracy reported, not gated: {REPORTED_WHY}; gates: the policy's review gates, a "
        "right decision counted as supported",
    )
    for column in ("attacker", "held-out accuracy", "role", "gates", "detail"):
        table.add_column(column, overflow="fold")
    for attacker in report.attackers:
        table.add_row(
            attacker.attacker,
            percent(attacker.accuracy),
            attacker.role,
            _gates_cell(attacker.failed_gates),
            escape(
                f"{attacker.detail}. {attacker.description}"
                + rule_errors_text(attacker.rule_errors)
            ),
        )
    return table


def _gates_cell(failed: tuple[str, ...] | None) -> str:
    """Not run, PASSES THE GATES (a failed check) or how many gates it fails."""
    if failed is None:
        return "[bold red]NOT RUN[/]"
    if not failed:
        return "[bold red]PASSES THE GATES[/]"
    return f"[green]fails {len(failed)}[/]"


def artifact_table(report: ArtifactReport) -> Table:
    """The most label-informative token classes against the permutation threshold."""
    threshold = "not run" if report.threshold_bits is None else f"{report.threshold_bits:.4f} bits"
    table = Table(
        title="Artifact scan: label information per candidate-visible token class",
        caption=f"threshold = {1 - report.alpha:g} quantile of the largest token MI over "
        f"{report.permutations} within-group label permutations (seed {report.seed}): "
        f"{threshold}; {len(report.classes)} classes tested",
    )
    for column in ("token class", "MI (bits)", "result", "top token (inputs)"):
        table.add_column(column, overflow="fold")
    carrying = set(report.carrying)
    shown = [c for c in report.classes if c.token_class in carrying]
    shown += [c for c in report.classes if c.token_class not in carrying][:_SHOWN_CLASSES]
    for score in shown:
        result = (
            "[bold red]CARRIES LABEL[/]" if score.token_class in carrying else "[green]below[/]"
        )
        table.add_row(  # escaped: a path's `[approval]` is data, not rich markup
            escape(score.token_class),
            f"{score.mutual_information_bits:.4f}",
            result,
            escape(f"{score.top_token} ({score.documents})"),
        )
    return table


def verdict_lines(audit: LearningAudit) -> list[tuple[bool, str]]:
    """(passed, line) per check: the learners' gates, the artifact scan, then the reported lines.

    A reported line is never a failure (passed True): it is a figure, not a check.
    """
    return [
        _learned_gates_line(audit.learned),
        _artifact_line(audit.artifacts),
        *(
            (True, recovery_line(a.attacker, WITHIN_CORPUS, a.correct, a.cases, a.rule_errors))
            for a in audit.learned.attackers
            if a.correct is not None and a.cases is not None
        ),
    ]


def _learned_gates_line(learned: LearnedReport) -> tuple[bool, str]:
    if learned.passing_gates:
        named = ", ".join(
            f"{a.attacker} ({WITHIN_CORPUS}) {percent(a.accuracy)}"
            for a in learned.attackers
            if a.failed_gates == ()
        )
        return False, f"learned attackers passing the review gates: {named}"
    if not learned.ok:
        return False, "learned attackers not run: whether one passes the review gates is open"
    return True, f"none of the {len(learned.attackers)} learned attackers passes the review gates"


def _artifact_line(artifacts: ArtifactReport) -> tuple[bool, str]:
    if artifacts.carrying:
        return False, (
            f"label artifacts: {len(artifacts.carrying)} token class(es) above "
            f"{artifacts.threshold_bits:.4f} bits: " + ", ".join(artifacts.carrying[:10])
        )
    if not artifacts.ok:
        return False, "artifact scan not run: no token could be tested"
    return True, (
        f"no token class carries label information (threshold {artifacts.threshold_bits:.4f} bits)"
    )
