"""Reviewer candidates for the RTB reviewer track, and a registry by name.

Deterministic reviewers run in-process: the `reference-policy` (the policy wording as code, reading
only candidate-visible evidence) and the sentinels used by the harness self-audit. Chat-model
reviewers are sent through `trustbench.providers` with the messages from `build_review_messages`;
their raw replies go to `validate_response` unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

from trustbench.errors import InputError
from trustbench.rtb._models import Decision
from trustbench.rtb.reviewers._chat import chat_responder
from trustbench.rtb.reviewers._llm import build_review_messages, extract_json_object
from trustbench.rtb.reviewers._protocol import Reviewer
from trustbench.rtb.reviewers._reference_policy import (
    PolicyFinding,
    ReferencePolicyReviewer,
    assess,
)
from trustbench.rtb.reviewers._sentinels import (
    EmptyReviewer,
    FixedDecisionReviewer,
    ForgedRefsReviewer,
    MalformedReviewer,
    RandomReviewer,
)

_FACTORIES: dict[str, Callable[[int], Reviewer]] = {
    "reference-policy": lambda seed: ReferencePolicyReviewer(),
    "always-permit": lambda seed: FixedDecisionReviewer(Decision.PERMIT),
    "always-deny": lambda seed: FixedDecisionReviewer(Decision.DENY),
    "always-hold": lambda seed: FixedDecisionReviewer(Decision.HOLD),
    "empty": lambda seed: EmptyReviewer(seed),
    "malformed": lambda seed: MalformedReviewer(seed),
    "forged-refs": lambda seed: ForgedRefsReviewer(),
    "random": lambda seed: RandomReviewer(seed),
}

REVIEWER_NAMES: tuple[str, ...] = tuple(_FACTORIES)
"""Every in-process reviewer name, in registry order."""

SENTINEL_NAMES: tuple[str, ...] = tuple(name for name in _FACTORIES if name != "reference-policy")
"""The sentinel reviewers (known behaviour, used to audit the harness)."""


def make_reviewer(name: str, *, seed: int = 0) -> Reviewer:
    """Build an in-process reviewer by registry name.

    Args:
        name: One of `REVIEWER_NAMES`.
        seed: Seed for the randomised sentinels (`empty`, `malformed`, `random`); recorded by the
            caller with the trial. Ignored by deterministic reviewers.

    Returns:
        The reviewer.

    Raises:
        InputError: For an unknown name (the message lists the known names).
    """
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise InputError(
            f"unknown reviewer {name!r}; known reviewers: {', '.join(REVIEWER_NAMES)}",
            location="reviewer",
        ) from None
    return factory(seed)


__all__ = [
    "REVIEWER_NAMES",
    "SENTINEL_NAMES",
    "EmptyReviewer",
    "FixedDecisionReviewer",
    "ForgedRefsReviewer",
    "MalformedReviewer",
    "PolicyFinding",
    "RandomReviewer",
    "ReferencePolicyReviewer",
    "Reviewer",
    "assess",
    "build_review_messages",
    "chat_responder",
    "extract_json_object",
    "make_reviewer",
]
