"""Platform state and fault targets from cases of policy `rtb-narrow-approval-v1`.

The simulated start time is one minute after the latest approval timestamp in the evidence, so
an approval's expiry keeps its authored meaning relative to the trial. Which approval a fault
acts on comes from grader-side authored data (the case's records and reference decision), never
from a boundary or a policy evaluation.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from trustbench.errors import InputError
from trustbench.rtb.boundaries._policy import canonical_parameters
from trustbench.rtb.corpus._models import (
    ApprovalRecord,
    Case,
    Decision,
    ResourceStateRecord,
    ServiceNoticeRecord,
)
from trustbench.rtb.platform import ApprovalSeed, FaultType, PlatformSeed, ResourceSeed
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
