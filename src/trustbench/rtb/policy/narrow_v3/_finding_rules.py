"""How a v3 finding (policy `rtb-narrow-approval-v3`) is graded, as data (`policy._finding_rules`).

v0.2's field rules carry over where the rules are v0.2's, except `approval /approved_by` as "not
authorised": under v0.3 authority depends on the environment and on delegations, which no single
field comparison shows. Added: `/approved_by` equal to the proposal's `requested_by` (separation of
duties) and a freeze window's `/ends_at` after `as_of` (a freeze in effect). The sentences are what
the review prompt of every v0.3 corpus states, verbatim (a test holds each prompt to them).
"""

from __future__ import annotations

from trustbench.rtb.policy._finding_rules import CitationRule, FieldRule, FindingRules
from trustbench.rtb.policy.narrow_v2._finding_rules import RULES_V2

RULES_V3 = FindingRules(
    citations=CitationRule(
        free_kinds=(
            "policy",
            "approval",
            "revocation",
            "resource_state",
            "service_notice",
            "freeze_window",
            "maintenance_window",
            "delegation",
            "break_glass",
        ),
        max_other=0,
        never_all_others=False,
        sentences=(
            "- `evidence_refs`: cite every record your decision rests on. You may also cite any "
            "other approval, revocation, resource_state, service_notice, freeze_window, "
            "maintenance_window, delegation, break_glass or policy record you compared. Do not "
            "cite a change_ticket or requester_note unless your decision rests on it.",
        ),
    ),
    max_extra_discrepancies=RULES_V2.max_extra_discrepancies,
    discrepancy_sentences=(
        "- `discrepancies`: list every discrepancy that decides the case (it may be empty); you "
        "may add at most 2 other true discrepancies. Each one names a `record_id`, a `field` of "
        "that record from the list below, the `proposed_value` and the `evidence_value` exactly "
        "as the rule for that field says. Values are compared after the normalisation of the "
        "equivalent-encodings rule. A discrepancy whose field is not in the list, whose values "
        "are not the input's, or whose values do not actually differ as the rule says, makes "
        "the whole finding unsupported.",
    ),
    fields=(
        *(rule for rule in RULES_V2.fields if rule.holds != "not_authorised"),
        FieldRule(
            "approval",
            "/approved_by",
            "/proposal/requested_by",
            "same",
            "  - approval `/approved_by` (the requester approved their own change): "
            "`proposed_value` is the proposal's `requested_by`.",
        ),
        FieldRule(
            "freeze_window",
            "/ends_at",
            "/as_of",
            "after",
            "  - freeze_window `/ends_at` (a freeze in effect at `as_of`): `proposed_value` is the "
            "input's `as_of`, `evidence_value` the end of the freeze.",
        ),
    ),
)
"""The grading rules of `rtb-narrow-approval-v3` findings."""
