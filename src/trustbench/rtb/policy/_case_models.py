"""Case, candidate-input, response and reading models shared by the evidence-record policies.

v0.2 and v0.3 (and a later version built the same way) differ in their reason codes, proposal and
evidence records, not in the shape of a case, what a candidate receives or how a reviewer answers.
Each of those shapes is declared once here, generic in what differs; a policy's `_models.py`
binds it to its own types (`class CaseV3(CaseOf[ProposalV3, EvidenceRecordV3, ExpectationsV3])`)
and restates only a field whose wording differs. The JSON schemas a corpus ships are generated
from the bound models, so they are the same as when each version spelled the fields out.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Generic, TypeVar

from pydantic import BaseModel, Field

from trustbench.rtb.corpus._discrepancy import Discrepancy
from trustbench.rtb.corpus._models import (
    AuthoringMetadata,
    Decision,
    Proposal,
    ReferenceStatus,
    _Strict,
)

CodeT = TypeVar("CodeT", bound=StrEnum)
"""The policy's reason-code vocabulary."""
ProposalT = TypeVar("ProposalT", bound=Proposal)
"""The policy's proposal model."""
EvidenceT = TypeVar("EvidenceT")
"""The policy's evidence record union (discriminated by `kind`)."""
KeyT = TypeVar("KeyT", bound=BaseModel)
"""The policy's answer-key model."""


class ContestableReadingOf(_Strict, Generic[CodeT]):
    """One defensible reading of a known-contestable case."""

    reading: str = Field(min_length=1)
    """The reading in words."""
    decision: Decision
    """The decision this reading leads to."""
    reason_codes: list[CodeT] = Field(min_length=1)
    """Reason codes this reading supports."""


class CaseOf(_Strict, Generic[ProposalT, EvidenceT, KeyT]):
    """One complete authoring case: candidate-visible parts plus the grader-only key."""

    case_id: str = Field(
        pattern=r"^[a-z0-9][a-z0-9_.-]*$", json_schema_extra={"not": {"pattern": "\n"}}
    )
    """Stable identifier, unique in the corpus. Never shown to candidates."""
    group: str
    """Domain group."""
    variant: str
    """Variant name (the case feature it exercises)."""
    task: str
    """The scoped task given to the reviewer."""
    as_of: str
    """ISO 8601 evaluation time: expiry and revocations are judged at this instant."""
    proposal: ProposalT
    """The proposed change."""
    evidence: list[EvidenceT] = Field(min_length=1)
    """Candidate-visible evidence records, in presentation order."""
    expectations: KeyT
    """Grader-only answer key."""
    reference_status: ReferenceStatus
    """Review status of the answer key."""
    authoring: AuthoringMetadata
    """Grader-only authoring metadata."""


class CandidateInputOf(_Strict, Generic[ProposalT, EvidenceT]):
    """What a reviewer receives for one case: no answer key, no case id, no variant."""

    evaluation_id: str
    """Fresh, unpredictable id issued for this export; the response must echo it."""
    task: str
    """The scoped task."""
    as_of: str
    """ISO 8601 evaluation time."""
    proposal: ProposalT
    """The proposed change."""
    evidence: list[EvidenceT]
    """Evidence records, in presentation order."""


class ReviewerResponseOf(_Strict, Generic[CodeT]):
    """A reviewer's structured finding for one candidate input."""

    evaluation_id: str
    """Must equal the `evaluation_id` of the input being answered."""
    decision: Decision
    """permit, deny or hold."""
    reason_codes: list[CodeT] = Field(min_length=1)
    """One or more codes from the closed vocabulary."""
    evidence_refs: list[str] = Field(min_length=1)
    """Record ids from the input's evidence that support the decision."""
    discrepancies: list[Discrepancy]
    """Each difference between the proposal and an evidence record that decides the case
    (may be empty for permit)."""
    explanation: str = Field(min_length=1)
    """Plain-language explanation addressing the decisive condition."""
