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


_SLIM: dict[tuple[Outcome, str | None], ValidatedResponse] = {}
_MAX_SLIM = 1024


def slim_of(outcome: Outcome, invalid_reason: str | None) -> ValidatedResponse:
    """The slim `ValidatedResponse` of an outcome and reason: one shared instance of each.

    A report reads every member trial back several times (`MemberStore`); building a pydantic
    model on each read cost more than reading the trial itself.
    """
    key = (outcome, invalid_reason)
    found = _SLIM.get(key)
    if found is None:
        if len(_SLIM) >= _MAX_SLIM:
            _SLIM.clear()
        found = _SLIM[key] = ValidatedResponse(outcome=outcome, invalid_reason=invalid_reason)
    return found


def slim_validated(validated: ValidatedResponse) -> ValidatedResponse:
    """`validated` without its parsed response: one shared instance per outcome and reason."""
    return slim_of(validated.outcome, validated.invalid_reason)


__all__ = ["MemberTrial", "slim_of", "slim_validated"]
