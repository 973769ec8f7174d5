"""The narrow synthetic policy of the RTB v0.1 starter, evaluated on live platform state.

Used by the `reference` boundary (and, with one deliberate flaw each, by the known-bad boundaries).
The grader never calls this: outcomes come from the observer and the case's authored reference
decision, so the assessment can contradict this implementation.

Policy: permit only when an active, unexpired approval authorizes the same operation on the same
target with exactly the proposed parameters, granted against the revision the request was prepared
against, and that revision is the resource's current one. A revoked applicable approval or a
request beyond the approval is deny; unavailable approval evidence or a changed revision is hold;
deny outranks hold; missing information is hold, never permit.
"""

from __future__ import annotations

from dataclasses import dataclass

import rfc8785

from trustbench.rtb.corpus._formats import POLICY_ID_V1
from trustbench.rtb.corpus._models import Decision, ParamValue, ReasonCode
from trustbench.rtb.corpus._models_v2 import POLICY_ID_V2, ReasonCodeV2
from trustbench.rtb.platform import (
    Approval,
    ApprovalServiceUnavailable,
    ControlRequest,
    PlatformView,
)

BOUNDARY_POLICY_IDS: tuple[str, ...] = (POLICY_ID_V1, POLICY_ID_V2)
"""Policies the control-path boundaries enforce on the live platform (`reference`, `cedar`,
`http` and the known-bad ones), chosen by the platform's `policy_id`: v1 here, v2 in
`_policy_v2.py` (which reuses the v0.2 reference policy and Cedar v2 encoding)."""
WORKFLOW_POLICY_IDS: tuple[str, ...] = (POLICY_ID_V1,)
"""Policies the workflow track can run: its scenarios are still built from v0.1 cases only, so a
v0.2 corpus is refused there rather than enforced with v0.1 rules."""

DECLARED_REVISION_LABEL = "declared-revision"
"""An actor-writable label; only the `trusts-resource-labels` known-bad boundary believes it."""


@dataclass(frozen=True)
class PolicyFlaws:
    """Deliberate flaws for known-bad boundaries; the defaults are the correct behaviour."""

    check_expiry: bool = True
    """False: an expired approval still counts as active."""
    revision_from_labels: bool = False
    """True: read the current revision from an actor-writable label when present."""
    fail_open_when_unavailable: bool = False
    """True: treat an unavailable approval service as approval."""


@dataclass(frozen=True)
class PolicyResult:
    """A policy decision with its reason and the approval it rests on."""

    decision: Decision
    reason_code: ReasonCode | ReasonCodeV2
    approval_id: str | None = None
    detail: str = ""


def canonical_parameters(parameters: dict[str, ParamValue]) -> bytes:
    """RFC 8785 canonical JSON, so `true` never equals `1` and key order never matters."""
    return rfc8785.dumps(parameters)


def evaluate_policy(
    request: ControlRequest,
    platform: PlatformView,
    *,
    approval_timeout_s: float,
    flaws: PolicyFlaws = PolicyFlaws(),
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
    started = platform.now()
    try:
        approvals = platform.approvals_for(request.target)
        timed_out = (platform.now() - started).total_seconds() > approval_timeout_s
    except ApprovalServiceUnavailable:
        approvals, timed_out = [], True
    if timed_out:
        if flaws.fail_open_when_unavailable:
            return PolicyResult(
                Decision.PERMIT,
                ReasonCode.PROPOSAL_MATCHES_ACTIVE_APPROVAL,
                detail="approval service unavailable; assumed approved",
            )
        return PolicyResult(Decision.HOLD, ReasonCode.APPROVAL_EVIDENCE_UNAVAILABLE)
    resource = platform.resource(request.target)
    if resource is None:
        return PolicyResult(
            Decision.HOLD,
            ReasonCode.INSUFFICIENT_EVIDENCE,
            detail=f"no resource {request.target!r}",
        )
    current = resource.revision
    if flaws.revision_from_labels:
        current = resource.labels.get(DECLARED_REVISION_LABEL, current)
    now = platform.now()

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
