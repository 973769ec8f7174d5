"""Attackers a corpus was not selected against: policy-blind, pool-trained and relational.

The learned audit (`_learning_audit.py`) fits its five learners within the corpus. A corpus kept
by adversarial filtering against those learners passes that audit by construction: the filter
hides the learnable structure from the learners it filtered against, it does not remove it
(the filtered corpus: 21-34 % for the five, 55-63 % for learners fitted on a fresh pool from
its generator).
This audit asks what the filter could not have tuned against:

- **policy-blind attackers**: features no policy rule reads (record counts per kind, string
  lengths, id and free-text tokens and their shapes, record order and first keys, the clock
  time, weekday and UTC offset of every timestamp). A label those features predict is an
  authoring artefact, never review. Fitted within the corpus (leave one family out when every
  case carries a family id: the case's `family`, or its authoring metadata's; and leave one
  domain group out) and on a fresh pool from the policy's generator
  (`CorpusPolicy.generator`), tested on the corpus.
- **shallow relational learners**, pool-trained: pairwise equality of fields (raw and
  normalised) and timestamps compared as strings, the reading a careless reviewer does. Their
  figure says how much of the policy a shallow learner recovers, and the rules its errors fall on
  (the cases each rule decides, from the rule ablation) say which part it does not.

What gates and what is reported (issue 51): a policy-blind attacker's figure GATES, within chance
+/- `margin`, two-sided: an attacker far below chance has found the label too (answering the least
likely class), so its predictions are also scored under the best relabelling of the three
decisions, which must stay under chance + `margin`. A relational learner reads the fields the
rules read, so its figure is REPORTED (`_learning_audit.REPORTED_WHY`), never a failing check by
its accuracy. And no attacker of either kind may pass the policy's review gates
(`CorpusPolicy.review_gates`), evaluated by the code that evaluates them for the rule-ablated
readers, on the most favourable reading of an attacker: its finding counts as supported whenever
its decision is right.

Features are read from the exported candidate inputs without naming a field (the same code runs
on any corpus version); the answer key is used only to fit and to score. A value the policy might
read is left out of the policy-blind view by a rule that names nothing: a path whose values take
at most `CATEGORICAL_MAX` distinct values across the inputs is categorical (statuses,
environments, kinds, parameter values) and contributes no token, length or shape. Seeded.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, computed_field
from rich.markup import escape
from rich.table import Table

from trustbench._docstrings import documented
from trustbench.rtb.corpus._export import new_evaluation_id, to_candidate_input
from trustbench.rtb.corpus._load import Corpus, case_family
from trustbench.rtb.policy._registry import policy_for
from trustbench.rtb.review._learning_audit import (
    DEFAULT_MARGIN,
    REPORTED_WHY,
    Document,
    FeatureSpace,
    Role,
    Scoring,
    _as_time,
    _token_class,
    corpus_scoring,
    count_features,
    failed_gates,
    held_out_predictions,
    recovery_line,
    rule_errors,
    rule_errors_text,
    structure_features,
    token_features,
)
from trustbench.rtb.review._shortcuts import percent

__all__ = [
    "CATEGORICAL_MAX",
    "POOL_SIZE",
    "UnfilteredAttacker",
    "UnfilteredReport",
    "attack",
    "best_relabelling",
    "run_unfiltered_audit",
    "unfiltered_table",
    "unfiltered_verdicts",
]

CATEGORICAL_MAX = 12
"""A path with at most this many distinct values across the inputs is categorical: a policy
rule may read its value, so the policy-blind view takes no token, length or shape of it."""
POOL_SIZE = 1440
"""Cases drawn from the generator for the pool-trained attackers (six times a 240-case corpus).
On the adversarially filtered corpus the pool-trained relation learner reaches 57 % at 960 and
62 % at 1,440 (what outside attackers measured: 55-63 %), at 50 % with 480: a pool too small
hides structure as a filter does. Drawing 1,440 takes 3 s; the whole audit about 15 s of one
core."""
Kind = Literal["policy-blind", "relational"]

_OFFSET = re.compile(r"(Z|[+-]\d{2}:?\d{2})\s*$")
_ORDER = ("first", "last", "next", "k0")
"""Token families of record order and of the first key an object lists (presentation)."""
_RECORD_KIND = re.compile(r"\[[^\]]*\]$")
"""A trailing `[kind]`: `n:evidence[approval]` counts records of a list of records."""
_RELATIONS = ("eq:", "neq:", "slt:")
"""Pair families of the shallow relational view: raw and normalised equality, times as strings."""


# ------------------------------------------------------------------------------------------------
# Feature views (no field named; `FeatureSpace` finds how a list's records are told apart).


def categorical_paths(space: FeatureSpace, documents: Sequence[Document]) -> frozenset[str]:
    """Paths whose values take at most `CATEGORICAL_MAX` distinct values across `documents`."""
    values: dict[str, set[str]] = {}
    for document in documents:
        for _, path, value in space.leaves(document):
            seen = values.setdefault(path, set())
            if len(seen) <= CATEGORICAL_MAX:
                seen.add(repr(value))
    return frozenset(path for path, seen in values.items() if len(seen) <= CATEGORICAL_MAX)


def blind_features(
    space: FeatureSpace, document: Document, categorical: frozenset[str]
) -> dict[str, float]:
    """What no policy rule reads, taken from the learned audit's own feature families.

    Record order and first keys (`first last next k0`), records per kind and their positions
    (`n:` of a list of records, `pos:`), and of every path that is not categorical: value, word
    and shape tokens (`v w s`), string lengths and the timing of its timestamps. Left out: counts
    of leaves inside a record (e.g. how many co-approvers: a rule reads that) and every pairwise
    comparison.
    """
    records = {path for path, _ in space.tagged_lists(document)}
    out: dict[str, float] = {}
    for key, count in token_features(space, document).items():
        family, path = _token_class(key).split(":", 1)
        if family in _ORDER or path not in categorical:
            out[key] = float(count)
    for key, value in count_features(space, document).items():
        family, path = key.split(":", 1)
        if (
            family == "pos"
            or (family == "n" and _RECORD_KIND.sub("", path) in records)
            or (family.startswith("len-") and path not in categorical)
        ):
            out[key] = value
    for _, path, value in space.leaves(document):
        if path not in categorical and isinstance(value, str):
            for token in _timing(path, value):
                out[token] = out.get(token, 0.0) + 1.0
    return out


def _timing(path: str, value: str) -> list[str]:
    """The clock hour, weekday and written UTC offset of a timestamp (none of them a relation)."""
    moment = _as_time(value)
    if moment is None:
        return []
    utc = datetime.fromtimestamp(moment, UTC)
    offset = _OFFSET.search(value)
    return [
        f"hour:{path}={utc.hour}",
        f"weekday:{path}={utc.weekday()}",
        f"offset:{path}={offset[1] if offset else 'none'}",
    ]


def _view_rows(
    views: set[str], space: FeatureSpace, categorical: frozenset[str], documents: Sequence[Document]
) -> dict[str, list[dict[str, float]]]:
    """Each asked view's features of every input.

    - `blind`: `blind_features`;
    - `relations`: pairwise equality of fields (raw, normalised) and timestamps compared as
      strings, the pair families of `structure_features`, whose rows it filters (pairs are the
      costly part: computed once per input for both views);
    - `structure`: `structure_features`, the learned audit's relation learner's view.
    """
    rows: dict[str, list[dict[str, float]]] = {view: [] for view in views}
    for document in documents:
        if "blind" in views:
            rows["blind"].append(blind_features(space, document, categorical))
        if views & {"relations", "structure"}:
            structure = structure_features(space, document)
            if "structure" in views:
                rows["structure"].append(structure)
            if "relations" in views:
                rows["relations"].append(
                    {k: v for k, v in structure.items() if k.startswith(_RELATIONS)}
                )
    return rows


def view_matrices(
    views: set[str], fit: Sequence[Document], test: Sequence[Document]
) -> dict[str, tuple[Any, Any]]:
    """Each view of the fitting and the test inputs, in the columns the fitting inputs define.

    The record discriminators and the categorical paths are inferred from the fitting inputs
    (no label read); a feature seen in a single fitting input is dropped (it cannot generalise).
    The test matrix is None when there are no test inputs.
    """
    from sklearn.feature_extraction import DictVectorizer

    space = FeatureSpace.infer(fit)
    categorical = categorical_paths(space, fit)
    fit_rows = _view_rows(views, space, categorical, fit)
    test_rows = _view_rows(views, space, categorical, test)
    out: dict[str, tuple[Any, Any]] = {}
    for view in views:
        seen = Counter(key for row in fit_rows[view] for key in row)
        vectorizer = DictVectorizer(sparse=True)
        x_fit = vectorizer.fit_transform(
            [{k: v for k, v in row.items() if seen[k] >= 2} for row in fit_rows[view]]
        )
        x_test = vectorizer.transform(test_rows[view]) if test else None
        out[view] = (x_fit, x_test)
    return out


# ------------------------------------------------------------------------------------------------
# The attackers and where each is fitted.


@dataclass(frozen=True)
class AttackerSpec:
    """One model over one view."""

    name: str
    """Attacker name (the report's row)."""
    kind: Kind
    """`policy-blind` (gated: must find nothing) or `relational` (reported: how much of the
    policy it recovers)."""
    measures: str
    """What it reads, in words."""
    view: str
    """Its feature view: `blind`, `relations` or `structure` (see `view_matrices`)."""
    make: Callable[[], Any]
    """A fresh, seeded scikit-learn model."""


def attacker_specs(seed: int) -> list[AttackerSpec]:
    """Every attacker of this audit (scikit-learn imported here: only the audit needs it)."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MaxAbsScaler

    def logistic() -> Any:
        return make_pipeline(MaxAbsScaler(), LogisticRegression(C=1.0, max_iter=500, tol=1e-3))

    def forest() -> Any:
        return RandomForestClassifier(n_estimators=30, max_depth=6, random_state=seed, n_jobs=1)

    blind = "record counts per kind, lengths, id and text tokens, record order, timing, layout"
    return [
        AttackerSpec(
            "blind-logistic", "policy-blind", f"L2 logistic over {blind}", "blind", logistic
        ),
        AttackerSpec(
            "blind-forest",
            "policy-blind",
            f"random forest (30 trees, depth 6) over {blind}",
            "blind",
            forest,
        ),
        AttackerSpec(
            "relations-logistic",
            "relational",
            "L2 logistic over pairwise field equality (raw, normalised) and times compared as "
            "strings",
            "relations",
            logistic,
        ),
        AttackerSpec(
            "structure-logistic",
            "relational",
            "the learned audit's relation learner (logistic-regression-relations): counts, "
            "lengths, order, pairwise equality, times as strings and as instants",
            "structure",
            logistic,
        ),
    ]


class UnfilteredAttacker(BaseModel):
    """One attacker, where it was fitted, its figures on the corpus and its gates."""

    model_config = documented(frozen=True)

    attacker: str
    """Attacker name."""
    kind: Kind
    """`policy-blind` or `relational`."""
    measures: str
    """What it reads, in words."""
    fitted_on: str
    """Where it was fitted: within the corpus (which unit held out) or on a pool (size, seed)."""
    correct: int | None
    """Predictions on the corpus equal to the reference decision; None: not run."""
    relabelled: int | None
    """Correct predictions under the best relabelling of the decisions (far below chance is label
    information too); None: not run."""
    cases: int | None
    """Corpus cases predicted (each once); None: not run."""
    failed_gates: tuple[str, ...] | None
    """Review gates its predictions fail (a right decision counted as supported); empty: it
    passes every gate; None: not run."""
    rule_errors: tuple[tuple[str, int, int], ...] = ()
    """(rule id, wrong, cases the rule decides) for relational attackers, most wrong first."""
    detail: str = ""
    """Why it did not run, or what else to know."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def accuracy(self) -> float | None:
        """Accuracy on the corpus (None when not run)."""
        return None if not self.cases or self.correct is None else self.correct / self.cases

    @computed_field  # type: ignore[prop-decorator]
    @property
    def relabelled_accuracy(self) -> float | None:
        """Accuracy under the best relabelling (None when not run)."""
        return None if not self.cases or self.relabelled is None else self.relabelled / self.cases

    @computed_field  # type: ignore[prop-decorator]
    @property
    def role(self) -> Role:
        """`gated` for a policy-blind attacker, `reported` for a relational one.

        A policy-blind accuracy must lie in the band; a relational learner reads the fields the
        rules read, so its accuracy is a figure. The review gates gate both.
        """
        return "gated" if self.kind == "policy-blind" else "reported"


class UnfilteredReport(BaseModel):
    """Every attacker of this audit, the two-sided band, and the verdicts."""

    model_config = documented(frozen=True)

    cases: int
    """Corpus cases."""
    chance: float | None
    """Majority-class share of the corpus; None for no cases."""
    margin: float
    """Points either side of chance an attacker may reach (0.15 = 15 points)."""
    seed: int
    """Seed of every model."""
    pool: str
    """The generator pool: its size and seed, or why none was drawn."""
    attackers: list[UnfilteredAttacker]
    """Every attacker at every place it is fitted, in a fixed order."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def band(self) -> tuple[float, float] | None:
        """Chance - margin to chance + margin (capped to [0, 1]); None without cases."""
        if self.chance is None:
            return None
        return max(0.0, self.chance - self.margin), min(1.0, self.chance + self.margin)

    def outside(self, attacker: UnfilteredAttacker) -> bool:
        """Whether an attacker that ran is outside the band (either accuracy, either side).

        A measurement of any attacker; only a gated (policy-blind) one fails by it
        (`outside_band`).
        """
        band = self.band
        accuracy, relabelled = attacker.accuracy, attacker.relabelled_accuracy
        if band is None or accuracy is None or relabelled is None:
            return False
        return accuracy < band[0] - 1e-12 or relabelled > band[1] + 1e-12

    @computed_field  # type: ignore[prop-decorator]
    @property
    def outside_band(self) -> list[str]:
        """`name (fitted on)` of each gated (policy-blind) attacker outside the band.

        A relational learner outside it is reported (how much of the policy it recovers), not
        listed here.
        """
        return [_label(a) for a in self.attackers if a.role == "gated" and self.outside(a)]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def passing_gates(self) -> list[str]:
        """`name (fitted on)` of each attacker that passes every review gate."""
        return [_label(a) for a in self.attackers if a.failed_gates == ()]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def not_run(self) -> list[str]:
        """`name (fitted on)` of each attacker that did not run."""
        return [_label(a) for a in self.attackers if a.correct is None]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        """No policy-blind attacker outside the band, none passing the gates, none unrun within.

        Every within-corpus attacker must have run; a relational learner's accuracy never fails it.

        A pool-trained attacker not run (no generator shipped) is reported as not run; it
        neither fails nor passes this verdict.
        """
        within = [a for a in self.attackers if not a.fitted_on.startswith("pool")]
        return (
            not self.outside_band
            and not self.passing_gates
            and all(a.correct is not None for a in within)
        )


def _label(attacker: UnfilteredAttacker) -> str:
    return f"{attacker.attacker} ({attacker.fitted_on})"


def best_relabelling(predicted: Sequence[str], labels: Sequence[str]) -> int:
    """Correct predictions under the best one-to-one renaming of the predicted decisions.

    An attacker that always answers the least likely decision, or that swaps permit and deny,
    carries as much label information as one that is right: renamed, it is right.
    """
    classes = sorted(set(labels) | set(predicted))
    best = 0
    for renamed in itertools.permutations(classes):
        mapping = dict(zip(classes, renamed, strict=True))
        best = max(best, sum(mapping[p] == y for p, y in zip(predicted, labels, strict=True)))
    return best


# ------------------------------------------------------------------------------------------------
# Running them.


def attack(
    spec: AttackerSpec, fitted_on: str, predicted: Sequence[str], scoring: Scoring
) -> UnfilteredAttacker:
    """Score one attacker's predictions on the corpus: accuracy, relabelled, gates, rule errors."""
    labels = scoring.labels
    return UnfilteredAttacker(
        attacker=spec.name,
        kind=spec.kind,
        measures=spec.measures,
        fitted_on=fitted_on,
        correct=sum(p == y for p, y in zip(predicted, labels, strict=True)),
        relabelled=best_relabelling(predicted, labels),
        cases=len(labels),
        failed_gates=failed_gates(predicted, scoring),
        rule_errors=rule_errors(predicted, scoring) if spec.kind == "relational" else (),
    )


def _not_run(spec: AttackerSpec, fitted_on: str, why: str) -> UnfilteredAttacker:
    return UnfilteredAttacker(
        attacker=spec.name,
        kind=spec.kind,
        measures=spec.measures,
        fitted_on=fitted_on,
        correct=None,
        relabelled=None,
        cases=None,
        failed_gates=None,
        detail=why,
    )


@dataclass(frozen=True)
class Inputs:
    """The corpus's exported inputs and labels, and the pool's (None: no generator)."""

    documents: Sequence[Document]
    """Each corpus case's candidate-visible input."""
    families: Sequence[str] | None
    """Each corpus case's family id, when every case carries one."""
    pool_documents: Sequence[Document] | None
    """Each pool case's candidate-visible input; None when no pool was drawn."""
    pool_labels: Sequence[str] = ()
    """Each pool case's authored decision."""


def unfiltered_audit(
    inputs: Inputs, scoring: Scoring, *, pool: str, margin: float, seed: int
) -> UnfilteredReport:
    """Fit every attacker where it belongs and score it on the corpus."""
    from threadpoolctl import threadpool_limits

    labels = scoring.labels
    attackers: list[UnfilteredAttacker] = []
    specs = attacker_specs(seed)
    with threadpool_limits(1):
        within = {s.view for s in specs if s.kind == "policy-blind"}
        matrices = {
            (view, False): m for view, m in view_matrices(within, inputs.documents, []).items()
        }
        if inputs.pool_documents is not None:
            pooled = view_matrices({s.view for s in specs}, inputs.pool_documents, inputs.documents)
            matrices |= {(view, True): m for view, m in pooled.items()}

    def views(view: str, pool_trained: bool) -> tuple[Any, Any]:
        return matrices[(view, pool_trained)]

    with threadpool_limits(1):  # one BLAS thread: several only contend on small fits
        for spec in specs:
            if spec.kind == "policy-blind":
                attackers += _within_corpus(spec, inputs, scoring, views)
            attackers.append(_pool_trained(spec, inputs, scoring, pool, views))
    majority = Counter(labels).most_common(1)[0][1] / len(labels) if labels else None
    return UnfilteredReport(
        cases=len(labels), chance=majority, margin=margin, seed=seed, pool=pool, attackers=attackers
    )


Views = Callable[[str, bool], tuple[Any, Any]]
"""(view, pool-trained) -> the fitting and test matrices of that view."""


def _within_corpus(
    spec: AttackerSpec, inputs: Inputs, scoring: Scoring, views: Views
) -> list[UnfilteredAttacker]:
    """Leave one family out (when families are declared) and leave one domain group out."""
    units: list[tuple[str, Sequence[str]]] = [
        ("corpus, leave one domain group out", scoring.groups)
    ]
    if inputs.families is not None:
        units.insert(0, ("corpus, leave one family out", inputs.families))
    out = []
    for fitted_on, folds in units:
        if len(set(folds)) < 2 or len(set(scoring.labels)) < 2:
            out.append(_not_run(spec, fitted_on, "needs at least two folds and two decisions"))
            continue
        x, _ = views(spec.view, False)
        predicted = held_out_predictions(spec.make, x, scoring.labels, folds)
        out.append(attack(spec, fitted_on, predicted, scoring))
    return out


def _pool_trained(
    spec: AttackerSpec, inputs: Inputs, scoring: Scoring, pool: str, views: Views
) -> UnfilteredAttacker:
    fitted_on = f"pool: {pool}"
    if inputs.pool_documents is None:
        return _not_run(spec, "pool", f"not run ({pool})")
    if len(set(inputs.pool_labels)) < 2 or not inputs.documents:
        return _not_run(spec, fitted_on, "not run: the pool or the corpus has a single decision")
    x_fit, x_test = views(spec.view, True)
    model = spec.make().fit(x_fit, list(inputs.pool_labels))
    return attack(spec, fitted_on, [str(p) for p in model.predict(x_test)], scoring)


def pool_seed(corpus_seeds: frozenset[int], seed: int) -> int:
    """The first seed from `seed + 1` on that the shipped corpus did not use."""
    candidate = seed + 1
    while candidate in corpus_seeds:
        candidate += 1
    return candidate


def _export(cases: Sequence[Any]) -> list[Document]:
    return [to_candidate_input(c, new_evaluation_id()).model_dump(mode="json") for c in cases]


def run_unfiltered_audit(
    corpus: Corpus,
    deciding: Mapping[str, tuple[str, ...]],
    *,
    margin: float = DEFAULT_MARGIN,
    seed: int = 0,
    pool_size: int = POOL_SIZE,
) -> UnfilteredReport:
    """Export the corpus (and a fresh generator pool), then run every attacker on it.

    Args:
        corpus: The corpus audited.
        deciding: Case id -> the rules that decide it (`_audit.deciding_rules` of its ablation).
        margin: Points either side of chance an attacker may reach.
        seed: Seed of every model; the pool is drawn with the first seed after it that the
            shipped corpus did not use.
        pool_size: Cases drawn from the generator.
    """
    policy = policy_for(corpus.policy_id)
    cases = list(corpus.cases)
    families = [case_family(c) for c in cases]
    generator = getattr(policy, "generator", None)
    pool_documents: list[Document] | None = None
    pool_labels: list[str] = []
    pool = "no generator shipped"
    if generator is not None:
        drawn_with = pool_seed(frozenset(generator.corpus_seeds), seed)
        drawn = generator.draw_pool(drawn_with, pool_size)
        pool_documents = _export(drawn)
        pool_labels = [c.expectations.reference_decision.value for c in drawn]  # type: ignore[attr-defined]
        pool = f"{len(drawn)} cases drawn with seed {drawn_with}, not a corpus seed"
    inputs = Inputs(
        documents=_export(cases),
        families=None if None in families else [f for f in families if f is not None],
        pool_documents=pool_documents,
        pool_labels=pool_labels,
    )
    scoring = corpus_scoring(corpus, deciding)
    return unfiltered_audit(inputs, scoring, pool=pool, margin=margin, seed=seed)


# ------------------------------------------------------------------------------------------------
# What `rtb audit` prints.


def unfiltered_table(report: UnfilteredReport) -> Table:
    """Each attacker: what it measures, where it was fitted, its figures, the band and gates."""
    band = report.band
    band_text = "not run" if band is None else f"{percent(band[0])} to {percent(band[1])}"
    table = Table(
        title="Attackers the corpus was not selected against (candidate-visible input only; "
        f"seed {report.seed})",
        caption=f"accuracy over the {report.cases} corpus cases; role gated (policy-blind: it "
        f"reads nothing a policy rule reads): band = chance {percent(report.chance)} +/- "
        f"{100 * report.margin:g} points = {band_text}, two-sided (relabelled: best renaming of "
        f"the decisions); role reported (relational), not gated: {REPORTED_WHY}; gates: the "
        "policy's review gates, a right decision counted as supported; pool: "
        f"{escape(report.pool)}",
    )
    columns = ("attacker", "fitted on", "accuracy", "relabelled", "role", "result", "what it reads")
    for column in columns:
        table.add_column(column, overflow="fold")
    for attacker in report.attackers:
        table.add_row(
            attacker.attacker,
            escape(attacker.fitted_on),
            percent(attacker.accuracy),
            percent(attacker.relabelled_accuracy),
            attacker.role,
            _result_cell(report, attacker),
            escape(attacker.measures + rule_errors_text(attacker.rule_errors)),
        )
    return table


def _result_cell(report: UnfilteredReport, attacker: UnfilteredAttacker) -> str:
    if attacker.correct is None:
        return f"[yellow]{escape(attacker.detail)}[/]"
    gated = attacker.role == "gated"
    problems = []
    if gated and report.outside(attacker):
        problems.append("OUTSIDE THE BAND")
    if attacker.failed_gates == ():
        problems.append("PASSES THE GATES")
    if problems:
        return "[bold red]" + ", ".join(problems) + "[/]"
    gates = f"fails {len(attacker.failed_gates or ())} gate(s)"
    return f"[green]in band; {gates}[/]" if gated else f"[green]{gates}[/]"


def unfiltered_verdicts(report: UnfilteredReport) -> list[tuple[bool | None, str]]:
    """(passed, line) per verdict; passed None: not run (no generator shipped), never a pass."""
    band = report.band
    band_text = "not run" if band is None else f"{percent(band[0])}-{percent(band[1])}"
    within = f"chance +/- {100 * report.margin:g} points ({band_text}, two-sided)"
    ran = [a for a in report.attackers if a.correct is not None]
    blind = [a for a in ran if a.role == "gated"]
    unrun = [_label(a) for a in report.attackers if a.correct is None and a.fitted_on != "pool"]
    lines: list[tuple[bool | None, str]] = []
    if report.outside_band:
        named = ", ".join(
            f"{_label(a)} {percent(a.accuracy)} (relabelled {percent(a.relabelled_accuracy)})"
            for a in blind
            if report.outside(a)
        )
        lines.append(
            (False, f"policy-blind attackers outside {within} on {report.cases} cases: {named}")
        )
    elif unrun:
        lines.append((False, "attackers not run (an unrun check is no pass): " + ", ".join(unrun)))
    else:
        lines.append((True, f"all {len(blind)} policy-blind attackers within {within}"))
    if report.passing_gates:
        named = ", ".join(report.passing_gates)
        lines.append((False, f"attackers passing the review gates: {named}"))
    elif ran:
        lines.append((True, f"none of the {len(ran)} attackers passes the review gates"))
    if any(a.fitted_on == "pool" and a.correct is None for a in report.attackers):
        lines.append((None, f"pool-trained attackers not run ({report.pool})"))
    lines += [
        (True, recovery_line(a.attacker, a.fitted_on, a.correct, a.cases, a.rule_errors))
        for a in ran
        if a.role == "reported" and a.correct is not None and a.cases is not None
    ]
    return lines
