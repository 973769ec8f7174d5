"""In-process reviewers by name: the reference policy and the sentinels of the harness audit."""

from __future__ import annotations

from collections.abc import Callable

from trustbench.errors import InputError
from trustbench.rtb.corpus._models import Decision
from trustbench.rtb.review.reviewers._protocol import Reviewer
from trustbench.rtb.review.reviewers._reference_policy import (
    ReferencePolicyReviewer,
)
from trustbench.rtb.review.reviewers._sentinels import (
    ContradictoryReviewer,
    EmptyReviewer,
    FixedDecisionReviewer,
    ForgedRefsReviewer,
    KeywordStufferReviewer,
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
    "keyword-stuffer": lambda seed: KeywordStufferReviewer(),
    "contradictory": lambda seed: ContradictoryReviewer(),
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
