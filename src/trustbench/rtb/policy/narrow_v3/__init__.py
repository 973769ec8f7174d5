"""Policy `rtb-narrow-approval-v3` (corpus v0.3): its contract, rules and encodings.

The registered object is `NARROW_V3`; the names below are its building blocks, public for
authoring tools and tests.

The live evaluators (the `reference` and Cedar engines on platform state) are reached through
the policy object (`live_evaluator`), not exported here: they import the simulated platform,
the boundaries and cedarpy, which a review run never needs.
"""

from __future__ import annotations

from trustbench.rtb.policy.narrow_v3._models import (
    POLICY_ID_V3,
    REASON_CODE_DECISION_V3,
    REASON_CODE_MEANING_V3,
    RULE_IDS,
    RULES,
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
    policy_text_v3,
)
from trustbench.rtb.policy.narrow_v3._policy import NARROW_V3, NarrowApprovalV3
from trustbench.rtb.policy.narrow_v3._reviewer import (
    ReferencePolicyV3Reviewer,
    assess_v3,
    render_prompt_v3,
)

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
    "policy_text_v3",
    "render_prompt_v3",
]
