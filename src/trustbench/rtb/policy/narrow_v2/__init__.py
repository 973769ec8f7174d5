"""Policy `rtb-narrow-approval-v2` (corpus v0.2): its contract, rules and encodings.

The registered object is `NARROW_V2`; the names below are its building blocks, public for
authoring tools and tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trustbench._lazy import lazy_exports

if TYPE_CHECKING:
    from trustbench.rtb.policy.narrow_v2._boundary import evaluate_policy_v2
    from trustbench.rtb.policy.narrow_v2._cedar import CedarFinding, cedar_assess_v2
    from trustbench.rtb.policy.narrow_v2._models import (
        POLICY_ID_V2,
        REASON_CODE_DECISION_V2,
        REASON_CODE_MEANING_V2,
        ApprovalRecordV2,
        CandidateInputV2,
        CaseV2,
        ChangeTicketRecord,
        ContestableReading,
        ExpectationsV2,
        PolicyRecordV2,
        ReasonCodeV2,
        RequesterNoteRecord,
        ResourceStateRecordV2,
        ReviewerResponseV2,
        RevocationRecord,
    )
    from trustbench.rtb.policy.narrow_v2._policy import NARROW_V2, NarrowApprovalV2
    from trustbench.rtb.policy.narrow_v2._reviewer import (
        FindingV2,
        ReferencePolicyV2Reviewer,
        assess_v2,
    )

__all__ = [
    "NARROW_V2",
    "POLICY_ID_V2",
    "REASON_CODE_DECISION_V2",
    "REASON_CODE_MEANING_V2",
    "ApprovalRecordV2",
    "CandidateInputV2",
    "CaseV2",
    "CedarFinding",
    "ChangeTicketRecord",
    "ContestableReading",
    "ExpectationsV2",
    "FindingV2",
    "NarrowApprovalV2",
    "PolicyRecordV2",
    "ReasonCodeV2",
    "ReferencePolicyV2Reviewer",
    "RequesterNoteRecord",
    "ResourceStateRecordV2",
    "ReviewerResponseV2",
    "RevocationRecord",
    "assess_v2",
    "cedar_assess_v2",
    "evaluate_policy_v2",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
