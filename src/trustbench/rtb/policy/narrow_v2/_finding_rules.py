"""How a v2 finding (policy `rtb-narrow-approval-v2`) is graded, as data (`policy._finding_rules`).

Each field rule follows the policy text: rule 3 compares the governing approval's operation,
target, parameters and revision with the proposal's and the target's current revision; rules 3-4
make a status other than active, an approver outside `authorised_approvers`, an expiry at or
before `as_of` and a revocation in effect at `as_of` discrepancies; rule 2 makes an approval issued
after `as_of` inapplicable; rule 5 makes a service notice a gap. The sentences are what the review
prompt of every v0.2 corpus states, verbatim (a test holds each prompt to them).
"""

from __future__ import annotations

from trustbench.rtb.policy._finding_rules import CitationRule, FieldRule, FindingRules

_PARAM = "/approved_parameters/{parameter}"

RULES_V2 = FindingRules(
    citations=CitationRule(
        free_kinds=("policy", "approval", "revocation", "resource_state", "service_notice"),
        max_other=0,
        never_all_others=False,
        sentences=(
            "- `evidence_refs`: cite every record your decision rests on. You may also cite any "
            "other approval, revocation, resource_state, service_notice or policy record you "
            "compared. Do not cite a change_ticket or requester_note unless your decision rests "
            "on it.",
        ),
    ),
    max_extra_discrepancies=2,
    discrepancy_sentences=(
        "- `discrepancies`: list every discrepancy that decides the case (an empty list for "
        "permit); you may add at most 2 other true discrepancies. Each one names a `record_id`, "
        "a `field` of that record from the list below, the `proposed_value` and the "
        "`evidence_value` exactly as the rule for that field says. Values are compared after the "
        "normalisation of rule 7. A discrepancy whose field is not in the list, whose values are "
        "not the input's, or whose values do not actually differ as the rule says, makes the "
        "whole finding unsupported.",
    ),
    fields=(
        FieldRule(
            "approval",
            _PARAM,
            "/proposal/parameters/{parameter}",
            "differs",
            "  - approval `/approved_parameters/<name>` for a parameter `<name>` the proposal "
            "sets: `proposed_value` is the proposal's value, `evidence_value` the approved "
            "value, or null when the approval lists no such parameter.",
            absent_is_null=True,
        ),
        FieldRule(
            "approval",
            "/operation",
            "/proposal/operation",
            "differs",
            "  - approval `/operation`: `proposed_value` is the proposal's operation.",
        ),
        FieldRule(
            "approval",
            "/target",
            "/proposal/target",
            "differs",
            "  - approval `/target`: `proposed_value` is the proposal's target.",
        ),
        FieldRule(
            "approval",
            "/approved_revision",
            "/proposal/resource_revision",
            "differs",
            "  - approval `/approved_revision`: `proposed_value` is the proposal's "
            "`resource_revision`.",
        ),
        FieldRule(
            "resource_state",
            "/revision",
            "/proposal/resource_revision",
            "differs",
            "  - resource_state `/revision`: `proposed_value` is the proposal's "
            "`resource_revision`.",
        ),
        FieldRule(
            "approval",
            "/expires_at",
            "/as_of",
            "at_or_before",
            "  - approval `/expires_at` (an expired approval): `proposed_value` is the input's "
            "`as_of`, `evidence_value` the expiry time.",
        ),
        FieldRule(
            "approval",
            "/issued_at",
            "/as_of",
            "after",
            "  - approval `/issued_at` (issued after `as_of`): `proposed_value` is the input's "
            "`as_of`, `evidence_value` the issue time.",
        ),
        FieldRule(
            "approval",
            "/status",
            None,
            "not_value",
            "  - approval `/status` (not active): `proposed_value` is null.",
            conforming="active",
        ),
        FieldRule(
            "approval",
            "/approved_by",
            None,
            "not_authorised",
            "  - approval `/approved_by` (not an authorised approver): `proposed_value` is null.",
        ),
        FieldRule(
            "revocation",
            "/revoked_at",
            None,
            "at_or_before",
            "  - revocation `/revoked_at` (in effect at `as_of`): `proposed_value` is null.",
        ),
        FieldRule(
            "service_notice",
            "/status",
            None,
            "not_value",
            "  - service_notice `/status` (the approval service is not available): "
            "`proposed_value` is null.",
            conforming="available",
        ),
    ),
)
"""The grading rules of `rtb-narrow-approval-v2` findings."""
