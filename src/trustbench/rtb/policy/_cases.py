"""Structural case checks whose logic is the same under every policy that uses them.

A policy's `_checks.py` composes these with its own (each version's vocabulary and records
differ; what a duplicate record id, an unsupported reason code or a leak is does not). Each check
returns `Problem`s naming the case file and the JSON pointer at fault.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from enum import Enum, StrEnum
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, Field

from trustbench.rtb.corpus._leakscan import find_leaks, grader_only_values
from trustbench.rtb.corpus._models import (
    AuthoringMetadata,
    Decision,
    Discrepancy,
    Problem,
    Proposal,
    ReferenceStatus,
    _Strict,
    duplicate_case_ids,
    json_pointer,
)

CaseT = TypeVar("CaseT")
"""The policy's case model."""


def each_case(
    cases: Sequence[tuple[str, CaseT]], check: Callable[[str, CaseT], list[Problem]]
) -> list[Problem]:
    """Duplicate case ids, then the problems `check` finds in each case file, in corpus order."""
    problems = duplicate_case_ids(cases)
    for rel, case in cases:
        problems += check(rel, case)
    return problems


def duplicate_record_ids(rel: str, record_ids: Sequence[str]) -> list[Problem]:
    """A problem for each evidence record whose id an earlier record of the case already used."""
    return [
        Problem(
            file=rel,
            pointer=json_pointer(["evidence", index, "record_id"]),
            message=f"duplicate record id {record_id!r} within the case",
        )
        for index, record_id in enumerate(record_ids)
        if record_ids.index(record_id) != index
    ]


def unresolved_record_ids(
    rel: str, where: str, ids: Sequence[str], record_ids: Sequence[str], suffix: str = ""
) -> list[Problem]:
    """A problem for each id of answer-key field `where` that names no evidence record of the case.

    Args:
        rel: The case file.
        where: The field of `expectations` the ids come from (`decisive_record_ids`, ...).
        ids: The record ids it names, in order.
        record_ids: The case's evidence record ids.
        suffix: Appended to each message (a policy's own wording of where it looked).
    """
    what = "discrepancy" if where == "decisive_discrepancies" else "decisive"
    return [
        Problem(
            file=rel,
            pointer=json_pointer(["expectations", where, index]),
            message=f"{what} record id {record_id!r} resolves to no evidence record{suffix}",
        )
        for index, record_id in enumerate(ids)
        if record_id not in record_ids
    ]


def unsupported_reason_codes(
    rel: str, expectations: Any, decision_of: Mapping[Any, Enum]
) -> list[Problem]:
    """A problem for each acceptable reason code that supports another decision than the key's.

    Args:
        rel: The case file.
        expectations: The case's answer key (`acceptable_reason_codes`, `reference_decision`).
        decision_of: The policy's reason code -> decision table.
    """
    reference = expectations.reference_decision
    return [
        Problem(
            file=rel,
            pointer=json_pointer(["expectations", "acceptable_reason_codes", index]),
            message=f"reason code {code.value!r} supports {decision_of[code].value}, not the "
            f"reference decision {reference.value}",
        )
        for index, code in enumerate(expectations.acceptable_reason_codes)
        if decision_of[code] is not reference
    ]


def candidate_visible_leaks(
    cases: Sequence[tuple[str, Any]], visible_fields: set[str]
) -> list[Problem]:
    """The parts a candidate will see must not mention any case's grader-only values.

    Pointers are those of the case file: the candidate-visible fields sit at the same paths.

    Args:
        cases: `(relative path, parsed case)` of every case of the corpus.
        visible_fields: The case's top-level fields a candidate sees.
    """
    forbidden = set().union(*(grader_only_values(case) for _, case in cases))
    return [
        Problem(
            file=rel,
            pointer=leak.pointer,
            message=f"candidate-visible content contains grader-only "
            f"{leak.kind.replace('_', ' ')} {leak.found!r}",
        )
        for rel, case in cases
        for leak in find_leaks(case.model_dump(mode="json", include=visible_fields), forbidden)
    ]


# ------------------------------------------------------------------------------------------------
# Case, candidate-input, response and reading models shared by the evidence-record policies.
#
# v0.2 and v0.3 (and a later version built the same way) differ in their reason codes, proposal and
# evidence records, not in the shape of a case, what a candidate receives or how a reviewer answers.
# Each of those shapes is declared once here, generic in what differs; a policy's `_models.py`
# binds it to its own types (`class CaseV3(CaseOf[ProposalV3, EvidenceRecordV3, ExpectationsV3])`)
# and restates only a field whose wording differs. The JSON schemas a corpus ships are generated
# from the bound models, so they are the same as when each version spelled the fields out.

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
