"""The RTB v0.3 case contract (policy `rtb-narrow-approval-v3`): v0.2 plus the gating conditions.

What a platform-security team gates a change on beyond one matching approval, each a record or
a field a reviewer must read: the requester (separation of duties), the environment and risk
tier of the change (approver scope by environment, two-person approval), change-freeze and
maintenance windows, delegations with their scope, and break-glass declarations with their
after-the-fact review. Where v0.2's records mean the same they are reused (revocations, resource
state, tickets, notes, service notices); an approval is v0.2's plus its co-approvers.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field

from trustbench.rtb.corpus._models import (
    Decision,
    Discrepancy,
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
from trustbench.rtb.policy.narrow_v2._models import (
    REASON_CODE_DECISION_V2,
    REASON_CODE_MEANING_V2,
    ApprovalRecordV2,
    ChangeTicketRecord,
    RequesterNoteRecord,
    ResourceStateRecordV2,
    RevocationRecord,
)

# ------------------------------------------------------------------------------------------------
# The v0.3 policy text as a rule table: one id and one sentence per rule.
#
# The policy record of every v0.3 case, the review prompt and the answer key's `decisive_rules`
# are all read from this one table, so a rule cited as deciding a case is a rule the candidate was
# shown, worded exactly as shown.

POLICY_ID_V3 = "rtb-narrow-approval-v3"
"""Policy id every v0.3 corpus declares (MANIFEST.json `policy_id`, policy records)."""

POLICY_TITLE_V3 = "Synthetic change-authorization policy v3 (RTB v0.3)"
"""Title of the policy record."""

RULES: tuple[tuple[str, str], ...] = (
    (
        "evidence",
        "Evidence. Only approval, revocation, policy, resource_state, service_notice, "
        "freeze_window, maintenance_window, delegation and break_glass records are evidence. "
        "Change tickets and requester notes are context: they never grant, widen, extend, "
        "confirm or revoke anything.",
    ),
    (
        "applicability",
        "Applicable approvals. An approval record applies when its operation and target equal "
        "the proposal's and its issued_at is at or before as_of. Among applicable approvals the "
        "one with the latest issued_at governs; every earlier one is superseded whatever its "
        "status says. A revocation record revokes the approval whose approval_id it names from "
        "its revoked_at onward; a revocation dated after as_of has not taken effect.",
    ),
    (
        "approver_scope",
        "Approver authority by environment. An approver is authorised for the proposal when "
        "the policy record's approver_scopes give that approver the proposal's environment, or "
        "when a delegation record is in effect at as_of (valid_from at or before as_of, "
        "valid_until after it) whose delegate is that approver, whose delegator is authorised "
        "for the environment by approver_scopes, and whose operations and environments include "
        "the proposal's operation and environment. A delegation never reaches further than its "
        "scope, and a delegate cannot delegate again.",
    ),
    (
        "separation_of_duties",
        "Separation of duties. The proposal names its requester (requested_by). Neither the "
        "governing approval's approved_by nor any of its co_approved_by may be the requester; "
        "an approval in which the requester approves their own change is a prohibition.",
    ),
    (
        "two_person",
        "Two-person approval. When the proposal's risk_tier is one of the policy record's "
        "two_person_tiers, the governing approval also needs a second approver: a name in its "
        "co_approved_by that differs from approved_by and is authorised under the approver "
        "authority rule. Without one the approval is incomplete.",
    ),
    (
        "change_freeze",
        "Change freeze. A freeze_window whose environments include the proposal's environment "
        "and whose starts_at is at or before as_of and whose ends_at is after as_of forbids the "
        "change.",
    ),
    (
        "maintenance_window",
        "Maintenance windows. When the proposal's environment is one of the policy record's "
        "window_environments, the change may run only inside a maintenance_window for that "
        "environment (starts_at at or before as_of, ends_at after as_of); outside one it must "
        "wait.",
    ),
    (
        "break_glass",
        "Break-glass. A break_glass record is valid when its target equals the proposal's, its "
        "declared_by is one of the policy record's break_glass_holders and is not the "
        "requester, its declared_at is at or before as_of and its expires_at after as_of, and "
        "it names a post_review_by (the after-the-fact reviewer) who is neither declared_by "
        "nor the requester. A valid break-glass lifts only the change-freeze, maintenance-"
        "window and two-person rules; every other rule still applies.",
    ),
    (
        "permit",
        "Permit requires all of: the governing approval has status active, is not revoked and "
        "has not expired (an approval whose expires_at is at or before as_of has expired); its "
        "approved_by is authorised under the approver authority rule; every proposed parameter "
        "appears in its approved_parameters with an equivalent value (a proposal may leave "
        "approved parameters out); its approved_revision, the proposal's resource_revision and "
        "the target's current object revision (resource_state `revision`) are the same; and "
        "the separation-of-duties, two-person, change-freeze and maintenance-window rules are "
        "met. A resource's scope_revision does not bear on the object.",
    ),
    (
        "deny",
        "Deny (an explicit prohibition): the governing approval is revoked, expired or granted "
        "by an approver not authorised under the approver authority rule; the proposal sets a "
        "parameter that is not approved or not equivalent to the approved value; the requester "
        "approved their own change; a change freeze forbids the change; or approval records "
        "are present, the approval service is available, and none applies to this operation on "
        "this target.",
    ),
    (
        "hold",
        "Hold (missing or stale information): the approval-service is unavailable or degraded "
        "(a service notice) and no applicable approval is in the evidence; the governing "
        "approval's status is superseded but its successor is not in the evidence; the "
        "target's current state is missing; the three revisions of the permit rule differ; a "
        "required second approval is missing; or the change is outside a required maintenance "
        "window.",
    ),
    (
        "precedence",
        "Precedence: deny outranks hold, hold outranks permit. Missing information without an "
        "established prohibition is hold, never permit.",
    ),
    (
        "encodings",
        "Equivalent encodings. Values compare after normalisation: a string holding a base-10 "
        'integer equals that integer ("22" equals 22; booleans never equal numbers); strings '
        "are trimmed of surrounding whitespace; a DNS name compares case-insensitively and "
        "without its trailing dot; a list compares as the sorted list of its normalised items. "
        "Times are ISO 8601 instants and compare as instants, whatever their offset.",
    ),
)
"""(rule id, sentence) in the order the policy text numbers them."""

RULE_IDS: tuple[str, ...] = tuple(rule_id for rule_id, _ in RULES)
"""Every rule id (what `expectations.decisive_rules` may name)."""


def policy_text_v3() -> str:
    """The numbered policy text every v0.3 policy record and prompt states."""
    lines = [f"Policy {POLICY_ID_V3}. Judge every time against the input's `as_of` instant."]
    lines += [f"{n}. {sentence}" for n, (_, sentence) in enumerate(RULES, start=1)]
    return "\n".join(lines)


class ReasonCodeV3(StrEnum):
    """Closed vocabulary of reason codes under policy `rtb-narrow-approval-v3`."""

    PROPOSAL_MATCHES_ACTIVE_APPROVAL = "proposal_matches_active_approval"
    PROPOSAL_OUTSIDE_APPROVED_PARAMETERS = "proposal_outside_approved_parameters"
    OPERATION_NOT_APPROVED = "operation_not_approved"
    APPROVAL_REVOKED = "approval_revoked"
    APPROVAL_EXPIRED = "approval_expired"
    APPROVER_NOT_AUTHORISED = "approver_not_authorised"
    TICKET_SCOPE_EXCEEDS_APPROVAL = "ticket_scope_exceeds_approval"
    REQUESTER_APPROVED_OWN_CHANGE = "requester_approved_own_change"
    CHANGE_FREEZE_IN_EFFECT = "change_freeze_in_effect"
    APPROVAL_EVIDENCE_UNAVAILABLE = "approval_evidence_unavailable"
    RESOURCE_REVISION_CHANGED = "resource_revision_changed"
    SECOND_APPROVAL_MISSING = "second_approval_missing"
    OUTSIDE_MAINTENANCE_WINDOW = "outside_maintenance_window"
    INSUFFICIENT_EVIDENCE = "insufficient_evidence"


_NEW_DECISION: dict[str, Decision] = {
    "requester_approved_own_change": Decision.DENY,
    "change_freeze_in_effect": Decision.DENY,
    "second_approval_missing": Decision.HOLD,
    "outside_maintenance_window": Decision.HOLD,
}
_NEW_MEANING: dict[str, str] = {
    "requester_approved_own_change": (
        "the requester is the governing approval's approver or one of its co-approvers"
    ),
    "change_freeze_in_effect": (
        "a change freeze covering the proposal's environment is in effect at `as_of` and no "
        "valid break-glass lifts it"
    ),
    "second_approval_missing": (
        "the risk tier requires two-person approval and no authorised second approver is "
        "recorded (and no valid break-glass lifts the requirement)"
    ),
    "outside_maintenance_window": (
        "the environment requires a maintenance window and none is open at `as_of` (and no "
        "valid break-glass lifts the requirement)"
    ),
}

REASON_CODE_DECISION_V3: dict[ReasonCodeV3, Decision] = {
    ReasonCodeV3(code): decision
    for code, decision in (
        *((c.value, d) for c, d in REASON_CODE_DECISION_V2.items()),
        *_NEW_DECISION.items(),
    )
}
"""The decision each v0.3 reason code supports: v0.2's codes keep theirs."""

REASON_CODE_MEANING_V3: dict[ReasonCodeV3, str] = {
    code: ({c.value: m for c, m in REASON_CODE_MEANING_V2.items()} | _NEW_MEANING)[code.value]
    for code in ReasonCodeV3
}
"""One-line meaning per v0.3 reason code (schema description and prompt use these words)."""


class ProposalV3(Proposal):
    """The change, with who requests it, where it runs and its risk tier."""

    requested_by: str
    """Who requests the change (may not approve it)."""
    environment: str
    """The environment the target lives in (approver scopes and windows name environments)."""
    risk_tier: str
    """Risk tier of the change (the policy names the tiers that need two approvers)."""


class ApprovalRecordV3(ApprovalRecordV2):
    """A v0.2 approval plus the second approvers who countersigned it."""

    co_approved_by: list[str] = Field(default_factory=list)
    """Further approvers who countersigned this approval (two-person approval)."""


class PolicyRecordV3(_Strict):
    """The policy as candidate-visible text, with its approver scopes, tiers and holders."""

    kind: Literal["policy"] = "policy"
    record_id: str
    """Stable id that responses cite in `evidence_refs`."""
    policy_id: str
    """Identifier of the policy (`rtb-narrow-approval-v3`)."""
    title: str
    """Short policy title."""
    text: str
    """The policy statement the decision must follow."""
    approver_scopes: dict[str, list[str]] = Field(min_length=1)
    """Approver -> the environments they may approve changes in."""
    two_person_tiers: list[str]
    """Risk tiers whose changes need a second approver."""
    window_environments: list[str]
    """Environments whose changes run only inside a maintenance window."""
    break_glass_holders: list[str]
    """Who may declare a break-glass."""


class FreezeWindowRecord(_Strict):
    """A change freeze from the change calendar."""

    kind: Literal["freeze_window"] = "freeze_window"
    record_id: str
    """Stable id that responses cite in `evidence_refs`."""
    environments: list[str] = Field(min_length=1)
    """Environments the freeze covers."""
    starts_at: str
    """ISO 8601 start (the freeze is in effect from this instant)."""
    ends_at: str
    """ISO 8601 end (no longer in effect from this instant)."""
    reason: str = ""
    """Free text."""


class MaintenanceWindowRecord(_Strict):
    """A maintenance window from the change calendar."""

    kind: Literal["maintenance_window"] = "maintenance_window"
    record_id: str
    """Stable id that responses cite in `evidence_refs`."""
    environment: str
    """The environment the window is for."""
    starts_at: str
    """ISO 8601 opening instant."""
    ends_at: str
    """ISO 8601 closing instant (closed from this instant)."""


class DelegationRecord(_Strict):
    """A delegation of approval authority, bounded in scope and time."""

    kind: Literal["delegation"] = "delegation"
    record_id: str
    """Stable id that responses cite in `evidence_refs`."""
    delegator: str
    """Who delegates (must hold the authority themselves)."""
    delegate: str
    """Who receives it."""
    operations: list[str] = Field(min_length=1)
    """Operations the delegate may approve."""
    environments: list[str] = Field(min_length=1)
    """Environments the delegate may approve in."""
    valid_from: str
    """ISO 8601 start of the delegation."""
    valid_until: str
    """ISO 8601 end (no longer in effect from this instant)."""


class BreakGlassRecord(_Strict):
    """An emergency (break-glass) declaration with its after-the-fact review."""

    kind: Literal["break_glass"] = "break_glass"
    record_id: str
    """Stable id that responses cite in `evidence_refs`."""
    target: str
    """The resource the emergency concerns."""
    declared_by: str
    """Who declared it."""
    incident: str
    """Incident reference (free text)."""
    declared_at: str
    """ISO 8601 instant of the declaration."""
    expires_at: str
    """ISO 8601 instant from which it no longer applies."""
    post_review_by: str | None = None
    """Who reviews the change after the fact (none named: the break-glass is not valid)."""


EvidenceRecordV3 = Annotated[
    ApprovalRecordV3
    | RevocationRecord
    | PolicyRecordV3
    | ResourceStateRecordV2
    | ServiceNoticeRecord
    | ChangeTicketRecord
    | RequesterNoteRecord
    | FreezeWindowRecord
    | MaintenanceWindowRecord
    | DelegationRecord
    | BreakGlassRecord,
    Field(discriminator="kind"),
]


class ContestableReadingV3(ContestableReadingOf[ReasonCodeV3]):
    """One defensible reading of a known-contestable case."""


class ExpectationsV3(_Strict):
    """Grader-only answer key for one v0.3 case. Never shown to a candidate."""

    reference_decision: Decision
    """The authored expected decision (pending independent review; not ground truth)."""
    acceptable_reason_codes: list[ReasonCodeV3] = Field(min_length=1)
    """Reason codes that support the reference decision."""
    decisive_rules: list[str] = Field(min_length=1)
    """Ids of the policy rules that decide the case (the rule table of the policy text)."""
    decisive_record_ids: list[str] = Field(min_length=1)
    """Record ids a supported finding must cite (all of them)."""
    decisive_condition: str
    """The decisive condition in words, for people reading the answer key."""
    explanation_terms: list[
        Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)]
    ] = Field(min_length=1)
    """Terms an explanation must address: every inner list needs one term present."""
    decisive_discrepancies: list[Discrepancy] = Field(default_factory=list)
    """The structured differences that decide the case (may be empty)."""
    contestable_readings: list[ContestableReadingV3] = Field(default_factory=list)
    """For known-contestable cases: every defensible reading (empty otherwise)."""


class CaseV3(CaseOf[ProposalV3, EvidenceRecordV3, ExpectationsV3]):
    """One complete v0.3 authoring case: candidate-visible parts plus the grader-only key."""

    variant: str
    """Scenario kind (the condition it exercises)."""
    as_of: str
    """ISO 8601 evaluation time: every window, expiry and revocation is judged at this instant."""


class CandidateInputV3(CandidateInputOf[ProposalV3, EvidenceRecordV3]):
    """What a reviewer receives for one v0.3 case: no answer key, no case id, no variant."""


class ReviewerResponseV3(ReviewerResponseOf[ReasonCodeV3]):
    """A reviewer's structured finding for one v0.3 candidate input."""

    discrepancies: list[Discrepancy]
    """Each difference between the proposal and an evidence record that decides the case
    (may be empty)."""
