"""Policy `rtb-narrow-approval-v4` (corpus v0.4): v0.3's rules on contrast families.

The registered object is `NARROW_V4`; the names below are its building blocks, public for the
authoring tool, the audit and tests. Deciding, grading and enforcing are v0.3's (imported); what
is v0.4's own is the contract (`CaseV4` names its family), the realism constraints and their
check, and the generator the corpus is drawn with.
"""

from __future__ import annotations

from trustbench.rtb.policy.narrow_v4._generate import (
    FAMILIES,
    FAMILY_GENERATOR,
    SEED,
    Drawn,
    FamilyGenerator,
    draw_families,
)
from trustbench.rtb.policy.narrow_v4._models import (
    POLICY_ID_V4,
    CandidateInputV4,
    CaseV4,
    PolicyRecordV4,
    ReviewerResponseV4,
    policy_text_v4,
)
from trustbench.rtb.policy.narrow_v4._policy import (
    NARROW_V4,
    NarrowApprovalV4,
    ReferencePolicyV4Reviewer,
    check_cases_v4,
)
from trustbench.rtb.policy.narrow_v4._world import REALISM, family_problems, realism_problems

__all__ = [
    "FAMILIES",
    "FAMILY_GENERATOR",
    "NARROW_V4",
    "POLICY_ID_V4",
    "REALISM",
    "SEED",
    "CandidateInputV4",
    "CaseV4",
    "Drawn",
    "FamilyGenerator",
    "NarrowApprovalV4",
    "PolicyRecordV4",
    "ReferencePolicyV4Reviewer",
    "ReviewerResponseV4",
    "check_cases_v4",
    "draw_families",
    "family_problems",
    "policy_text_v4",
    "realism_problems",
]
