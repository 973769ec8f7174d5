"""One graded reviewer trial: the row every reviewer-track metric is declared over.

A slotted frozen dataclass, not a pydantic model: `report` holds one per configuration and
finished trial, and as a model each cost about 1.1 kB (its `__dict__` and fields-set), most of
the report's memory after the ledger was streamed (issue 30); slotted it is about 130 bytes.
Rows are made only by the grader from already-validated values, so nothing is lost by not
validating them again.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from trustbench.rtb.corpus._models import Decision


class Outcome(StrEnum):
    """What a trial produced: one of the three decisions, or why there is no decision."""

    PERMIT = "permit"
    DENY = "deny"
    HOLD = "hold"
    MISSING = "missing"
    """No output: None, an empty string or only whitespace."""
    INVALID = "invalid"
    """Output that is not a valid finding for this input (see `invalid_reason`)."""

    @property
    def is_decision(self) -> bool:
        """True for permit/deny/hold, False for missing/invalid."""
        return self in (Outcome.PERMIT, Outcome.DENY, Outcome.HOLD)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewTrialRow:
    """One graded trial of a reviewer configuration on one case."""

    case_id: str
    """The case (grader-side id)."""
    group: str
    """The case's domain group."""
    variant: str
    """The case's variant."""
    reference_status: str = "pending"
    """The case's reference status (`reviewed`, `disputed`, `pending`; `reference_label`): one
    more breakdown key, and what `[analysis] exclude_disputed` leaves out of the gates."""
    trial: int = 0
    """Trial index for repeated trials of the same case."""
    reference: Decision
    """The authored reference decision."""
    observed: Outcome
    """The configuration's observed outcome."""
    supported: bool | None
    """Whether the finding was supported; None when there is no finding to judge (unchecked)."""
    latency_s: float | None = None
    """Wall-clock seconds of the whole review (every member and call); None if not measured."""
    tokens: int | None = None
    """Total tokens over every call of the review; None if not reported."""
    cost_usd: float | None = None
    """Total cost in US dollars; None if not reported."""
    member_outcomes: tuple[Outcome, ...] = ()
    """Joint member outcomes for a chain, in review order; empty otherwise."""
