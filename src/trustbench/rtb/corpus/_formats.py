"""Which case contract a corpus uses, keyed by the policy id it declares.

A corpus declares its policy in `MANIFEST.json` (`policy_id`). The policy fixes the case format
(models and schemas), the reason-code vocabulary and the code that may grade it: a reviewer or
boundary that implements one policy refuses a corpus declaring another, instead of silently
grading it with the wrong rules. A manifest without `policy_id` is a v0.1-format corpus (the
v0.1 starter predates the field and stays byte-identical).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from trustbench.errors import InputError
from trustbench.rtb.corpus._models import (
    REASON_CODE_DECISION,
    REASON_CODE_MEANING,
    CandidateInput,
    Case,
    ReasonCode,
    ReviewerResponse,
)
from trustbench.rtb.policy.narrow_v2._models import (
    POLICY_ID_V2,
    REASON_CODE_DECISION_V2,
    REASON_CODE_MEANING_V2,
    CandidateInputV2,
    CaseV2,
    ReasonCodeV2,
    ReviewerResponseV2,
)

POLICY_ID_V1 = "rtb-narrow-approval-v1"
"""Policy of the v0.1 starter (and any corpus whose manifest names no policy)."""


@dataclass(frozen=True)
class CorpusFormat:
    """The contract a policy id implies: models, reason codes and evidence record names."""

    policy_id: str
    """The policy id."""
    case_model: type[BaseModel]
    """Authoring case model."""
    candidate_model: type[BaseModel]
    """Candidate-input model."""
    response_model: type[BaseModel]
    """Reviewer-response model."""
    reason_codes: tuple[str, ...]
    """The closed reason-code vocabulary (values)."""
    reason_decision: dict[str, str]
    """Reason code -> the decision it supports."""
    reason_meaning: dict[str, str]
    """Reason code -> one-line meaning."""
    evidence_defs: tuple[str, ...]
    """Schema `$defs` names of the evidence records (their `kind` is required in the union)."""


FORMATS: dict[str, CorpusFormat] = {
    POLICY_ID_V1: CorpusFormat(
        policy_id=POLICY_ID_V1,
        case_model=Case,
        candidate_model=CandidateInput,
        response_model=ReviewerResponse,
        reason_codes=tuple(code.value for code in ReasonCode),
        reason_decision={c.value: d.value for c, d in REASON_CODE_DECISION.items()},
        reason_meaning={c.value: m for c, m in REASON_CODE_MEANING.items()},
        evidence_defs=(
            "ApprovalRecord",
            "PolicyRecord",
            "ResourceStateRecord",
            "ServiceNoticeRecord",
        ),
    ),
    POLICY_ID_V2: CorpusFormat(
        policy_id=POLICY_ID_V2,
        case_model=CaseV2,
        candidate_model=CandidateInputV2,
        response_model=ReviewerResponseV2,
        reason_codes=tuple(code.value for code in ReasonCodeV2),
        reason_decision={c.value: d.value for c, d in REASON_CODE_DECISION_V2.items()},
        reason_meaning={c.value: m for c, m in REASON_CODE_MEANING_V2.items()},
        evidence_defs=(
            "ApprovalRecordV2",
            "RevocationRecord",
            "PolicyRecordV2",
            "ResourceStateRecordV2",
            "ServiceNoticeRecord",
            "ChangeTicketRecord",
            "RequesterNoteRecord",
        ),
    ),
}
"""Every policy id trustbench implements -> its corpus format."""

KNOWN_POLICY_IDS: tuple[str, ...] = tuple(FORMATS)
"""The policy ids trustbench can validate and grade."""


def corpus_format(policy_id: str) -> CorpusFormat:
    """The format for a policy id.

    Raises:
        InputError: trustbench implements no such policy (the message lists the known ones).
    """
    try:
        return FORMATS[policy_id]
    except KeyError:
        raise InputError(
            f"policy id {policy_id!r} is not implemented; known: {', '.join(KNOWN_POLICY_IDS)}",
            location="MANIFEST.json/policy_id",
        ) from None


def require_policy(
    corpus_root: object, policy_id: str, implemented: tuple[str, ...], who: str
) -> None:
    """Refuse a corpus whose policy `who` does not implement.

    Args:
        corpus_root: The corpus folder or label (named in the message).
        policy_id: The corpus's declared policy id.
        implemented: The policy ids `who` implements.
        who: The reviewer, boundary or track doing the check (named in the message).

    Raises:
        InputError: `policy_id` is not in `implemented`.
    """
    if policy_id not in implemented:
        raise InputError(
            f"{who} implements policy {', '.join(implemented)}, but the corpus at {corpus_root} "
            f"declares policy {policy_id!r}; it would be graded by the wrong rules",
            location="MANIFEST.json/policy_id",
        )
