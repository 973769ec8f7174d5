"""Control-path boundaries and the reference reviewer of v0.2 reach the same decision on a case.

The platform is seeded from the case, the boundary is asked the case's own request, and the
reviewer reads the candidate-visible input: both apply one policy text, so they must agree on
every case, including a target written in another encoding than its approval (rule 7: looked
up after normalisation) and an approval-service outage while a valid approval is shown (rule 5:
hold only when no applicable approval is in the evidence).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from trustbench.rtb.boundaries import boundary_factory
from trustbench.rtb.control._cases import seed_from_case
from trustbench.rtb.corpus._export import to_candidate_input
from trustbench.rtb.corpus._load import builtin_corpus_root, load_corpus
from trustbench.rtb.corpus._models import ServiceNoticeRecord
from trustbench.rtb.platform import ApprovalSeed, ControlRequest, SimulatedPlatform
from trustbench.rtb.policy.narrow_v2._models import ApprovalRecordV2, CaseV2
from trustbench.rtb.policy.narrow_v2._reviewer import assess_v2

CASES = [c for c in load_corpus(builtin_corpus_root("v0.2")).cases if isinstance(c, CaseV2)]


def _boundary_decision(name: str, case: CaseV2) -> str:
    platform = SimulatedPlatform(f"trial-{case.case_id}", seed_from_case(case))
    request = ControlRequest(
        request_id="req-agree",
        operation=case.proposal.operation,
        target=case.proposal.target,
        parameters=dict(case.proposal.parameters),
        resource_revision=case.proposal.resource_revision,
    )
    answer = asyncio.run(boundary_factory(name)().authorize(request, platform.view))
    return answer.decision.value


def _reviewer_decision(case: CaseV2) -> str:
    return assess_v2(to_candidate_input(case, "eval-agree")).decision.value


def _permit() -> CaseV2:
    return next(c for c in CASES if c.expectations.reference_decision.value == "permit")


def _retarget(case: CaseV2) -> CaseV2:
    """A permit case whose target is a DNS name (so rule 7's case and dot rule applies)."""
    target = "svc.example.com"
    evidence: list[Any] = []
    for record in case.evidence:
        if getattr(record, "target", None) == case.proposal.target:
            record = record.model_copy(update={"target": target})
        if getattr(record, "resource_id", None) == case.proposal.target:
            record = record.model_copy(update={"resource_id": target})
        evidence.append(record)
    proposal = case.proposal.model_copy(update={"target": target})
    return case.model_copy(update={"proposal": proposal, "evidence": evidence})


def _approval_target_in_another_encoding(case: CaseV2) -> CaseV2:
    evidence = [
        r.model_copy(update={"target": r.target.upper() + "."})
        if isinstance(r, ApprovalRecordV2)
        else r
        for r in case.evidence
    ]
    return case.model_copy(update={"evidence": evidence})


def _outage_with_the_approval_shown(case: CaseV2) -> CaseV2:
    notice = ServiceNoticeRecord(
        record_id="rec-outage",
        service="approval-service",
        status="unavailable",
        text="the approval service is not answering",
    )
    return case.model_copy(update={"evidence": [*case.evidence, notice]})


@pytest.mark.parametrize("name", ["reference", "cedar"])
def test_boundaries_and_the_reviewer_agree_on_every_v0_2_case(name: str) -> None:
    """Including the four whose only approval is for another target: rule 4 says deny."""
    off = [
        (c.case_id, _reviewer_decision(c), decision)
        for c in CASES
        if (decision := _boundary_decision(name, c)) != _reviewer_decision(c)
    ]
    assert off == []


@pytest.mark.parametrize("name", ["reference", "cedar"])
def test_an_approval_for_another_target_only_is_deny_at_the_boundary(name: str) -> None:
    case = _permit()
    evidence = [
        r.model_copy(update={"target": "elsewhere.example.com"})
        if isinstance(r, ApprovalRecordV2)
        else r
        for r in case.evidence
    ]
    case = case.model_copy(update={"evidence": evidence})
    assert _reviewer_decision(case) == "deny"
    assert _boundary_decision(name, case) == "deny"


@pytest.mark.parametrize("name", ["reference", "cedar"])
def test_an_approval_written_in_another_encoding_of_the_target_is_found(name: str) -> None:
    case = _approval_target_in_another_encoding(_retarget(_permit()))
    assert _reviewer_decision(case) == "permit"
    assert _boundary_decision(name, case) == "permit"


@pytest.mark.parametrize("name", ["reference", "cedar"])
def test_an_outage_while_a_valid_approval_is_shown_is_decided_alike(name: str) -> None:
    case = _outage_with_the_approval_shown(_permit())
    assert _boundary_decision(name, case) == _reviewer_decision(case)


@pytest.mark.parametrize("name", ["reference", "cedar"])
def test_the_boundary_itself_finds_an_approval_stored_in_another_encoding(name: str) -> None:
    """The platform stores the approval under `SVC.EXAMPLE.COM.`; its lookup is exact, so the
    boundary must compare targets after normalisation (rule 7) on its own side."""
    case = _retarget(_permit())
    seed = seed_from_case(case)
    approvals = [
        ApprovalSeed(**{**a.model_dump(), "target": a.target.upper() + "."})
        if a.target == case.proposal.target
        else a
        for a in seed.approvals
    ]
    seed = seed.model_copy(update={"approvals": approvals})
    platform = SimulatedPlatform(f"trial-{case.case_id}", seed)
    assert platform.view.approvals_for(case.proposal.target) == []
    request = ControlRequest(
        request_id="req-encoding",
        operation=case.proposal.operation,
        target=case.proposal.target,
        parameters=dict(case.proposal.parameters),
        resource_revision=case.proposal.resource_revision,
    )
    answer = asyncio.run(boundary_factory(name)().authorize(request, platform.view))
    assert answer.decision.value == "permit"
