"""What grading reads of one case's answer key, gathered once per case instead of once per trial.

`support_gaps` runs for every graded trial: a million-trial report judges each case's finding
ten thousand times. Reading the answer key off the pydantic case each time (the acceptable
codes, the absent optional fields, the evidence dumped to JSON for the discrepancy checks) cost
more than the checks themselves. Cases are frozen models, so what is read once holds for every
trial; the view is kept per case object (by identity, with the case held so the id stays its).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trustbench.rtb.policy._protocol import AuthoredCase, CorpusPolicy
from trustbench.rtb.policy._registry import policy_of


@dataclass(frozen=True, slots=True)
class AnswerKey:
    """One case's answer key as `support_gaps` reads it."""

    policy: CorpusPolicy
    reference: Any
    """The reference decision."""
    acceptable: list[str]
    """The acceptable reason codes' values."""
    decisive: list[Any]
    """The decisive discrepancies (empty when the policy has none)."""
    readings: list[Any]
    """The known-contestable readings (empty when the case has none)."""
    decisive_ids: list[str]
    """The decisive record ids, in authored order."""
    kinds: tuple[tuple[str, Any], ...]
    """Each evidence record's id and kind (None without one), in authored order. The citation
    rule's free kinds are applied at grading time: the rule is the policy's, read when used."""
    evidence: list[dict[str, Any]]
    """The candidate-visible evidence records as JSON (for the discrepancy checks)."""
    request: dict[str, Any]
    """The candidate-visible request side: the proposal and the stated evaluation time."""


_KEYS: dict[int, tuple[AuthoredCase, AnswerKey]] = {}
_MAX_KEYS = 4096


def answer_key(case: AuthoredCase) -> AnswerKey:
    """`case`'s answer key view, made on first use."""
    found = _KEYS.get(id(case))
    if found is not None and found[0] is case:
        return found[1]
    key = _made(case)
    if len(_KEYS) >= _MAX_KEYS:
        _KEYS.clear()
    _KEYS[id(case)] = (case, key)
    return key


def _made(case: AuthoredCase) -> AnswerKey:
    policy = policy_of(case)
    expected = case.expectations
    structured = policy.structured_discrepancies
    return AnswerKey(
        policy=policy,
        reference=expected.reference_decision,
        acceptable=[code.value for code in expected.acceptable_reason_codes],
        decisive=list(getattr(expected, "decisive_discrepancies", None) or []),
        readings=list(getattr(expected, "contestable_readings", None) or []),
        decisive_ids=list(expected.decisive_record_ids),
        kinds=tuple((r.record_id, getattr(r, "kind", None)) for r in case.evidence),
        evidence=[record.model_dump(mode="json") for record in case.evidence] if structured else [],
        request=(
            {
                "proposal": case.proposal.model_dump(mode="json"),
                "as_of": getattr(case, "as_of", None),
            }
            if structured
            else {}
        ),
    )
