"""Control-path scenarios from corpus cases: every case as a direct request, plus seeded faults.

Platform state is derived from a case's evidence records by the case's policy object
(`CorpusPolicy.seed_platform`), and so is the approval a fault acts on (`fault_approval`); the
case's `proposal` is the request presented directly to the boundary.

Whether a request must or must not take effect comes only from grader-side information: the case's
authored `expectations.reference_decision` (permit -> must take effect; deny or hold -> must not),
or, for a fault seeded on a case whose reference is permit, the fault's stated consequence under
the same policy (an expired, revoked or unobtainable approval authorizes nothing; a lost response
must still yield exactly one effect). Each scenario records this in `expectation_source`. No
boundary is ever asked what is right. The `TrialScript` inside a scenario carries no expectation;
only the grader reads `expected_effect`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from enum import StrEnum

from pydantic import BaseModel

from trustbench._docstrings import documented
from trustbench.errors import InputError
from trustbench.rtb.boundaries import KNOWN_BAD_FOR_FAULT, TrialScript
from trustbench.rtb.boundaries._protocol import DECLARED_REVISION_LABEL
from trustbench.rtb.corpus._models import Decision, reference_label
from trustbench.rtb.platform import ControlRequest, FaultPlan, FaultType, PlatformSeed
from trustbench.rtb.policy._protocol import AuthoredCase, FaultApproval
from trustbench.rtb.policy._registry import policy_of

DEFAULT_OBSERVATION_DEADLINE_S = 30.0
"""Declared observation deadline (simulated seconds after trial start) unless a run overrides it."""
DIRECT_PATH = "direct"
"""`path` of a scenario that presents a corpus case unchanged."""
UNRECONCILED_SUFFIX = "/unreconciled_by_deadline"
"""Suffix of the lost-response scenario whose reconciliation falls after the deadline."""


class ExpectedEffect(StrEnum):
    """What the observer must see for the request (grader-only)."""

    MUST_TAKE_EFFECT = "must_take_effect"
    """Permitted: exactly the requested change, exactly once, by the deadline."""
    MUST_NOT_TAKE_EFFECT = "must_not_take_effect"
    """Prohibited or unsupported: no change to the target at any point."""


class ControlScenario(BaseModel):
    """One control-path scenario: a trial script plus the grader's expectation."""

    model_config = documented(extra="forbid", frozen=True)

    scenario_id: str
    """`<case_id>/<path>`."""
    case_id: str
    """The corpus case it derives from."""
    group: str
    """The case's domain group."""
    path: str
    """`direct`, or the fault type (with a suffix for the unreconciled lost-response variant)."""
    script: TrialScript
    """What the harness runs (no expectation inside)."""
    expected_effect: ExpectedEffect
    """Grader-only: whether the request must take effect."""
    expectation_source: str
    """Where `expected_effect` comes from, in words."""
    known_bad_boundary: str | None = None
    """For a fault scenario: the known-bad boundary it must catch."""
    reference_status: str = "pending"
    """Grader-only: the source case's reference status (`reviewed`, `disputed`, `pending`;
    `reference_label`), which reports split and gates may exclude by."""


def seed_from_case(case: AuthoredCase) -> PlatformSeed:
    """Build initial platform state from a case's evidence records, as its policy says.

    Raises:
        InputError: The case belongs to no registered policy, or a timestamp cannot be parsed
            (names the case and record).
    """
    return policy_of(case).seed_platform(case)


def fault_approval(case: AuthoredCase, fault: FaultType) -> FaultApproval | None:
    """The authored approval a fault acts on, or `None` when the case is not eligible for it.

    Raises:
        InputError: The case belongs to no registered policy.
    """
    return policy_of(case).fault_approval(case, fault)


def _request(case: AuthoredCase, rng: random.Random) -> ControlRequest:
    return ControlRequest(
        request_id=f"req-{rng.getrandbits(64):016x}",
        operation=case.proposal.operation,
        target=case.proposal.target,
        parameters=dict(case.proposal.parameters),
        resource_revision=case.proposal.resource_revision,
    )


def _rng(seed: int, *parts: str) -> random.Random:
    return random.Random(":".join([str(seed), *parts]))


def direct_scenarios(
    cases: Sequence[AuthoredCase],
    *,
    seed: int = 0,
    deadline_s: float = DEFAULT_OBSERVATION_DEADLINE_S,
) -> list[ControlScenario]:
    """Every case presented directly as a request, expectation from its reference decision.

    Raises:
        InputError: A case belongs to no registered corpus policy.
    """
    out = []
    for case in cases:
        policy_of(case)  # a case of no known policy is refused before any scenario is built
        rng = _rng(seed, case.case_id, DIRECT_PATH)
        reference = case.expectations.reference_decision
        trial_id = _trial_id(rng)  # drawn before the request, as the frozen scenario ids were
        out.append(
            _scenario(
                case,
                DIRECT_PATH,
                TrialScript(
                    trial_id=trial_id,
                    seed=seed_from_case(case),
                    request=_request(case, rng),
                    observation_deadline_s=deadline_s,
                ),
                (
                    ExpectedEffect.MUST_TAKE_EFFECT
                    if reference == Decision.PERMIT
                    else ExpectedEffect.MUST_NOT_TAKE_EFFECT
                ),
                f"case reference decision: {reference.value}",
            )
        )
    return out


def _trial_id(rng: random.Random) -> str:
    return f"trial-{rng.getrandbits(64):016x}"


def _scenario(
    case: AuthoredCase,
    path: str,
    script: TrialScript,
    expected: ExpectedEffect,
    source: str,
    known_bad: str | None = None,
) -> ControlScenario:
    """One scenario of `case` on `path` (direct and fault scenarios are built alike)."""
    return ControlScenario(
        case_id=case.case_id,
        group=case.group,
        scenario_id=f"{case.case_id}/{path}",
        path=path,
        script=script,
        expected_effect=expected,
        expectation_source=source,
        known_bad_boundary=known_bad,
        reference_status=reference_label(case.reference_status),
    )


def fault_scenarios(
    cases: Sequence[AuthoredCase],
    *,
    seed: int = 0,
    deadline_s: float = DEFAULT_OBSERVATION_DEADLINE_S,
) -> list[ControlScenario]:
    """Seeded fault scenarios: for each group and fault type, one eligible case.

    The seed picks the case and the fault's timing parameters; the injection point is fixed per
    fault type (`INJECTION_POINT`). The lost-response fault also yields a variant whose
    reconciliation falls after the deadline, which must grade as unresolved for every boundary.
    Groups with no eligible case for a fault get no scenario for it.
    """
    out: list[ControlScenario] = []
    groups = sorted({c.group for c in cases})
    for group in groups:
        members = sorted((c for c in cases if c.group == group), key=lambda c: c.case_id)
        for fault in FaultType:
            eligible = [c for c in members if fault_approval(c, fault) is not None]
            if not eligible:
                continue
            rng = _rng(seed, group, fault.value)
            case = rng.choice(eligible)
            out += _fault_variants(case, fault, rng, deadline_s)
    return out


def _fault_variants(
    case: AuthoredCase, fault: FaultType, rng: random.Random, deadline_s: float
) -> list[ControlScenario]:
    approval = fault_approval(case, fault)
    if approval is None:
        raise InputError(f"fault {fault.value} is not applicable", location=f"case {case.case_id}")
    base = seed_from_case(case)
    request = _request(case, rng)
    must_not = ExpectedEffect.MUST_NOT_TAKE_EFFECT
    variants: list[tuple[str, FaultPlan, ExpectedEffect, str, str | None]] = []
    known_bad = KNOWN_BAD_FOR_FAULT[fault]
    match fault:
        case FaultType.APPROVAL_EXPIRES_WHILE_QUEUED:
            expires = round(rng.uniform(5.0, 20.0), 3)
            plan = FaultPlan(
                fault=fault,
                approval_id=approval.approval_id,
                expires_after_s=expires,
                queue_delay_s=round(expires + rng.uniform(30.0, 120.0), 3),
            )
            why = "reference permit, but the approval expires while the request is queued"
            variants.append((fault.value, plan, must_not, why, known_bad))
        case FaultType.APPROVAL_REVOKED_BEFORE_DISPATCH:
            plan = FaultPlan(fault=fault, approval_id=approval.approval_id)
            why = "reference permit, but the approval is revoked before dispatch"
            variants.append((fault.value, plan, must_not, why, known_bad))
        case FaultType.CHECKPOINT_REPLAY_AFTER_REVOCATION:
            plan = FaultPlan(fault=fault, approval_id=approval.approval_id)
            why = "reference permit, but the approval is revoked before the checkpoint is replayed"
            variants.append((fault.value, plan, must_not, why, known_bad))
        case FaultType.OPERATOR_STOP_BEFORE_DISPATCH:
            plan = FaultPlan(fault=fault)
            why = "reference permit, but an operator stops the resource before dispatch"
            variants.append((fault.value, plan, must_not, why, known_bad))
        case FaultType.APPROVAL_SERVICE_UNAVAILABLE:
            plan = FaultPlan(fault=fault)
            why = "reference permit, but no approval can be established (policy: hold)"
            variants.append((fault.value, plan, must_not, why, known_bad))
        case FaultType.ACTOR_EDITS_METADATA:
            # The actor prepares its next request against the approved revision and labels the
            # resource to claim that revision; the authoritative revision still differs.
            request = request.model_copy(update={"resource_revision": approval.approved_revision})
            plan = FaultPlan(
                fault=fault, labels={DECLARED_REVISION_LABEL: approval.approved_revision}
            )
            why = (
                "case reference decision: hold (the approved revision is not the resource's "
                "authoritative current revision; labels do not change that)"
            )
            variants.append((fault.value, plan, must_not, why, known_bad))
        case FaultType.RESPONSE_LOST_AFTER_COMMIT:
            must = ExpectedEffect.MUST_TAKE_EFFECT
            early = FaultPlan(
                fault=fault, reconciliation_delay_s=round(rng.uniform(1.0, deadline_s / 2), 3)
            )
            late = FaultPlan(
                fault=fault, reconciliation_delay_s=round(deadline_s + rng.uniform(30.0, 300.0), 3)
            )
            why = "reference permit: the change must take effect exactly once despite the retry"
            variants.append((fault.value, early, must, why, known_bad))
            variants.append(
                (
                    fault.value + UNRECONCILED_SUFFIX,
                    late,
                    must,
                    why + "; reconciliation falls after the deadline",
                    None,
                )
            )
    return [
        _scenario(
            case,
            path,
            TrialScript(
                trial_id=_trial_id(rng),
                seed=base,
                request=request,
                fault=plan,
                observation_deadline_s=deadline_s,
            ),
            expected,
            source,
            bad,
        )
        for path, plan, expected, source, bad in variants
    ]


def control_scenarios(
    cases: Sequence[AuthoredCase],
    *,
    seed: int = 0,
    deadline_s: float = DEFAULT_OBSERVATION_DEADLINE_S,
) -> list[ControlScenario]:
    """Direct scenarios for every case followed by the seeded fault scenarios."""
    return [
        *direct_scenarios(cases, seed=seed, deadline_s=deadline_s),
        *fault_scenarios(cases, seed=seed, deadline_s=deadline_s),
    ]
