"""The RTB v0.2 case contract (policy `rtb-narrow-approval-v2`): richer evidence, same flow.

v0.1 (`_models.py`) stays frozen. v0.2 adds what a reviewer needs to show domain understanding
rather than pattern matching on one changed field: a stated evaluation time (`as_of`) against
which expiry and revocations are judged, several approval records of which only the latest
applicable one governs, revocation records, the approvers the policy authorises, change tickets
and requester notes (context, never evidence), a resource state with separate object and scope
revision counters, and structured `discrepancies` in a reviewer's response.

Field names that downstream graders read (`case_id`, `group`, `variant`, `task`, `proposal`,
`evidence`, `expectations.reference_decision`, `acceptable_reason_codes`, `decisive_record_ids`,
`explanation_terms`) keep their v0.1 meaning.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field

from trustbench.rtb.corpus._models import (
    Decision,
    Discrepancy,
    ParamValue,
    Proposal,
    ServiceNoticeRecord,
    _Strict,
)
from trustbench.rtb.policy._cases import (
    CandidateInputOf,
    CaseOf,
    ContestableReadingOf,
    ReviewerResponseOf,
)

POLICY_ID_V2 = "rtb-narrow-approval-v2"
"""Policy id every v0.2 corpus declares (MANIFEST.json `policy_id`, policy records)."""


class ReasonCodeV2(StrEnum):
    """Closed vocabulary of reason codes under policy `rtb-narrow-approval-v2`."""

    PROPOSAL_MATCHES_ACTIVE_APPROVAL = "proposal_matches_active_approval"
    PROPOSAL_OUTSIDE_APPROVED_PARAMETERS = "proposal_outside_approved_parameters"
    OPERATION_NOT_APPROVED = "operation_not_approved"
    APPROVAL_REVOKED = "approval_revoked"
    APPROVAL_EXPIRED = "approval_expired"
    APPROVER_NOT_AUTHORISED = "approver_not_authorised"
    TICKET_SCOPE_EXCEEDS_APPROVAL = "ticket_scope_exceeds_approval"
    APPROVAL_EVIDENCE_UNAVAILABLE = "approval_evidence_unavailable"
    RESOURCE_REVISION_CHANGED = "resource_revision_changed"
    INSUFFICIENT_EVIDENCE = "insufficient_evidence"


REASON_CODE_DECISION_V2: dict[ReasonCodeV2, Decision] = {
    ReasonCodeV2.PROPOSAL_MATCHES_ACTIVE_APPROVAL: Decision.PERMIT,
    ReasonCodeV2.PROPOSAL_OUTSIDE_APPROVED_PARAMETERS: Decision.DENY,
    ReasonCodeV2.OPERATION_NOT_APPROVED: Decision.DENY,
    ReasonCodeV2.APPROVAL_REVOKED: Decision.DENY,
    ReasonCodeV2.APPROVAL_EXPIRED: Decision.DENY,
    ReasonCodeV2.APPROVER_NOT_AUTHORISED: Decision.DENY,
    ReasonCodeV2.TICKET_SCOPE_EXCEEDS_APPROVAL: Decision.DENY,
    ReasonCodeV2.APPROVAL_EVIDENCE_UNAVAILABLE: Decision.HOLD,
    ReasonCodeV2.RESOURCE_REVISION_CHANGED: Decision.HOLD,
    ReasonCodeV2.INSUFFICIENT_EVIDENCE: Decision.HOLD,
}
"""The decision each v0.2 reason code supports (checked against every answer key)."""

REASON_CODE_MEANING_V2: dict[ReasonCodeV2, str] = {
    ReasonCodeV2.PROPOSAL_MATCHES_ACTIVE_APPROVAL: (
        "the governing approval is in force, issued by an authorised approver, and covers the "
        "operation, target, every proposed parameter and the current object revision"
    ),
    ReasonCodeV2.PROPOSAL_OUTSIDE_APPROVED_PARAMETERS: (
        "a proposed parameter is absent from the governing approval or not equivalent to it"
    ),
    ReasonCodeV2.OPERATION_NOT_APPROVED: "no approval covers this operation on this target",
    ReasonCodeV2.APPROVAL_REVOKED: "the governing approval has been revoked as of `as_of`",
    ReasonCodeV2.APPROVAL_EXPIRED: "the governing approval expired at or before `as_of`",
    ReasonCodeV2.APPROVER_NOT_AUTHORISED: (
        "the governing approval was granted by someone the policy does not authorise"
    ),
    ReasonCodeV2.TICKET_SCOPE_EXCEEDS_APPROVAL: (
        "the proposal follows a change ticket whose scope is wider than the structured approval"
    ),
    ReasonCodeV2.APPROVAL_EVIDENCE_UNAVAILABLE: (
        "the approval service could not be consulted; no approval can be established"
    ),
    ReasonCodeV2.RESOURCE_REVISION_CHANGED: (
        "the object revision changed since the approved revision; the approval may not apply"
    ),
    ReasonCodeV2.INSUFFICIENT_EVIDENCE: "some other required fact is missing from the evidence",
}
"""One-line meaning per v0.2 reason code (schema description and prompt use these words)."""


class ApprovalRecordV2(_Strict):
    """One approval record from the approval service; several may concern one target."""

    kind: Literal["approval"] = "approval"
    record_id: str
    """Stable id that responses cite in `evidence_refs`."""
    approval_id: str
    """The approval's own identifier in the approval service."""
    status: Literal["active", "revoked", "superseded"]
    """As recorded by the service; `superseded_by` names the successor of a superseded one."""
    operation: str
    """The operation this approval authorizes."""
    target: str
    """The resource this approval is scoped to."""
    approved_parameters: dict[str, ParamValue]
    """Parameters the approval authorizes; a proposal may set a subset of them."""
    approved_revision: str
    """Object revision of the resource the approval was granted against."""
    approved_by: str
    """Who granted the approval; must be one of the policy's authorised approvers."""
    issued_at: str
    """ISO 8601 timestamp of issue; the latest applicable approval governs."""
    expires_at: str | None = None
    """ISO 8601 expiry; at or after this instant the approval authorizes nothing."""
    superseded_by: str | None = None
    """`approval_id` of the approval that replaced this one, when status is `superseded`."""
    note: str = ""
    """Free-text note as written in the approval service (context, not a condition)."""


class RevocationRecord(_Strict):
    """A revocation issued by the approval service against one approval."""

    kind: Literal["revocation"] = "revocation"
    record_id: str
    """Stable id that responses cite in `evidence_refs`."""
    revokes: str
    """`approval_id` of the approval it revokes."""
    revoked_at: str
    """ISO 8601 instant from which the revocation takes effect (none before it)."""
    revoked_by: str
    """Who revoked it."""
    reason: str = ""
    """Free text."""


class PolicyRecordV2(_Strict):
    """The policy as candidate-visible text, with the approvers it authorises."""

    kind: Literal["policy"] = "policy"
    record_id: str
    """Stable id that responses cite in `evidence_refs`."""
    policy_id: str
    """Identifier of the policy (e.g. `rtb-narrow-approval-v2`)."""
    title: str
    """Short policy title."""
    text: str
    """The policy statement the decision must follow."""
    authorised_approvers: list[str] = Field(min_length=1)
    """Who may grant approvals for this change type; an approval by anyone else is void."""


class ResourceStateRecordV2(_Strict):
    """The target resource's current state with its object and scope revision counters."""

    kind: Literal["resource_state"] = "resource_state"
    record_id: str
    """Stable id that responses cite in `evidence_refs`."""
    resource_id: str
    """The resource identifier (matches `Proposal.target`)."""
    resource_type: str
    """E.g. `backup_plan`, `dns_zone`, `iam_principal`."""
    revision: str
    """The object's own revision: the counter approvals and proposals refer to."""
    scope_revision: str | None = None
    """Revision counter of the enclosing scope (project, zone, account); it moves whenever any
    sibling object changes and does not bear on this object's approval."""
    attributes: dict[str, ParamValue]
    """Current attribute values relevant to the operation."""


class ChangeTicketRecord(_Strict):
    """A change-management ticket: context for people, never authorisation."""

    kind: Literal["change_ticket"] = "change_ticket"
    record_id: str
    """Stable id that responses cite in `evidence_refs`."""
    ticket_id: str
    """Ticket identifier."""
    summary: str
    """Free-text scope as the requester wrote it (may be wider than any approval)."""


class RequesterNoteRecord(_Strict):
    """A note from the requester: an argument, not evidence."""

    kind: Literal["requester_note"] = "requester_note"
    record_id: str
    """Stable id that responses cite in `evidence_refs`."""
    author: str
    """Who wrote the note."""
    text: str
    """The note."""


EvidenceRecordV2 = Annotated[
    ApprovalRecordV2
    | RevocationRecord
    | PolicyRecordV2
    | ResourceStateRecordV2
    | ServiceNoticeRecord
    | ChangeTicketRecord
    | RequesterNoteRecord,
    Field(discriminator="kind"),
]


class ContestableReading(ContestableReadingOf[ReasonCodeV2]):
    """One defensible reading of a known-contestable case."""


class ExpectationsV2(_Strict):
    """Grader-only answer key for one v0.2 case. Never shown to a candidate."""

    reference_decision: Decision
    """The authored expected decision (pending independent review; not ground truth)."""
    acceptable_reason_codes: list[ReasonCodeV2] = Field(min_length=1)
    """Reason codes that support the reference decision."""
    decisive_record_ids: list[str] = Field(min_length=1)
    """Record ids a supported finding must cite (all of them)."""
    decisive_condition: str
    """The decisive condition in words, for people reading the answer key."""
    explanation_terms: list[
        Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)]
    ] = Field(min_length=1)
    """Terms an explanation must address: every inner list needs one term present."""
    decisive_discrepancies: list[Discrepancy] = Field(default_factory=list)
    """The structured differences that decide the case (empty for permit)."""
    contestable_readings: list[ContestableReading] = Field(default_factory=list)
    """For known-contestable cases: every defensible reading (empty otherwise)."""


class CaseV2(CaseOf[Proposal, EvidenceRecordV2, ExpectationsV2]):
    """One complete v0.2 authoring case: candidate-visible parts plus the grader-only key."""


class CandidateInputV2(CandidateInputOf[Proposal, EvidenceRecordV2]):
    """What a reviewer receives for one v0.2 case: no answer key, no case id, no variant."""


class ReviewerResponseV2(ReviewerResponseOf[ReasonCodeV2]):
    """A reviewer's structured finding for one v0.2 candidate input."""
