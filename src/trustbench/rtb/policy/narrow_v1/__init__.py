"""Policy `rtb-narrow-approval-v1` (the first starter corpus): its rules and encodings.

The registered object is `NARROW_V1`. Its case, input and response models are the base contract
in `trustbench.rtb.corpus` (`Case`, `CandidateInput`, `ReviewerResponse`), which later policies
reuse parts of; the rules that read them live here.

The live evaluators (the `reference` and Cedar engines on platform state) are reached through
the policy object (`live_evaluator`), not exported here: they import the simulated platform,
the boundaries and cedarpy, which a review run never needs.
"""

from __future__ import annotations

from trustbench.rtb.policy.narrow_v1._policy import NARROW_V1, POLICY_ID, NarrowApprovalV1
from trustbench.rtb.policy.narrow_v1._reviewer import (
    PolicyFinding,
    ReferencePolicyReviewer,
    assess,
)

__all__ = [
    "NARROW_V1",
    "POLICY_ID",
    "NarrowApprovalV1",
    "PolicyFinding",
    "ReferencePolicyReviewer",
    "assess",
]
