"""Run boundaries over control scenarios, and qualify the control-path harness itself.

`evaluate_boundary` runs and grades a boundary over scenarios. `run_control_audit` is the
harness qualification behind `trustbench rtb audit` (spec: "Audit the Harness Before Trusting Its
Results"). These checks test the measurement path, not any candidate:

1. an injected target-state mismatch is reported by the observer and by the grader;
2. removing a required event lowers evidence completeness and is not read as success;
3. `unchecked` shows a prohibited effect on every prohibited direct request;
4. `review-gated` shows bypasses on direct requests (even with a correct reviewer);
5. every fault scenario catches its known-bad boundary. A known-bad boundary that passes is
   reported as a harness defect;
6. the `reference` boundary meets every authored expectation (only the lost-response variant
   reconciled after the deadline may stay unresolved). A failure means the authored reference
   decision, the case-to-platform mapping, or the reference policy is wrong: the assessment has
   contradicted the implementation, and someone must find out which before trusting results.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from pydantic import BaseModel

from trustbench._docstrings import documented
from trustbench.rtb.boundaries import (
    BoundaryFactory,
    InjectAction,
    SimulatedEnvironment,
    TargetEnvironment,
    TrialRun,
    boundary_factory,
    run_trial,
)
from trustbench.rtb.control._cases import (
    DIRECT_PATH,
    UNRECONCILED_SUFFIX,
    ControlScenario,
    ExpectedEffect,
    control_scenarios,
)
from trustbench.rtb.control._grading import (
    ControlCounts,
    ControlOutcome,
    TrialGrade,
    grade_trial,
    summarize,
)
from trustbench.rtb.platform import EffectKind, FaultType
from trustbench.rtb.policy._protocol import AuthoredCase


class _Frozen(BaseModel):
    model_config = documented(extra="forbid", frozen=True)


class BoundaryEvaluation(_Frozen):
    """Runs, grades and counts for one boundary."""

    runs: list[TrialRun]
    """Every trial run, in scenario order."""
    grades: list[TrialGrade]
    """Every trial grade, in scenario order."""
    counts: ControlCounts
    """Summary counts."""


async def evaluate_boundary(
    scenarios: Sequence[ControlScenario],
    factory: BoundaryFactory,
    environment: TargetEnvironment | None = None,
) -> BoundaryEvaluation:
    """Run and grade one boundary over `scenarios`, one fresh trial each.

    Args:
        scenarios: Control scenarios.
        factory: Makes fresh boundary instances.
        environment: Where trials run (default: the local simulated platform).

    Returns:
        Runs, grades and counts.
    """
    environment = environment or SimulatedEnvironment()
    runs: list[TrialRun] = []
    grades: list[TrialGrade] = []
    for scenario in scenarios:
        run = await run_trial(scenario.script, factory, environment)
        runs.append(run)
        grades.append(grade_trial(scenario, run))
    name = runs[0].boundary if runs else factory().name
    return BoundaryEvaluation(runs=runs, grades=grades, counts=summarize(name, grades))


class AuditCheck(_Frozen):
    """One harness-qualification check."""

    name: str
    """Short name of the check."""
    passed: bool
    """Whether the harness behaved as required."""
    detail: str
    """What was measured."""


class ControlAuditReport(_Frozen):
    """Result of qualifying the control-path harness."""

    checks: list[AuditCheck]
    """Every check, in order."""
    harness_defects: list[str]
    """Failed checks, in words (a known-bad boundary that passed is listed here)."""

    @property
    def passed(self) -> bool:
        """True when every check passed."""
        return all(check.passed for check in self.checks)


async def arun_control_audit(cases: Sequence[AuthoredCase], *, seed: int = 0) -> ControlAuditReport:
    """Async form of `run_control_audit`."""
    scenarios = control_scenarios(list(cases), seed=seed)
    direct = [s for s in scenarios if s.path == DIRECT_PATH]
    checks = [
        await _mismatch_check(direct),
        await _completeness_check(direct),
        await _unchecked_check(direct),
        await _review_gated_check(direct),
        *await _known_bad_checks(scenarios),
        await _reference_check(scenarios),
    ]
    return ControlAuditReport(
        checks=checks,
        harness_defects=[f"{c.name}: {c.detail}" for c in checks if not c.passed],
    )


def run_control_audit(cases: Sequence[AuthoredCase], *, seed: int = 0) -> ControlAuditReport:
    """Qualify the control-path harness on `cases` (see module docstring for the checks).

    Args:
        cases: Corpus cases (any corpus).
        seed: Scenario seed.

    Returns:
        The audit report; `passed` is False when any check failed.
    """
    return asyncio.run(arun_control_audit(cases, seed=seed))


def _first(scenarios: Sequence[ControlScenario], expected: ExpectedEffect) -> ControlScenario:
    return next(s for s in scenarios if s.expected_effect == expected)


async def _mismatch_check(direct: Sequence[ControlScenario]) -> AuditCheck:
    name = "injected target-state mismatch is reported"
    candidates = [s for s in direct if s.expected_effect == ExpectedEffect.MUST_NOT_TAKE_EFFECT]
    if not candidates:
        return AuditCheck(name=name, passed=False, detail="no prohibited direct scenario to use")
    scenario = candidates[0]
    tamper = InjectAction(
        action="tamper_resource",
        target=scenario.script.request.target,
        attributes={"audit_injected_mismatch": True},
    )
    run = await run_trial(
        scenario.script,
        boundary_factory("reference"),
        SimulatedEnvironment(),
        after_dispatch=[tamper],
    )
    observed = any(e.kind == EffectKind.STATE_MISMATCH for e in run.effect_log)
    grade = grade_trial(scenario, run)
    passed = observed and grade.state_mismatch and grade.outcome != ControlOutcome.PREVENTED
    return AuditCheck(
        name=name,
        passed=passed,
        detail=f"{scenario.scenario_id}: observer entry={observed}, "
        f"grader state_mismatch={grade.state_mismatch}, outcome={grade.outcome.value}",
    )


async def _completeness_check(direct: Sequence[ControlScenario]) -> AuditCheck:
    name = "removing a required event lowers evidence completeness"
    scenario = _first(direct, ExpectedEffect.MUST_NOT_TAKE_EFFECT)
    run = await run_trial(scenario.script, boundary_factory("reference"), SimulatedEnvironment())
    full = grade_trial(scenario, run)
    # Drop the final state reading: the last entry, so the remaining chain still verifies.
    trimmed = run.model_copy(
        update={"effect_log": [e for e in run.effect_log if e.kind != EffectKind.FINAL_STATE]}
    )
    cut = grade_trial(scenario, trimmed)
    passed = cut.evidence_present < full.evidence_present and cut.outcome not in (
        ControlOutcome.PREVENTED,
        ControlOutcome.PERMITTED_COMPLETED,
    )
    return AuditCheck(
        name=name,
        passed=passed,
        detail=f"{scenario.scenario_id}: evidence {full.evidence_present}/{full.evidence_required}"
        f" -> {cut.evidence_present}/{cut.evidence_required}; outcome {full.outcome.value} -> "
        f"{cut.outcome.value}",
    )


async def _unchecked_check(direct: Sequence[ControlScenario]) -> AuditCheck:
    evaluation = await evaluate_boundary(direct, boundary_factory("unchecked"))
    c = evaluation.counts
    passed = c.prohibited_trials > 0 and c.prohibited_confirmed == c.prohibited_trials
    return AuditCheck(
        name="unchecked shows every prohibited effect",
        passed=passed,
        detail=f"{c.prohibited_confirmed}/{c.prohibited_trials} prohibited direct requests "
        "took effect",
    )


async def _review_gated_check(direct: Sequence[ControlScenario]) -> AuditCheck:
    evaluation = await evaluate_boundary(direct, boundary_factory("review-gated"))
    c = evaluation.counts
    named = ", ".join(b.case_id for b in c.bypasses[:3])
    return AuditCheck(
        name="review-gated shows bypasses on direct requests",
        passed=c.prohibited_confirmed > 0,
        detail=f"{c.prohibited_confirmed}/{c.prohibited_trials} prohibited direct requests "
        f"bypassed the review (e.g. {named})",
    )


async def _known_bad_checks(scenarios: Sequence[ControlScenario]) -> list[AuditCheck]:
    checks = []
    for fault in FaultType:
        aimed = [s for s in scenarios if s.known_bad_boundary and s.path == fault.value]
        name = f"fault {fault.value} catches its known-bad boundary"
        if not aimed:
            checks.append(AuditCheck(name=name, passed=False, detail="no scenario for this fault"))
            continue
        bad = aimed[0].known_bad_boundary or ""
        evaluation = await evaluate_boundary(aimed, boundary_factory(bad))
        caught = [g for g in evaluation.grades if g.outcome == ControlOutcome.PROHIBITED_EFFECT]
        checks.append(
            AuditCheck(
                name=name,
                passed=len(caught) == len(aimed),
                detail=f"known-bad `{bad}` caught in {len(caught)}/{len(aimed)} scenarios"
                + ("" if caught else " (HARNESS DEFECT: a known-bad boundary passed)"),
            )
        )
    return checks


async def _reference_check(scenarios: Sequence[ControlScenario]) -> AuditCheck:
    evaluation = await evaluate_boundary(scenarios, boundary_factory("reference"))
    allowed_unresolved = {s.scenario_id for s in scenarios if s.path.endswith(UNRECONCILED_SUFFIX)}
    good = {ControlOutcome.PREVENTED, ControlOutcome.PERMITTED_COMPLETED}
    off = [
        f"{g.scenario_id}={g.outcome.value}"
        for g in evaluation.grades
        if g.outcome not in good
        and not (g.outcome == ControlOutcome.UNRESOLVED and g.scenario_id in allowed_unresolved)
    ]
    return AuditCheck(
        name="reference boundary meets every authored expectation",
        passed=not off,
        detail=(
            f"{len(evaluation.grades) - len(off)}/{len(evaluation.grades)} scenarios as expected"
            + (
                f"; disagreements (check case, mapping or policy): {', '.join(off[:5])}"
                if off
                else ""
            )
        ),
    )
