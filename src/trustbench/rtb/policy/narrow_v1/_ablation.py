"""The rules of the v0.1 policy text, each with the reference reviewer that omits it.

Every ablated reader is `assess` on a rewritten input (the rule's facts made to agree, so the
rule can no longer decide) or `assess` with one step of its answer changed (precedence, holding on
missing information). The reference reviewer itself is untouched: a reader never sees more than
the candidate-visible input, and `rtb audit` shows each rule decides at least one case
(`trustbench.rtb.policy._rules`).
"""

from __future__ import annotations

from collections.abc import Callable

from trustbench.rtb.corpus._models import (
    ApprovalRecord,
    CandidateInput,
    Decision,
    ReasonCode,
    ResourceStateRecord,
    ServiceNoticeRecord,
)
from trustbench.rtb.policy._rules import PolicyRule, unknown_rule
from trustbench.rtb.policy.narrow_v1._reviewer import (
    PolicyFinding,
    ReferencePolicyReviewer,
    assess,
    finding_reply,
)

SCOPE = "operation-and-target"
ACTIVE = "approval-active"
PARAMETERS = "exact-parameters"
REVISION = "revision-current"
UNAVAILABLE = "service-notice-holds"
PRECEDENCE = "deny-outranks-hold"
MISSING = "missing-is-hold"

DECISION_RULES_V1: tuple[PolicyRule, ...] = (
    PolicyRule(
        SCOPE,
        "permit; deny",
        "an approval applies only to the same operation on the same target",
        "reads every approval as if it were for the proposal's operation and target",
    ),
    PolicyRule(
        ACTIVE,
        "permit; deny",
        "only an active approval authorizes; a revoked applicable approval is deny",
        "ignores an approval's status (a revoked approval reads as active)",
    ),
    PolicyRule(
        PARAMETERS,
        "permit; deny",
        "exactly the proposed parameters must be approved; beyond them is deny",
        "ignores parameters (any applicable active approval matches)",
    ),
    PolicyRule(
        REVISION,
        "permit; hold",
        "approved revision, proposal revision and current revision must agree; else hold",
        "never compares revisions",
    ),
    PolicyRule(
        UNAVAILABLE,
        "hold",
        "an unavailable approval service (a service notice) is hold",
        "ignores service notices",
    ),
    PolicyRule(
        PRECEDENCE,
        "precedence",
        "an established prohibition (deny) outranks missing or stale information (hold)",
        "checks for missing or stale information first: hold outranks deny",
    ),
    PolicyRule(
        MISSING,
        "precedence",
        "missing information without an established prohibition is hold, never permit",
        "permits when no prohibition is established and information is missing (fails open)",
    ),
)
"""The rules of the v0.1 policy record, in the order the text states them."""

_MISSING_CODES = frozenset(
    {ReasonCode.APPROVAL_EVIDENCE_UNAVAILABLE, ReasonCode.INSUFFICIENT_EVIDENCE}
)


def _rewrite_approvals(candidate_input: CandidateInput, **fields: object) -> CandidateInput:
    """The input with `fields` of every approval record replaced (values may be callables)."""
    evidence = []
    for record in candidate_input.evidence:
        if isinstance(record, ApprovalRecord):
            update = {k: v(record) if callable(v) else v for k, v in fields.items()}
            record = record.model_copy(update=update)
        evidence.append(record)
    return candidate_input.model_copy(update={"evidence": evidence})


def _without_scope(candidate_input: CandidateInput) -> CandidateInput:
    proposal = candidate_input.proposal
    return _rewrite_approvals(candidate_input, operation=proposal.operation, target=proposal.target)


def _without_status(candidate_input: CandidateInput) -> CandidateInput:
    return _rewrite_approvals(candidate_input, status="active", revoked_at=None)


def _without_parameters(candidate_input: CandidateInput) -> CandidateInput:
    return _rewrite_approvals(
        candidate_input, approved_parameters=dict(candidate_input.proposal.parameters)
    )


def _without_revisions(candidate_input: CandidateInput) -> CandidateInput:
    revision = candidate_input.proposal.resource_revision
    rewritten = _rewrite_approvals(candidate_input, approved_revision=revision)
    evidence = [
        r.model_copy(update={"revision": revision}) if isinstance(r, ResourceStateRecord) else r
        for r in rewritten.evidence
    ]
    return rewritten.model_copy(update={"evidence": evidence})


def _without_notices(candidate_input: CandidateInput) -> CandidateInput:
    evidence = [r for r in candidate_input.evidence if not isinstance(r, ServiceNoticeRecord)]
    return candidate_input.model_copy(update={"evidence": evidence})


def _hold_first(candidate_input: CandidateInput) -> PolicyFinding:
    """Hold whenever the input, with every prohibition's facts made to agree, would be hold."""
    finding = assess(candidate_input)
    if finding.decision is not Decision.DENY:
        return finding
    neutral = _without_parameters(_without_status(_without_scope(candidate_input)))
    stale = assess(neutral)
    return stale if stale.decision is Decision.HOLD else finding


def _fail_open(candidate_input: CandidateInput) -> PolicyFinding:
    """Permit where the reference holds only for missing information."""
    finding = assess(candidate_input)
    if finding.decision is Decision.HOLD and set(finding.reason_codes) <= _MISSING_CODES:
        return PolicyFinding(
            Decision.PERMIT,
            (ReasonCode.PROPOSAL_MATCHES_ACTIVE_APPROVAL,),
            finding.evidence_refs,
            "Nothing in the evidence prohibits the change (ablated reader: fails open).",
        )
    return finding


_REWRITES: dict[str, Callable[[CandidateInput], CandidateInput]] = {
    SCOPE: _without_scope,
    ACTIVE: _without_status,
    PARAMETERS: _without_parameters,
    REVISION: _without_revisions,
    UNAVAILABLE: _without_notices,
}
_READERS: dict[str, Callable[[CandidateInput], PolicyFinding]] = {
    PRECEDENCE: _hold_first,
    MISSING: _fail_open,
    **{
        rule: (lambda ci, rewrite=rewrite: assess(rewrite(ci)))
        for rule, rewrite in _REWRITES.items()
    },
}


class AblatedV1Reviewer(ReferencePolicyReviewer):
    """The v0.1 reference reviewer with one rule of the policy text removed."""

    def __init__(self, rule_id: str) -> None:
        if rule_id not in _READERS:
            raise unknown_rule(rule_id, DECISION_RULES_V1)
        self.rule_id = rule_id
        self.name = f"reference-policy-without-{rule_id}"
        self._read = _READERS[rule_id]

    def review(self, prompt: str, candidate_input: CandidateInput) -> str | None:
        """The ablated finding as a JSON reply (the input is checked as the reference does)."""
        super().review(prompt, candidate_input)  # refuses an input of another policy
        finding = self._read(candidate_input)
        return finding_reply(candidate_input.evaluation_id, finding, list(finding.evidence_refs))


assert set(_READERS) == {rule.rule_id for rule in DECISION_RULES_V1}
