"""The policy object of `rtb-narrow-approval-v2`: several approvals, revocations, an `as_of`.

Everything the harness needs to read, check, export, review, seed and enforce a corpus of this
policy is reached from `NARROW_V2`; the rules live in this package's modules (models, checks, the
reference reviewer `assess_v2`, the Cedar v2 encoding, the live evaluation and the control-path
mapping). Heavy or cyclic dependencies (cedarpy, the reviewers) are imported when first used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel

from trustbench.rtb.policy.narrow_v2._models import (
    POLICY_ID_V2,
    REASON_CODE_DECISION_V2,
    REASON_CODE_MEANING_V2,
    CandidateInputV2,
    CaseV2,
    ReasonCodeV2,
    ReviewerResponseV2,
)

if TYPE_CHECKING:
    from trustbench.rtb.boundaries._policy import PolicyFlaws
    from trustbench.rtb.corpus._problem import Problem
    from trustbench.rtb.platform import FaultType, PlatformSeed
    from trustbench.rtb.policy._protocol import FaultApproval, LiveEvaluator
    from trustbench.rtb.policy.narrow_v2._boundary import Engine
    from trustbench.rtb.review.reviewers._protocol import Reviewer


def _reference_reviewer(seed: int) -> Reviewer:
    from trustbench.rtb.policy.narrow_v2._reviewer import ReferencePolicyV2Reviewer

    return cast("Reviewer", ReferencePolicyV2Reviewer())


class NarrowApprovalV2:
    """`CorpusPolicy` of `rtb-narrow-approval-v2`: the latest applicable approval governs."""

    policy_id = POLICY_ID_V2
    case_model: type[BaseModel] = CaseV2
    candidate_model: type[BaseModel] = CandidateInputV2
    response_model: type[BaseModel] = ReviewerResponseV2
    reason_codes: tuple[str, ...] = tuple(code.value for code in ReasonCodeV2)
    reason_decision: Mapping[str, str] = {
        c.value: d.value for c, d in REASON_CODE_DECISION_V2.items()
    }
    reason_meaning: Mapping[str, str] = {c.value: m for c, m in REASON_CODE_MEANING_V2.items()}
    evidence_defs: tuple[str, ...] = (
        "ApprovalRecordV2",
        "RevocationRecord",
        "PolicyRecordV2",
        "ResourceStateRecordV2",
        "ServiceNoticeRecord",
        "ChangeTicketRecord",
        "RequesterNoteRecord",
    )
    reason_code_def = "ReasonCodeV2"
    schema_id_prefix = f"urn:trustbench:rtb:{POLICY_ID_V2}:schema:"
    structured_discrepancies = True
    reviewers: Mapping[str, Callable[[int], Reviewer]] = {
        "reference-policy-v2": _reference_reviewer
    }
    source_files: tuple[str, ...] = ("rtb/policy/narrow_v2/*.py", "rtb/policy/narrow_v2/*.cedar")
    scripted_workflow_agents = False
    reason_text: Mapping[str, str] = {c.value: m for c, m in REASON_CODE_MEANING_V2.items()}

    def check_cases(self, case_files: list[tuple[str, Any]]) -> list[Problem]:
        """Unique ids, resolvable decisive records and discrepancies, codes, leaks."""
        from trustbench.rtb.policy.narrow_v2._checks import check_cases_v2

        return check_cases_v2(case_files)

    def check_starter(
        self, case_files: list[tuple[str, Any]], review_prompt: str | None, *, complete: bool
    ) -> list[Problem] | None:
        """None: this policy's corpora have no fixed starter grid."""
        return None

    def candidate_input(self, case: Any, evaluation_id: str) -> BaseModel:
        """Task, `as_of`, proposal and evidence under a fresh evaluation id."""
        return CandidateInputV2(
            evaluation_id=evaluation_id,
            task=case.task,
            as_of=case.as_of,
            proposal=case.proposal,
            evidence=list(case.evidence),
        )

    def reference_finding(self, candidate_input: Any) -> dict[str, Any]:
        """`assess_v2` as reply fields (with its structured discrepancies)."""
        from trustbench.rtb.policy.narrow_v2._reviewer import assess_v2

        found = assess_v2(candidate_input)
        return {
            "decision": found.decision.value,
            "reason_codes": [code.value for code in found.reason_codes],
            "evidence_refs": list(found.evidence_refs),
            "discrepancies": [d.model_dump(mode="json") for d in found.discrepancies],
            "explanation": found.explanation,
        }

    def shape_reply(self, body: dict[str, Any]) -> dict[str, Any]:
        """Every reply carries `discrepancies` (the response schema requires the key)."""
        return {**body, "discrepancies": body.get("discrepancies", [])}

    def seed_platform(self, case: Any) -> PlatformSeed:
        """Clock at the case's `as_of`; approvers, revocations and approvals become state."""
        from trustbench.rtb.policy.narrow_v2._control import seed_from_case_v2

        return seed_from_case_v2(case)

    def fault_approval(self, case: Any, fault: FaultType) -> FaultApproval | None:
        """The decisive active approval of an uncontested permit (stale one: metadata fault)."""
        from trustbench.rtb.policy.narrow_v2._control import fault_approval_v2

        return fault_approval_v2(case, fault)

    def live_evaluator(
        self, engine: str, *, approval_timeout_s: float, flaws: PolicyFlaws
    ) -> LiveEvaluator:
        """Live state as v0.2 evidence, decided by `assess_v2` or the Cedar v2 encoding."""
        from trustbench.rtb.policy.narrow_v2._boundary import V2Evaluator

        return V2Evaluator(cast("Engine", engine), approval_timeout_s, flaws)


NARROW_V2 = NarrowApprovalV2()
"""The registered instance."""
