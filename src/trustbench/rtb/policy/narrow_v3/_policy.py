"""The policy object of `rtb-narrow-approval-v3`: v0.2 plus the gating conditions of a real team.

Everything the harness needs to read, check, export, review, seed and enforce a corpus of this
policy is reached from `NARROW_V3`. A case seeds v0.2's platform state plus the platform's
governance records (`_control.py`: requester, environment and risk tier, policy configuration,
change calendar, delegations, break-glass); the live evaluation (`_boundary.py`, imported when
first used) writes that state back as v0.3 evidence and asks `assess_v3` or the Cedar encoding.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel

from trustbench.rtb.policy._finding_rules import FindingRules
from trustbench.rtb.policy._policy_base import evidence_defs, reason_tables
from trustbench.rtb.policy._rules import PolicyRule
from trustbench.rtb.policy.narrow_v2._policy import EvidenceRecordsPolicy
from trustbench.rtb.policy.narrow_v3._ablation import AblatedV3Reviewer
from trustbench.rtb.policy.narrow_v3._checks import check_cases_v3
from trustbench.rtb.policy.narrow_v3._decision_rules import DECISION_RULES_V3
from trustbench.rtb.policy.narrow_v3._finding_rules import RULES_V3
from trustbench.rtb.policy.narrow_v3._models import (
    POLICY_ID_V3,
    REASON_CODE_DECISION_V3,
    REASON_CODE_MEANING_V3,
    CandidateInputV3,
    CaseV3,
    EvidenceRecordV3,
    ReasonCodeV3,
    ReviewerResponseV3,
)
from trustbench.rtb.policy.narrow_v3._reviewer import ReferencePolicyV3Reviewer, reference_finding

if TYPE_CHECKING:
    from trustbench.rtb.boundaries._policy import PolicyFlaws
    from trustbench.rtb.platform import PlatformView
    from trustbench.rtb.policy._protocol import LiveEvaluator
    from trustbench.rtb.review.reviewers._protocol import Reviewer


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

    check_cases = staticmethod(check_cases_v3)
    """v0.2's checks plus known decisive rules and the shared policy text."""
    reference_finding = staticmethod(reference_finding)
    """`assess_v3` as reply fields (with its structured discrepancies)."""

    def ablated_reviewer(self, rule_id: str) -> Reviewer:
        """The reference reviewer without rule `rule_id` (`_ablation.py`)."""
        return cast("Reviewer", AblatedV3Reviewer(rule_id))

    control_module = "trustbench.rtb.policy.narrow_v3._control"
    seed_function = "seed_from_case_v3"
    """v0.2's state plus the governance records: requester, classification, calendar, ..."""
    fault_function = "fault_approval_v3"
    """v0.2's eligibility: the decisive active approval of an uncontested permit (or stale)."""

    def change_records(self, target: str, platform: PlatformView) -> dict[str, Any] | None:
        """Requester, environment, risk tier and every record v0.3 reads, as v0.3 evidence."""
        from trustbench.rtb.policy.narrow_v3._boundary import change_records_v3

        return change_records_v3(target, platform)

    def live_evaluator(
        self, engine: str, *, approval_timeout_s: float, flaws: PolicyFlaws
    ) -> LiveEvaluator:
        """Live state as v0.3 evidence, decided by `assess_v3` or the Cedar v0.3 encoding."""
        from trustbench.rtb.policy.narrow_v3._boundary import Engine, V3Evaluator

        return V3Evaluator(cast("Engine", engine), approval_timeout_s, flaws)


NARROW_V3 = NarrowApprovalV3()
"""The registered instance."""
