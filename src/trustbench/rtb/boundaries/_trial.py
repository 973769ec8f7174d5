"""Run one control-path trial: fresh state, faults at their fixed points, the request, the deadline.

The runner sees the trial *script* (state, request, fault) but never the grader's expectations, so
nothing here can steer an outcome. The boundary receives only the session's view. The effect log
is read after the observation deadline and returned for the grader; the boundary's own answers are
kept as claims, beside it, for diagnosis and for the time from request to block.
"""

from __future__ import annotations

import time
from datetime import timedelta

from pydantic import BaseModel, Field

from trustbench._docstrings import documented
from trustbench.rtb.boundaries._protocol import (
    DEFAULT_ENFORCEMENT,
    Authorization,
    BoundaryFactory,
    DispatchReceipt,
    Enforcement,
    enforcement_of,
)
from trustbench.rtb.boundaries._target import InjectAction, TargetEnvironment
from trustbench.rtb.platform import (
    INJECTION_POINT,
    ControlRequest,
    EffectEntry,
    FaultPlan,
    FaultType,
    PlatformSeed,
)


class _Frozen(BaseModel):
    model_config = documented(extra="forbid", frozen=True)


class TrialScript(_Frozen):
    """What the harness does in one trial. Contains no expectation about the outcome."""

    trial_id: str
    """Unique per trial."""
    seed: PlatformSeed
    """Initial platform state (fresh for every trial)."""
    request: ControlRequest
    """The request presented to the boundary."""
    fault: FaultPlan | None = None
    """The seeded fault, if any."""
    observation_deadline_s: float = Field(gt=0)
    """Simulated seconds after trial start by which the observer must establish the outcome."""


class TrialRun(_Frozen):
    """What happened in one trial: the observer's log plus the boundary's claims."""

    trial_id: str
    """The trial."""
    boundary: str
    """Name of the boundary under test."""
    enforcement: Enforcement = DEFAULT_ENFORCEMENT
    """What the boundary declares it is (`Boundary.enforcement`), recorded with its trials so an
    analysis can tell a candidate's failure from an instrument's without a list of names."""
    environment_strength: str
    """`simulated platform` or `external service <URL>`: what a denial here can establish."""
    fault: FaultType | None
    """The fault injected, if any."""
    injection_point: str | None
    """Where it was injected, in words."""
    observation_deadline_s: float
    """The declared observation deadline."""
    authorization: Authorization | None
    """The boundary's authorization answer (a claim)."""
    receipt: DispatchReceipt | None
    """The boundary's dispatch report (a claim)."""
    boundary_error: str | None
    """An exception the boundary raised, if any (the outcome still comes from the observer)."""
    request_to_response_s: float
    """Wall-clock seconds from presenting the request to the boundary's final answer."""
    effect_log: list[EffectEntry]
    """The protected observer's log, read after the deadline (grader input)."""


def _before_request(script: TrialScript) -> list[InjectAction]:
    plan = script.fault
    if plan is None:
        return []
    match plan.fault:
        case FaultType.APPROVAL_EXPIRES_WHILE_QUEUED:
            expires = script.seed.start_time + timedelta(seconds=plan.expires_after_s or 0.0)
            return [
                InjectAction(
                    action="set_approval_expiry", approval_id=plan.approval_id, expires_at=expires
                )
            ]
        case FaultType.RESPONSE_LOST_AFTER_COMMIT:
            return [
                InjectAction(
                    action="lose_next_response",
                    target=script.request.target,
                    seconds=plan.reconciliation_delay_s,
                )
            ]
        case FaultType.ACTOR_EDITS_METADATA:
            return [
                InjectAction(action="edit_labels", target=script.request.target, labels=plan.labels)
            ]
        case FaultType.APPROVAL_SERVICE_UNAVAILABLE:
            return [InjectAction(action="set_approval_service", available=False)]
    return []


def _between_authorize_and_dispatch(script: TrialScript) -> list[InjectAction]:
    plan = script.fault
    if plan is None:
        return []
    match plan.fault:
        case FaultType.APPROVAL_EXPIRES_WHILE_QUEUED:
            return [InjectAction(action="advance_clock", seconds=plan.queue_delay_s)]
        case FaultType.APPROVAL_REVOKED_BEFORE_DISPATCH | (
            FaultType.CHECKPOINT_REPLAY_AFTER_REVOCATION
        ):
            return [InjectAction(action="revoke_approval", approval_id=plan.approval_id)]
        case FaultType.OPERATOR_STOP_BEFORE_DISPATCH:
            target = script.request.target
            reason = f"operator stop: halt every change to {target} now"
            return [InjectAction(action="operator_stop", target=target, reason=reason)]
    return []


async def run_trial(
    script: TrialScript,
    boundary_factory: BoundaryFactory,
    environment: TargetEnvironment,
    *,
    after_dispatch: list[InjectAction] | None = None,
) -> TrialRun:
    """Run one trial and return its observer log with the boundary's claims.

    Args:
        script: State, request and fault.
        boundary_factory: Makes a fresh boundary (called again after a simulated crash).
        environment: Where the trial runs.
        after_dispatch: Extra harness actions after dispatch (harness qualification only, e.g. an
            out-of-band state change the observer must report).

    Returns:
        The trial's run record: the script's trial id and deadline, the fault type of its fault.
    """
    session = await environment.open_trial(script.trial_id, script.seed)
    try:
        for action in _before_request(script):
            await session.inject(action)
        boundary = boundary_factory()
        name = boundary.name
        enforcement = enforcement_of(boundary)
        authorization: Authorization | None = None
        receipt: DispatchReceipt | None = None
        error: str | None = None
        started = time.perf_counter()
        try:
            authorization = await boundary.authorize(script.request, session.view)
            for action in _between_authorize_and_dispatch(script):
                await session.inject(action)
            if script.fault and script.fault.fault == FaultType.CHECKPOINT_REPLAY_AFTER_REVOCATION:
                checkpoint = authorization.model_dump_json()
                boundary = boundary_factory()  # the process crashed; a new instance recovers
                authorization = Authorization.model_validate_json(checkpoint)
            receipt = await boundary.dispatch(script.request, authorization, session.view)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        elapsed = time.perf_counter() - started
        for action in after_dispatch or []:
            await session.inject(action)
        await session.settle(script.observation_deadline_s)
        log = await session.observer_entries()
        return TrialRun(
            trial_id=script.trial_id,
            observation_deadline_s=script.observation_deadline_s,
            boundary=name,
            enforcement=enforcement,
            environment_strength=session.environment_strength,
            fault=script.fault.fault if script.fault else None,
            injection_point=INJECTION_POINT[script.fault.fault] if script.fault else None,
            authorization=authorization,
            receipt=receipt,
            boundary_error=error,
            request_to_response_s=elapsed,
            effect_log=log,
        )
    finally:
        await session.close()
