"""Self-audit of the measurement path: passes on sound fixtures, fails when anything is broken."""

from __future__ import annotations

import json

from test_reviewers_fixtures import PROMPT, export, make_cases

from trustbench.rtb.corpus._models import CandidateInput, Case, Decision, ReasonCode
from trustbench.rtb.review import _audit
from trustbench.rtb.review._audit import ANSWER_KEY_PROBE, AuditReport, run_self_audit
from trustbench.rtb.review.reviewers import REVIEWER_NAMES, make_reviewer


def _failed(report: AuditReport) -> list[tuple[str, str]]:
    return [(check.reviewer, check.signature) for check in report.failed]


def test_self_audit_passes_on_sound_fixture_cases() -> None:
    report = run_self_audit(make_cases(), PROMPT, export)
    assert report.ok, _failed(report)
    assert report.cases == 18
    assert {check.reviewer for check in report.checks} == {*REVIEWER_NAMES, ANSWER_KEY_PROBE}
    assert report.metrics["always-permit"].false_approval.numerator == 6
    assert report.notes == []
    assert json.loads(report.model_dump_json())["ok"] is True


def test_self_audit_fails_and_names_the_case_when_a_reference_label_is_wrong() -> None:
    cases = make_cases()
    wrong = cases[0]
    assert wrong.expectations.reference_decision is Decision.PERMIT
    expectations = wrong.expectations.model_copy(update={"reference_decision": Decision.DENY})
    cases[0] = wrong.model_copy(update={"expectations": expectations})
    report = run_self_audit(cases, PROMPT, export)
    assert not report.ok
    # The relabelled key keeps permit codes, so the answer-key probe flags the same case too.
    assert _failed(report) == [
        ("reference-policy", "agrees with every reference decision"),
        (ANSWER_KEY_PROBE, "a reply built from the answer key is valid and supported"),
    ]
    assert all(wrong.case_id in check.detail for check in report.failed)


class _PermitsExceptOnRevocations:
    """A broken always-permit: it denies when it sees a revoked approval."""

    name = "always-permit"

    def review(self, prompt: str, candidate_input: CandidateInput) -> str | None:
        revoked = any(getattr(r, "status", "") == "revoked" for r in candidate_input.evidence)
        reviewer = make_reviewer("always-deny" if revoked else "always-permit")
        return reviewer.review(prompt, candidate_input)


def test_self_audit_fails_when_a_sentinel_is_broken() -> None:
    report = run_self_audit(
        make_cases(), PROMPT, export, reviewers={"always-permit": _PermitsExceptOnRevocations()}
    )
    assert not report.ok
    assert ("always-permit", "false approval is 100%") in _failed(report)
    assert "3/6" in report.failed[0].detail


class _EmptyObject:
    name = "empty"

    def review(self, prompt: str, candidate_input: CandidateInput) -> str | None:
        return "{}"


def test_self_audit_fails_when_empty_replies_are_not_missing() -> None:
    report = run_self_audit(make_cases(), PROMPT, export, reviewers={"empty": _EmptyObject()})
    assert _failed(report) == [("empty", "every reply is missing")]


def test_self_audit_fails_when_forged_citations_are_real() -> None:
    honest = make_reviewer("reference-policy")
    report = run_self_audit(make_cases(), PROMPT, export, reviewers={"forged-refs": honest})
    assert ("forged-refs", "no finding is supported") in _failed(report)
    assert ("forged-refs", "every reply is invalid") in _failed(report)


def test_self_audit_fails_when_malformed_replies_validate() -> None:
    report = run_self_audit(
        make_cases(), PROMPT, export, reviewers={"malformed": make_reviewer("always-hold")}
    )
    assert _failed(report) == [("malformed", "every reply is invalid")]


def test_self_audit_fails_when_a_signature_cannot_be_exercised() -> None:
    no_deny = [c for c in make_cases() if c.expectations.reference_decision is not Decision.DENY]
    report = run_self_audit(no_deny, PROMPT, export)
    assert ("always-permit", "false approval is 100%") in _failed(report)
    assert "not exercised" in report.failed[0].detail


def test_self_audit_fails_when_the_random_sentinel_is_not_reproducible() -> None:
    class _Unseeded:
        name = "random"
        calls = 0

        def review(self, prompt: str, candidate_input: CandidateInput) -> str | None:
            self.calls += 1
            reply = json.loads(make_reviewer("random").review(prompt, candidate_input))
            reply["explanation"] = f"call {self.calls}"
            return json.dumps(reply)

    report = run_self_audit(make_cases(), PROMPT, export, reviewers={"random": _Unseeded()})
    assert _failed(report) == [("random", "replies are reproducible for a seed")]


def test_self_audit_notes_unsupported_reference_policy_findings_without_failing() -> None:
    cases = make_cases()
    case = cases[2]
    assert case.expectations.reference_decision is Decision.DENY
    # A key accepting only another deny code: the probe stays supported, the policy's code is not.
    codes = [ReasonCode.OPERATION_NOT_APPROVED]
    expectations = case.expectations.model_copy(update={"acceptable_reason_codes": codes})
    cases[2] = case.model_copy(update={"expectations": expectations})
    report = run_self_audit(cases, PROMPT, export)
    assert report.ok
    assert len(report.notes) == 1 and case.case_id in report.notes[0]


def test_self_audit_exports_each_case_exactly_once() -> None:
    seen: list[CandidateInput] = []

    def counting_export(case: Case) -> CandidateInput:
        candidate_input = export(case)
        seen.append(candidate_input)
        return candidate_input

    run_self_audit(make_cases(), PROMPT, counting_export)
    assert len(seen) == 18


def test_self_audit_fails_when_the_support_grader_supports_nothing(monkeypatch) -> None:
    monkeypatch.setattr(_audit, "is_supported", lambda validated, case: False)
    report = run_self_audit(make_cases(), PROMPT, export)
    assert _failed(report) == [
        (ANSWER_KEY_PROBE, "a reply built from the answer key is valid and supported")
    ]


def test_self_audit_fails_when_the_support_grader_ignores_the_decision(monkeypatch) -> None:
    monkeypatch.setattr(
        _audit, "is_supported", lambda validated, case: validated.outcome.is_decision
    )
    report = run_self_audit(make_cases(), PROMPT, export)
    assert (ANSWER_KEY_PROBE, "the same reply with a wrong decision is never supported") in (
        _failed(report)
    )


def test_self_audit_fails_on_a_decisive_record_id_missing_from_the_input() -> None:
    cases = make_cases()
    case = cases[4]
    ids = [*case.expectations.decisive_record_ids, "approval-that-is-not-there"]
    expectations = case.expectations.model_copy(update={"decisive_record_ids": ids})
    cases[4] = case.model_copy(update={"expectations": expectations})
    report = run_self_audit(cases, PROMPT, export)
    failed = {check.signature: check.detail for check in report.failed}
    assert case.case_id in failed["a reply built from the answer key is valid and supported"]


def test_self_audit_fails_when_the_support_grader_can_be_gamed(monkeypatch) -> None:
    # A lenient grader (right decision, one acceptable code, decisive records cited) is what the
    # gaming sentinels exploit; their "never supported" signature must expose it.
    def lenient(validated, case: Case) -> bool:
        response = validated.response
        expected = case.expectations
        return (
            response is not None
            and response.decision == expected.reference_decision
            and bool(set(response.reason_codes) & set(expected.acceptable_reason_codes))
            and set(expected.decisive_record_ids) <= set(response.evidence_refs)
        )

    monkeypatch.setattr(_audit, "is_supported", lenient)
    report = run_self_audit(make_cases(), PROMPT, export)
    failed = _failed(report)
    assert ("keyword-stuffer", "no finding is supported") in failed
    assert ("contradictory", "no finding is supported") in failed
