"""The v0.3 reference reviewer with one rule of the policy text removed (`rtb audit`'s readers).

Most rules are left out inside `assess_v3` (its `disabled` set, which it passes on to
`assess_v2` for the rules v0.3 keeps from v0.2). Three change only the last step and are applied
here: v0.2's readers that believe tickets and notes and that fail open where information is
missing (reused from `narrow_v2._ablation`, on v0.3's finding), and one that lets a valid
break-glass permit whatever else the evidence says. Each reader sees only the candidate-visible
input, as the reference does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from typing import Any

from trustbench.rtb.corpus._models import Decision
from trustbench.rtb.policy._rules import PolicyRule
from trustbench.rtb.policy.narrow_v2 import _decision_rules as v2
from trustbench.rtb.policy.narrow_v2._ablation import AblatedV2Reviewer, credulous, fail_open
from trustbench.rtb.policy.narrow_v2._reviewer import FindingV2
from trustbench.rtb.policy.narrow_v3 import _decision_rules as v3
from trustbench.rtb.policy.narrow_v3._models import CandidateInputV3, ReasonCodeV3
from trustbench.rtb.policy.narrow_v3._reviewer import (
    ReferencePolicyV3Reviewer,
    assess_v3,
    valid_break_glass,
)


def _glass_overrides(candidate_input: CandidateInputV3) -> FindingV2:
    """Permit whenever a valid break-glass for the target is in the evidence."""
    finding = assess_v3(candidate_input)
    glass = valid_break_glass(candidate_input)
    if glass is None or finding.decision is Decision.PERMIT:
        return finding
    return replace(
        finding,
        decision=Decision.PERMIT,
        reason_codes=(ReasonCodeV3.PROPOSAL_MATCHES_ACTIVE_APPROVAL,),
        evidence_refs=tuple(dict.fromkeys([glass.record_id, *finding.evidence_refs])),
        discrepancies=(),
        explanation=f"Break-glass {glass.record_id} authorises the change (ablated reader: it "
        "lifts every rule).",
    )


_LAST_STEP: dict[str, Callable[[CandidateInputV3], FindingV2]] = {
    v2.EVIDENCE: partial(credulous, assess=assess_v3),
    v2.MISSING: partial(fail_open, assess=assess_v3),
    v3.GLASS_ONLY: _glass_overrides,
}


class AblatedV3Reviewer(AblatedV2Reviewer, ReferencePolicyV3Reviewer):
    """The v0.3 reference reviewer with one rule of the policy text removed."""

    decision_rules: tuple[PolicyRule, ...] = v3.DECISION_RULES_V3
    """The rules that may be removed (v0.2's as v0.3 states them, then v0.3's own)."""
    last_steps: Mapping[str, Callable[[Any], FindingV2]] = _LAST_STEP
    """v0.2's last steps on v0.3's finding, and the break-glass reader."""
