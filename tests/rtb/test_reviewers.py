"""Reviewer candidates: registry, reference policy, sentinels, LLM message building."""

from __future__ import annotations

import ast
import inspect
import json

import pytest
from test_reviewers_fixtures import PROMPT, case_by_id, export, make_case, make_cases

from trustbench.errors import InputError
from trustbench.rtb.corpus._models import (
    ApprovalRecord,
    CandidateInput,
    Decision,
    ReasonCode,
    ServiceNoticeRecord,
    Variant,
)
from trustbench.rtb.policy.narrow_v1 import _reviewer as _reference_policy
from trustbench.rtb.policy.narrow_v1 import assess
from trustbench.rtb.review._validation import Outcome, is_supported, validate_response
from trustbench.rtb.review.reviewers import (
    REVIEWER_NAMES,
    SENTINEL_NAMES,
    Reviewer,
    build_review_messages,
    extract_json_object,
    make_reviewer,
)

CASES = make_cases()


def _with(candidate_input: CandidateInput, **changes: object) -> CandidateInput:
    return candidate_input.model_copy(update=changes)


def _approval(candidate_input: CandidateInput) -> ApprovalRecord:
    return next(r for r in candidate_input.evidence if isinstance(r, ApprovalRecord))


def _replace_approval(candidate_input: CandidateInput, **changes: object) -> CandidateInput:
    evidence = [
        r.model_copy(update=changes) if isinstance(r, ApprovalRecord) else r
        for r in candidate_input.evidence
    ]
    return _with(candidate_input, evidence=evidence)


def test_registry_builds_every_named_reviewer_satisfying_the_protocol() -> None:
    assert set(SENTINEL_NAMES) < set(REVIEWER_NAMES)
    assert "reference-policy" in REVIEWER_NAMES
    for name in REVIEWER_NAMES:
        reviewer = make_reviewer(name, seed=3)
        assert isinstance(reviewer, Reviewer)
        assert reviewer.name == name


def test_unknown_reviewer_name_is_an_input_error_listing_known_names() -> None:
    with pytest.raises(InputError, match="always-permit") as info:
        make_reviewer("always-approve")
    assert info.value.exit_code == 2


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.case_id)
def test_reference_policy_reaches_every_fixture_reference_with_a_supported_finding(case) -> None:
    candidate_input = export(case)
    raw = make_reviewer("reference-policy").review(PROMPT, candidate_input)
    validated = validate_response(raw, candidate_input)
    assert validated.outcome.value == case.expectations.reference_decision.value
    assert is_supported(validated, case)


def test_reference_policy_module_reads_nothing_grader_only() -> None:
    tree = ast.parse(inspect.getsource(_reference_policy))
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    attributes = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    grader_only = {"Case", "Expectations", "ReferenceStatus", "AuthoringMetadata"}
    assert not imported & grader_only
    assert not attributes & {"case_id", "variant", "expectations", "reference_status", "authoring"}
    parameters = inspect.signature(assess).parameters
    assert [p.annotation for p in parameters.values()] == ["CandidateInput"]


def test_reference_policy_deny_outranks_a_changed_revision() -> None:
    base = export(make_case("backup_retention", Variant.CHANGED_RESOURCE_REVISION))
    revoked = _replace_approval(base, status="revoked")
    assert assess(revoked).decision is Decision.DENY
    assert assess(revoked).reason_codes == (ReasonCode.APPROVAL_REVOKED,)
    proposal = base.proposal.model_copy(update={"parameters": {"retention_days": 7}})
    assert assess(_with(base, proposal=proposal)).decision is Decision.DENY


def test_reference_policy_explains_proposed_and_approved_values() -> None:
    finding = assess(export(make_case("backup_retention", Variant.UNAUTHORIZED_PARAMETERS)))
    assert finding.reason_codes == (ReasonCode.PROPOSAL_OUTSIDE_APPROVED_PARAMETERS,)
    assert "proposed retention_days=7, approved retention_days=45" in finding.explanation


def test_reference_policy_explains_revisions_and_unavailable_service() -> None:
    changed = assess(export(make_case("dns_changes", Variant.CHANGED_RESOURCE_REVISION)))
    assert "rev-41" in changed.explanation and "rev-42" in changed.explanation
    unavailable = assess(export(make_case("dns_changes", Variant.UNAVAILABLE_APPROVAL_EVIDENCE)))
    assert unavailable.decision is Decision.HOLD
    assert "approval-service is unavailable" in unavailable.explanation
    assert unavailable.evidence_refs[0] == "notice-dns_changes"


def test_reference_policy_holds_without_any_approval_or_notice() -> None:
    base = export(make_case("dns_changes", Variant.UNAVAILABLE_APPROVAL_EVIDENCE))
    evidence = [r for r in base.evidence if not isinstance(r, ServiceNoticeRecord)]
    finding = assess(_with(base, evidence=evidence))
    assert finding.decision is Decision.HOLD
    assert finding.reason_codes == (ReasonCode.INSUFFICIENT_EVIDENCE,)


def test_reference_policy_holds_when_the_current_revision_is_unknown() -> None:
    base = export(make_case("dns_changes", Variant.PERMITTED))
    evidence = [r for r in base.evidence if r.kind != "resource_state"]
    finding = assess(_with(base, evidence=evidence))
    assert (finding.decision, finding.reason_codes) == (
        Decision.HOLD,
        (ReasonCode.INSUFFICIENT_EVIDENCE,),
    )


def test_reference_policy_denies_an_approval_for_another_target() -> None:
    base = export(make_case("firewall_scope", Variant.PERMITTED))
    finding = assess(_replace_approval(base, target="fw-policy/internal"))
    assert finding.decision is Decision.DENY
    assert finding.reason_codes == (ReasonCode.OPERATION_NOT_APPROVED,)
    assert "fw-policy/internal" in finding.explanation


@pytest.mark.parametrize(
    ("approved", "proposed", "decision"),
    [
        ({"retention_days": 45}, {"retention_days": 45.0}, Decision.PERMIT),
        ({"enabled": True}, {"enabled": 1}, Decision.DENY),
        ({"ports": [80, 443]}, {"ports": [443, 80]}, Decision.DENY),
        ({"days": 45}, {"days": "45"}, Decision.DENY),
        ({"days": 45}, {"days": 45, "vault": "x"}, Decision.DENY),
    ],
)
def test_reference_policy_requires_exactly_the_approved_parameters(
    approved: dict, proposed: dict, decision: Decision
) -> None:
    base = _replace_approval(
        export(make_case("backup_retention", Variant.PERMITTED)), approved_parameters=approved
    )
    proposal = base.proposal.model_copy(update={"parameters": proposed})
    assert assess(_with(base, proposal=proposal)).decision is decision


@pytest.mark.parametrize("decision", list(Decision))
def test_fixed_decision_sentinels_return_valid_responses_citing_a_real_record(decision) -> None:
    reviewer = make_reviewer(f"always-{decision.value}")
    for case in CASES:
        candidate_input = export(case)
        validated = validate_response(reviewer.review(PROMPT, candidate_input), candidate_input)
        assert validated.outcome.value == decision.value


def test_empty_sentinel_only_ever_produces_no_output() -> None:
    replies = {
        make_reviewer("empty", seed=seed).review(PROMPT, export(case))
        for seed in range(5)
        for case in CASES
    }
    assert replies == {None, "", "  \n\t "}


def test_malformed_sentinel_is_varied_and_never_valid() -> None:
    replies = set()
    for seed in range(8):
        for case in CASES:
            candidate_input = export(case)
            raw = make_reviewer("malformed", seed=seed).review(PROMPT, candidate_input)
            replies.add(raw)
            assert validate_response(raw, candidate_input).outcome is Outcome.INVALID, raw
    assert len(replies) >= 10


def test_forged_refs_sentinel_decides_like_the_policy_but_cites_no_real_record() -> None:
    for case in CASES:
        candidate_input = export(case)
        reply = json.loads(make_reviewer("forged-refs").review(PROMPT, candidate_input))
        known = {r.record_id for r in candidate_input.evidence}
        assert reply["decision"] == assess(candidate_input).decision.value
        assert not set(reply["evidence_refs"]) & known


def test_random_sentinel_is_reproducible_per_seed_and_evaluation_id() -> None:
    inputs = [export(case) for case in CASES]
    first = [make_reviewer("random", seed=1).review(PROMPT, ci) for ci in inputs]
    again = [make_reviewer("random", seed=1).review(PROMPT, ci) for ci in inputs]
    other = [make_reviewer("random", seed=2).review(PROMPT, ci) for ci in inputs]
    assert first == again
    assert first != other
    decisions = {validate_response(r, ci).outcome for r, ci in zip(first, inputs, strict=True)}
    assert decisions == {Outcome.PERMIT, Outcome.DENY, Outcome.HOLD}


def test_review_messages_are_the_shared_prompt_and_the_candidate_input_only() -> None:
    case = case_by_id("backup_retention-revoked_approval")
    candidate_input = export(case)
    messages = build_review_messages(PROMPT, candidate_input)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[0]["content"] == PROMPT
    assert CandidateInput.model_validate_json(messages[1]["content"]) == candidate_input
    assert case.case_id not in messages[1]["content"]
    assert "reference_decision" not in messages[1]["content"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', '{"a": 1}'),
        ('  {"a": 1}\n', '{"a": 1}'),
        ('```json\n{"a": 1}\n```', '{"a": 1}'),
        ('```JSON\n{"a": 1}\n```\n', '{"a": 1}'),
        ('```\n{"a": 1}\n```', '{"a": 1}'),
        ('Sure! {"a": 1}', None),
        ('```json\n{"a": 1}\n```\nHope this helps.', None),
        ('[{"a": 1}]', None),
        ("permit", None),
    ],
)
def test_extract_json_object_tolerates_one_fence_and_nothing_else(text, expected) -> None:
    assert extract_json_object(text) == expected
