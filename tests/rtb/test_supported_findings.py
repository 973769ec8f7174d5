"""Supported findings v2: gaming replies are unsupported, correct findings are, whatever the words.

v0.1 (no structured discrepancies): the keyword-stuffer and contradictory sentinels are valid
replies that are never supported on any built-in case, and correct plain wording is supported.
v0.2: replies to real cases of the built-in v0.2 corpus go through the real path (exported
input, v0.2 response schema) and are graded against the case's `decisive_discrepancies`.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

import trustbench.rtb.corpus as corpus_package
from trustbench.rtb.corpus import load_corpus
from trustbench.rtb.corpus._export import to_candidate_input
from trustbench.rtb.corpus._load import Corpus, builtin_corpus_root
from trustbench.rtb.corpus._models import Discrepancy
from trustbench.rtb.policy.narrow_v2._models import CaseV2
from trustbench.rtb.review._validation import (
    Outcome,
    ValidatedResponse,
    is_supported,
    support_gaps,
    validate_response,
)
from trustbench.rtb.review.reviewers import make_reviewer

BUILTIN = load_corpus(Path(corpus_package.__file__).parent / "v0.1")
"""The frozen v0.1 starter (named explicitly: these tests are about v0.1 replies)."""


@pytest.mark.parametrize("name", ["keyword-stuffer", "contradictory"])
def test_gaming_sentinels_are_valid_but_never_supported_on_any_builtin_case(name: str) -> None:
    reviewer = make_reviewer(name)
    for case in BUILTIN.cases:
        candidate_input = to_candidate_input(case, "eval-gaming-test")
        validated = validate_response(reviewer.review("", candidate_input), candidate_input)
        assert validated.outcome.is_decision, (case.case_id, validated.invalid_reason)
        assert not is_supported(validated, case), case.case_id


def test_keyword_stuffer_reaches_every_builtin_reference_decision_by_a_surface_rule() -> None:
    # The point of the sentinel: a right decision with a stuffed finding; it must not be the
    # decision that makes it unsupported.
    reviewer = make_reviewer("keyword-stuffer")
    for case in BUILTIN.cases:
        candidate_input = to_candidate_input(case, "eval-gaming-test")
        reply = json.loads(reviewer.review("", candidate_input) or "{}")
        assert reply["decision"] == case.expectations.reference_decision.value, case.case_id


def test_correct_plain_wording_is_supported_on_the_builtin_unauthorized_case() -> None:
    case = BUILTIN.case("backup_retention-03-unauthorized_parameters")
    candidate_input = to_candidate_input(case, "eval-plain")
    reply = {
        "evaluation_id": "eval-plain",
        "decision": "deny",
        "reason_codes": ["proposal_outside_approved_parameters"],
        "evidence_refs": ["approval-backup_retention", "policy-backup_retention"],
        "explanation": "The proposal sets retention_days to 7, which the approval does not allow.",
    }
    validated = validate_response(json.dumps(reply), candidate_input)
    assert is_supported(validated, case), support_gaps(validated, case)


V2_CASE = "dns_changes-03-equivalent_encoding-deny"
"""A v0.2 deny case decided by one parameter: the proposed TTL 3000 against the approved 300."""


@functools.cache
def _v2_corpus() -> Corpus:
    return load_corpus(builtin_corpus_root().parent / "v0.2")


def _v2_case() -> CaseV2:
    return next(case for case in _v2_corpus().cases if case.case_id == V2_CASE)


def _decisive() -> Discrepancy:
    (decisive,) = _v2_case().expectations.decisive_discrepancies
    return decisive


def _v2_reply(discrepancies: list[dict[str, Any]] | None, **changes: Any) -> dict[str, Any]:
    case = _v2_case()
    reply: dict[str, Any] = {
        "decision": "deny",
        "reason_codes": [code.value for code in case.expectations.acceptable_reason_codes],
        "evidence_refs": list(case.expectations.decisive_record_ids),
        "explanation": "The TTL differs from the approval.",
    }
    if discrepancies is not None:
        reply["discrepancies"] = discrepancies
    return {**reply, **changes}


def _v2_finding(discrepancies: list[dict[str, Any]] | None, **changes: Any) -> ValidatedResponse:
    """Validate a reply through the real v0.2 path: exported input, v0.2 response schema."""
    candidate_input = to_candidate_input(_v2_case(), "rtb-" + "0" * 32)
    body = {"evaluation_id": candidate_input.evaluation_id, **_v2_reply(discrepancies, **changes)}
    return validate_response(json.dumps(body), candidate_input)


def test_a_correct_structured_finding_is_supported() -> None:
    validated = _v2_finding([_decisive().model_dump(mode="json")])
    assert validated.outcome is Outcome.DENY, validated.invalid_reason
    assert support_gaps(validated, _v2_case()) == []


def test_an_equivalent_encoding_of_the_decisive_values_is_accepted() -> None:
    decisive = _decisive()
    encoded = {
        **decisive.model_dump(mode="json"),
        "proposed_value": str(decisive.proposed_value),
        "evidence_value": f" {decisive.evidence_value} ",
    }
    assert support_gaps(_v2_finding([encoded]), _v2_case()) == []


@pytest.mark.parametrize(
    ("change", "gap"),
    [
        ({"evidence_value": 30}, "evidence value 30 at"),
        ({"proposed_value": 3}, "proposed value 3 at"),
        ({"field": "/approved_parameters/record_type"}, "decisive discrepancy not cited"),
        ({"record_id": "rec-elsewhere"}, "not in the evidence"),
        ({"field": "/approved_parameters/ttl_seconds"}, "not one the policy compares"),
    ],
)
def test_a_fabricated_or_wrong_field_discrepancy_is_unsupported(
    change: dict[str, Any], gap: str
) -> None:
    validated = _v2_finding([{**_decisive().model_dump(mode="json"), **change}])
    gaps = support_gaps(validated, _v2_case())
    assert any(gap in g for g in gaps), gaps


def test_a_fabricated_discrepancy_beside_the_decisive_one_is_unsupported() -> None:
    decisive = _decisive().model_dump(mode="json")
    invented = {**decisive, "field": "/approved_revision", "evidence_value": "rev-9"}
    assert not is_supported(_v2_finding([decisive, invented]), _v2_case())


def test_listing_many_true_discrepancies_is_not_a_finding() -> None:
    case = _v2_case()
    decisive = _decisive()
    approval = next(r for r in case.evidence if r.record_id == decisive.record_id)
    true_but_irrelevant = [
        {"record_id": approval.record_id, "field": f"/{key}", "evidence_value": value}
        for key, value in approval.model_dump(mode="json").items()
        if isinstance(value, str) and key != "record_id"
    ]
    assert len(true_but_irrelevant) > 2
    validated = _v2_finding([decisive.model_dump(mode="json"), *true_but_irrelevant])
    gaps = support_gaps(validated, case)
    assert any("non-decisive discrepancies cited" in g for g in gaps), gaps


def test_a_v2_reply_without_discrepancies_is_invalid_never_approval() -> None:
    validated = _v2_finding(None)
    assert validated.outcome is Outcome.INVALID
    assert "discrepancies" in (validated.invalid_reason or "")


def test_a_fabricated_discrepancy_makes_even_a_correct_permit_unsupported() -> None:
    case = next(
        c for c in _v2_corpus().cases if c.expectations.reference_decision.value == "permit"
    )
    candidate_input = to_candidate_input(case, "rtb-" + "1" * 32)
    record = case.evidence[0].record_id
    reply = {
        "evaluation_id": candidate_input.evaluation_id,
        "decision": "permit",
        "reason_codes": [code.value for code in case.expectations.acceptable_reason_codes],
        "evidence_refs": list(case.expectations.decisive_record_ids),
        "explanation": "Matches.",
        "discrepancies": [{"record_id": record, "field": "/record_id", "evidence_value": "x"}],
    }
    validated = validate_response(json.dumps(reply), candidate_input)
    assert validated.outcome is Outcome.PERMIT
    assert any("not one the policy compares" in gap for gap in support_gaps(validated, case))


def test_contradictory_codes_are_unsupported_even_with_the_right_discrepancy() -> None:
    validated = _v2_finding(
        [_decisive().model_dump(mode="json")],
        reason_codes=["proposal_outside_approved_parameters", "proposal_matches_active_approval"],
    )
    gaps = support_gaps(validated, _v2_case())
    assert any("contradict the decision deny" in g for g in gaps), gaps
