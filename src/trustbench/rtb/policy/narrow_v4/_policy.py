"""The policy object of `rtb-narrow-approval-v4`: v0.3's rules, read on corpus v0.4.

The v0.4 policy text states v0.3's rules unchanged (`_models.policy_text_v4`), so everything
that decides, grades or enforces is v0.3's, reached by import: the reference reviewer
(`assess_v3`), its ablated readers, the finding rules, the Cedar encoding and the control path.
What is v0.4's own: the models (the policy record declares the v0.4 id; a case names its contrast
family), the structural checks (v0.3's, plus the family contract and the realism constraints of
`_world.realism_problems`), the review gates sized for the v0.4 corpus, and the generator the
corpus was drawn with (`_generate.FAMILY_GENERATOR`), which `rtb audit` draws a fresh pool from.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from pydantic import BaseModel

from trustbench.rtb.corpus._leakscan import find_leaks
from trustbench.rtb.corpus._models import Problem
from trustbench.rtb.policy._policy_base import evidence_defs
from trustbench.rtb.policy._protocol import CaseGenerator, FindingRules, PolicyRule
from trustbench.rtb.policy.narrow_v3._policy import (
    AblatedV3Reviewer,
    NarrowApprovalV3,
    check_cases_v3,
)
from trustbench.rtb.policy.narrow_v3._reviewer import (
    DECISION_RULES_V3,
    RULES_V3,
    ReferencePolicyV3Reviewer,
)
from trustbench.rtb.policy.narrow_v4._generate import FAMILY_GENERATOR
from trustbench.rtb.policy.narrow_v4._models import (
    POLICY_ID_V4,
    CandidateInputV4,
    CaseV4,
    EvidenceRecordV4,
    ReviewerResponseV4,
    policy_text_v4,
)
from trustbench.rtb.policy.narrow_v4._world import family_problems, realism_problems

if TYPE_CHECKING:
    from trustbench.rtb.platform import PlatformSeed, PlatformView
    from trustbench.rtb.review.reviewers._protocol import Reviewer


class ReferencePolicyV4Reviewer(ReferencePolicyV3Reviewer):
    """The v0.3 reference reviewer on v0.4 inputs (the policy text is v0.3's, rule for rule)."""

    name = "reference-policy-v4"
    policy_ids: tuple[str, ...] = (POLICY_ID_V4,)
    """Policies this reviewer implements; a track refuses a corpus declaring another."""
    input_model: type[BaseModel] = CandidateInputV4
    """The v0.4 candidate-input format (a v0.3 input is refused)."""


class AblatedV4Reviewer(AblatedV3Reviewer, ReferencePolicyV4Reviewer):
    """The v0.4 reference reviewer with one rule of the policy text removed (v0.3's readers)."""


def check_cases_v4(cases: list[tuple[str, CaseV4]]) -> list[Problem]:
    """v0.3's checks under the v0.4 id and text, the family contract, and the realism checks.

    The family id is grader-only: it must not appear in anything a candidate sees.
    """
    problems = check_cases_v3(cases, POLICY_ID_V4, policy_text_v4())  # type: ignore[arg-type]
    families = {case.family for _, case in cases}
    for rel, case in cases:
        visible = case.model_dump(mode="json", include={"task", "as_of", "proposal", "evidence"})
        problems += [
            Problem(
                file=rel,
                pointer=leak.pointer,
                message=f"candidate-visible content contains the family id {leak.found!r}",
            )
            for leak in find_leaks(visible, families)
        ]
    return problems + family_problems(cases) + realism_problems(cases)


class NarrowApprovalV4(NarrowApprovalV3):
    """`CorpusPolicy` of `rtb-narrow-approval-v4`."""

    policy_id = POLICY_ID_V4
    case_model: type[BaseModel] = CaseV4
    candidate_model: type[BaseModel] = CandidateInputV4
    response_model: type[BaseModel] = ReviewerResponseV4
    evidence_defs: tuple[str, ...] = evidence_defs(EvidenceRecordV4)
    schema_id_prefix = f"urn:trustbench:rtb:{POLICY_ID_V4}:schema:"
    finding_rules: FindingRules = RULES_V3
    reviewers: Mapping[str, Callable[[int], Reviewer]] = {
        "reference-policy-v4": lambda seed: cast("Reviewer", ReferencePolicyV4Reviewer())
    }
    source_files: tuple[str, ...] = (
        "rtb/policy/narrow_v4/*.py",
        "rtb/policy/narrow_v3/*.py",
        "rtb/policy/narrow_v3/*.cedar",
        "rtb/policy/narrow_v2/*.py",
    )
    rules: tuple[PolicyRule, ...] = DECISION_RULES_V3
    """v0.3's decision rules (the v0.4 text states them unchanged), each ablatable."""
    review_gates: Path = Path(__file__).with_name("review_gates.toml")
    """Exact 5 % gates sized for the v0.4 corpus (see the file)."""
    generator: CaseGenerator | None = FAMILY_GENERATOR
    """The contrast-family generator the shipped v0.4 corpus was drawn with."""

    check_cases = staticmethod(check_cases_v4)
    """v0.3's checks, the family contract and the realism constraints."""

    def ablated_reviewer(self, rule_id: str) -> Reviewer:
        """The reference reviewer without rule `rule_id` (v0.3's ablated readers)."""
        return cast("Reviewer", AblatedV4Reviewer(rule_id))

    def change_records(self, target: str, platform: PlatformView) -> dict[str, Any] | None:
        """v0.3's records (the same rules read them) under the v0.4 id, the policy record too.

        A workflow agent reading `read_change_records` on a v0.4 platform must see the policy
        its platform declares: records naming v0.3's id would send it (and whoever follows the
        id) to v0.3's input format, which a v0.4 candidate input refuses.
        """
        shown = super().change_records(target, platform)
        if shown is None:
            return None
        records = [
            {**record, "policy_id": POLICY_ID_V4} if record["kind"] == "policy" else record
            for record in shown["records"]
        ]
        return {**shown, "policy_id": POLICY_ID_V4, "records": records}

    def seed_platform(self, case: Any) -> PlatformSeed:
        """v0.3's platform state for the case, declaring the v0.4 policy (same rules)."""
        return super().seed_platform(case).model_copy(update={"policy_id": POLICY_ID_V4})


NARROW_V4 = NarrowApprovalV4()
"""The registered instance."""
