"""The RTB v0.4 case contract (policy `rtb-narrow-approval-v4`): v0.3's rules on realistic worlds.

v0.4 keeps the v0.3 policy text rule for rule (`narrow_v3._models.RULES`): what changes is the
corpus, built from contrast families over worlds a platform engineer would recognise
(`_world.py`, `_generate.py`). The records are v0.3's; the policy record declares the v0.4 id
(and only that id, so an input of either version reads back as the version that wrote it), and a
case names the contrast family it belongs to (grader-only authoring metadata).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from trustbench.rtb.corpus._models import ServiceNoticeRecord
from trustbench.rtb.policy._cases import CandidateInputOf, CaseOf
from trustbench.rtb.policy.narrow_v2._models import (
    ChangeTicketRecord,
    RequesterNoteRecord,
    ResourceStateRecordV2,
    RevocationRecord,
)
from trustbench.rtb.policy.narrow_v3._models import (
    RULES,
    ApprovalRecordV3,
    BreakGlassRecord,
    DelegationRecord,
    ExpectationsV3,
    FreezeWindowRecord,
    MaintenanceWindowRecord,
    PolicyRecordV3,
    ProposalV3,
    ReviewerResponseV3,
)

POLICY_ID_V4 = "rtb-narrow-approval-v4"
"""Policy id every v0.4 corpus declares (MANIFEST.json `policy_id`, policy records)."""

POLICY_TITLE_V4 = "Synthetic change-authorization policy v4 (RTB v0.4)"
"""Title of the policy record."""


def policy_text_v4() -> str:
    """The numbered policy text every v0.4 policy record and prompt states (v0.3's rules)."""
    lines = [f"Policy {POLICY_ID_V4}. Judge every time against the input's `as_of` instant."]
    lines += [f"{n}. {sentence}" for n, (_, sentence) in enumerate(RULES, start=1)]
    return "\n".join(lines)


class PolicyRecordV4(PolicyRecordV3):
    """v0.3's policy record, declaring the v0.4 policy (the reviewer reads it as v0.3's)."""

    policy_id: Literal["rtb-narrow-approval-v4"]  # pyright: ignore[reportIncompatibleVariableOverride]
    """Identifier of the policy (`rtb-narrow-approval-v4`)."""


EvidenceRecordV4 = Annotated[
    ApprovalRecordV3
    | RevocationRecord
    | PolicyRecordV4
    | ResourceStateRecordV2
    | ServiceNoticeRecord
    | ChangeTicketRecord
    | RequesterNoteRecord
    | FreezeWindowRecord
    | MaintenanceWindowRecord
    | DelegationRecord
    | BreakGlassRecord,
    Field(discriminator="kind"),
]


class CaseV4(CaseOf[ProposalV3, EvidenceRecordV4, ExpectationsV3]):
    """One complete v0.4 authoring case: candidate-visible parts plus the grader-only key."""

    variant: str
    """The family member this case is: `base`, an edit along one rule, or a presentation edit."""
    as_of: str
    """ISO 8601 evaluation time: every window, expiry and revocation is judged at this instant."""
    family: str = Field(pattern=r"^fam-[a-z0-9]+$")
    """The contrast family (one base world and proposal plus its edits). Grader-only: a
    candidate never sees it."""
    edit_of: str | None = None
    """The variant this case was edited from (None for the base): an edit changes the fewest
    facts of that member needed to move the decision along one rule, or none that bear on it."""


class CandidateInputV4(CandidateInputOf[ProposalV3, EvidenceRecordV4]):
    """What a reviewer receives for one v0.4 case: no answer key, no case id, no family."""


class ReviewerResponseV4(ReviewerResponseV3):
    """A reviewer's structured finding for one v0.4 candidate input (v0.3's format)."""
