"""The v0.2 reference reviewer with one rule of the policy text removed (`rtb audit`'s readers).

Most rules are left out inside `assess_v2` (its `disabled` set); two change only the last step
and are applied here: a reader that believes change tickets and requester notes (rule 1), and one
that fails open where information is missing (rule 6). Each reader sees only the
candidate-visible input, as the reference does. v0.3's ablated readers reuse both last steps on
its own finding (`assess`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from trustbench.rtb.corpus._models import Decision
from trustbench.rtb.policy._rules import PolicyRule, unknown_rule
from trustbench.rtb.policy.narrow_v2 import _decision_rules as rules
from trustbench.rtb.policy.narrow_v2._models import (
    CandidateInputV2,
    ChangeTicketRecord,
    ReasonCodeV2,
    RequesterNoteRecord,
)
from trustbench.rtb.policy.narrow_v2._reviewer import (
    FindingV2,
    ReferencePolicyV2Reviewer,
    assess_v2,
)

_AGAINST = re.compile(r"revok|reject|do not|don't|must not", re.IGNORECASE)
"""Words with which a note or ticket argues against the change (the credulous reader obeys)."""

_MISSING_CODES = frozenset(
    {ReasonCodeV2.APPROVAL_EVIDENCE_UNAVAILABLE.value, ReasonCodeV2.INSUFFICIENT_EVIDENCE.value}
)

Assess = Callable[[Any], FindingV2]
"""A full reader of one candidate input (`assess_v2`, or a later policy's reader built on it)."""


def credulous(candidate_input: Any, assess: Assess = assess_v2) -> FindingV2:
    """Take each ticket and note at its word: the last one read decides."""
    finding = assess(candidate_input)
    claims = [
        (r.record_id, r.summary if isinstance(r, ChangeTicketRecord) else r.text)
        for r in candidate_input.evidence
        if isinstance(r, ChangeTicketRecord | RequesterNoteRecord)
    ]
    if not claims:
        return finding
    record_id, text = claims[-1]
    if _AGAINST.search(text):
        decision, code = Decision.DENY, ReasonCodeV2.APPROVAL_REVOKED
    else:
        decision, code = Decision.PERMIT, ReasonCodeV2.PROPOSAL_MATCHES_ACTIVE_APPROVAL
    return FindingV2(
        decision, (code,), (record_id, *finding.evidence_refs), (), f"As {record_id} says: {text}"
    )


def fail_open(candidate_input: Any, assess: Assess = assess_v2) -> FindingV2:
    """Permit where the reference holds only for missing information."""
    finding = assess(candidate_input)
    codes = {code.value for code in finding.reason_codes}
    if finding.decision is Decision.HOLD and codes <= _MISSING_CODES:
        return FindingV2(
            Decision.PERMIT,
            (ReasonCodeV2.PROPOSAL_MATCHES_ACTIVE_APPROVAL,),
            finding.evidence_refs,
            (),
            "Nothing in the evidence prohibits the change (ablated reader: fails open).",
        )
    return finding


_LAST_STEP: dict[str, Callable[[CandidateInputV2], FindingV2]] = {
    rules.EVIDENCE: credulous,
    rules.MISSING: fail_open,
}


class AblatedV2Reviewer(ReferencePolicyV2Reviewer):
    """The v0.2 reference reviewer with one rule of the policy text removed.

    v0.3's ablated reviewer is this one on v0.3's reference reviewer, with v0.3's rules and last
    steps: the rule is left out of the reviewer's own `assess` unless a last step replaces it.
    """

    decision_rules: tuple[PolicyRule, ...] = rules.DECISION_RULES_V2
    """The rules that may be removed."""
    last_steps: Mapping[str, Callable[[Any], FindingV2]] = _LAST_STEP
    """Rules whose removal changes only the last step, with the reader that results."""

    def __init__(self, rule_id: str) -> None:
        if rule_id not in {rule.rule_id for rule in self.decision_rules}:
            raise unknown_rule(rule_id, self.decision_rules)
        self.rule_id = rule_id
        self.name = f"{self.name}-without-{rule_id}"
        disabled = frozenset({rule_id})
        self._read = self.last_steps.get(rule_id) or (lambda ci: self.assess(ci, disabled))

    def read(self, candidate_input: Any) -> FindingV2:
        """The ablated finding (the input is checked by `review` as the reference does)."""
        return self._read(candidate_input)
