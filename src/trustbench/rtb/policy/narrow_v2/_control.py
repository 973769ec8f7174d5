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

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, ClassVar, Literal

from pydantic import BaseModel

from trustbench.errors import InputError
from trustbench.rtb.boundaries._protocol import DECLARED_REVISION_LABEL, PolicyFlaws, PolicyResult
from trustbench.rtb.corpus._models import Decision, Proposal, ServiceNoticeRecord
from trustbench.rtb.corpus._normalise import equivalent
from trustbench.rtb.platform import (
    Approval,
    ApprovalSeed,
    ApprovalServiceUnavailable,
    ControlRequest,
    FaultType,
    PlatformSeed,
    PlatformView,
    ResourceSeed,
    RevocationSeed,
)
from trustbench.rtb.policy._records import approval_terms, resource_seed
from trustbench.rtb.policy.narrow_v2._cedar import CedarFinding, cedar_assess_v2
from trustbench.rtb.policy.narrow_v2._models import (
    POLICY_ID_V2,
    ApprovalRecordV2,
    CandidateInputV2,
    CaseV2,
    EvidenceRecordV2,
    PolicyRecordV2,
    ReasonCodeV2,
    ResourceStateRecordV2,
    RevocationRecord,
)
from trustbench.rtb.policy.narrow_v2._reviewer import FindingV2, assess_v2

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


# ------------------------------------------------------------------------------------------------
# Policy `rtb-narrow-approval-v2` enforced on live simulated-platform state.
#
# No third copy of the policy: this module reads the platform's service APIs (approvals with their
# approvers and issue times, revocation records, the resource's authoritative revision, the
# authorised approvers configured on the platform, the simulated clock as the evaluation time),
# writes them as the evidence records of a v0.2 candidate input (every approval the service holds,
# so an approval for another target is shown as the case shows it), and asks one of the two existing
# encodings to decide: `assess_v2` (the `reference` boundary) or the Cedar v2 policy
# (`cedar_assess_v2`, the `cedar` boundary). The known-bad boundaries' flaws are applied to that
# evidence (an expiry dropped, a label believed, an outage read as approval), so each one differs
# from the correct boundary in exactly one place.
#
# The grader never calls this: outcomes come from the observer and the case's authored reference
# decision.

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

    def review_input(self, request: ControlRequest, platform: PlatformView) -> Any:
        """The live proposal as the candidate input a reviewer reads (workflow review chains).

        When the approval service cannot be read the input shows no approval (a reviewer is
        never told an approval exists that nobody could read).
        """
        evidence = live_evidence(
            request, platform, self.flaws, self.approval_timeout_s, self.approval_model
        )
        return self.candidate_input(request, platform, evidence or [])

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
