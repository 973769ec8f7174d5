"""The policy object of `rtb-narrow-approval-v3`: v0.2 plus the gating conditions of a real team.

Everything the harness needs to read, check, export, review, seed and enforce a corpus of this
policy is reached from `NARROW_V3`. A case seeds v0.2's platform state plus the platform's
governance records (`_control.py`: requester, environment and risk tier, policy configuration,
change calendar, delegations, break-glass); the live evaluation (`_control.py`, imported when
first used) writes that state back as v0.3 evidence and asks `assess_v3` or the Cedar encoding.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel

from trustbench.rtb.corpus._models import Decision, Problem, json_pointer
from trustbench.rtb.policy._cases import each_case
from trustbench.rtb.policy._policy_base import evidence_defs, reason_tables
from trustbench.rtb.policy._protocol import CaseGenerator, FindingRules, PolicyRule
from trustbench.rtb.policy.narrow_v2 import _reviewer as v2
from trustbench.rtb.policy.narrow_v2._policy import (
    AblatedV2Reviewer,
    EvidenceRecordsPolicy,
    _leaks,
    credulous,
    fail_open,
)
from trustbench.rtb.policy.narrow_v2._reviewer import FindingV2
from trustbench.rtb.policy.narrow_v3 import _reviewer as v3
from trustbench.rtb.policy.narrow_v3._generator import GENERATOR_V3
from trustbench.rtb.policy.narrow_v3._models import (
    POLICY_ID_V3,
    REASON_CODE_DECISION_V3,
    REASON_CODE_MEANING_V3,
    RULE_IDS,
    CandidateInputV3,
    CaseV3,
    EvidenceRecordV3,
    PolicyRecordV3,
    ReasonCodeV3,
    ReviewerResponseV3,
    policy_text_v3,
)
from trustbench.rtb.policy.narrow_v3._reviewer import (
    DECISION_RULES_V3,
    RULES_V3,
    ReferencePolicyV3Reviewer,
    assess_v3,
    reference_finding,
    valid_break_glass,
)

if TYPE_CHECKING:
    from trustbench.rtb.boundaries._protocol import PolicyFlaws
    from trustbench.rtb.platform import PlatformView
    from trustbench.rtb.policy._protocol import LiveEvaluator
    from trustbench.rtb.review.reviewers._protocol import Reviewer


# ------------------------------------------------------------------------------------------------
# Structural checks of a v0.3 corpus (policy `rtb-narrow-approval-v3`), after schema checks.
#
# As for v0.2 (unique ids, decisive records and discrepancies that resolve inside their case,
# reason codes that support the decision, a policy record declaring the corpus policy, no
# grader-only value in what a candidate sees; v0.2's leak scan is reused), plus: every rule named
# in `decisive_rules` is a rule of the policy text, and each policy record states that text.


def check_cases_v3(
    cases: list[tuple[str, CaseV3]],
    policy_id: str = POLICY_ID_V3,
    policy_text: str | None = None,
) -> list[Problem]:
    """Run every v0.3 check; an empty list means the cases are consistent.

    Args:
        cases: `(relative path, case)` of every case that parsed.
        policy_id: The policy every policy record must declare (a later version that states
            the v0.3 rules checks its own cases with its id and text).
        policy_text: The text every policy record must state (default: `policy_text_v3()`).
    """
    declared = (policy_id, policy_text_v3() if policy_text is None else policy_text)
    problems = each_case(
        cases,
        lambda rel, case: [
            Problem(file=rel, pointer=p, message=m) for p, m in _case_internal(case, declared)
        ],
    )
    return problems + _leaks(cases)  # type: ignore[arg-type]


def _case_internal(case: CaseV3, declared: tuple[str, str]) -> list[tuple[str, str]]:
    found = _record_problems(case, declared)
    key = case.expectations
    codes = [
        (
            ["acceptable_reason_codes", i],
            f"reason code {c.value!r} does not support the reference "
            f"decision {key.reference_decision.value}",
        )
        for i, c in enumerate(key.acceptable_reason_codes)
        if REASON_CODE_DECISION_V3[c] is not key.reference_decision
    ]
    rules = [
        (["decisive_rules", i], f"decisive rule {r!r} is not a rule of the policy text")
        for i, r in enumerate(key.decisive_rules)
        if r not in RULE_IDS
    ]
    readings = [
        (["contestable_readings", i], "a reading's reason code does not support its decision")
        for i, reading in enumerate(key.contestable_readings)
        if any(REASON_CODE_DECISION_V3[c] is not reading.decision for c in reading.reason_codes)
    ]
    for parts, message in [*codes, *rules, *readings]:
        found.append((json_pointer(["expectations", *parts]), message))
    return found


def _record_problems(case: CaseV3, declared: tuple[str, str]) -> list[tuple[str, str]]:
    policy_id, policy_text = declared
    found: list[tuple[str, str]] = []
    record_ids = [record.record_id for record in case.evidence]
    found += [
        (json_pointer(["evidence", i, "record_id"]), f"duplicate record id {r!r} within the case")
        for i, r in enumerate(record_ids)
        if record_ids.index(r) != i
    ]
    policies = [r for r in case.evidence if isinstance(r, PolicyRecordV3)]
    if not policies or any(p.policy_id != policy_id for p in policies):
        found.append(("/evidence", f"a case needs a policy record declaring {policy_id!r}"))
    if any(p.text != policy_text for p in policies):
        found.append(("/evidence", f"a policy record's text is not the {policy_id} policy text"))
    key = case.expectations
    refs = [("decisive_record_ids", i, r) for i, r in enumerate(key.decisive_record_ids)]
    refs += [
        ("decisive_discrepancies", i, d.record_id) for i, d in enumerate(key.decisive_discrepancies)
    ]
    found += [
        (
            json_pointer(["expectations", where, i]),
            f"record id {r!r} resolves to no evidence record",
        )
        for where, i, r in refs
        if r not in record_ids
    ]
    return found


# ------------------------------------------------------------------------------------------------
# The v0.3 reference reviewer with one rule of the policy text removed (`rtb audit`'s readers).
#
# Most rules are left out inside `assess_v3` (its `disabled` set, which it passes on to
# `assess_v2` for the rules v0.3 keeps from v0.2). Three change only the last step and are applied
# here: v0.2's readers that believe tickets and notes and that fail open where information is
# missing (reused from `narrow_v2._ablation`, on v0.3's finding), and one that lets a valid
# break-glass permit whatever else the evidence says. Each reader sees only the candidate-visible
# input, as the reference does.


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


class NarrowApprovalV3(EvidenceRecordsPolicy):
    """`CorpusPolicy` of `rtb-narrow-approval-v3`."""

    policy_id = POLICY_ID_V3
    case_model: type[BaseModel] = CaseV3
    candidate_model: type[BaseModel] = CandidateInputV3
    response_model: type[BaseModel] = ReviewerResponseV3
    reason_codes, reason_decision, reason_meaning, reason_code_def = reason_tables(
        ReasonCodeV3, REASON_CODE_DECISION_V3, REASON_CODE_MEANING_V3
    )
    evidence_defs: tuple[str, ...] = evidence_defs(EvidenceRecordV3)
    schema_id_prefix = f"urn:trustbench:rtb:{POLICY_ID_V3}:schema:"
    finding_rules: FindingRules = RULES_V3
    reviewers: Mapping[str, Callable[[int], Reviewer]] = {
        "reference-policy-v3": lambda seed: cast("Reviewer", ReferencePolicyV3Reviewer())
    }
    source_files: tuple[str, ...] = (
        "rtb/policy/narrow_v3/*.py",
        "rtb/policy/narrow_v3/*.cedar",
        "rtb/policy/narrow_v2/*.py",
    )
    scripted_workflow_agents = True
    reason_text: Mapping[str, str] = reason_meaning
    rules: tuple[PolicyRule, ...] = DECISION_RULES_V3
    """v0.2's decision rules as the v0.3 text states them, then v0.3's own, each ablatable."""
    review_gates: Path = Path(__file__).with_name("review_gates.toml")
    """Exact 5 % gates on 80 cases per decision, one on deny/hold confusions."""
    generator: CaseGenerator | None = GENERATOR_V3
    """The pool step the shipped corpus was filtered from (`_generator.py`), with fresh seeds."""

    check_cases = staticmethod(check_cases_v3)
    """v0.2's checks plus known decisive rules and the shared policy text."""
    reference_finding = staticmethod(reference_finding)
    """`assess_v3` as reply fields (with its structured discrepancies)."""

    def ablated_reviewer(self, rule_id: str) -> Reviewer:
        """The reference reviewer without rule `rule_id` (the ablated reviewer above)."""
        return cast("Reviewer", AblatedV3Reviewer(rule_id))

    control_module = "trustbench.rtb.policy.narrow_v3._control"
    seed_function = "seed_from_case_v3"
    """v0.2's state plus the governance records: requester, classification, calendar, ..."""
    fault_function = "fault_approval_v3"
    """v0.2's eligibility: the decisive active approval of an uncontested permit (or stale)."""

    def change_records(self, target: str, platform: PlatformView) -> dict[str, Any] | None:
        """Requester, environment, risk tier and every record v0.3 reads, as v0.3 evidence."""
        from trustbench.rtb.policy.narrow_v3._control import change_records_v3

        return change_records_v3(target, platform)

    def live_evaluator(
        self, engine: str, *, approval_timeout_s: float, flaws: PolicyFlaws
    ) -> LiveEvaluator:
        """Live state as v0.3 evidence, decided by `assess_v3` or the Cedar v0.3 encoding."""
        from trustbench.rtb.policy.narrow_v3._control import Engine, V3Evaluator

        return V3Evaluator(cast("Engine", engine), approval_timeout_s, flaws)


NARROW_V3 = NarrowApprovalV3()
"""The registered instance."""
