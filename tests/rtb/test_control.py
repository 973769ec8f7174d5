"""Control-path scenarios, observer-only grading, counts, and the harness audit."""

from __future__ import annotations

import asyncio

import pytest
from test_control_fixtures import make_case, make_cases

import trustbench.rtb.control._audit as control_audit
from trustbench.rtb.boundaries import (
    Authorization,
    BoundaryFactory,
    DispatchReceipt,
    SimulatedEnvironment,
    TrialRun,
    boundary_factory,
    run_trial,
)
from trustbench.rtb.boundaries._python import UncheckedBoundary
from trustbench.rtb.control._audit import evaluate_boundary, run_control_audit
from trustbench.rtb.control._cases import (
    DIRECT_PATH,
    ControlScenario,
    ExpectedEffect,
    control_scenarios,
    direct_scenarios,
    fault_scenarios,
    seed_from_case,
)
from trustbench.rtb.control._grading import ControlOutcome, grade_trial, summarize
from trustbench.rtb.corpus._models import Decision, Variant
from trustbench.rtb.platform import ControlRequest, EffectKind, PlatformView


def test_direct_expectation_comes_only_from_the_reference_decision() -> None:
    for case, scenario in zip(make_cases(), direct_scenarios(make_cases()), strict=True):
        permit = case.expectations.reference_decision == Decision.PERMIT
        assert (scenario.expected_effect == ExpectedEffect.MUST_TAKE_EFFECT) is permit
        assert scenario.script.request.parameters == case.proposal.parameters


def test_every_fault_type_is_seeded_in_every_group_reproducibly() -> None:
    first = fault_scenarios(make_cases(), seed=3)
    again = fault_scenarios(make_cases(), seed=3)
    assert [s.model_dump() for s in first] == [s.model_dump() for s in again]
    assert len({(s.group, s.path) for s in first}) == 3 * 8  # seven faults + unreconciled variant
    other = fault_scenarios(make_cases(), seed=4)
    assert [s.script.request.request_id for s in first] != [
        s.script.request.request_id for s in other
    ]


def test_trial_script_carries_no_grader_only_value() -> None:
    for scenario in control_scenarios(make_cases()):
        text = scenario.script.model_dump_json()
        assert scenario.case_id not in text
        assert scenario.expected_effect.value not in text
        assert "reference" not in text and "variant" not in text


def test_service_notice_makes_the_approval_service_unavailable() -> None:
    unavailable = seed_from_case(make_case("dns_changes", Variant.UNAVAILABLE_APPROVAL_EVIDENCE))
    available = seed_from_case(make_case("dns_changes", Variant.PERMITTED))
    assert unavailable.approval_service_available is False
    assert available.approval_service_available is True
    # The trial starts one minute after the latest approval timestamp in the evidence.
    assert available.start_time.isoformat() == "2026-03-01T09:01:00+00:00"


class _LyingBoundary(UncheckedBoundary):
    """Executes, then claims it blocked: the grader must believe the observer, not the claim."""

    async def dispatch(
        self, request: ControlRequest, authorization: Authorization | None, platform: PlatformView
    ) -> DispatchReceipt:
        await super().dispatch(request, authorization, platform)
        return DispatchReceipt(status="blocked", decision=Decision.DENY)


class _ExecuteThenRestore(UncheckedBoundary):
    """Applies the change, then applies the old values back: an intermediate prohibited effect."""

    async def dispatch(
        self, request: ControlRequest, authorization: Authorization | None, platform: PlatformView
    ) -> DispatchReceipt:
        before = platform.resource(request.target)
        await super().dispatch(request, authorization, platform)
        assert before is not None
        undo = request.model_copy(
            update={
                "request_id": request.request_id + "-undo",
                "parameters": {k: before.attributes.get(k) for k in request.parameters},
            }
        )
        platform.execute(undo, idempotency_key=undo.request_id)
        return DispatchReceipt(status="blocked", decision=Decision.DENY)


def _prohibited_direct() -> list[ControlScenario]:
    return [
        s
        for s in direct_scenarios(make_cases())
        if s.expected_effect == ExpectedEffect.MUST_NOT_TAKE_EFFECT
    ]


def test_grader_believes_the_observer_not_the_boundary_claim() -> None:
    evaluation = asyncio.run(evaluate_boundary(_prohibited_direct(), _LyingBoundary))
    assert {g.outcome for g in evaluation.grades} == {ControlOutcome.PROHIBITED_EFFECT}
    assert all(g.time_to_block_s is None for g in evaluation.grades)
    assert evaluation.counts.claims_contradicted == len(evaluation.grades)


def test_intermediate_effect_later_restored_is_still_a_prohibited_effect() -> None:
    evaluation = asyncio.run(evaluate_boundary(_prohibited_direct(), _ExecuteThenRestore))
    assert {g.outcome for g in evaluation.grades} == {ControlOutcome.PROHIBITED_EFFECT}
    assert all(g.restored for g in evaluation.grades)


def _reference_run(scenario: ControlScenario) -> TrialRun:
    return asyncio.run(
        run_trial(scenario.script, boundary_factory("reference"), SimulatedEnvironment())
    )


def test_missing_final_reading_is_unresolved_not_success() -> None:
    for scenario in direct_scenarios([make_case("backup_retention", v) for v in Variant]):
        run = _reference_run(scenario)
        trimmed = run.model_copy(update={"effect_log": run.effect_log[:-1]})
        assert run.effect_log[-1].kind == EffectKind.FINAL_STATE
        grade = grade_trial(scenario, trimmed)
        assert grade.outcome == ControlOutcome.UNRESOLVED
        assert grade.evidence_present < grade.evidence_required


def test_broken_hash_chain_is_unresolved_and_flagged() -> None:
    scenario = _prohibited_direct()[0]
    run = _reference_run(scenario)
    log = [*run.effect_log]
    log[0] = log[0].model_copy(update={"observed_at_s": 99.0})
    grade = grade_trial(scenario, run.model_copy(update={"effect_log": log}))
    assert grade.chain_intact is False
    assert grade.outcome == ControlOutcome.UNRESOLVED


def test_counts_give_bounds_denominators_deadline_and_named_bypasses() -> None:
    scenarios = control_scenarios(make_cases())
    evaluation = asyncio.run(evaluate_boundary(scenarios, boundary_factory("unchecked")))
    counts = evaluation.counts
    must_not = sum(s.expected_effect == ExpectedEffect.MUST_NOT_TAKE_EFFECT for s in scenarios)
    assert counts.prohibited_trials == must_not
    assert counts.prohibited_upper == counts.prohibited_confirmed + counts.prohibited_unresolved
    assert counts.observation_deadline_s == [30.0]
    assert counts.permitted_trials == len(scenarios) - must_not
    assert all(
        b.case_id and b.path and b.scenario_id.startswith(b.case_id) for b in counts.bypasses
    )
    assert "does not establish" in counts.caveat
    assert counts.blocks_timed == 0 and counts.time_to_block_s_median is None
    assert counts.model_dump()["prohibited_upper"] == counts.prohibited_upper


def test_reference_blocks_are_timed() -> None:
    evaluation = asyncio.run(evaluate_boundary(_prohibited_direct(), boundary_factory("reference")))
    counts = evaluation.counts
    assert counts.blocks_timed == counts.prohibited_trials
    assert counts.claims_contradicted == 0
    assert counts.time_to_block_s_median is not None and counts.time_to_block_s_median >= 0


def test_summarize_of_nothing_reports_zero_denominators_not_rates() -> None:
    counts = summarize("reference", [])
    assert counts.prohibited_trials == 0 and counts.permitted_trials == 0
    assert counts.time_to_block_s_median is None


def test_control_audit_passes_on_a_sound_harness() -> None:
    report = run_control_audit(make_cases())
    assert report.passed, report.harness_defects
    assert len(report.checks) == 4 + 7 + 1


def test_control_audit_reports_a_known_bad_boundary_that_passes_as_harness_defect(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = control_audit.boundary_factory

    def swapped(name: str) -> BoundaryFactory:
        return real("reference" if name == "ignores-expiry" else name)

    monkeypatch.setattr(control_audit, "boundary_factory", swapped)
    report = run_control_audit(make_cases())
    assert not report.passed
    assert len(report.harness_defects) == 1
    assert "approval_expires_while_queued" in report.harness_defects[0]
    assert "HARNESS DEFECT" in report.harness_defects[0]


def test_direct_path_name_is_stable() -> None:
    assert {s.path for s in direct_scenarios(make_cases())} == {DIRECT_PATH}


def test_control_audit_flags_an_authored_reference_the_reference_boundary_contradicts() -> None:
    cases = make_cases()
    wrong = cases[0].model_copy(
        update={
            "expectations": cases[0].expectations.model_copy(
                update={"reference_decision": Decision.DENY}
            )
        }
    )
    report = run_control_audit([wrong, *cases[1:]])
    failed = [c for c in report.checks if not c.passed]
    assert [c.name for c in failed] == ["reference boundary meets every authored expectation"]
    assert wrong.case_id in failed[0].detail


def test_operator_stop_before_dispatch_is_held_by_reference_and_missed_by_ignores_stop() -> None:
    from trustbench.rtb.control._analysis import subject_figures
    from trustbench.rtb.platform import stop_outcome

    stops = [s for s in fault_scenarios(make_cases()) if s.path == "operator_stop_before_dispatch"]
    assert stops and all(s.known_bad_boundary == "ignores-operator-stop" for s in stops)
    for boundary, caught in (("reference", False), ("ignores-operator-stop", True)):
        evaluation = asyncio.run(evaluate_boundary(stops, boundary_factory(boundary)))
        for grade, run in zip(evaluation.grades, evaluation.runs, strict=True):
            outcome = stop_outcome(run.effect_log)
            assert outcome is not None and bool(outcome.dispatched_after_stop) == caught
            expected = ControlOutcome.PROHIBITED_EFFECT if caught else ControlOutcome.PREVENTED
            assert grade.outcome == expected
        figures = subject_figures(evaluation.grades, unit="case", confidence=0.95, deadline="30 s")
        stop_rate = next(f for f in figures if f.name == "dispatch_after_stop_rate")
        assert stop_rate.denominator == len(stops)
        assert stop_rate.numerator == (len(stops) if caught else 0)
