"""The control path on corpus v0.3: the platform holds the governance state the policy gates on.

Requester, environment and risk tier, approver scopes, the change calendar, delegations and
break-glass declarations become platform records, so the boundaries enforce policy
`rtb-narrow-approval-v3` from the platform, not from the case. Expectations come from the authored
answer keys and outcomes from the protected observer.
"""

from __future__ import annotations

import asyncio
from functools import cache

import pytest

from trustbench.rtb.boundaries import boundary_factory
from trustbench.rtb.control._audit import evaluate_boundary
from trustbench.rtb.control._cases import (
    UNRECONCILED_SUFFIX,
    ControlScenario,
    ExpectedEffect,
    control_scenarios,
    seed_from_case,
)
from trustbench.rtb.control._grading import ControlOutcome
from trustbench.rtb.corpus import load_corpus
from trustbench.rtb.corpus._load import builtin_corpus_root
from trustbench.rtb.corpus._models import Decision
from trustbench.rtb.platform import ControlRequest, PlatformSeed, SimulatedPlatform
from trustbench.rtb.policy.narrow_v2._models import ResourceStateRecordV2
from trustbench.rtb.policy.narrow_v3._models import (
    ApprovalRecordV3,
    BreakGlassRecord,
    CaseV3,
    DelegationRecord,
    FreezeWindowRecord,
    ReasonCodeV3,
)

ROOT = builtin_corpus_root("v0.3")


@cache
def _cases() -> list[CaseV3]:
    return [c for c in load_corpus(ROOT).cases if isinstance(c, CaseV3)]


@cache
def _scenarios() -> tuple[ControlScenario, ...]:
    group = sorted({c.group for c in _cases()})[0]
    return tuple(control_scenarios([c for c in _cases() if c.group == group], seed=3))


def _request(case: CaseV3) -> ControlRequest:
    return ControlRequest(
        request_id="req-v3-test",
        operation=case.proposal.operation,
        target=case.proposal.target,
        parameters=dict(case.proposal.parameters),
        resource_revision=case.proposal.resource_revision,
    )


def _authorize(name: str, seed: PlatformSeed, case: CaseV3) -> tuple[Decision, str]:
    platform = SimulatedPlatform("trial-v3", seed)
    answer = asyncio.run(boundary_factory(name)().authorize(_request(case), platform.view))
    return answer.decision, answer.reason_code


@pytest.mark.parametrize("name", ["reference", "cedar"])
def test_v0_3_reference_and_cedar_boundaries_meet_every_authored_expectation(name: str) -> None:
    scenarios = _scenarios()
    evaluation = asyncio.run(evaluate_boundary(list(scenarios), boundary_factory(name)))
    assert evaluation.counts.prohibited_trials > 0 and evaluation.counts.permitted_trials > 0
    for scenario, grade in zip(scenarios, evaluation.grades, strict=True):
        if scenario.expected_effect == ExpectedEffect.MUST_NOT_TAKE_EFFECT:
            assert grade.outcome == ControlOutcome.PREVENTED, scenario.scenario_id
        elif scenario.path.endswith(UNRECONCILED_SUFFIX):
            assert grade.outcome == ControlOutcome.UNRESOLVED, scenario.scenario_id
        else:
            assert grade.outcome == ControlOutcome.PERMITTED_COMPLETED, scenario.scenario_id


def test_v0_3_platform_carries_requester_classification_calendar_delegations_and_glass() -> None:
    case = next(
        c
        for c in _cases()
        if any(isinstance(r, DelegationRecord) for r in c.evidence)
        and any(isinstance(r, BreakGlassRecord) for r in c.evidence)
        and any(isinstance(r, FreezeWindowRecord) for r in c.evidence)
    )
    seed = seed_from_case(case)
    governance = seed.governance
    assert seed.policy_id == "rtb-narrow-approval-v3"
    assert governance.requester == case.proposal.requested_by
    placed = governance.resource_classes[case.proposal.target]
    assert (placed.environment, placed.risk_tier) == (
        case.proposal.environment,
        case.proposal.risk_tier,
    )
    kinds = {"freeze_window": "freeze", "maintenance_window": "maintenance"}
    assert [w.kind for w in governance.calendar] == [
        kinds[r.kind] for r in case.evidence if r.kind in kinds
    ]
    assert len(governance.delegations) == sum(r.kind == "delegation" for r in case.evidence)
    assert len(governance.break_glass) == sum(r.kind == "break_glass" for r in case.evidence)
    # The seed crosses the `http` boundary's wire as JSON: nothing may be lost on the way.
    assert PlatformSeed.model_validate_json(seed.model_dump_json()) == seed
    assert SimulatedPlatform("trial-v3", seed).view.governance == governance


def test_v0_3_approvals_keep_their_co_approvers_on_the_platform() -> None:
    case = next(
        c
        for c in _cases()
        if any(isinstance(r, ApprovalRecordV3) and r.co_approved_by for r in c.evidence)
    )
    listed = SimulatedPlatform("trial-v3", seed_from_case(case)).view.approvals_for(None)
    co = {a.approval_id: a.co_approved_by for a in listed}
    for record in case.evidence:
        if isinstance(record, ApprovalRecordV3):
            assert co[record.approval_id] == record.co_approved_by


def test_platforms_of_earlier_policies_dump_without_governance_or_co_approvers() -> None:
    # v0.1 and v0.2 platforms hold none of it, and their seeds and approval listings read as
    # they did before the records existed (the workflow tools show the agent these dumps).
    for version in ("v0.1", "v0.2"):
        seed = seed_from_case(load_corpus(builtin_corpus_root(version)).cases[0])
        assert "governance" not in seed.model_dump(mode="json")
        assert all("co_approved_by" not in a.model_dump(mode="json") for a in seed.approvals)


@pytest.mark.parametrize("name", ["reference", "cedar"])
def test_v0_3_boundary_reads_the_requester_from_the_platform_not_the_case(name: str) -> None:
    case = next(c for c in _cases() if c.expectations.reference_decision == Decision.PERMIT)
    seed = seed_from_case(case)
    governing = next(
        r
        for r in case.evidence
        if isinstance(r, ApprovalRecordV3) and r.record_id in case.expectations.decisive_record_ids
    )
    assert _authorize(name, seed, case)[0] == Decision.PERMIT
    # The same request, now submitted as the change's own approver: separation of duties.
    governance = seed.governance.model_copy(update={"requester": governing.approved_by})
    decision, reason = _authorize(name, seed.model_copy(update={"governance": governance}), case)
    assert (decision, reason) == (Decision.DENY, ReasonCodeV3.REQUESTER_APPROVED_OWN_CHANGE)


@pytest.mark.parametrize("name", ["reference", "cedar"])
def test_v0_3_unclassified_target_is_never_permitted(name: str) -> None:
    case = next(c for c in _cases() if c.expectations.reference_decision == Decision.PERMIT)
    seed = seed_from_case(case)
    governance = seed.governance.model_copy(update={"resource_classes": {}})
    decision, _ = _authorize(name, seed.model_copy(update={"governance": governance}), case)
    assert decision != Decision.PERMIT


@pytest.mark.parametrize("name", ["reference", "cedar"])
def test_every_v0_3_case_seeded_on_the_platform_gets_its_authored_decision(name: str) -> None:
    # Every group, every twist: an approval re-issued under its id, a target with no, two
    # agreeing or two conflicting current states. The platform must hold what the records say.
    wrong = [
        (case.case_id, decision)
        for case in _cases()
        if (decision := _authorize(name, seed_from_case(case), case)[0])
        != case.expectations.reference_decision
    ]
    assert wrong == []


def _target_revisions(case: CaseV3) -> set[str]:
    return {
        r.revision.strip()
        for r in case.evidence
        if isinstance(r, ResourceStateRecordV2) and r.resource_id == case.proposal.target
    }


def test_v0_3_target_states_that_disagree_are_unreadable_and_states_that_agree_are_one() -> None:
    def states(case: CaseV3) -> int:
        return sum(
            isinstance(r, ResourceStateRecordV2) and r.resource_id == case.proposal.target
            for r in case.evidence
        )

    conflicting = next(c for c in _cases() if len(_target_revisions(c)) > 1)
    agreeing = next(c for c in _cases() if states(c) > 1 and len(_target_revisions(c)) == 1)
    for case, readable in ((conflicting, False), (agreeing, True)):
        seeded = [
            r for r in seed_from_case(case).resources if r.resource_id == case.proposal.target
        ]
        assert [r.state_readable for r in seeded] == [readable], case.case_id
        view = SimulatedPlatform("trial-v3", seed_from_case(case)).view
        assert (view.resource(case.proposal.target) is not None) == readable
