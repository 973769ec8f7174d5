"""The v0.3 policy text as a rule table: one id and one sentence per rule.

The policy record of every v0.3 case, the review prompt and the answer key's `decisive_rules`
are all read from this one table, so a rule cited as deciding a case is a rule the candidate was
shown, worded exactly as shown.
"""

from __future__ import annotations

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
