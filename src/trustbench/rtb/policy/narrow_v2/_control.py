"""Platform state and fault targets from v0.2 cases (policy `rtb-narrow-approval-v2`).

Every record that bears on the v0.2 policy becomes live platform state, so the boundary decides
from the platform, not from the case: approvals keep their approver, issue time, expiry, status
and successor (each approval record is seeded, an approval re-issued under its id included);
revocation records keep their effective instant; the policy record's authorised
approvers become the platform's configuration; a notice that the `approval-service` is down makes
it unavailable; a target with no state record, or with state records that disagree on its
revision, exists with its state unreadable (records that agree are one state). The simulated
clock starts at the case's `as_of`, so expiry and revocations are judged at the authored
evaluation time. Change tickets and requester notes are not evidence under
the policy and are not seeded.

Which approval a fault acts on comes from grader-side authored data (the case's
`decisive_record_ids`), never from a boundary or a policy evaluation.
"""

from __future__ import annotations

from datetime import UTC, datetime

from trustbench.errors import InputError
from trustbench.rtb.corpus._models import Decision, ServiceNoticeRecord
from trustbench.rtb.corpus._normalise import equivalent
from trustbench.rtb.platform import (
    ApprovalSeed,
    FaultType,
    PlatformSeed,
    ResourceSeed,
    RevocationSeed,
)
from trustbench.rtb.policy._records import approval_terms, resource_seed
from trustbench.rtb.policy.narrow_v2._models import (
    POLICY_ID_V2,
    ApprovalRecordV2,
    CaseV2,
    PolicyRecordV2,
    ReasonCodeV2,
    ResourceStateRecordV2,
    RevocationRecord,
)

APPROVAL_SERVICE = "approval-service"
"""The service whose notice makes approval evidence unavailable (as in the policy text)."""


def _instant(case: CaseV2, record_id: str, text: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as error:
        raise InputError(
            f"unparsable timestamp: {error}", location=f"case {case.case_id}, record {record_id}"
        ) from error
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _applicable_approval_shown(case: CaseV2) -> bool:
    """An approval for the proposal's operation and target, issued by `as_of`, is in the case."""
    as_of = _instant(case, "as_of", case.as_of)
    return any(
        isinstance(r, ApprovalRecordV2)
        and equivalent(r.operation, case.proposal.operation)
        and equivalent(r.target, case.proposal.target)
        and _instant(case, r.record_id, r.issued_at) <= as_of
        for r in case.evidence
    )


def _one_target_state(resources: list[ResourceSeed], target: str) -> list[ResourceSeed]:
    """The platform holds one state of the target: the evidence's, or an unreadable one.

    Several current-state records of the target that agree on its revision are one state (the
    first is seeded). Records that disagree leave its current revision unknown (the policy's
    hold for a missing state): the first is seeded with its state unreadable through the
    resource API, so the boundary faces the same gap and the observer still sees any change.
    """
    states = [r for r in resources if r.resource_id == target]
    if len(states) < 2:
        return resources
    others = [r for r in resources if r.resource_id != target]
    agreed = len({s.revision.strip() for s in states}) == 1
    first = states[0] if agreed else states[0].model_copy(update={"state_readable": False})
    return [*others, first]


def seed_from_case_v2(case: CaseV2) -> PlatformSeed:
    """Build initial platform state from a v0.2 case; the clock starts at its `as_of`.

    Raises:
        InputError: When a timestamp cannot be parsed (names the case and record).
    """
    resources: list[ResourceSeed] = []
    approvals: list[ApprovalSeed] = []
    revocations: list[RevocationSeed] = []
    approvers: list[str] = []
    available = True
    target = case.proposal.target
    for r in case.evidence:
        if isinstance(r, ResourceStateRecordV2):
            seed = resource_seed(r)
            if equivalent(r.resource_id, target):
                # Looked up after normalisation (rule 7): the platform holds one identity for
                # the resource, so the boundary finds it by the request's own encoding.
                seed = seed.model_copy(update={"resource_id": target})
            resources.append(seed)
        elif isinstance(r, ApprovalRecordV2):
            terms = approval_terms(r)
            if equivalent(terms.get("target"), target):
                terms = {**terms, "target": target}  # the same resource, one identity (rule 7)
            approvals.append(
                ApprovalSeed(
                    **terms,
                    expires_at=_instant(case, r.record_id, r.expires_at) if r.expires_at else None,
                    approved_by=r.approved_by,
                    issued_at=_instant(case, r.record_id, r.issued_at),
                    superseded_by=r.superseded_by,
                )
            )
        elif isinstance(r, RevocationRecord):
            revocations.append(
                RevocationSeed(
                    approval_id=r.revokes,
                    revoked_at=_instant(case, r.record_id, r.revoked_at),
                    revoked_by=r.revoked_by,
                )
            )
        elif isinstance(r, PolicyRecordV2):
            approvers += r.authorised_approvers
        elif isinstance(r, ServiceNoticeRecord) and r.service.strip() == APPROVAL_SERVICE:
            available = False
    if not available and _applicable_approval_shown(case):
        # Rule 5 holds for an outage only when no applicable approval is in the evidence: a case
        # that shows one had it served despite the notice, so the platform serves it too.
        available = True
    resources = _one_target_state(resources, target)
    if not any(equivalent(r.resource_id, case.proposal.target) for r in resources):
        # The evidence has no current state for the target, but a request acts on a resource
        # that exists: it is seeded at the revision the proposal names, with its state unreadable
        # through the resource API, so the boundary faces the same gap and the observer still
        # sees any change.
        resources.append(
            ResourceSeed(
                resource_id=case.proposal.target,
                resource_type="unknown",
                revision=case.proposal.resource_revision,
                attributes={},
                state_readable=False,
            )
        )
    return PlatformSeed(
        start_time=_instant(case, "as_of", case.as_of),
        resources=resources,
        approvals=approvals,
        revocations=revocations,
        approval_service_available=available,
        policy_id=POLICY_ID_V2,
        authorised_approvers=approvers,
    )


def _decisive_approvals(case: CaseV2) -> list[ApprovalRecordV2]:
    decisive = set(case.expectations.decisive_record_ids)
    return [r for r in case.evidence if isinstance(r, ApprovalRecordV2) and r.record_id in decisive]


def current_revision_v2(case: CaseV2) -> str | None:
    """The authored current object revision of the proposal's target, if stated."""
    for r in case.evidence:
        if isinstance(r, ResourceStateRecordV2) and equivalent(r.resource_id, case.proposal.target):
            return r.revision
    return None


def fault_approval_v2(case: CaseV2, fault: FaultType) -> ApprovalRecordV2 | None:
    """The authored decisive approval a fault acts on, or `None` when the case is not eligible.

    Eligible: an uncontested permit case with a decisive active approval (every fault but the
    metadata one); for the metadata fault, an uncontested hold whose only acceptable reason is a
    changed revision, with a decisive approval granted against another revision.
    """
    expectations = case.expectations
    if expectations.contestable_readings:
        return None
    approvals = [a for a in _decisive_approvals(case) if a.status == "active"]
    if fault == FaultType.ACTOR_EDITS_METADATA:
        current = current_revision_v2(case)
        only_revision = [ReasonCodeV2.RESOURCE_REVISION_CHANGED]
        if expectations.reference_decision != Decision.HOLD:
            return None
        if expectations.acceptable_reason_codes != only_revision:
            return None
        stale = [a for a in approvals if current and not equivalent(a.approved_revision, current)]
        return stale[0] if stale else None
    if expectations.reference_decision != Decision.PERMIT:
        return None
    return approvals[0] if approvals else None
