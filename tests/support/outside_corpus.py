"""Outside attackers of RTB corpus v0.4, written apart from the generator and the audit.

Issue 51's "checked by": an attacker that shares no code with what it judges. Everything here
reads only what a candidate sees (`to_candidate_input`, the exporter's own function) and the
policy text; the generator is a black box (`NARROW_V4.generator.draw_pool`), the grader is the
project's (`validate_response`, `support_gaps`) and so is the gate evaluation
(`configuration_figures`, `evaluate_gates` under the policy's `review_gates.toml`), as the
reviewer track computes them for a run of K = 1 trial per case. No per-case figure is pinned:
the corpus is read at run time (another engineer regenerates it).

Three families of attacker:

- pool-trained learners (`LEARNERS`): fitted on a fresh generator pool (seeds the corpus did not
  use), scored on the shipped cases; their features are of this module's own design;
- careless readers (`CARELESS_READERS`): five short rules a lazy reviewer would apply;
- finding writers (`fabricated_reply`, `utc_reply`): the reference finding with one plausible
  false discrepancy added, or with every time restated in UTC (the same instants).
"""

from __future__ import annotations

import itertools
import json
import tomllib
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trustbench.core.gates import GateResult, GateSpec, evaluate_gates
from trustbench.rtb.corpus import builtin_corpus_root, to_candidate_input
from trustbench.rtb.policy.narrow_v4 import NARROW_V4, CaseV4
from trustbench.rtb.review._counting import configuration_figures
from trustbench.rtb.review._rows import ReviewTrialRow
from trustbench.rtb.review._validation import support_gaps, validate_response

DECISIONS = ("permit", "deny", "hold")
"""The three decisions, in the order a confusion matrix lists them."""

FREE_KINDS = frozenset(
    {
        "policy",
        "approval",
        "revocation",
        "resource_state",
        "service_notice",
        "freeze_window",
        "maintenance_window",
        "delegation",
        "break_glass",
    }
)
"""Record kinds the prompt lets a reviewer cite whether or not its decision rests on them."""

Reply = dict[str, Any]
"""A reviewer's reply as JSON fields (before `json.dumps`)."""
Seen = dict[str, Any]
"""A candidate input as JSON (what a reviewer receives), without its evaluation id."""


# ------------------------------------------------------------------------------------------------
# What a candidate sees, for the shipped corpus and a fresh pool.


def shipped_cases(root: Path | None = None) -> list[CaseV4]:
    """Every case file of the shipped v0.4 corpus, parsed with the policy's case model.

    Read directly, not through `load_corpus`: its full validation (schema, family contract,
    realism) takes 20 s on the shared machine, and `tests/rtb/test_corpus_v0_4.py` runs it.
    """
    folder = (root or builtin_corpus_root("0.4")) / "cases"
    return [CaseV4.model_validate_json(path.read_text()) for path in sorted(folder.glob("*.json"))]


def pool_cases(count: int, seed: int = 1) -> list[CaseV4]:
    """`count` cases drawn from the shipped generator with a seed the corpus did not use."""
    generator = NARROW_V4.generator
    assert generator is not None and seed not in generator.corpus_seeds
    return [CaseV4.model_validate(case.model_dump()) for case in generator.draw_pool(seed, count)]


def seen_of(case: CaseV4) -> Seen:
    """The case as a candidate receives it (`rtb export`'s function), evaluation id dropped."""
    seen = to_candidate_input(case, "outside").model_dump(mode="json")
    del seen["evaluation_id"]
    return seen


def label_of(case: CaseV4) -> str:
    """The answer key's decision (grader side: only for fitting and scoring)."""
    return case.expectations.reference_decision.value


# ------------------------------------------------------------------------------------------------
# Scoring: accuracy under the best relabelling, and the release gates as the track computes them.


def best_relabelled_accuracy(truth: Sequence[str], guess: Sequence[str]) -> float:
    """Accuracy under the permutation of decision names that maximises it.

    Two-sided: a reader far below chance has label information too (it only swaps names).
    """
    pairs = Counter(zip(truth, guess, strict=True))
    best = max(
        sum(pairs[(true, renamed)] for true, renamed in zip(DECISIONS, order, strict=True))
        for order in itertools.permutations(DECISIONS)
    )
    return best / len(truth)


def review_gates() -> tuple[list[GateSpec], dict[str, Any]]:
    """The `[[gates]]` and `[analysis]` of the v0.4 built-in review spec (`review_gates.toml`)."""
    declared = tomllib.loads(Path(NARROW_V4.review_gates).read_text())
    return [GateSpec.model_validate(gate) for gate in declared["gates"]], declared["analysis"]


@dataclass(frozen=True)
class GateOutcome:
    """How one attacker fared on the corpus: its decisions, support and the release gates."""

    accuracy: float
    """Share of cases whose decision equals the answer key's."""
    relabelled_accuracy: float
    """Accuracy under the best renaming of the three decisions."""
    supported: int
    """Findings the project's grader judged supported (`support_gaps` empty)."""
    cases: int
    """Cases replied to (one trial each)."""
    gates: tuple[GateResult, ...]
    """Every release gate of the v0.4 review spec, evaluated on this attacker's trials."""

    @property
    def passes(self) -> bool:
        """Whether every release gate passed (what a release would need)."""
        return all(gate.status == "passed" for gate in self.gates)

    def gate(self, name: str) -> GateResult:
        """The result of the gate named `name`."""
        return next(gate for gate in self.gates if gate.spec.name == name)

    def summary(self) -> str:
        """One line for the review document: accuracy, support and each gate's status."""
        gates = ", ".join(f"{gate.spec.name} {gate.status}" for gate in self.gates)
        return (
            f"accuracy {self.accuracy:.1%} (best relabelling {self.relabelled_accuracy:.1%}), "
            f"supported {self.supported}/{self.cases}; {gates}"
        )


def graded_row(case: CaseV4, reply: Reply) -> ReviewTrialRow:
    """One trial as the reviewer track grades it: schema, ids, citations, discrepancies."""
    candidate_input = to_candidate_input(case, "outside")
    validated = validate_response(
        json.dumps({**reply, "evaluation_id": "outside"}), candidate_input
    )
    return ReviewTrialRow(
        case_id=case.case_id,
        group=case.group,
        variant=case.variant,
        reference=case.expectations.reference_decision,
        observed=validated.outcome,
        supported=not support_gaps(validated, case),
    )


def gate_outcome(cases: Sequence[CaseV4], replies: Sequence[Reply]) -> GateOutcome:
    """Grade one reply per case and evaluate the v0.4 release gates on the trials (K = 1)."""
    specs, analysis = review_gates()
    rows = [graded_row(case, reply) for case, reply in zip(cases, replies, strict=True)]
    figures = configuration_figures(
        rows,
        unit=analysis["unit"],
        k=1,
        confidence=analysis["confidence"],
        seed=analysis["bootstrap_seed"],
        resamples=analysis["bootstrap_resamples"],
    )
    truth = [row.reference.value for row in rows]
    observed = [row.observed.value for row in rows]
    return GateOutcome(
        accuracy=sum(t == o for t, o in zip(truth, observed, strict=True)) / len(rows),
        relabelled_accuracy=best_relabelled_accuracy(truth, observed),
        supported=sum(bool(row.supported) for row in rows),
        cases=len(rows),
        gates=tuple(evaluate_gates(specs, figures)),
    )


# ------------------------------------------------------------------------------------------------
# A bare finding for a reader that only decides: the best reply it can make without reading more.

_GENERIC_CODE = {
    "permit": "proposal_matches_active_approval",
    "deny": "operation_not_approved",
    "hold": "insufficient_evidence",
}
"""The reason code a decision-only reader gives (the most general one of each decision)."""


def decision_reply(seen: Seen, decision: str, code: str | None = None) -> Reply:
    """A valid reply carrying `decision`: it cites every record it may cite, lists no discrepancy.

    Citing every free-kind record covers the decisive ones (the citation rule tolerates it), so
    the finding fails support only on its codes and missing discrepancies, never on form.
    """
    return {
        "decision": decision,
        "reason_codes": [code or _GENERIC_CODE[decision]],
        "evidence_refs": [r["record_id"] for r in seen["evidence"] if r["kind"] in FREE_KINDS],
        "discrepancies": [],
        "explanation": f"{decision}: decided by an outside attacker without reading the rules.",
    }


# ------------------------------------------------------------------------------------------------
# Careless readers: each one line of policy a lazy reviewer would stop at.


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _unexpired(approval: dict[str, Any], as_of: datetime) -> bool:
    """Whether the approval's expiry is after `as_of` (an approval without one never expires)."""
    return approval["expires_at"] is None or _instant(approval["expires_at"]) > as_of


def _records(seen: Seen, kind: str) -> list[dict[str, Any]]:
    return [record for record in seen["evidence"] if record["kind"] == kind]


def _latest_approval(seen: Seen) -> dict[str, Any] | None:
    """The latest-issued approval for the proposal's operation and target (no as_of check)."""
    proposal = seen["proposal"]
    matching = [
        a
        for a in _records(seen, "approval")
        if a["operation"] == proposal["operation"] and a["target"] == proposal["target"]
    ]
    return max(matching, key=lambda a: _instant(a["issued_at"]), default=None)


def _active_and_unexpired(seen: Seen) -> bool:
    approval = _latest_approval(seen)
    return (
        approval is not None
        and approval["status"] == "active"
        and _unexpired(approval, _instant(seen["as_of"]))
    )


def latest_approval_reader(seen: Seen) -> str:
    """Permit if the latest approval is active and unexpired; deny otherwise."""
    return "permit" if _active_and_unexpired(seen) else "deny"


def any_freeze_reader(seen: Seen) -> str:
    """Deny if any freeze record exists; otherwise the latest-approval reader."""
    return "deny" if _records(seen, "freeze_window") else latest_approval_reader(seen)


def any_notice_reader(seen: Seen) -> str:
    """Hold if any service notice is present; otherwise the latest-approval reader."""
    return "hold" if _records(seen, "service_notice") else latest_approval_reader(seen)


def checklist_reader(seen: Seen) -> str:
    """Latest approval active, unexpired, same parameters and revision: permit; notice: hold.

    The reviewer who checks the approval against the proposal field by field and stops there:
    no authority, freeze, window, two-person or revocation rule.
    """
    approval = _latest_approval(seen)
    proposal = seen["proposal"]
    if approval is None:
        return "hold" if _approval_service_down(seen) else "deny"
    same_parameters = all(
        str(approval["approved_parameters"].get(name)).strip().lower() == str(value).strip().lower()
        for name, value in proposal["parameters"].items()
    )
    if not (_active_and_unexpired(seen) and same_parameters):
        return "deny"
    if approval["approved_revision"] != proposal["resource_revision"]:
        return "hold"
    return "permit"


def _approval_service_down(seen: Seen) -> bool:
    return any(n["service"] == "approval-service" for n in _records(seen, "service_notice"))


def string_time_reader(seen: Seen) -> str:
    """The checklist reader, but comparing times as strings and reading every freeze as live.

    A reader that never parses an offset: `expires_at > as_of` as text, and a freeze whose text
    span contains `as_of` forbids the change whatever its environments.
    """
    as_of = seen["as_of"]
    if any(f["starts_at"] <= as_of < f["ends_at"] for f in _records(seen, "freeze_window")):
        return "deny"
    approval = _latest_approval(seen)
    if approval is None or (approval["expires_at"] or "9999") <= as_of:
        return "deny"
    return (
        "hold"
        if approval["approved_revision"] != seen["proposal"]["resource_revision"]
        else ("permit" if approval["status"] == "active" else "deny")
    )


CARELESS_READERS: dict[str, Callable[[Seen], str]] = {
    "latest-approval-active": latest_approval_reader,
    "deny-on-any-freeze": any_freeze_reader,
    "hold-on-any-notice": any_notice_reader,
    "approval-checklist": checklist_reader,
    "times-as-strings": string_time_reader,
}
"""The careless readers, by the name the review document uses."""


def reader_replies(cases: Sequence[CaseV4], reader: Callable[[Seen], str]) -> list[Reply]:
    """Each case's reply from a decision-only reader."""
    replies = []
    for case in cases:
        seen = seen_of(case)
        replies.append(decision_reply(seen, reader(seen)))
    return replies


# ------------------------------------------------------------------------------------------------
# Pool-trained learners over what a candidate sees (features of this module's own design).


def flat_tokens(seen: Seen) -> dict[str, float]:
    """`path=value` tokens of the input (record ids and list positions dropped) and kind counts."""
    tokens: Counter[str] = Counter()

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key != "record_id":
                    walk(f"{prefix}.{key}", item)
        elif isinstance(value, list):
            tokens[f"{prefix}#len={len(value)}"] += 1
            for item in value:
                walk(f"{prefix}[]", item)
        else:
            tokens[f"{prefix}={value}"] += 1

    walk("proposal", seen["proposal"])
    for record in seen["evidence"]:
        tokens[f"count:{record['kind']}"] += 1
        walk(record["kind"], record)
    return dict(tokens)


def canonical_text(seen: Seen) -> str:
    """The input as canonical JSON (sorted keys): what a format-agnostic text model reads."""
    return json.dumps(seen, sort_keys=True)


Learner = Callable[[list[Seen], list[str], list[Seen]], list[str]]
"""Fit on (pool inputs, pool labels), predict the decisions of the test inputs."""


def forest_on_tokens(train: list[Seen], labels: list[str], test: list[Seen]) -> list[str]:
    """A random forest over flattened `key=value` tokens and record counts."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.feature_extraction import DictVectorizer

    vectorizer = DictVectorizer()
    model = RandomForestClassifier(n_estimators=200, random_state=0, n_jobs=1)
    model.fit(vectorizer.fit_transform([flat_tokens(s) for s in train]), labels)
    return [
        str(label) for label in model.predict(vectorizer.transform([flat_tokens(s) for s in test]))
    ]


def boosting_on_tokens(train: list[Seen], labels: list[str], test: list[Seen]) -> list[str]:
    """Gradient-boosted trees over the flattened tokens (the 500 most label-related, by chi2)."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.feature_selection import SelectKBest, chi2
    from threadpoolctl import threadpool_limits

    vectorizer = DictVectorizer()
    train_x: Any = vectorizer.fit_transform([flat_tokens(s) for s in train])  # scipy sparse
    selector = SelectKBest(chi2, k=min(500, train_x.shape[1])).fit(train_x, labels)
    model = HistGradientBoostingClassifier(random_state=0, max_iter=100)
    test_x: Any = selector.transform(vectorizer.transform([flat_tokens(s) for s in test]))
    kept_x: Any = selector.transform(train_x)
    with threadpool_limits(1):  # OpenMP threads on a shared 2-core machine only contend
        model.fit(kept_x.toarray(), labels)
        return [str(label) for label in model.predict(test_x.toarray())]


def char_ngram_linear(train: list[Seen], labels: list[str], test: list[Seen]) -> list[str]:
    """A logistic regression over TF-IDF character 3-5-grams of the canonical JSON text."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    vectorizer = TfidfVectorizer(
        analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True, max_features=60000
    )
    model = LogisticRegression(C=10.0, max_iter=3000)
    model.fit(vectorizer.fit_transform([canonical_text(s) for s in train]), labels)
    return [
        str(label)
        for label in model.predict(vectorizer.transform([canonical_text(s) for s in test]))
    ]


def knn_on_text(train: list[Seen], labels: list[str], test: list[Seen]) -> list[str]:
    """Five nearest neighbours (cosine over TF-IDF word tokens of the canonical text)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.neighbors import KNeighborsClassifier

    vectorizer = TfidfVectorizer(token_pattern=r"[^\s\"{}\[\],:]+", sublinear_tf=True)
    model = KNeighborsClassifier(n_neighbors=5, metric="cosine")
    model.fit(vectorizer.fit_transform([canonical_text(s) for s in train]), labels)
    return [
        str(label)
        for label in model.predict(vectorizer.transform([canonical_text(s) for s in test]))
    ]


def _same(left: Any, right: Any) -> bool:
    return str(left).strip().lower().rstrip(".") == str(right).strip().lower().rstrip(".")


def relation_features(seen: Seen) -> list[float]:
    """Pairwise comparisons of the latest matching approval with the proposal, state and as_of.

    Shallow on purpose: field equalities and instants compared with `as_of`, no rule order, no
    authority or break-glass reasoning, so what it recovers is what field comparison alone gives.
    """
    proposal, as_of = seen["proposal"], _instant(seen["as_of"])
    approval = _latest_approval(seen) or {}
    states = [s for s in _records(seen, "resource_state") if s["resource_id"] == proposal["target"]]
    approved = approval.get("approved_parameters", {})
    revoked = {
        r["revokes"] for r in _records(seen, "revocation") if _instant(r["revoked_at"]) <= as_of
    }

    def live(window: dict[str, Any]) -> bool:
        return _instant(window["starts_at"]) <= as_of < _instant(window["ends_at"])

    return [
        float(bool(approval)),
        float(approval.get("status") == "active"),
        float(bool(approval) and _unexpired(approval, as_of)),
        float(bool(approval) and _instant(approval["issued_at"]) <= as_of),
        float(all(_same(approved.get(k), v) for k, v in proposal["parameters"].items())),
        float(_same(approval.get("approved_revision"), proposal["resource_revision"])),
        float(approval.get("approval_id") in revoked),
        float(approval.get("approved_by") == proposal["requested_by"]),
        float(proposal["requested_by"] in approval.get("co_approved_by", [])),
        float(len(approval.get("co_approved_by", []))),
        float(bool(states)),
        float(any(_same(s["revision"], proposal["resource_revision"]) for s in states)),
        float(
            any(
                live(f) and proposal["environment"] in f["environments"]
                for f in _records(seen, "freeze_window")
            )
        ),
        float(
            any(
                live(w) and w["environment"] == proposal["environment"]
                for w in _records(seen, "maintenance_window")
            )
        ),
        float(_approval_service_down(seen)),
        float(bool(_records(seen, "break_glass"))),
        float(bool(_records(seen, "delegation"))),
    ]


def forest_on_relations(train: list[Seen], labels: list[str], test: list[Seen]) -> list[str]:
    """A random forest over `relation_features` (a shallow relational learner)."""
    from sklearn.ensemble import RandomForestClassifier

    model = RandomForestClassifier(n_estimators=200, random_state=0, n_jobs=1)
    model.fit([relation_features(s) for s in train], labels)
    return [str(label) for label in model.predict([relation_features(s) for s in test])]


LEARNERS: dict[str, Learner] = {
    "forest-tokens": forest_on_tokens,
    "boosted-tokens": boosting_on_tokens,
    "char-ngram-logistic": char_ngram_linear,
    "knn-text": knn_on_text,
    "forest-relations": forest_on_relations,
}
"""The pool-trained learners, by the name the review document uses."""


def learner_replies(
    learner: Learner, pool: Sequence[CaseV4], cases: Sequence[CaseV4]
) -> list[Reply]:
    """Fit `learner` on the pool's inputs and labels; reply to each case with its decision."""
    test = [seen_of(case) for case in cases]
    decisions = learner([seen_of(case) for case in pool], [label_of(c) for c in pool], test)
    return [
        decision_reply(seen, str(decision)) for seen, decision in zip(test, decisions, strict=True)
    ]


# ------------------------------------------------------------------------------------------------
# Finding writers: the reference finding, with one lookalike falsehood added, or restated in UTC.


def reference_reply(case: CaseV4) -> Reply:
    """The policy's own finding on the case (its decision is the answer key's on v0.4)."""
    reply = dict(NARROW_V4.reference_finding(to_candidate_input(case, "outside")))
    assert reply["decision"] == label_of(case), case.case_id
    return reply


def _unstarted_freeze(seen: Seen) -> Reply | None:
    """A freeze over the proposal's environment that starts after as_of, said to be in effect."""
    as_of = _instant(seen["as_of"])
    for freeze in _records(seen, "freeze_window"):
        if seen["proposal"]["environment"] in freeze["environments"] and (
            _instant(freeze["starts_at"]) > as_of
        ):
            return _freeze_claim(seen, freeze)
    return None


def _other_environment_freeze(seen: Seen) -> Reply | None:
    """A freeze over other environments only, said to be in effect for the proposal."""
    for freeze in _records(seen, "freeze_window"):
        if seen["proposal"]["environment"] not in freeze["environments"]:
            return _freeze_claim(seen, freeze)
    return None


def _approver_out_of_scope(seen: Seen) -> Reply | None:
    """The applicable approval's approver said to be unauthorised (v0.2's form of the claim).

    v0.4's finding format has no field for authority (it depends on environment and
    delegation): the only discrepancy a reviewer can write for "the approver's scope does not
    cover this environment" is the `/approved_by` field with a null proposed value.
    """
    proposal = seen["proposal"]
    for approval in _records(seen, "approval"):
        if approval["operation"] == proposal["operation"] and (
            approval["target"] == proposal["target"]
        ):
            return {
                "record_id": approval["record_id"],
                "field": "/approved_by",
                "proposed_value": None,
                "evidence_value": approval["approved_by"],
            }
    return None


def _freeze_claim(seen: Seen, freeze: dict[str, Any]) -> Reply:
    return {
        "record_id": freeze["record_id"],
        "field": "/ends_at",
        "proposed_value": seen["as_of"],
        "evidence_value": freeze["ends_at"],
    }


def _other_service_notice(seen: Seen) -> Reply | None:
    """A notice of a service other than the approval service, said to make approvals unknown."""
    for notice in _records(seen, "service_notice"):
        if notice["service"] != "approval-service":
            return {
                "record_id": notice["record_id"],
                "field": "/status",
                "proposed_value": None,
                "evidence_value": notice["status"],
            }
    return None


def _other_approval_revoked(seen: Seen) -> Reply | None:
    """A revocation of an approval not in the evidence, said to revoke the proposal's approval."""
    known = {a["approval_id"] for a in _records(seen, "approval")}
    for revocation in _records(seen, "revocation"):
        if revocation["revokes"] not in known:
            return {
                "record_id": revocation["record_id"],
                "field": "/revoked_at",
                "proposed_value": None,
                "evidence_value": revocation["revoked_at"],
            }
    return None


def _sibling_approval_not_active(seen: Seen) -> Reply | None:
    """An approval for another target, its non-active status said to stop the proposal."""
    for approval in _records(seen, "approval"):
        if approval["target"] != seen["proposal"]["target"] and approval["status"] != "active":
            return {
                "record_id": approval["record_id"],
                "field": "/status",
                "proposed_value": None,
                "evidence_value": approval["status"],
            }
    return None


FABRICATIONS: dict[str, Callable[[Seen], Reply | None]] = {
    "unstarted-freeze": _unstarted_freeze,
    "other-environment-freeze": _other_environment_freeze,
    "other-service-notice": _other_service_notice,
    "revocation-of-another-approval": _other_approval_revoked,
    "sibling-approval-status": _sibling_approval_not_active,
    "approver-out-of-scope": _approver_out_of_scope,
}
"""Lookalike false discrepancies, each the shape of a true one with one joint fact wrong."""


def fabricated_reply(case: CaseV4, kinds: Iterable[str] = FABRICATIONS) -> tuple[Reply, str | None]:
    """The reference finding plus ONE lookalike false discrepancy (the first kind that applies).

    One, so the finding stays within the prompt's "at most 2 other" discrepancies: a grader that
    rejects it must do so for its falsehood, not for its count. Returns the kind added (None:
    none applies, the reply is the reference finding).
    """
    reply = reference_reply(case)
    seen = seen_of(case)
    for kind in kinds:
        claim = FABRICATIONS[kind](seen)
        if claim is not None and claim not in reply["discrepancies"]:
            reply["discrepancies"] = [*reply["discrepancies"], claim]
            return reply, kind
    return reply, None


def _in_utc(value: Any) -> Any:
    """An ISO 8601 instant restated in UTC (`Z`); any other value unchanged."""
    if isinstance(value, str) and "T" in value:
        try:
            instant = datetime.fromisoformat(value)
        except ValueError:
            return value
        if instant.tzinfo is not None:
            return instant.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return value


def utc_reply(case: CaseV4) -> tuple[Reply, bool]:
    """The reference finding with every time in its discrepancies written in UTC.

    Returns the reply and whether any value was restated (the same instant, another offset).
    """
    reply = reference_reply(case)
    restated = [
        {
            **d,
            "proposed_value": _in_utc(d["proposed_value"]),
            "evidence_value": _in_utc(d["evidence_value"]),
        }
        for d in reply["discrepancies"]
    ]
    changed = restated != reply["discrepancies"]
    reply["discrepancies"] = restated
    return reply, changed


# ------------------------------------------------------------------------------------------------
# The review document's figures: `python -m tests.support.outside_corpus [POOL] [SEED]`.


def _attacker_lines(cases: list[CaseV4], pool: list[CaseV4]) -> list[str]:
    lines = []
    for name, learner in LEARNERS.items():
        outcome = gate_outcome(cases, learner_replies(learner, pool, cases))
        lines.append(f"learner {name}: {outcome.summary()}")
    for name, reader in CARELESS_READERS.items():
        outcome = gate_outcome(cases, reader_replies(cases, reader))
        lines.append(f"careless {name}: {outcome.summary()}")
    return lines


def _writer_lines(cases: list[CaseV4]) -> list[str]:
    fabricated = [fabricated_reply(case) for case in cases]
    outcome = gate_outcome(cases, [reply for reply, _ in fabricated])
    kinds = dict(Counter(kind for _, kind in fabricated))
    lines = [f"fabricating reviewer (first applicable kind added: {kinds}): {outcome.summary()}"]
    for kind in FABRICATIONS:
        made = [(case, fabricated_reply(case, [kind])) for case in cases]
        rows = [graded_row(case, reply) for case, (reply, added) in made if added == kind]
        supported = sum(bool(row.supported) for row in rows)
        lines.append(f"  {kind} alone: {supported}/{len(rows)} supported")
        if rows and supported:
            alone = gate_outcome(cases, [reply for _, (reply, _) in made])
            lines.append(f"    reviewer adding only {kind}: {alone.summary()}")
    restated = [utc_reply(case) for case in cases]
    outcome = gate_outcome(cases, [reply for reply, _ in restated])
    changed = sum(flag for _, flag in restated)
    lines.append(f"UTC-writing reviewer ({changed} findings restated): {outcome.summary()}")
    outcome = gate_outcome(cases, [reference_reply(case) for case in cases])
    lines.append(f"reference reviewer: {outcome.summary()}")
    return lines


def figures(pool_count: int, pool_seed: int) -> list[str]:
    """Every attacker's line for `docs/rtb-corpus-v0.4-review.md`, on the shipped corpus."""
    cases = shipped_cases()
    pool = pool_cases(pool_count, pool_seed)
    header = f"corpus: {len(cases)} cases; pool: {len(pool)} cases drawn with seed {pool_seed}"
    return [header, *_attacker_lines(cases, pool), *_writer_lines(cases)]


# ------------------------------------------------------------------------------------------------
# The domain review's reading aid: a random sample of families, each member beside its parent.


def family_sample(cases: Sequence[CaseV4], seed: int, count: int = 12) -> list[list[CaseV4]]:
    """`count` families drawn at random with `seed`, each as its members (base first)."""
    import random

    families: dict[str, list[CaseV4]] = {}
    for case in cases:
        families.setdefault(case.family, []).append(case)
    chosen = random.Random(seed).sample(sorted(families), count)
    return [sorted(families[f], key=lambda c: c.variant != "family-base") for f in chosen]


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out |= _flat(item, f"{prefix}/{key}")
        return out
    return {prefix: value}


def member_changes(parent: CaseV4, member: CaseV4) -> list[str]:
    """What a member changes in its parent's candidate-visible input, one line per field.

    Records are matched by `record_id` (their order is presentation): a line names the record's
    kind, the field, and the values before and after.
    """

    def indexed(case: CaseV4) -> dict[str, Any]:
        seen = seen_of(case)
        records = {f"{r['kind']}:{r['record_id']}": r for r in seen.pop("evidence")}
        return _flat({**seen, "evidence": records})

    before, after = indexed(parent), indexed(member)
    return [
        f"{path}: {before.get(path, '<absent>')!r} -> {after.get(path, '<absent>')!r}"
        for path in sorted(before.keys() | after.keys())
        if before.get(path, "<absent>") != after.get(path, "<absent>")
    ]


def review_sheet(seed: int, count: int = 12) -> list[str]:
    """The sampled families as the reviewer read them: each base in full, each edit's changes."""
    lines: list[str] = []
    for members in family_sample(shipped_cases(), seed, count):
        base = members[0]
        by_variant = {case.variant: case for case in members}
        lines.append(f"== {base.family} ({base.group}, {base.authoring.template})")
        lines.append(json.dumps(seen_of(base), indent=1))
        for case in members:
            key = case.expectations
            lines.append(
                f"-- {case.case_id} {case.variant} <- {case.edit_of}: "
                f"{key.reference_decision.value} {[c.value for c in key.acceptable_reason_codes]}"
            )
            parent = by_variant.get(case.edit_of or "", base)
            lines += [f"   {change}" for change in member_changes(parent, case)]
    return lines


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["review"]:
        print("\n".join(review_sheet(int(sys.argv[2]))))
    else:
        numbers = [int(value) for value in sys.argv[1:3]]
        for line in figures(*(numbers + [1440, 1][len(numbers) :])):
            print(line, flush=True)
