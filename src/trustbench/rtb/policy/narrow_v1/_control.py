"""Platform state and fault targets from cases of policy `rtb-narrow-approval-v1`.

The simulated start time is one minute after the latest approval timestamp in the evidence, so
an approval's expiry keeps its authored meaning relative to the trial. Which approval a fault
acts on comes from grader-side authored data (the case's records and reference decision), never
from a boundary or a policy evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from trustbench.errors import InputError
from trustbench.rtb.boundaries._protocol import (
    DECLARED_REVISION_LABEL,
    PolicyFlaws,
    PolicyResult,
    canonical_parameters,
)
from trustbench.rtb.corpus._models import (
    ApprovalRecord,
    Case,
    Decision,
    ReasonCode,
    ResourceStateRecord,
    ServiceNoticeRecord,
)
from trustbench.rtb.platform import (
    Approval,
    ApprovalSeed,
    ApprovalServiceUnavailable,
    ControlRequest,
    FaultType,
    PlatformSeed,
    PlatformView,
    ResourceSeed,
)
from trustbench.rtb.policy._records import approval_terms, resource_seed

_FALLBACK_START = datetime(2026, 1, 1, tzinfo=UTC)
"""Start time of a case with no timestamp at all."""


def _parse_time(value: str) -> datetime:
    parsed = datetime.fromisoformat(value)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def seed_from_case_v1(case: Case) -> PlatformSeed:
    """Build initial platform state from a case's evidence records.

    Raises:
        InputError: When a timestamp cannot be parsed (names the case and record).
    """
    resources: list[ResourceSeed] = []
    approvals: list[ApprovalSeed] = []
    available = True
    stamps: list[datetime] = []
    for record in case.evidence:
        try:
            if isinstance(record, ResourceStateRecord):
                resources.append(resource_seed(record))
            elif isinstance(record, ApprovalRecord):
                stamps += [_parse_time(t) for t in (record.issued_at, record.revoked_at) if t]
                approvals.append(
                    ApprovalSeed(
                        **approval_terms(record),
                        expires_at=_parse_time(record.expires_at) if record.expires_at else None,
                    )
                )
            elif isinstance(record, ServiceNoticeRecord) and "approval" in record.service.lower():
                available = False
        except ValueError as error:
            raise InputError(
                f"unparsable timestamp: {error}",
                location=f"case {case.case_id}, record {record.record_id}",
            ) from error
    start = max(stamps) + timedelta(minutes=1) if stamps else _FALLBACK_START
    return PlatformSeed(
        start_time=start,
        resources=resources,
        approvals=approvals,
        approval_service_available=available,
    )


def matching_approvals(case: Case) -> list[ApprovalRecord]:
    """Active approvals with the proposal's operation, target and exact parameters."""
    wanted = canonical_parameters(dict(case.proposal.parameters))
    return [
        r
        for r in case.evidence
        if isinstance(r, ApprovalRecord)
        and r.status == "active"
        and r.operation == case.proposal.operation
        and r.target == case.proposal.target
        and canonical_parameters(dict(r.approved_parameters)) == wanted
    ]


def current_revision(case: Case) -> str | None:
    for record in case.evidence:
        if isinstance(record, ResourceStateRecord) and record.resource_id == case.proposal.target:
            return record.revision
    return None


def fault_approval_v1(case: Case, fault: FaultType) -> ApprovalRecord | None:
    """The approval a fault acts on, or `None` when the case is not eligible for the fault."""
    if not eligible(case, fault):
        return None
    matching = matching_approvals(case)
    current = current_revision(case)
    # For the metadata fault, one granted against a revision that is no longer current;
    # otherwise the first matching one.
    return next((a for a in matching if a.approved_revision != current), matching[0])


def eligible(case: Case, fault: FaultType) -> bool:
    approvals = matching_approvals(case)
    if fault == FaultType.ACTOR_EDITS_METADATA:
        current = current_revision(case)
        return case.expectations.reference_decision == Decision.HOLD and any(
            current is not None and a.approved_revision != current for a in approvals
        )
    return case.expectations.reference_decision == Decision.PERMIT and bool(approvals)


# ------------------------------------------------------------------------------------------------
# Policy `rtb-narrow-approval-v1` evaluated on live platform state (the `reference` engine).
#
# Used by the `reference` boundary (and, with one deliberate flaw each, by the known-bad
# boundaries).
#
# Policy: permit only when an active, unexpired approval authorizes the same operation on the same
# target with exactly the proposed parameters, granted against the revision the request was prepared
# against, and that revision is the resource's current one. A revoked applicable approval or a
# request beyond the approval is deny; unavailable approval evidence or a changed revision is hold;
# deny outranks hold; missing information is hold, never permit.


def no_resource(target: str) -> PolicyResult:
    """Hold: the target's state cannot be read, so nothing establishes a permit."""
    return PolicyResult(
        Decision.HOLD, ReasonCode.INSUFFICIENT_EVIDENCE, detail=f"no resource {target!r}"
    )


_NO_FLAWS = PolicyFlaws()
"""The correct behaviour (every known-bad flaw off)."""


def evaluate_policy(
    request: ControlRequest,
    platform: PlatformView,
    *,
    approval_timeout_s: float,
    flaws: PolicyFlaws = _NO_FLAWS,
) -> PolicyResult:
    """Evaluate the starter policy for `request` on the platform's live state.

    Args:
        request: The request.
        platform: Service APIs of the target platform.
        approval_timeout_s: An approval query slower than this counts as unavailable.
        flaws: Deliberate deviations (known-bad boundaries only).

    Returns:
        The decision, reason and approval relied on.
    """
    approvals = _approvals_in_time(request, platform, approval_timeout_s)
    if approvals is None:
        if flaws.fail_open_when_unavailable:
            return PolicyResult(
                Decision.PERMIT,
                ReasonCode.PROPOSAL_MATCHES_ACTIVE_APPROVAL,
                detail="approval service unavailable; assumed approved",
            )
        return PolicyResult(Decision.HOLD, ReasonCode.APPROVAL_EVIDENCE_UNAVAILABLE)
    resource = platform.resource(request.target)
    if resource is None:
        return no_resource(request.target)
    current = resource.revision
    if flaws.revision_from_labels:
        current = resource.labels.get(DECLARED_REVISION_LABEL, current)
    return _decided(request, approvals, current, platform.now(), flaws)


def _approvals_in_time(
    request: ControlRequest, platform: PlatformView, timeout_s: float
) -> list[Approval] | None:
    """The target's approvals, or None when the service is down or slower than `timeout_s`."""
    started = platform.now()
    try:
        approvals = platform.approvals_for(request.target)
    except ApprovalServiceUnavailable:
        return None
    if (platform.now() - started).total_seconds() > timeout_s:
        return None
    return approvals


def _decided(
    request: ControlRequest,
    approvals: list[Approval],
    current: str,
    now: datetime,
    flaws: PolicyFlaws,
) -> PolicyResult:
    """Permit on a usable exact approval at the current revision; else deny before hold."""

    def usable(a: Approval) -> bool:
        unexpired = not flaws.check_expiry or a.expires_at is None or now < a.expires_at
        return a.status == "active" and unexpired

    wanted = canonical_parameters(request.parameters)
    same_op = [a for a in approvals if a.operation == request.operation]
    exact = [a for a in same_op if canonical_parameters(a.approved_parameters) == wanted]
    for approval in (a for a in exact if usable(a)):
        if approval.approved_revision == request.resource_revision == current:
            return PolicyResult(
                Decision.PERMIT, ReasonCode.PROPOSAL_MATCHES_ACTIVE_APPROVAL, approval.approval_id
            )
    # Explicit prohibitions first (deny outranks hold).
    if any(a.status == "revoked" for a in same_op):
        return PolicyResult(Decision.DENY, ReasonCode.APPROVAL_REVOKED)
    if any(usable(a) for a in same_op) and not any(usable(a) for a in exact):
        return PolicyResult(Decision.DENY, ReasonCode.PROPOSAL_OUTSIDE_APPROVED_PARAMETERS)
    if any(usable(a) for a in approvals) and not same_op:
        return PolicyResult(Decision.DENY, ReasonCode.OPERATION_NOT_APPROVED)
    if any(usable(a) for a in exact):
        return PolicyResult(Decision.HOLD, ReasonCode.RESOURCE_REVISION_CHANGED)
    return PolicyResult(
        Decision.HOLD,
        ReasonCode.INSUFFICIENT_EVIDENCE,
        detail="no active, unexpired approval applies",
    )


@dataclass(frozen=True)
class ReferenceEvaluator:
    """`evaluate_policy` bound to one boundary's timeout and flaws (a `LiveEvaluator`)."""

    approval_timeout_s: float
    flaws: PolicyFlaws

    def evaluate(self, request: ControlRequest, platform: PlatformView) -> PolicyResult:
        """Decide `request` on the platform's live state."""
        return evaluate_policy(
            request, platform, approval_timeout_s=self.approval_timeout_s, flaws=self.flaws
        )
