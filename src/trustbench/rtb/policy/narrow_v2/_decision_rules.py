"""The decision rules of the v0.2 policy text (rules 1-7), each with what its ablated reader does.

`assess_v2` takes a set of these ids to leave out (`disabled`); the default leaves none out and is
the reference reviewer. Two rules change only the final step and are applied in `_ablation.py`
(believing tickets and notes, failing open). See `trustbench.rtb.policy._rules`.
"""

from __future__ import annotations

from trustbench.rtb.policy._rules import PolicyRule

EVIDENCE = "evidence-records-only"
SCOPE = "operation-and-target"
ISSUED = "issued-by-as-of"
LATEST = "latest-governs"
REVOCATION_TIME = "revocation-from-revoked-at"
NOT_REVOKED = "not-revoked"
NOT_EXPIRED = "not-expired"
AUTHORITY = "authorised-approver"
PARAMETERS = "approved-parameters"
OMITTED = "omitted-parameters-allowed"
REVISIONS = "revisions-agree"
OBJECT_REVISION = "object-revision-not-scope"
NONE_APPLIES = "none-applies-denies"
NOTICE = "service-notice-holds"
SUPERSEDED = "superseded-holds"
STATE_MISSING = "state-missing-holds"
PRECEDENCE = "deny-outranks-hold"
MISSING = "missing-is-hold"
EQUIVALENT = "equivalent-encodings"


def _rule(rule_id: str, clause: str, statement: str, ablation: str) -> PolicyRule:
    return PolicyRule(rule_id, clause, statement, ablation)


DECISION_RULES_V2: tuple[PolicyRule, ...] = (
    _rule(
        EVIDENCE,
        "rule 1",
        "change tickets and requester notes are not evidence",
        "believes tickets and notes: one arguing for the change permits, one saying it is "
        "revoked or to reject denies",
    ),
    _rule(
        SCOPE,
        "rule 2",
        "an approval applies when its operation and target equal the proposal's",
        "an approval applies whatever its operation and target",
    ),
    _rule(
        ISSUED,
        "rule 2",
        "an approval applies only when issued at or before as_of",
        "ignores as_of for issuance (an approval issued later applies)",
    ),
    _rule(
        LATEST,
        "rule 2",
        "the applicable approval with the latest issued_at governs",
        "the first applicable approval in evidence order governs",
    ),
    _rule(
        REVOCATION_TIME,
        "rule 2",
        "a revocation takes effect from its revoked_at (one dated after as_of has not)",
        "a revocation takes effect whatever its revoked_at",
    ),
    _rule(
        NOT_REVOKED,
        "rules 3, 4",
        "a revoked governing approval is deny",
        "ignores status revoked and revocation records",
    ),
    _rule(
        NOT_EXPIRED,
        "rules 3, 4",
        "an approval whose expires_at is at or before as_of has expired: deny",
        "ignores expires_at",
    ),
    _rule(
        AUTHORITY,
        "rules 3, 4",
        "approved_by must be one of the policy record's authorised_approvers",
        "ignores approver authority",
    ),
    _rule(
        PARAMETERS,
        "rules 3, 4",
        "every proposed parameter must be approved with an equivalent value",
        "ignores parameters",
    ),
    _rule(
        OMITTED,
        "rule 3",
        "a proposal may leave approved parameters out",
        "requires exactly the approved parameter set (one left out is deny)",
    ),
    _rule(
        REVISIONS,
        "rules 3, 5",
        "approved, proposal and current object revisions must be the same, else hold",
        "never compares revisions",
    ),
    _rule(
        OBJECT_REVISION,
        "rule 3",
        "scope_revision does not bear on the object; the object revision does",
        "reads scope_revision (where present) as the current revision",
    ),
    _rule(
        NONE_APPLIES,
        "rule 4",
        "approvals present, service available, none applies: deny",
        "holds (insufficient evidence) when no approval applies",
    ),
    _rule(
        NOTICE,
        "rule 5",
        "an unavailable or degraded approval-service with no applicable approval is hold",
        "ignores approval-service notices",
    ),
    _rule(
        SUPERSEDED,
        "rule 5",
        "a governing approval marked superseded whose successor is absent is hold",
        "reads status superseded as active",
    ),
    _rule(
        STATE_MISSING,
        "rule 5",
        "a missing (or ambiguous) current state of the target is hold",
        "compares only the approved and the proposal revision when the state is missing",
    ),
    _rule(
        PRECEDENCE,
        "rule 6",
        "deny outranks hold",
        "checks for missing or stale information first: hold outranks deny",
    ),
    _rule(
        MISSING,
        "rule 6",
        "missing information without an established prohibition is hold, never permit",
        "permits when no prohibition is established and information is missing (fails open)",
    ),
    _rule(
        EQUIVALENT,
        "rule 7",
        "values compare after normalisation (integers in strings, whitespace, DNS case, lists)",
        "compares every value raw",
    ),
)
"""The rules of the v0.2 policy record, in the order the text states them."""
