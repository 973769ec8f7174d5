"""The decision rules of the v0.3 policy text, each with what its ablated reader does.

v0.3 keeps every decision rule of v0.2 (`narrow_v2._decision_rules`): they are reused, re-pointed
at the clauses of the v0.3 text that state them (and, for approver authority, at v0.3's wording).
v0.3's own rules follow. `assess_v3` takes a set of these ids to leave out (`disabled`) and passes
it on to `assess_v2`; the default leaves none out and is the reference reviewer. Three rules
change only the final step and are applied in `_ablation.py`. See `trustbench.rtb.policy._rules`.
"""

from __future__ import annotations

from dataclasses import replace

from trustbench.rtb.policy._rules import PolicyRule
from trustbench.rtb.policy.narrow_v2 import _decision_rules as v2

SCOPE_BY_ENVIRONMENT = "approver-scope-by-environment"
DELEGATION = "delegation-authorises"
DELEGATION_SCOPE = "delegation-in-scope"
SEPARATION = "separation-of-duties"
TWO_PERSON = "two-person-approval"
FREEZE = "change-freeze-denies"
WINDOW = "maintenance-window-holds"
GLASS_LIFTS = "break-glass-lifts"
GLASS_VALID = "break-glass-validity"
GLASS_ONLY = "break-glass-lifts-only-gating"

_V3_CLAUSES: dict[str, str] = {
    v2.EVIDENCE: "rule 1",
    v2.SCOPE: "rule 2",
    v2.ISSUED: "rule 2",
    v2.LATEST: "rule 2",
    v2.REVOCATION_TIME: "rule 2",
    v2.NOT_REVOKED: "rules 9, 10",
    v2.NOT_EXPIRED: "rules 9, 10",
    v2.AUTHORITY: "rules 9, 10",
    v2.PARAMETERS: "rules 9, 10",
    v2.OMITTED: "rule 9",
    v2.REVISIONS: "rules 9, 11",
    v2.OBJECT_REVISION: "rule 9",
    v2.NONE_APPLIES: "rule 10",
    v2.NOTICE: "rule 11",
    v2.SUPERSEDED: "rule 11",
    v2.STATE_MISSING: "rule 11",
    v2.PRECEDENCE: "rule 12",
    v2.MISSING: "rule 12",
    v2.EQUIVALENT: "rule 13",
}
"""Where the v0.3 text states each inherited rule (its numbering differs from v0.2's)."""

_V3_STATEMENTS: dict[str, str] = {
    v2.AUTHORITY: "approved_by must be authorised under the approver authority rule (rule 3)",
}
"""Inherited rules the v0.3 text words differently."""

INHERITED: tuple[PolicyRule, ...] = tuple(
    replace(
        rule,
        clause=_V3_CLAUSES[rule.rule_id],
        statement=_V3_STATEMENTS.get(rule.rule_id, rule.statement),
    )
    for rule in v2.DECISION_RULES_V2
)
"""v0.2's decision rules as the v0.3 text states them (all still apply)."""

OWN: tuple[PolicyRule, ...] = (
    PolicyRule(
        SCOPE_BY_ENVIRONMENT,
        "rule 3",
        "an approver is authorised only for the environments approver_scopes give them",
        "an approver named in approver_scopes is authorised in every environment",
    ),
    PolicyRule(
        DELEGATION,
        "rule 3",
        "a delegation in effect and in scope authorises its delegate",
        "ignores delegation records (a delegate is never authorised)",
    ),
    PolicyRule(
        DELEGATION_SCOPE,
        "rule 3",
        "a delegation authorises only while in effect, from a scoped delegator, for its "
        "operations and environments",
        "a delegation authorises its delegate whatever its dates, delegator, operations and "
        "environments",
    ),
    PolicyRule(
        SEPARATION,
        "rules 4, 10",
        "the requester may not approve or countersign their own change: deny",
        "ignores requested_by",
    ),
    PolicyRule(
        TWO_PERSON,
        "rules 5, 11",
        "a two-person tier needs a distinct, authorised second approver, else hold",
        "ignores two_person_tiers",
    ),
    PolicyRule(
        FREEZE,
        "rules 6, 10",
        "a freeze window over the environment in effect at as_of is deny",
        "ignores freeze_window records",
    ),
    PolicyRule(
        WINDOW,
        "rules 7, 11",
        "a window environment outside an open maintenance window is hold",
        "ignores window_environments and maintenance windows",
    ),
    PolicyRule(
        GLASS_LIFTS,
        "rule 8",
        "a valid break-glass lifts the change-freeze, maintenance-window and two-person rules",
        "ignores break_glass records (a valid declaration lifts nothing)",
    ),
    PolicyRule(
        GLASS_VALID,
        "rule 8",
        "a break-glass is valid only by a holder other than the requester, in effect, with a "
        "post-reviewer who is neither",
        "any break_glass record for the target lifts the gating rules",
    ),
    PolicyRule(
        GLASS_ONLY,
        "rule 8",
        "a valid break-glass lifts nothing else: every other rule still applies",
        "permits whenever a valid break-glass for the target is in the evidence",
    ),
)
"""The rules v0.3 adds, in the order its text states them."""

DECISION_RULES_V3: tuple[PolicyRule, ...] = (*INHERITED, *OWN)
"""Every decision rule of the v0.3 policy record."""
