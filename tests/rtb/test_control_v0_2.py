"""The control path on corpus v0.2: boundaries enforce policy `rtb-narrow-approval-v2` live.

Expectations come from the authored answer keys and outcomes from the protected observer; no
test asks a boundary what is right.
"""

from __future__ import annotations

import asyncio
from functools import cache
from pathlib import Path

import pytest
from aiohttp import web

import trustbench.rtb.corpus as corpus_package
from trustbench.rtb._harness_audit import run_harness_audit
from trustbench.rtb.boundaries import (
    HttpBoundary,
    HttpEnvironment,
    boundary_factory,
    reference_service_app,
)
from trustbench.rtb.control._audit import BoundaryEvaluation, evaluate_boundary
from trustbench.rtb.control._cases import (
    UNRECONCILED_SUFFIX,
    ControlScenario,
    ExpectedEffect,
    control_scenarios,
    seed_from_case,
)
from trustbench.rtb.control._grading import ControlOutcome
from trustbench.rtb.corpus import load_corpus
from trustbench.rtb.corpus._models import Decision
from trustbench.rtb.platform import ControlRequest, SimulatedPlatform
from trustbench.rtb.policy.narrow_v2._models import (
    ApprovalRecordV2,
    CaseV2,
    PolicyRecordV2,
    ReasonCodeV2,
    RevocationRecord,
)

V0_2 = Path(corpus_package.__file__).parent / "v0.2"
GROUP = "backup_retention"
"""One domain group keeps the run fast (direct scenarios plus one fault case per fault type)."""


@cache
def _cases() -> list[CaseV2]:
    return [c for c in load_corpus(V0_2).cases if isinstance(c, CaseV2)]


@cache
def _scenarios() -> tuple[ControlScenario, ...]:
    return tuple(control_scenarios([c for c in _cases() if c.group == GROUP], seed=3))


def _evaluate(name: str, scenarios: tuple[ControlScenario, ...]) -> BoundaryEvaluation:
    return asyncio.run(evaluate_boundary(list(scenarios), boundary_factory(name)))


def _request(case: CaseV2) -> ControlRequest:
    return ControlRequest(
        request_id="req-v2-test",
        operation=case.proposal.operation,
        target=case.proposal.target,
        parameters=dict(case.proposal.parameters),
        resource_revision=case.proposal.resource_revision,
    )


@pytest.mark.parametrize("name", ["reference", "cedar"])
def test_v0_2_reference_and_cedar_boundaries_meet_every_authored_expectation(name: str) -> None:
    scenarios = _scenarios()
    assert len({s.path for s in scenarios}) >= 7, "direct plus every fault path must be present"
    evaluation = _evaluate(name, scenarios)
    counts = evaluation.counts
    assert counts.prohibited_trials > 0 and counts.permitted_trials > 0
    assert counts.prohibited_confirmed == 0 and counts.prohibited_unresolved == 0
    for scenario, grade in zip(scenarios, evaluation.grades, strict=True):
        if scenario.expected_effect == ExpectedEffect.MUST_NOT_TAKE_EFFECT:
            assert grade.outcome == ControlOutcome.PREVENTED, scenario.scenario_id
        elif scenario.path.endswith(UNRECONCILED_SUFFIX):
            assert grade.outcome == ControlOutcome.UNRESOLVED, scenario.scenario_id
        else:
            assert grade.outcome == ControlOutcome.PERMITTED_COMPLETED, scenario.scenario_id


def test_v0_2_known_bad_boundaries_are_caught_by_their_fault_scenarios() -> None:
    aimed = [s for s in _scenarios() if s.known_bad_boundary]
    assert {s.known_bad_boundary for s in aimed} >= {
        "ignores-expiry",
        "authorization-time-only",
        "retry-without-idempotency",
        "trusts-recovered-checkpoint",
        "trusts-resource-labels",
        "fail-open-when-approval-service-unavailable",
    }
    for scenario in aimed:
        grade = _evaluate(scenario.known_bad_boundary or "", (scenario,)).grades[0]
        assert grade.outcome == ControlOutcome.PROHIBITED_EFFECT, scenario.scenario_id


def test_v0_2_unchecked_boundary_shows_every_prohibited_direct_effect() -> None:
    direct = tuple(s for s in _scenarios() if s.path == "direct")
    evaluation = _evaluate("unchecked", direct)
    must_not = [s for s in direct if s.expected_effect == ExpectedEffect.MUST_NOT_TAKE_EFFECT]
    assert evaluation.counts.prohibited_confirmed == len(must_not) > 0


def test_v0_2_platform_carries_approvers_revocations_and_starts_at_as_of() -> None:
    case = next(c for c in _cases() if any(isinstance(r, RevocationRecord) for r in c.evidence))
    seed = seed_from_case(case)
    assert seed.policy_id == "rtb-narrow-approval-v2"
    assert seed.start_time.isoformat().replace("+00:00", "Z") == case.as_of
    approvers = [
        n for r in case.evidence if isinstance(r, PolicyRecordV2) for n in r.authorised_approvers
    ]
    assert seed.authorised_approvers == approvers
    revoked = {r.revokes for r in case.evidence if isinstance(r, RevocationRecord)}
    assert {r.approval_id for r in seed.revocations} == revoked
    issued_by = {a.approval_id: a.approved_by for a in seed.approvals}
    for record in case.evidence:
        if isinstance(record, ApprovalRecordV2):
            assert issued_by[record.approval_id] == record.approved_by


def _permit_case_with_expiry() -> tuple[CaseV2, ApprovalRecordV2]:
    for case in _cases():
        if case.expectations.reference_decision != Decision.PERMIT:
            continue
        decisive = set(case.expectations.decisive_record_ids)
        for r in case.evidence:
            if isinstance(r, ApprovalRecordV2) and r.record_id in decisive and r.expires_at:
                return case, r
    raise AssertionError("corpus v0.2 has no permit case with an expiring decisive approval")


@pytest.mark.parametrize("name", ["reference", "cedar"])
def test_v0_2_boundary_judges_expiry_at_the_platform_clock_not_the_authored_as_of(
    name: str,
) -> None:
    case, approval = _permit_case_with_expiry()
    platform = SimulatedPlatform("trial-expiry", seed_from_case(case))
    boundary = boundary_factory(name)()
    before = asyncio.run(boundary.authorize(_request(case), platform.view))
    assert before.decision == Decision.PERMIT
    expires = seed_from_case(case).approvals
    expiry = next(a.expires_at for a in expires if a.approval_id == approval.approval_id)
    assert expiry is not None
    platform.faults.advance_clock((expiry - platform.view.now()).total_seconds() + 1)
    after = asyncio.run(boundary.authorize(_request(case), platform.view))
    assert after.decision == Decision.DENY
    assert after.reason_code == ReasonCodeV2.APPROVAL_EXPIRED


@pytest.mark.parametrize("name", ["reference", "cedar"])
def test_v0_2_platform_without_authorised_approvers_never_permits(name: str) -> None:
    case, _ = _permit_case_with_expiry()
    seed = seed_from_case(case).model_copy(update={"authorised_approvers": []})
    platform = SimulatedPlatform("trial-no-approvers", seed)
    answer = asyncio.run(boundary_factory(name)().authorize(_request(case), platform.view))
    assert answer.decision == Decision.DENY
    assert answer.reason_code == ReasonCodeV2.APPROVER_NOT_AUTHORISED


@pytest.mark.parametrize("name", ["reference", "cedar"])
def test_platform_policy_no_boundary_implements_fails_closed(name: str) -> None:
    case, _ = _permit_case_with_expiry()
    seed = seed_from_case(case).model_copy(update={"policy_id": "rtb-narrow-approval-v9"})
    platform = SimulatedPlatform("trial-unknown-policy", seed)
    answer = asyncio.run(boundary_factory(name)().authorize(_request(case), platform.view))
    assert answer.decision == Decision.HOLD


def test_v0_2_target_without_authored_state_is_unreadable_to_the_boundary_but_observed() -> None:
    case = next(
        c
        for c in _cases()
        if c.expectations.reference_decision == Decision.HOLD
        and c.variant == "evidence_gap"
        and all(getattr(r, "resource_id", None) != c.proposal.target for r in c.evidence)
    )
    platform = SimulatedPlatform("trial-gap", seed_from_case(case))
    assert platform.view.resource(case.proposal.target) is None
    snapshot = platform.observer_reader().entries()[0].snapshot or {}
    assert snapshot[case.proposal.target] is not None


def test_harness_audit_on_v0_2_runs_the_control_checks_and_only_workflow_is_not_run() -> None:
    rows = run_harness_audit(load_corpus(V0_2))
    control = [row for row in rows if row.track == "control"]
    assert control and not any(row.not_run for row in control)
    assert all(row.passed for row in control), [r.detail for r in control if not r.passed]
    assert any("known-bad" in row.detail for row in control)
    assert {row.track for row in rows if row.not_run} == {"workflow"}


def test_v0_2_http_boundary_carries_the_v2_platform_state_to_a_local_service() -> None:
    # The seed (approvers, revocations, policy id, as_of clock) crosses the wire as JSON; the
    # service's reference boundary must then meet the authored expectations as it does locally.
    scenarios = [s for s in _scenarios() if not s.path.endswith(UNRECONCILED_SUFFIX)]

    async def run() -> BoundaryEvaluation:
        runner = web.AppRunner(reference_service_app())
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        url = f"http://127.0.0.1:{port}"
        try:
            return await evaluate_boundary(
                scenarios, lambda: HttpBoundary(url), HttpEnvironment(url)
            )
        finally:
            await runner.cleanup()

    evaluation = asyncio.run(run())
    for scenario, grade in zip(scenarios, evaluation.grades, strict=True):
        expected = (
            ControlOutcome.PREVENTED
            if scenario.expected_effect == ExpectedEffect.MUST_NOT_TAKE_EFFECT
            else ControlOutcome.PERMITTED_COMPLETED
        )
        assert grade.outcome == expected, scenario.scenario_id
