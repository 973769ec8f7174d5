"""Policy `rtb-narrow-approval-v2` (corpus v0.2): its contract, rules and encodings.

The registered object is `NARROW_V2`; the names below are its building blocks, public for
authoring tools and tests.

The live evaluators (the `reference` and Cedar engines on platform state) are reached through
the policy object (`live_evaluator`), not exported here: they import the simulated platform,
the boundaries and cedarpy, which a review run never needs.
"""

from __future__ import annotations

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
]
