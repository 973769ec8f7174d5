"""Policy `rtb-narrow-approval-v1` (the first starter corpus): its rules and encodings.

The registered object is `NARROW_V1`. Its case, input and response models are the base contract
in `trustbench.rtb.corpus` (`Case`, `CandidateInput`, `ReviewerResponse`), which later policies
reuse parts of; the rules that read them live here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trustbench._lazy import lazy_exports

if TYPE_CHECKING:
    from trustbench.rtb.policy.narrow_v1._boundary import evaluate_policy
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
    "evaluate_policy",
]

__getattr__, __dir__ = lazy_exports(__name__, __file__)
