"""Policy `rtb-narrow-approval-v2` enforced on live simulated-platform state.

No third copy of the policy: this module reads the platform's service APIs (approvals with their
approvers and issue times, revocation records, the resource's authoritative revision, the
authorised approvers configured on the platform, the simulated clock as the evaluation time),
writes them as the evidence records of a v0.2 candidate input (every approval the service holds,
so an approval for another target is shown as the case shows it), and asks one of the two existing
encodings to decide: `assess_v2` (the `reference` boundary) or the Cedar v2 policy
(`cedar_assess_v2`, the `cedar` boundary). The known-bad boundaries' flaws are applied to that
evidence (an expiry dropped, a label believed, an outage read as approval), so each one differs
from the correct boundary in exactly one place.

The grader never calls this: outcomes come from the observer and the case's authored reference
decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import BaseModel

from trustbench.rtb.boundaries._policy import (
    DECLARED_REVISION_LABEL,
    PolicyFlaws,
    PolicyResult,
)
from trustbench.rtb.corpus._models import Decision, Proposal, ServiceNoticeRecord
from trustbench.rtb.platform import (
    Approval,
    ApprovalServiceUnavailable,
    ControlRequest,
    PlatformView,
)
from trustbench.rtb.policy._records import approval_terms
from trustbench.rtb.policy.narrow_v2._cedar import CedarFinding, cedar_assess_v2
from trustbench.rtb.policy.narrow_v2._models import (
    POLICY_ID_V2,
    ApprovalRecordV2,
    CandidateInputV2,
    EvidenceRecordV2,
    PolicyRecordV2,
    ReasonCodeV2,
    ResourceStateRecordV2,
    RevocationRecord,
)
from trustbench.rtb.policy.narrow_v2._reviewer import APPROVAL_SERVICE, FindingV2, assess_v2

_NO_FLAWS = PolicyFlaws()
Engine = Literal["reference", "cedar"]
"""Which existing encoding of the v0.2 policy decides."""


@dataclass(frozen=True)
class V2Evaluator:
    """`evaluate_policy_v2` bound to an engine, a timeout and flaws (a `LiveEvaluator`).

    A later policy that writes live state as evidence extending v0.2's (v0.3) subclasses it and
    names what differs: its approval model, its candidate input, its two encodings and how it
    finds the approval a permit rests on. Reading the state, failing open and picking the reason
    are this class's.
    """

    engine: Engine
    approval_timeout_s: float
    flaws: PolicyFlaws

    reason_codes: ClassVar[type[StrEnum]] = ReasonCodeV2
    """The policy's vocabulary."""
    approval_model: ClassVar[type[ApprovalRecordV2]] = ApprovalRecordV2
    """The approval record the live approvals are written as."""

    input_model: ClassVar[type[BaseModel]] = CandidateInputV2
    """The policy's candidate input, which the live state is written as."""

    def proposal(self, request: ControlRequest, platform: PlatformView) -> Proposal:
        """The request as the policy's proposal."""
        return Proposal(
            operation=request.operation,
            target=request.target,
            parameters=dict(request.parameters),
            resource_revision=request.resource_revision,
        )

    def records(self, platform: PlatformView, evidence: list[Any]) -> list[Any]:
        """Every evidence record of the input: here the live evidence alone."""
        return evidence

    def candidate_input(
        self, request: ControlRequest, platform: PlatformView, evidence: list[Any]
    ) -> Any:
        """The request and the live `evidence` as the policy's candidate input."""
        return self.input_model(
            evaluation_id=request.request_id,
            task="authorize the request",
            as_of=iso(platform.now()),
            proposal=self.proposal(request, platform),
            evidence=self.records(platform, evidence),
        )

    def cedar(self, candidate_input: Any) -> CedarFinding:
        """The Cedar encoding's decision (`cedar_assess_v2`)."""
        return cedar_assess_v2(candidate_input)

    def assess(self, candidate_input: Any) -> FindingV2:
        """The reference reviewer's finding (`assess_v2`)."""
        return assess_v2(candidate_input)

    def permitted_approval(self, candidate_input: Any, finding: FindingV2) -> str | None:
        """The approval id a permit of the reference rests on (`assess_v2` cites it first)."""
        return _governing_approval_id(candidate_input, finding.evidence_refs[0])

    def evaluate(self, request: ControlRequest, platform: PlatformView) -> PolicyResult:
        """Decide `request` at the platform's current simulated time."""
        evidence = live_evidence(
            request, platform, self.flaws, self.approval_timeout_s, self.approval_model
        )
        if evidence is None:
            return PolicyResult(
                Decision.PERMIT,
                self.reason_codes("proposal_matches_active_approval"),
                detail="approval service unavailable; assumed approved",
            )
        candidate_input = self.candidate_input(request, platform, evidence)
        approval_id: str | None = None
        if self.engine == "cedar":
            cedar = self.cedar(candidate_input)
            decision, codes, detail = cedar.decision, cedar.reason_codes, cedar.detail
        else:
            finding = self.assess(candidate_input)
            decision, codes, detail = finding.decision, finding.reason_codes, finding.explanation
            if decision == Decision.PERMIT:
                approval_id = self.permitted_approval(candidate_input, finding)
        reason = codes[0] if codes else self.reason_codes("insufficient_evidence")
        return PolicyResult(decision, reason, approval_id, detail)


def iso(moment: datetime) -> str:
    """An instant as the ISO 8601 text evidence records carry."""
    return moment.isoformat()


def _countersignatures(approval: Approval, countersigned: bool) -> dict[str, Any]:
    return {"co_approved_by": list(approval.co_approved_by)} if countersigned else {}


def _approval_record_id(approval_id: str, shown: dict[str, int]) -> str:
    """A unique record id for the next record of `approval_id` (one approval may be re-issued).

    The first record keeps `approval:<id>`; a later record of the same id is `approval:<id>#<n>`.
    """
    count = shown.get(approval_id, 0)
    shown[approval_id] = count + 1
    return f"approval:{approval_id}" + (f"#{count + 1}" if count else "")


def _governing_approval_id(candidate_input: CandidateInputV2, record_id: str) -> str | None:
    """The approval id of the approval record `record_id` in the live evidence."""
    for r in candidate_input.evidence:
        if isinstance(r, ApprovalRecordV2) and r.record_id == record_id:
            return r.approval_id
    return None


def live_evidence(
    request: ControlRequest,
    platform: PlatformView,
    flaws: PolicyFlaws,
    timeout_s: float,
    approval_model: type[ApprovalRecordV2] = ApprovalRecordV2,
) -> list[EvidenceRecordV2] | None:
    """The live platform state as v0.2 evidence records; `None` when the flaw fails open.

    A policy whose approvals extend v0.2's (v0.3: co-approvers) passes its own `approval_model`;
    an approval's countersignatures are written only into a model that has the field.
    """
    records: list[EvidenceRecordV2] = []
    countersigned = "co_approved_by" in approval_model.model_fields
    if platform.authorised_approvers:
        records.append(
            PolicyRecordV2(
                record_id="platform-policy",
                policy_id=POLICY_ID_V2,
                title="policy in force on the platform",
                text="",
                authorised_approvers=list(platform.authorised_approvers),
            )
        )
    started = platform.now()
    try:
        # Every approval the service holds, not only the request target's: rule 4 denies when
        # approvals are present but none applies, and rule 7 finds the target's own approvals
        # after normalisation (the encodings compare targets, not the platform's lookup).
        approvals = platform.approvals_for(None)
        revocations = platform.revocations_for(None)
        unavailable = (platform.now() - started).total_seconds() > timeout_s
    except ApprovalServiceUnavailable:
        approvals, revocations, unavailable = [], [], True
    if unavailable:
        if flaws.fail_open_when_unavailable:
            return None
        approvals, revocations = [], []
        records.append(
            ServiceNoticeRecord(
                record_id="approval-service-notice",
                service=APPROVAL_SERVICE,
                status="unavailable",
                text="the approval query failed or exceeded the boundary's timeout",
            )
        )
    shown: dict[str, int] = {}
    for a in approvals:
        if a.issued_at is None:
            continue  # an approval of unknown issue time cannot be ordered: it never governs
        records.append(
            approval_model(
                record_id=_approval_record_id(a.approval_id, shown),
                **approval_terms(a),
                approved_by=a.approved_by or "",
                issued_at=iso(a.issued_at),
                expires_at=(iso(a.expires_at) if a.expires_at and flaws.check_expiry else None),
                superseded_by=a.superseded_by,
                **_countersignatures(a, countersigned),
            )
        )
    records += [
        RevocationRecord(
            record_id=f"revocation:{i}",
            revokes=r.approval_id,
            revoked_at=iso(r.revoked_at),
            revoked_by=r.revoked_by,
        )
        for i, r in enumerate(revocations)
    ]
    resource = platform.resource(request.target)
    if resource is not None:
        revision = resource.revision
        if flaws.revision_from_labels:
            revision = resource.labels.get(DECLARED_REVISION_LABEL, revision)
        records.append(
            ResourceStateRecordV2(
                record_id="resource-state",
                resource_id=request.target,
                resource_type="platform-resource",
                revision=revision,
                attributes=dict(resource.attributes),
            )
        )
    return records


def evaluate_policy_v2(
    request: ControlRequest,
    platform: PlatformView,
    *,
    engine: Engine,
    approval_timeout_s: float,
    flaws: PolicyFlaws = _NO_FLAWS,
) -> PolicyResult:
    """Decide `request` under the v0.2 policy, at the platform's current simulated time.

    Args:
        request: The request.
        platform: Service APIs of the target platform.
        engine: `reference` (`assess_v2`) or `cedar` (the Cedar v2 encoding).
        approval_timeout_s: An approval query slower than this counts as unavailable.
        flaws: Deliberate deviations (known-bad boundaries only).

    Returns:
        The decision with its first reason code at the decisive precedence level.
    """
    return V2Evaluator(engine, approval_timeout_s, flaws).evaluate(request, platform)
