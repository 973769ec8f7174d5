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

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar, Literal, TypeVar, cast

from pydantic import BaseModel

from trustbench.rtb.boundaries._protocol import PolicyFlaws
from trustbench.rtb.platform import (
    BreakGlassSeed,
    CalendarWindowSeed,
    ControlRequest,
    DelegationSeed,
    FaultType,
    GovernanceSeed,
    PlatformSeed,
    PlatformView,
    ResourceClass,
)
from trustbench.rtb.policy._records import same_named
from trustbench.rtb.policy.narrow_v2._cedar import CedarFinding
from trustbench.rtb.policy.narrow_v2._control import (
    V2Evaluator,
    _instant,
    fault_approval_v2,
    iso,
    live_evidence,
    seed_from_case_v2,
)
from trustbench.rtb.policy.narrow_v2._models import ApprovalRecordV2, CaseV2
from trustbench.rtb.policy.narrow_v2._reviewer import FindingV2
from trustbench.rtb.policy.narrow_v3 import _models as models
from trustbench.rtb.policy.narrow_v3._cedar import cedar_assess_v3
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
from trustbench.rtb.policy.narrow_v3._reviewer import assess_v3, governing_approval

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


# ------------------------------------------------------------------------------------------------
# Policy `rtb-narrow-approval-v3` enforced on live simulated-platform state.
#
# No third copy of the policy: v0.2's live reading (`narrow_v2._boundary.live_evidence`: every
# approval the service holds, now with its co-approvers, revocation records, the resource's
# authoritative revision, an outage as the approval-service notice, and the known-bad boundaries'
# flaws) is extended with the platform's governance records (`GovernanceSeed`) written as v0.3
# evidence: the policy configuration as the policy record, the change calendar as freeze and
# maintenance windows, delegations and break-glass declarations. The request becomes a v0.3
# proposal with the platform's requester and the target's environment and risk tier. One of the two
# existing encodings decides: `assess_v3` (the `reference` boundary) or the Cedar v0.3 policy set
# (`cedar_assess_v3`, the `cedar` boundary), at the platform's current simulated time.
#
# The grader never calls this: outcomes come from the observer and the case's authored reference
# decision.

Engine = Literal["reference", "cedar"]
"""Which existing encoding of the v0.3 policy decides."""


def _as_text(name: str, value: Any) -> Any:
    """A seed's value as a record carries it (an instant as ISO 8601 text)."""
    return iso(value) if isinstance(value, datetime) else value


def governance_evidence(governance: GovernanceSeed) -> list[Any]:
    """The platform's governance records as v0.3 evidence records (workflow tools show these)."""
    records: list[Any] = []
    if governance.approver_scopes:
        records.append(
            models.PolicyRecordV3(
                record_id="platform-policy",
                policy_id=models.POLICY_ID_V3,
                title="policy in force on the platform",
                text="",
                approver_scopes={k: list(v) for k, v in governance.approver_scopes.items()},
                two_person_tiers=list(governance.two_person_tiers),
                window_environments=list(governance.window_environments),
                break_glass_holders=list(governance.break_glass_holders),
            )
        )
    for i, w in enumerate(governance.calendar):
        if w.kind == "freeze":
            records.append(
                models.FreezeWindowRecord(
                    record_id=f"calendar:{i}",
                    environments=list(w.environments),
                    starts_at=iso(w.starts_at),
                    ends_at=iso(w.ends_at),
                    reason=w.reason,
                )
            )
        else:
            records += [
                models.MaintenanceWindowRecord(
                    record_id=f"calendar:{i}:{j}",
                    environment=environment,
                    starts_at=iso(w.starts_at),
                    ends_at=iso(w.ends_at),
                )
                for j, environment in enumerate(w.environments)
            ]
    records += [
        same_named(d, models.DelegationRecord, _as_text, record_id=f"delegation:{i}")
        for i, d in enumerate(governance.delegations)
    ]
    records += [
        same_named(b, models.BreakGlassRecord, _as_text, record_id=f"break-glass:{i}")
        for i, b in enumerate(governance.break_glass)
    ]
    return records


def live_proposal(request: ControlRequest, governance: GovernanceSeed) -> models.ProposalV3:
    """The request as a v0.3 proposal: requester and classification come from the platform.

    A target the platform has not classified gets an empty environment and tier (no approver is
    scoped to it, so nothing authorises the change).
    """
    placed = governance.resource_classes.get(request.target)
    return models.ProposalV3(
        operation=request.operation,
        target=request.target,
        parameters=dict(request.parameters),
        resource_revision=request.resource_revision,
        requested_by=governance.requester or "",
        environment=placed.environment if placed else "",
        risk_tier=placed.risk_tier if placed else "",
    )


@dataclass(frozen=True)
class V3Evaluator(V2Evaluator):
    """Policy v0.3 on live state, bound to an engine, a timeout and flaws (a `LiveEvaluator`)."""

    reason_codes: ClassVar[type[StrEnum]] = models.ReasonCodeV3
    """The policy's vocabulary."""
    approval_model: ClassVar[type[ApprovalRecordV2]] = models.ApprovalRecordV3
    """Approvals with their co-approvers."""

    input_model: ClassVar[type[BaseModel]] = models.CandidateInputV3
    """The v0.3 candidate input."""

    def proposal(self, request: ControlRequest, platform: PlatformView) -> models.ProposalV3:
        """The request with the requester and classification the platform supplies."""
        return live_proposal(request, platform.governance)

    def records(self, platform: PlatformView, evidence: list[Any]) -> list[Any]:
        """The governance records, then v0.2's live evidence."""
        return [*governance_evidence(platform.governance), *evidence]

    def cedar(self, candidate_input: Any) -> CedarFinding:
        """The Cedar v0.3 encoding's decision (`cedar_assess_v3`)."""
        return cedar_assess_v3(candidate_input)

    def assess(self, candidate_input: Any) -> FindingV2:
        """The reference reviewer's finding (`assess_v3`)."""
        return assess_v3(candidate_input)

    def permitted_approval(self, candidate_input: Any, finding: FindingV2) -> str | None:
        """The approval id of the governing approval, if one governs."""
        governing = governing_approval(candidate_input)
        return None if governing is None else governing.approval_id


def change_records_v3(target: str, platform: PlatformView) -> dict[str, Any]:
    """What the workflow tool `read_change_records` shows: the live evidence the boundary reads.

    The same reading as `V3Evaluator` (no flaws, no timeout: an outage shows as the
    approval-service notice), for a change to `target`, with the proposal context the platform
    supplies. Record ids are the platform's, never a case's.
    """
    probe = ControlRequest(
        request_id="records", operation="", target=target, parameters={}, resource_revision=""
    )
    evidence = (
        live_evidence(probe, platform, PolicyFlaws(), float("inf"), models.ApprovalRecordV3) or []
    )
    governance = platform.governance
    context = live_proposal(probe, governance)
    return {
        "policy_id": models.POLICY_ID_V3,
        "proposal_context": {
            "requested_by": context.requested_by,
            "environment": context.environment,
            "risk_tier": context.risk_tier,
        },
        "records": [
            r.model_dump(mode="json") for r in [*governance_evidence(governance), *evidence]
        ],
        "service_time": iso(platform.now()),
    }
