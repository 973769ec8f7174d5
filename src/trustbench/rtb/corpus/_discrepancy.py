"""A structured finding: one difference between the proposal and an evidence record.

Keyword-matching an explanation cannot tell a careful reviewer from a keyword salad, so a finding
is supported by *structured* discrepancies instead: which record, which field (a JSON pointer into
that record), what the proposal says and what the evidence says. The grader compares a reviewer's
discrepancies with the case's decisive ones after the corpus policy's normalisation
(`_normalise.py`), so `port "22"` and `port 22` are the same value where the policy says so.

The same model is written by case authors (grader-only `decisive_discrepancies`) and by reviewers
(in their response), so both sides speak one format.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

JsonScalar = str | int | float | bool | None
FindingValue = JsonScalar | list[JsonScalar]


class Discrepancy(BaseModel):
    """One field where the proposal and an authoritative evidence record disagree.

    For a missing or unavailable record (a hold), `field` points at what establishes the gap
    (e.g. a service notice's `/status`), `evidence_value` is what the record says
    (`"unavailable"`), and `proposed_value` is None.
    """

    model_config = ConfigDict(use_attribute_docstrings=True, extra="forbid", frozen=True)

    record_id: str = Field(min_length=1)
    """`record_id` of the evidence record the proposal is compared with."""
    field: str = Field(pattern=r"^(/[^/]*)+$")
    """JSON pointer (RFC 6901) into that record, e.g. `/approved_parameters/retention_days`."""
    proposed_value: FindingValue = None
    """The proposal's value for the same thing (None when the proposal has none)."""
    evidence_value: FindingValue = None
    """The record's value at `field`."""
