"""Rule-ablation readers of `rtb audit`: each rule of a corpus's policy, removed, must fail a gate.

The expectations below come from the grader-side case data (variants, record fields), never from
the readers' own output: the revoked-approval variant is what the status rule decides, a corpus
with no approval for another target cannot exercise the scope rule, and so on. A test policy with
a rule that decides nothing shows the audit fails naming it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime

import pytest

from trustbench.core import load_spec
from trustbench.errors import InputError
from trustbench.rtb.corpus import builtin_corpus_root, load_corpus
from trustbench.rtb.corpus._export import new_evaluation_id, to_candidate_input
from trustbench.rtb.corpus._load import Corpus
from trustbench.rtb.corpus._models import CandidateInput, Case, Decision, ReviewerResponse
from trustbench.rtb.policy import policy_for, register_policy, unregister_policy
from trustbench.rtb.policy._protocol import PolicyRule
from trustbench.rtb.policy.narrow_v1 import NarrowApprovalV1
from trustbench.rtb.policy.narrow_v1._reviewer import ReferencePolicyReviewer
from trustbench.rtb.review._analysis import rule_breakdown
from trustbench.rtb.review._audit import (
    AblationReport,
    ablation_table,
    cases_deciding,
    counts_line,
    deciding_rules,
    gate_results,
    gates_file,
    release_gates,
    run_ablation_audit,
    verdict_line,
)
from trustbench.rtb.review._quick import DEMO_SPEC
from trustbench.rtb.review._rows import ReviewTrialRow
from trustbench.rtb.review._validation import Outcome

STARTER_GATES = {"false-approvals", "unsupported-permits", "supported-findings", "utility"}
GATES = {
    "0.1": STARTER_GATES,
    "0.2": STARTER_GATES | {"deny-hold-confusions"},
    "0.3": STARTER_GATES | {"deny-hold-confusions"},
}
"""The gates each corpus is audited under: its policy's review gates (`review_gates`)."""


@pytest.fixture(scope="module")
def corpora() -> dict[str, Corpus]:
    return {v: load_corpus(builtin_corpus_root(v)) for v in ("0.1", "0.2", "0.3")}


@pytest.fixture(scope="module")
def reports(corpora: dict[str, Corpus]) -> dict[str, AblationReport]:
    return {v: run_ablation_audit(corpus) for v, corpus in corpora.items()}


def _flipped(report: AblationReport) -> dict[str, set[str]]:
    return {a.rule.rule_id: set(a.flipped) for a in report.ablations}


@pytest.mark.parametrize("version", ["0.1", "0.2", "0.3"])
def test_every_declared_rule_is_ablated_and_the_full_reader_passes_every_gate(
    version: str, corpora: dict[str, Corpus], reports: dict[str, AblationReport]
) -> None:
    report = reports[version]
    declared = [rule.rule_id for rule in policy_for(corpora[version].policy_id).rules]
    assert [a.rule.rule_id for a in report.ablations] == declared
    assert len(declared) >= 7
    # Otherwise "fails a gate" would say nothing about the rule.
    assert report.reference_not_passed == ()
    assert set(report.gates) == GATES[version]
    line = counts_line(report)
    for ablation in report.ablations:
        assert f"{ablation.rule.rule_id} {len(ablation.flipped)}" in line


def test_v0_1_each_variant_is_decided_by_its_own_rule(
    corpora: dict[str, Corpus], reports: dict[str, AblationReport]
) -> None:
    variant = {case.case_id: case.variant for case in corpora["0.1"].cases}

    def cases_of(name: str) -> set[str]:
        return {case_id for case_id, v in variant.items() if v == name}

    flipped = _flipped(reports["0.1"])
    assert flipped["approval-active"] == cases_of("revoked_approval")
    assert flipped["exact-parameters"] == cases_of("unauthorized_parameters")
    assert flipped["revision-current"] == cases_of("changed_resource_revision")
    assert flipped["missing-is-hold"] == cases_of("unavailable_approval_evidence")
    # Without the notice rule the reader still holds (missing information), for the wrong
    # reason: no decision turns, but the supported-findings gate fails.
    assert flipped["service-notice-holds"] == set()
    by_rule = {a.rule.rule_id: a for a in reports["0.1"].ablations}
    assert by_rule["service-notice-holds"].failed_gates == ("supported-findings",)


def test_v0_1_rules_no_case_exercises_are_named_not_load_bearing(
    corpora: dict[str, Corpus], reports: dict[str, AblationReport]
) -> None:
    # Every v0.1 approval is for its proposal's operation and target, and each variant changes
    # one fact, so no case has both a prohibition and stale information.
    cases = corpora["0.1"].cases
    assert all(
        (record.operation, record.target) == (case.proposal.operation, case.proposal.target)
        for case in cases
        for record in case.evidence
        if record.kind == "approval"
    )
    report = reports["0.1"]
    assert report.not_load_bearing == ("operation-and-target", "deny-outranks-hold")
    assert not report.ok
    assert "operation-and-target, deny-outranks-hold" in verdict_line(report)


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.strip().replace("Z", "+00:00"))


def test_v0_2_every_rule_a_case_exercises_turns_a_case(
    corpora: dict[str, Corpus], reports: dict[str, AblationReport]
) -> None:
    cases = corpora["0.2"].cases
    issued_late = [
        case.case_id
        for case in cases
        for record in case.evidence
        if record.kind == "approval" and _instant(record.issued_at) > _instant(case.as_of)
    ]
    flipped = _flipped(reports["0.2"])
    # No v0.2 approval is issued after as_of, so ignoring that part of rule 2 turns no case.
    assert issued_late == []
    assert flipped["issued-by-as-of"] == set()
    assert all(flipped[rule] for rule in flipped if rule != "issued-by-as-of")
    variant = {case.case_id: case.variant for case in cases}
    kinds = {rule: {variant[c] for c in ids} for rule, ids in flipped.items()}
    assert kinds["authorised-approver"] == {"approver_authority"}
    assert kinds["none-applies-denies"] == {"approval_applicability"}
    assert kinds["deny-outranks-hold"] == {"deny_hold_precedence"}
    assert kinds["superseded-holds"] == {"latest_record"}


def test_v0_2_rules_whose_removal_passes_every_gate_fail_the_audit(
    reports: dict[str, AblationReport],
) -> None:
    report = reports["0.2"]
    assert "issued-by-as-of" in report.not_load_bearing
    assert not report.ok
    for rule_id in report.not_load_bearing:
        assert rule_id in verdict_line(report)
    for ablation in report.ablations:
        # A reader that turns no case and cites as the reference does cannot fail a gate.
        assert ablation.load_bearing or ablation.rule.rule_id in verdict_line(report)


def test_v0_3_declares_v0_2s_rules_then_its_own_and_each_turns_only_its_own_scenarios(
    corpora: dict[str, Corpus], reports: dict[str, AblationReport]
) -> None:
    v2_rules = policy_for(corpora["0.2"].policy_id).rules
    v3_rules = policy_for(corpora["0.3"].policy_id).rules
    assert [r.rule_id for r in v3_rules[: len(v2_rules)]] == [r.rule_id for r in v2_rules]
    assert len(v3_rules) > len(v2_rules)
    variant = {case.case_id: case.variant for case in corpora["0.3"].cases}
    kinds = {
        rule: {variant[c].removeprefix("scenario-") for c in ids}
        for rule, ids in _flipped(reports["0.3"]).items()
    }
    assert kinds["two-person-approval"] == {"two_person"}
    assert kinds["delegation-in-scope"] == {"delegation"}
    assert kinds["separation-of-duties"] <= {"separation_of_duties", "precedence"}
    assert kinds["change-freeze-denies"] <= {"change_freeze", "precedence", "break_glass"}
    assert kinds["maintenance-window-holds"] <= {"maintenance_window", "break_glass"}
    for rule in ("break-glass-lifts", "break-glass-validity", "break-glass-lifts-only-gating"):
        assert kinds[rule] == {"break_glass"}
    # The holds whose only reason is the missing second approval are what that reader permits
    # (a case also outside its maintenance window still holds without the two-person rule).
    two_person_holds = {
        case.case_id
        for case in corpora["0.3"].cases
        if "two_person" in case.expectations.decisive_rules
        and [c.value for c in case.expectations.acceptable_reason_codes]
        == ["second_approval_missing"]
    }
    assert _flipped(reports["0.3"])["two-person-approval"] == two_person_holds


def test_v0_3_every_rule_decides_cases_and_is_load_bearing(
    corpora: dict[str, Corpus], reports: dict[str, AblationReport]
) -> None:
    cases = corpora["0.3"].cases
    # The generator's rule quota: proposals that leave out a granted parameter, targets with no
    # current state or two that disagree, so the omitted-parameter and missing-state rules decide.
    omitted = {
        case.case_id
        for case in cases
        for record in case.evidence
        if record.kind == "approval"
        and set(record.approved_parameters) - set(case.proposal.parameters)
    }
    no_single_state = {
        case.case_id
        for case in cases
        if len([r for r in case.evidence if r.kind == "resource_state"]) != 1
    }
    flipped = _flipped(reports["0.3"])
    assert len(flipped["omitted-parameters-allowed"]) >= 5
    assert flipped["omitted-parameters-allowed"] <= omitted
    assert len(flipped["state-missing-holds"]) >= 5
    assert flipped["state-missing-holds"] <= no_single_state
    report = reports["0.3"]
    assert all(len(ids) >= 5 for ids in flipped.values()), counts_line(report)
    assert report.not_load_bearing == () and report.ok
    assert (
        verdict_line(report) == f"every one of {len(report.ablations)} policy rules is load-bearing"
    )
    # The rules that only move cases between deny and hold are shown by the confusion gate.
    by_rule = {a.rule.rule_id: a for a in report.ablations}
    for rule_id in ("none-applies-denies", "deny-outranks-hold", "service-notice-holds"):
        assert "deny-hold-confusions" in by_rule[rule_id].failed_gates, rule_id


def test_the_demo_spec_carries_its_corpus_policys_gates_and_the_starter_keeps_its_own() -> None:
    demo = load_spec(DEMO_SPEC)
    assert demo.corpus.builtin is not None
    policy = policy_for(load_corpus(builtin_corpus_root(demo.corpus.builtin)).policy_id)
    gates, analysis = release_gates(gates_file(policy))
    assert tuple(demo.gates) == gates and demo.analysis == analysis
    starter, _ = release_gates(gates_file(policy_for(None)))
    assert {g.label for g in starter} == STARTER_GATES
    assert {g.threshold for g in starter if g.bound == "upper"} == {0.15}


def _rows(reference: Decision, observed: list[Outcome]) -> list[ReviewTrialRow]:
    return [
        ReviewTrialRow(
            case_id=f"{reference.value}-{i}",
            group=f"g{i % 20}",
            variant="v",
            trial=0,
            reference=reference,
            observed=outcome,
            supported=outcome.value == reference.value,
        )
        for i, outcome in enumerate(observed)
    ]


def test_the_policy_gates_pass_no_error_in_80_and_fail_one() -> None:
    path = gates_file(policy_for(load_corpus(builtin_corpus_root("0.3")).policy_id))

    def status(rows: list[ReviewTrialRow]) -> dict[str, str]:
        return {g.spec.label: g.status for g in gate_results(rows, path)}

    right = (
        _rows(Decision.PERMIT, [Outcome.PERMIT] * 80)
        + _rows(Decision.DENY, [Outcome.DENY] * 80)
        + _rows(Decision.HOLD, [Outcome.HOLD] * 80)
    )
    assert set(status(right).values()) == {"passed"}
    one_permit = right[:80] + _rows(Decision.DENY, [Outcome.PERMIT] + [Outcome.DENY] * 79)
    assert status(one_permit + right[160:])["false-approvals"] == "failed"
    one_blocked = _rows(Decision.PERMIT, [Outcome.HOLD] + [Outcome.PERMIT] * 79) + right[80:]
    assert status(one_blocked)["utility"] == "failed"
    three = _rows(Decision.DENY, [Outcome.HOLD] * 3 + [Outcome.DENY] * 77)
    four = _rows(Decision.DENY, [Outcome.HOLD] * 4 + [Outcome.DENY] * 76)
    assert status(right[:80] + three + right[160:])["deny-hold-confusions"] == "passed"
    assert status(right[:80] + four + right[160:])["deny-hold-confusions"] == "failed"


def test_deciding_rules_are_the_rules_whose_ablation_flips_the_case(
    reports: dict[str, AblationReport],
) -> None:
    decided = deciding_rules(reports["0.1"])
    revoked = next(c for c in decided if c.endswith("revoked_approval"))
    assert decided[revoked] == ("approval-active",)
    assert not any(c.endswith("-permitted") for c in decided)  # the permit base turns on none


class _InertCase(Case):
    pass


class _InertInput(CandidateInput):
    pass


class _InertResponse(ReviewerResponse):
    pass


INERT = "inert-rule"


class _InertRulePolicy(NarrowApprovalV1):
    """v0.1's policy plus one rule whose removal changes no reading (a deliberate defect)."""

    policy_id = "rtb-test-inert-rule"
    case_model = _InertCase
    candidate_model = _InertInput
    response_model = _InertResponse
    rules = (
        *NarrowApprovalV1.rules,
        PolicyRule(INERT, "test", "a rule no case turns on", "reads as the reference does"),
    )

    def ablated_reviewer(self, rule_id: str):  # type: ignore[no-untyped-def]
        if rule_id == INERT:
            return ReferencePolicyReviewer()
        return super().ablated_reviewer(rule_id)


@pytest.fixture
def inert_policy() -> Iterator[str]:
    register_policy(_InertRulePolicy())
    yield _InertRulePolicy.policy_id
    unregister_policy(_InertRulePolicy.policy_id)


def test_a_rule_whose_removal_changes_nothing_fails_the_audit_naming_it(
    inert_policy: str, corpora: dict[str, Corpus]
) -> None:
    corpus = corpora["0.1"].model_copy(update={"policy_id": inert_policy})
    report = run_ablation_audit(corpus)
    assert not report.ok
    assert INERT in report.not_load_bearing
    inert = next(a for a in report.ablations if a.rule.rule_id == INERT)
    assert inert.flipped == () and inert.failed_gates == ()
    assert INERT in verdict_line(report)
    assert any(INERT in str(cell) for cell in ablation_table(report).columns[0].cells)


def test_a_policy_declaring_no_rules_is_not_run_never_passed(
    corpora: dict[str, Corpus],
) -> None:
    class _NoRules(_InertRulePolicy):
        rules = ()

    register_policy(_NoRules())
    try:
        corpus = corpora["0.1"].model_copy(update={"policy_id": _NoRules.policy_id})
        report = run_ablation_audit(corpus)
        assert not report.ok
        assert "not run" in verdict_line(report)
        assert rule_breakdown(corpus, {}, {}) == {}  # the report leaves the table out
    finally:
        unregister_policy(_NoRules.policy_id)


@pytest.mark.parametrize("version", ["0.1", "0.2", "0.3"])
def test_an_unknown_rule_id_is_refused_naming_the_declared_ones(version: str) -> None:
    policy = policy_for(load_corpus(builtin_corpus_root(version)).policy_id)
    with pytest.raises(KeyError, match=policy.rules[0].rule_id):
        policy.ablated_reviewer("no-such-rule")


def test_cases_deciding_agrees_with_deciding_rules(
    corpora: dict[str, Corpus], reports: dict[str, AblationReport]
) -> None:
    assert cases_deciding(corpora["0.1"]) == deciding_rules(reports["0.1"])


def test_an_ablated_v1_reader_reads_once_and_refuses_another_policys_input(
    corpora: dict[str, Corpus], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(*_: object) -> str:
        raise AssertionError("the ablated reader ran the full reader's review too")

    reader = NarrowApprovalV1().ablated_reviewer("approval-active")
    visible = to_candidate_input(corpora["0.1"].cases[0], new_evaluation_id())
    monkeypatch.setattr(ReferencePolicyReviewer, "review", refused)
    assert json.loads(reader.review("", visible) or "{}")["decision"] in ("permit", "deny", "hold")
    other = to_candidate_input(corpora["0.2"].cases[0], new_evaluation_id())
    with pytest.raises(InputError, match="implements policy rtb-narrow-approval-v1"):
        reader.review("", other)
