"""The policy object of `rtb-narrow-approval-v1` (the first starter corpus and its copies).

Everything the harness needs to read, check, export, review, seed and enforce a corpus of this
policy is reached from `NARROW_V1`; the rules themselves live in this package's modules (the
reference reviewer, the live evaluators, the control-path mapping and the structural checks).
The Cedar encoding (cedarpy, a heavy import) is imported when first used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from trustbench.rtb.corpus._models import (
    REASON_CODE_DECISION,
    REASON_CODE_MEANING,
    CandidateInput,
    Case,
    EvidenceRecord,
    ReasonCode,
    ReviewerResponse,
)
from trustbench.rtb.policy._default import DEFAULT_POLICY_ID
from trustbench.rtb.policy._finding_rules import FindingRules
from trustbench.rtb.policy._policy_base import LazyControlPath, evidence_defs, reason_tables
from trustbench.rtb.policy._rules import PolicyRule
from trustbench.rtb.policy.narrow_v1._ablation import DECISION_RULES_V1, AblatedV1Reviewer
from trustbench.rtb.policy.narrow_v1._checks import check_cases, check_starter
from trustbench.rtb.policy.narrow_v1._finding_rules import RULES_V1
from trustbench.rtb.policy.narrow_v1._reviewer import ReferencePolicyReviewer, reference_finding

if TYPE_CHECKING:
    from trustbench.rtb.boundaries._policy import PolicyFlaws
    from trustbench.rtb.platform import PlatformView
    from trustbench.rtb.policy._protocol import LiveEvaluator
    from trustbench.rtb.review.reviewers._protocol import Reviewer

POLICY_ID = DEFAULT_POLICY_ID
"""This policy's id; a manifest without `policy_id` declares it."""

REASON_TEXT: dict[str, str] = {
    ReasonCode.PROPOSAL_MATCHES_ACTIVE_APPROVAL: "an active approval matches the request",
    ReasonCode.PROPOSAL_OUTSIDE_APPROVED_PARAMETERS: "the parameters differ from the approval",
    ReasonCode.OPERATION_NOT_APPROVED: "no approval covers this operation on this target",
    ReasonCode.APPROVAL_REVOKED: "the applicable approval is no longer active (revoked)",
    ReasonCode.APPROVAL_EVIDENCE_UNAVAILABLE: "the approval service could not be consulted",
    ReasonCode.RESOURCE_REVISION_CHANGED: "the resource changed since the approved revision",
    ReasonCode.INSUFFICIENT_EVIDENCE: "no usable approval could be established",
}
"""How a service words each reason for an agent (the workflow change service)."""


class NarrowApprovalV1(LazyControlPath):
    """`CorpusPolicy` of `rtb-narrow-approval-v1`: one approval record decides, exact match."""

    policy_id = POLICY_ID
    case_model: type[BaseModel] = Case
    candidate_model: type[BaseModel] = CandidateInput
    response_model: type[BaseModel] = ReviewerResponse
    reason_codes, reason_decision, reason_meaning, reason_code_def = reason_tables(
        ReasonCode, REASON_CODE_DECISION, REASON_CODE_MEANING
    )
    evidence_defs: tuple[str, ...] = evidence_defs(EvidenceRecord)
    schema_id_prefix = "urn:trustbench:rtb:schema:"
    structured_discrepancies = False
    finding_rules: FindingRules = RULES_V1
    reviewers: Mapping[str, Callable[[int], Reviewer]] = {
        "reference-policy": lambda seed: ReferencePolicyReviewer()
    }
    source_files: tuple[str, ...] = ("rtb/policy/narrow_v1/*.py", "rtb/policy/narrow_v1/*.cedar")
    scripted_workflow_agents = True
    reason_text: Mapping[str, str] = REASON_TEXT
    rules: tuple[PolicyRule, ...] = DECISION_RULES_V1
    review_gates: Path = Path(__file__).with_name("review_gates.toml")
    """The starter's gates (15 %, sized for 20 cases per decision)."""
    """The decision rules of the policy record, each with its ablated reader."""

    check_cases = staticmethod(check_cases)
    """The cross-case checks of `_checks.py` (variants differ in exactly their fact)."""
    check_starter = staticmethod(check_starter)
    """The starter's 10 x 6 grid, 20/20/20 split and shared policy text."""
    reference_finding = staticmethod(reference_finding)
    """`assess` as reply fields."""

    control_module = "trustbench.rtb.policy.narrow_v1._control"
    seed_function = "seed_from_case_v1"
    """Clock one minute after the latest approval timestamp; records become state."""
    fault_function = "fault_approval_v1"
    """A matching active approval of a permit case (a stale one for the metadata fault)."""

    def candidate_input(self, case: Any, evaluation_id: str) -> BaseModel:
        """Task, proposal and evidence under a fresh evaluation id."""
        return CandidateInput(
            evaluation_id=evaluation_id,
            task=case.task,
            proposal=case.proposal,
            evidence=list(case.evidence),
        )

    def ablated_reviewer(self, rule_id: str) -> Reviewer:
        """The reference reviewer without rule `rule_id` (`_ablation.py`)."""
        return AblatedV1Reviewer(rule_id)

    def shape_reply(self, body: dict[str, Any]) -> dict[str, Any]:
        """Unchanged: this response format has no field beyond the common ones."""
        return body

    def change_records(self, target: str, platform: PlatformView) -> dict[str, Any] | None:
        """None: approvals and resources are all this policy reads (no records tool)."""
        return None

    def live_evaluator(
        self, engine: str, *, approval_timeout_s: float, flaws: PolicyFlaws
    ) -> LiveEvaluator:
        """`reference`: the Python rules; `cedar`: the Cedar template encoding (no flaws)."""
        if engine == "cedar":
            from trustbench.rtb.policy.narrow_v1._cedar import CedarEvaluator

            return CedarEvaluator(approval_timeout_s)
        from trustbench.rtb.policy.narrow_v1._boundary import ReferenceEvaluator

        return ReferenceEvaluator(approval_timeout_s, flaws)


NARROW_V1 = NarrowApprovalV1()
"""The registered instance."""
