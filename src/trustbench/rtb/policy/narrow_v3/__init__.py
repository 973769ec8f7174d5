"""Policy `rtb-narrow-approval-v3` (corpus v0.3): its contract, rules and encodings.

The registered object is `NARROW_V3`; the names below are its building blocks, public for
authoring tools and tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trustbench._lazy import lazy_exports

if TYPE_CHECKING:
    from trustbench.rtb.policy.narrow_v3._cedar import cedar_assess_v3
    from trustbench.rtb.policy.narrow_v3._models import (
        POLICY_ID_V3,
        REASON_CODE_DECISION_V3,
        REASON_CODE_MEANING_V3,
        ApprovalRecordV3,
        BreakGlassRecord,
        CandidateInputV3,
        CaseV3,
        DelegationRecord,
        ExpectationsV3,
        FreezeWindowRecord,
        MaintenanceWindowRecord,
        PolicyRecordV3,
        ProposalV3,
        ReasonCodeV3,
        ReviewerResponseV3,
    )
    from trustbench.rtb.policy.narrow_v3._policy import NARROW_V3, NarrowApprovalV3
    from trustbench.rtb.policy.narrow_v3._prompt import render_prompt_v3
    from trustbench.rtb.policy.narrow_v3._reviewer import ReferencePolicyV3Reviewer, assess_v3
    from trustbench.rtb.policy.narrow_v3._rules import RULE_IDS, RULES, policy_text_v3

__all__ = [
    "NARROW_V3",
    "POLICY_ID_V3",
    "REASON_CODE_DECISION_V3",
    "REASON_CODE_MEANING_V3",
    "RULES",
    "RULE_IDS",
    "ApprovalRecordV3",
    "BreakGlassRecord",
    "CandidateInputV3",
    "CaseV3",
    "DelegationRecord",
    "ExpectationsV3",
    "FreezeWindowRecord",
    "MaintenanceWindowRecord",
    "NarrowApprovalV3",
    "PolicyRecordV3",
    "ProposalV3",
    "ReasonCodeV3",
    "ReferencePolicyV3Reviewer",
    "ReviewerResponseV3",
    "assess_v3",
    "cedar_assess_v3",
    "policy_text_v3",
    "render_prompt_v3",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
