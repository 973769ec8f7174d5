"""Platform state and fault targets from v0.3 cases (policy `rtb-narrow-approval-v3`).

v0.3 keeps v0.2's records, so v0.2's mapping seeds what they mean (resources, approvals with
their approver, issue time, expiry, status and successor, revocations, an approval-service
outage; `narrow_v2._control`). What v0.3 adds becomes the platform's governance records
(`trustbench.rtb.platform.GovernanceSeed`): the proposal's requester is the identity the trial's
changes are requested as, its environment and risk tier are the target's platform-owned
classification, the policy record's approver scopes, two-person tiers, window environments and
break-glass holders are the platform's configuration, freeze and maintenance windows its change
calendar, delegations and break-glass declarations its records, and each approval keeps its
co-approvers. Change tickets and requester notes are not evidence under the policy and are not
seeded.

Which approval a fault acts on comes from grader-side authored data, as in v0.2: the case's
decisive approvals, never a boundary's evaluation.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar, cast

from pydantic import BaseModel

from trustbench.rtb.platform import (
    BreakGlassSeed,
    CalendarWindowSeed,
    DelegationSeed,
    FaultType,
    GovernanceSeed,
    PlatformSeed,
    ResourceClass,
)
from trustbench.rtb.policy._records import same_named
from trustbench.rtb.policy.narrow_v2._control import _instant, fault_approval_v2, seed_from_case_v2
from trustbench.rtb.policy.narrow_v2._models import ApprovalRecordV2, CaseV2
from trustbench.rtb.policy.narrow_v3._models import (
    POLICY_ID_V3,
    ApprovalRecordV3,
    BreakGlassRecord,
    CaseV3,
    DelegationRecord,
    FreezeWindowRecord,
    MaintenanceWindowRecord,
    PolicyRecordV3,
)

SeedT = TypeVar("SeedT", bound=BaseModel)


def _policy_configuration(case: CaseV3) -> dict[str, Any]:
    """The policy records' scopes, tiers, window environments and holders, merged in order."""
    scopes: dict[str, list[str]] = {}
    lists: dict[str, list[str]] = {
        "two_person_tiers": [],
        "window_environments": [],
        "break_glass_holders": [],
    }
    for p in case.evidence:
        if isinstance(p, PolicyRecordV3):
            for name, environments in p.approver_scopes.items():
                scopes.setdefault(name, []).extend(environments)
            for field, values in lists.items():
                values.extend(getattr(p, field))
    return {"approver_scopes": scopes, **lists}


def _calendar(case: CaseV3) -> list[CalendarWindowSeed]:
    windows: list[CalendarWindowSeed] = []
    for r in case.evidence:
        if isinstance(r, FreezeWindowRecord):
            windows.append(
                CalendarWindowSeed(
                    window_id=r.record_id,
                    kind="freeze",
                    environments=list(r.environments),
                    starts_at=_instant(cast("CaseV2", case), r.record_id, r.starts_at),
                    ends_at=_instant(cast("CaseV2", case), r.record_id, r.ends_at),
                    reason=r.reason,
                )
            )
        elif isinstance(r, MaintenanceWindowRecord):
            windows.append(
                CalendarWindowSeed(
                    window_id=r.record_id,
                    kind="maintenance",
                    environments=[r.environment],
                    starts_at=_instant(cast("CaseV2", case), r.record_id, r.starts_at),
                    ends_at=_instant(cast("CaseV2", case), r.record_id, r.ends_at),
                )
            )
    return windows


def _seeds(
    case: CaseV3, record_type: type[Any], seed_type: type[SeedT], id_field: str
) -> list[SeedT]:
    """Each `record_type` record of the case as a `seed_type`: id as `id_field`, instants parsed."""
    at = cast("CaseV2", case)
    instants = {n for n, f in seed_type.model_fields.items() if f.annotation is datetime}

    def seed(r: Any) -> SeedT:
        def convert(name: str, value: Any) -> Any:
            return _instant(at, r.record_id, value) if name in instants else value

        return same_named(r, seed_type, convert, **{id_field: r.record_id})

    return [seed(r) for r in case.evidence if isinstance(r, record_type)]


def seed_from_case_v3(case: CaseV3) -> PlatformSeed:
    """Build initial platform state from a v0.3 case; the clock starts at its `as_of`.

    Raises:
        InputError: When a timestamp cannot be parsed (names the case and record).
    """
    base = seed_from_case_v2(cast("CaseV2", case))
    # v0.2's mapping seeds one approval per approval record, in evidence order; each keeps its
    # own record's co-approvers (an approval re-issued under the same id may have others).
    records = [r for r in case.evidence if isinstance(r, ApprovalRecordV3)]
    approvals = [
        a.model_copy(update={"co_approved_by": list(r.co_approved_by)}) if r.co_approved_by else a
        for a, r in zip(base.approvals, records, strict=True)
    ]
    proposal = case.proposal
    governance = GovernanceSeed(
        requester=proposal.requested_by,
        resource_classes={
            proposal.target: ResourceClass(
                environment=proposal.environment, risk_tier=proposal.risk_tier
            )
        },
        **_policy_configuration(case),
        calendar=_calendar(case),
        delegations=_seeds(case, DelegationRecord, DelegationSeed, "delegation_id"),
        break_glass=_seeds(case, BreakGlassRecord, BreakGlassSeed, "declaration_id"),
    )
    return base.model_copy(
        update={"approvals": approvals, "policy_id": POLICY_ID_V3, "governance": governance}
    )


def fault_approval_v3(case: CaseV3, fault: FaultType) -> ApprovalRecordV2 | None:
    """The authored decisive approval a fault acts on, or `None` when the case is not eligible.

    v0.2's eligibility, read on the v0.3 case (its approvals are v0.2's plus co-approvers and its
    reason codes keep v0.2's values): an uncontested permit with a decisive active approval, or
    for the metadata fault an uncontested hold whose only reason is a changed revision.
    """
    return fault_approval_v2(cast("CaseV2", case), fault)
