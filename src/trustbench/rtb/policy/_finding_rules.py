"""The grading rules of a finding, as data a policy object declares (`CorpusPolicy.finding_rules`).

"Do not hide the rule and punish the candidate for missing it": every rule the grader applies to a
finding's citations and discrepancies is one entry here, with the sentence that states it to the
candidate. The grader (`trustbench.rtb.review._findings`) reads nothing else, and a test checks
that each corpus's review prompt contains every sentence of its policy's rules
(`FindingRules.prompt_lines`), so the prompt states exactly what is graded.

A cited discrepancy is true only when its record exists, its field is one the policy compares
for that kind of record (a `FieldRule`), the field exists there (or is absent where the rule says
absence is what is cited), the cited values equal the records' values after the policy's
normalisation, and the rule's condition holds (the values differ, the approval has expired, ...).
One false discrepancy makes the finding unsupported.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Holds = Literal["differs", "same", "at_or_before", "after", "not_value", "not_authorised"]
"""When a cited discrepancy on a field is a discrepancy at all:

- `differs`: the proposed and the recorded value are not equivalent after normalisation;
- `same`: they are equivalent (e.g. the approver is the requester: separation of duties);
- `at_or_before`: the recorded instant is at or before the proposed one (expired at `as_of`);
- `after`: the recorded instant is after the proposed one (issued after `as_of`);
- `not_value`: the recorded value is not the rule's `conforming` value (e.g. status not active);
- `not_authorised`: the recorded approver is not among the policy record's authorised approvers.
"""

PARAMETER = "{parameter}"
"""Placeholder in a `FieldRule` pointer: the name of a parameter the proposal sets."""


@dataclass(frozen=True)
class FieldRule:
    """One field the policy compares, and how a discrepancy on it must be written."""

    kind: str
    """Evidence record kind the field belongs to (`approval`, `resource_state`, ...)."""
    field: str
    """JSON pointer into the record; `{parameter}` stands for a parameter the proposal sets."""
    proposed: str | None
    """Where `proposed_value` must come from: a JSON pointer into the request
    (`{"proposal": ..., "as_of": ...}`), or None when `proposed_value` must be null."""
    holds: Holds
    """The condition that makes the cited values a discrepancy (see `Holds`)."""
    sentence: str
    """How the candidate prompt states this rule (verbatim)."""
    conforming: str | None = None
    """For `not_value`: the value that is no discrepancy (e.g. `active`)."""
    absent_is_null: bool = False
    """The field may be absent from the record (its parent object exists): that absence is
    cited with `evidence_value` null (an approval that lists no such parameter)."""


@dataclass(frozen=True)
class CitationRule:
    """Which records a supported finding cites in `evidence_refs`."""

    free_kinds: tuple[str, ...]
    """Record kinds that may always be cited besides the decisive records."""
    max_other: int
    """Other non-decisive records (of kinds not in `free_kinds`) tolerated."""
    never_all_others: bool
    """Citing every non-decisive record of the other kinds is never a precise citation."""
    sentences: tuple[str, ...]
    """How the candidate prompt states these rules (verbatim)."""


@dataclass(frozen=True)
class FindingRules:
    """Every rule the grader applies to a finding beyond its decision and reason codes."""

    citations: CitationRule
    """What `evidence_refs` must and may hold."""
    fields: tuple[FieldRule, ...] = ()
    """The fields a discrepancy may cite (empty: the response format has no discrepancies)."""
    max_extra_discrepancies: int = 0
    """True discrepancies beyond the case's decisive ones that a supported finding may list."""
    discrepancy_sentences: tuple[str, ...] = field(default_factory=tuple)
    """General discrepancy rules as the prompt states them (verbatim)."""

    def prompt_lines(self) -> list[str]:
        """Every sentence the candidate prompt must contain for these rules."""
        return [
            *self.citations.sentences,
            *self.discrepancy_sentences,
            *(rule.sentence for rule in self.fields),
        ]

    def rules_for(self, kind: str) -> list[FieldRule]:
        """The field rules of a record kind."""
        return [rule for rule in self.fields if rule.kind == kind]
