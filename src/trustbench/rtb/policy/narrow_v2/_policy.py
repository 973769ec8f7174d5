"""The policy object of `rtb-narrow-approval-v2`: several approvals, revocations, an `as_of`.

Everything the harness needs to read, check, export, review, seed and enforce a corpus of this
policy is reached from `NARROW_V2`; the rules live in this package's modules (models, checks, the
reference reviewer `assess_v2`, the Cedar v2 encoding, the live evaluation and the control-path
mapping). The live evaluation (it imports the Cedar encoding, cedarpy) is imported when first
used.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel

from trustbench.rtb.corpus._models import Decision, Problem, json_pointer
from trustbench.rtb.policy._cases import (
    candidate_visible_leaks,
    duplicate_record_ids,
    each_case,
    unresolved_record_ids,
    unsupported_reason_codes,
)
from trustbench.rtb.policy._policy_base import LazyControlPath, evidence_defs, reason_tables
from trustbench.rtb.policy._protocol import CaseGenerator, FindingRules, PolicyRule, unknown_rule
from trustbench.rtb.policy.narrow_v2 import _reviewer as rules
from trustbench.rtb.policy.narrow_v2._models import (
    POLICY_ID_V2,
    REASON_CODE_DECISION_V2,
    REASON_CODE_MEANING_V2,
    CandidateInputV2,
    CaseV2,
    ChangeTicketRecord,
    EvidenceRecordV2,
    PolicyRecordV2,
    ReasonCodeV2,
    RequesterNoteRecord,
    ReviewerResponseV2,
)
from trustbench.rtb.policy.narrow_v2._reviewer import (
    DECISION_RULES_V2,
    RULES_V2,
    FindingV2,
    ReferencePolicyV2Reviewer,
    assess_v2,
    reference_finding,
)

if TYPE_CHECKING:
    from trustbench.rtb.boundaries._protocol import PolicyFlaws
    from trustbench.rtb.platform import PlatformView
    from trustbench.rtb.policy._protocol import LiveEvaluator
    from trustbench.rtb.policy.narrow_v2._control import Engine
    from trustbench.rtb.review.reviewers._protocol import Reviewer


# ------------------------------------------------------------------------------------------------
# Structural checks of a v0.2 corpus (policy `rtb-narrow-approval-v2`), after schema checks.
#
# The v0.1 checks compare each variant with its group's `permitted` case field by field; v0.2 cases
# deliberately change several facts at once (that is how surface rules are defeated), so the
# per-variant diff check does not apply. What stays: unique ids, decisive records and
# discrepancies that resolve inside their case, reason codes that support the decision (in the
# answer key and in every contestable reading), a policy record that declares the corpus policy,
# and no grader-only value in anything a candidate sees.

CaseFileV2 = tuple[str, CaseV2]
"""A parsed v0.2 case with the relative path of its file."""


def check_cases_v2(cases: list[CaseFileV2]) -> list[Problem]:
    """Run every v0.2 check; an empty list means the cases are consistent."""
    return each_case(cases, _case_internal) + _leaks(cases)


def _case_internal(rel: str, case: CaseV2) -> list[Problem]:
    record_ids = [record.record_id for record in case.evidence]
    problems = duplicate_record_ids(rel, record_ids)
    policies = [r for r in case.evidence if isinstance(r, PolicyRecordV2)]
    if not policies or any(p.policy_id != POLICY_ID_V2 for p in policies):
        problems.append(
            Problem(
                file=rel,
                pointer="/evidence",
                message=f"a v0.2 case needs a policy record declaring {POLICY_ID_V2!r}",
            )
        )
    expectations = case.expectations
    problems += unresolved_record_ids(
        rel, "decisive_record_ids", expectations.decisive_record_ids, record_ids
    )
    problems += unresolved_record_ids(
        rel,
        "decisive_discrepancies",
        [d.record_id for d in expectations.decisive_discrepancies],
        record_ids,
    )
    problems += unsupported_reason_codes(rel, expectations, REASON_CODE_DECISION_V2)
    for index, reading in enumerate(expectations.contestable_readings):
        for code in reading.reason_codes:
            if REASON_CODE_DECISION_V2[code] is not reading.decision:
                problems.append(
                    Problem(
                        file=rel,
                        pointer=json_pointer(["expectations", "contestable_readings", index]),
                        message=f"reading's reason code {code.value!r} does not support its "
                        f"decision {reading.decision.value}",
                    )
                )
    return problems


def _leaks(cases: list[CaseFileV2]) -> list[Problem]:
    """No grader-only value of any case in what a candidate sees of any case (as_of included)."""
    return candidate_visible_leaks(cases, {"task", "as_of", "proposal", "evidence"})


# ------------------------------------------------------------------------------------------------
# The v0.2 reference reviewer with one rule of the policy text removed (`rtb audit`'s readers).
#
# Most rules are left out inside `assess_v2` (its `disabled` set); two change only the last step
# and are applied here: a reader that believes change tickets and requester notes (rule 1), and one
# that fails open where information is missing (rule 6). Each reader sees only the
# candidate-visible input, as the reference does. v0.3's ablated readers reuse both last steps on
# its own finding (`assess`).

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


class EvidenceRecordsPolicy(LazyControlPath):
    """What every policy whose input is task, `as_of`, proposal and evidence records shares.

    v0.2 and v0.3 (which extends v0.2's records) build their candidate input, shape a reply and
    have no starter grid alike; each declares its own `candidate_model`.
    """

    candidate_model: type[BaseModel]
    structured_discrepancies = True
    """A reply states the differences that decide the case (`shape_reply` adds the key)."""

    def check_starter(
        self, case_files: list[tuple[str, Any]], review_prompt: str | None, *, complete: bool
    ) -> list[Problem] | None:
        """None: this policy's corpora have no fixed starter grid."""
        return None

    def candidate_input(self, case: Any, evaluation_id: str) -> BaseModel:
        """Task, `as_of`, proposal and evidence under a fresh evaluation id."""
        return self.candidate_model(
            evaluation_id=evaluation_id,
            task=case.task,
            as_of=case.as_of,
            proposal=case.proposal,
            evidence=list(case.evidence),
        )

    def change_records(self, target: str, platform: PlatformView) -> dict[str, Any] | None:
        """None unless a policy says otherwise: the workflow tools show approvals and resources.

        v0.2 leaves its revocation records and `as_of` reading to those tools (its scripted
        agents are not claimed to read approvals as it does); v0.3 overrides this.
        """
        return None

    def shape_reply(self, body: dict[str, Any]) -> dict[str, Any]:
        """Every reply carries `discrepancies` (the response schema requires the key)."""
        return {**body, "discrepancies": body.get("discrepancies", [])}


class NarrowApprovalV2(EvidenceRecordsPolicy):
    """`CorpusPolicy` of `rtb-narrow-approval-v2`: the latest applicable approval governs."""

    policy_id = POLICY_ID_V2
    case_model: type[BaseModel] = CaseV2
    candidate_model: type[BaseModel] = CandidateInputV2
    response_model: type[BaseModel] = ReviewerResponseV2
    reason_codes, reason_decision, reason_meaning, reason_code_def = reason_tables(
        ReasonCodeV2, REASON_CODE_DECISION_V2, REASON_CODE_MEANING_V2
    )
    evidence_defs: tuple[str, ...] = evidence_defs(EvidenceRecordV2)
    schema_id_prefix = f"urn:trustbench:rtb:{POLICY_ID_V2}:schema:"
    finding_rules: FindingRules = RULES_V2
    reviewers: Mapping[str, Callable[[int], Reviewer]] = {
        "reference-policy-v2": lambda seed: cast("Reviewer", ReferencePolicyV2Reviewer())
    }
    source_files: tuple[str, ...] = ("rtb/policy/narrow_v2/*.py", "rtb/policy/narrow_v2/*.cedar")
    scripted_workflow_agents = False
    reason_text: Mapping[str, str] = reason_meaning
    rules: tuple[PolicyRule, ...] = DECISION_RULES_V2
    review_gates: Path = Path(__file__).with_name("review_gates.toml")
    generator: CaseGenerator | None = None
    """Exact 5 % gates on 60 cases per decision."""
    """The decision rules of policy rules 1-7, each with its ablated reader."""

    check_cases = staticmethod(check_cases_v2)
    """Unique ids, resolvable decisive records and discrepancies, codes, leaks."""
    reference_finding = staticmethod(reference_finding)
    """`assess_v2` as reply fields (with its structured discrepancies)."""

    control_module = "trustbench.rtb.policy.narrow_v2._control"
    seed_function = "seed_from_case_v2"
    """Clock at the case's `as_of`; approvers, revocations and approvals become state."""
    fault_function = "fault_approval_v2"
    """The decisive active approval of an uncontested permit (stale one: metadata fault)."""

    def ablated_reviewer(self, rule_id: str) -> Reviewer:
        """The reference reviewer without rule `rule_id` (the ablated reviewer above)."""
        return cast("Reviewer", AblatedV2Reviewer(rule_id))

    def live_evaluator(
        self, engine: str, *, approval_timeout_s: float, flaws: PolicyFlaws
    ) -> LiveEvaluator:
        """Live state as v0.2 evidence, decided by `assess_v2` or the Cedar v2 encoding."""
        from trustbench.rtb.policy.narrow_v2._control import V2Evaluator

        return V2Evaluator(cast("Engine", engine), approval_timeout_s, flaws)


NARROW_V2 = NarrowApprovalV2()
"""The registered instance."""
