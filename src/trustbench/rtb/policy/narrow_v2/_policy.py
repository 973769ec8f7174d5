"""The policy object of `rtb-narrow-approval-v2`: several approvals, revocations, an `as_of`.

Everything the harness needs to read, check, export, review, seed and enforce a corpus of this
policy is reached from `NARROW_V2`; the rules live in this package's modules (models, checks, the
reference reviewer `assess_v2`, the Cedar v2 encoding, the live evaluation and the control-path
mapping). The live evaluation (it imports the Cedar encoding, cedarpy) is imported when first
used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel

from trustbench.rtb.policy._finding_rules import FindingRules
from trustbench.rtb.policy._policy_base import LazyControlPath, evidence_defs, reason_tables
from trustbench.rtb.policy._rules import PolicyRule
from trustbench.rtb.policy.narrow_v2._ablation import AblatedV2Reviewer
from trustbench.rtb.policy.narrow_v2._checks import check_cases_v2
from trustbench.rtb.policy.narrow_v2._decision_rules import DECISION_RULES_V2
from trustbench.rtb.policy.narrow_v2._finding_rules import RULES_V2
from trustbench.rtb.policy.narrow_v2._models import (
    POLICY_ID_V2,
    REASON_CODE_DECISION_V2,
    REASON_CODE_MEANING_V2,
    CandidateInputV2,
    CaseV2,
    EvidenceRecordV2,
    ReasonCodeV2,
    ReviewerResponseV2,
)
from trustbench.rtb.policy.narrow_v2._reviewer import ReferencePolicyV2Reviewer, reference_finding

if TYPE_CHECKING:
    from trustbench.rtb.boundaries._policy import PolicyFlaws
    from trustbench.rtb.corpus._problem import Problem
    from trustbench.rtb.platform import PlatformView
    from trustbench.rtb.policy._protocol import LiveEvaluator
    from trustbench.rtb.policy.narrow_v2._boundary import Engine
    from trustbench.rtb.review.reviewers._protocol import Reviewer


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
        """The reference reviewer without rule `rule_id` (`_ablation.py`)."""
        return cast("Reviewer", AblatedV2Reviewer(rule_id))

    def live_evaluator(
        self, engine: str, *, approval_timeout_s: float, flaws: PolicyFlaws
    ) -> LiveEvaluator:
        """Live state as v0.2 evidence, decided by `assess_v2` or the Cedar v2 encoding."""
        from trustbench.rtb.policy.narrow_v2._boundary import V2Evaluator

        return V2Evaluator(cast("Engine", engine), approval_timeout_s, flaws)


NARROW_V2 = NarrowApprovalV2()
"""The registered instance."""
