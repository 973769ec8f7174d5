"""One candidate's graded reviewer trial, as the report holds it (`MemberTrial`).

Apart from the grading (`_grading.py`) and the store that keeps graded trials on disk
(`_member_store.py`), which both use it, so neither imports the other's internals.
"""

from __future__ import annotations

from dataclasses import dataclass

from trustbench.rtb.policy._protocol import AuthoredCase
from trustbench.rtb.review._validation import Outcome, ValidatedResponse


@dataclass(frozen=True, slots=True)
class MemberTrial:
    """One candidate's graded trial of one case (trial index k).

    One is held per finished trial for the whole report, so it keeps what the figures and the
    per-trial rows read, not the parsed reply: `validated` has no `response` (its explanation
    and support gaps are kept instead), repeated names are interned.
    """

    case: AuthoredCase
    """The authored case (grader side)."""
    candidate: str
    """The candidate's name."""
    trial: int
    """Trial index k."""
    status: str
    """`completed` or `failed` (the ledger's trial status)."""
    evaluation_id: str | None
    """The evaluation id the candidate saw; None if the trial failed before recording one."""
    raw_reply: str | None
    """The reply text exactly as received, kept only when no finding was parsed from it (a
    missing or invalid reply: its reasons and excerpts read it); None otherwise."""
    reported_model: str | None
    """Model id the service reported."""
    validated: ValidatedResponse
    """Outcome of validation (missing for a failed trial) and why a reply was invalid; its
    parsed `response` is not kept (see `explanation`, `support_gaps`)."""
    supported: bool
    """Whether the finding is valid and supported for the case."""
    latency_s: float | None
    """Sum of the trial's counted attempts' latencies (retries included)."""
    tokens: int | None
    """Sum of reported prompt + completion tokens; None when no attempt reported any."""
    cost_usd: float | None
    """Sum of reported attempt costs; None (unknown, never 0) when no attempt had a cost."""
    attempts: int
    """Counted attempts of the trial."""
    error_class: str | None
    """Why a failed trial failed (e.g. `server_error` after the retries ran out)."""
    explanation: str | None = None
    """The valid finding's explanation (for people to read, never scored); None without one."""
    support_gaps: tuple[str, ...] = ()
    """Why the finding is not supported for the case (`support_gaps`); empty when it is."""


_SLIM: dict[Outcome, ValidatedResponse] = {}


def slim_validated(validated: ValidatedResponse) -> ValidatedResponse:
    """`validated` without its parsed response: one shared instance per plain outcome."""
    if validated.invalid_reason is not None:
        return ValidatedResponse(outcome=validated.outcome, invalid_reason=validated.invalid_reason)
    if validated.outcome not in _SLIM:
        _SLIM[validated.outcome] = ValidatedResponse(outcome=validated.outcome)
    return _SLIM[validated.outcome]


__all__ = ["MemberTrial", "slim_validated"]
