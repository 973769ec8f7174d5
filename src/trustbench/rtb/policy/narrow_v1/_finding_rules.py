"""How a v1 finding (policy `rtb-narrow-approval-v1`) is graded, as data (`policy._finding_rules`).

The v0.1 response format has no structured discrepancies, so only the citation rule applies: every
decisive record, the policy record freely, at most one other record and never every other one (a
list of every record id would otherwise pass on every three-record case of the starter).
"""

from __future__ import annotations

from trustbench.rtb.policy._finding_rules import CitationRule, FindingRules

RULES_V1 = FindingRules(
    citations=CitationRule(
        free_kinds=("policy",),
        max_other=1,
        never_all_others=True,
        sentences=(
            "  Besides the records your decision depends on and the policy record, cite at most "
            "one other record, and never every other record.",
        ),
    ),
)
"""The grading rules of `rtb-narrow-approval-v1` findings."""
