"""In-process reviewers by name: the reference policy and the sentinels of the harness audit."""

from __future__ import annotations

from collections.abc import Callable

from trustbench.errors import InputError, did_you_mean
from trustbench.rtb.corpus._models import Decision
from trustbench.rtb.policy._default import DEFAULT_POLICY_ID
from trustbench.rtb.policy._registry import policy_reviewer, require_policy, reviewer_policies
from trustbench.rtb.review.reviewers._protocol import Reviewer
from trustbench.rtb.review.reviewers._sentinels import (
    ContradictoryReviewer,
    EmptyReviewer,
    FixedDecisionReviewer,
    ForgedRefsReviewer,
    KeywordStufferReviewer,
    MalformedReviewer,
    RandomReviewer,
)

_SENTINELS: dict[str, Callable[[int], Reviewer]] = {
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

REVIEWER_POLICIES: dict[str, tuple[str, ...]] = reviewer_policies()
"""Reviewers that implement a policy -> the policy ids they implement (from each registered
policy's `reviewers`). A corpus declaring any other policy is refused (the sentinels are
policy-agnostic and absent here). Read from the registry's declarations: importing this module
loads no policy; a reviewer's policy is loaded when the reviewer is made."""

ALL_REVIEWER_NAMES: tuple[str, ...] = tuple(
    {**dict.fromkeys(REVIEWER_POLICIES), **dict.fromkeys(_SENTINELS)}
)
"""Every in-process reviewer name, in registry order (any policy)."""

SENTINEL_NAMES: tuple[str, ...] = tuple(
    name for name in ALL_REVIEWER_NAMES if name not in REVIEWER_POLICIES
)
"""The sentinel reviewers (known behaviour, used to audit the harness)."""


def reviewer_names(policy_id: str) -> tuple[str, ...]:
    """The reviewers that can review a corpus of this policy.

    Returns:
        Its reference reviewer(s) and the policy-agnostic sentinels, in registry order.
    """
    return tuple(
        name
        for name in ALL_REVIEWER_NAMES
        if name not in REVIEWER_POLICIES or policy_id in REVIEWER_POLICIES[name]
    )


REVIEWER_NAMES: tuple[str, ...] = reviewer_names(DEFAULT_POLICY_ID)
"""The reviewers for a corpus of the default policy (the set the self-audit runs); see
`reviewer_names` for another policy and `ALL_REVIEWER_NAMES` for every name."""


def require_reviewer_policy(name: str, corpus_root: object, policy_id: str) -> None:
    """Refuse a corpus whose policy the named reviewer does not implement.

    Args:
        name: Registry name of the reviewer.
        corpus_root: Corpus folder or label (named in the message).
        policy_id: The corpus's declared policy id.

    Raises:
        InputError: The reviewer implements a different policy.
    """
    if name in REVIEWER_POLICIES:
        require_policy(corpus_root, policy_id, REVIEWER_POLICIES[name], f"reviewer {name!r}")


def make_reviewer(name: str, *, seed: int = 0) -> Reviewer:
    """Build an in-process reviewer by registry name.

    Args:
        name: One of `ALL_REVIEWER_NAMES`.
        seed: Seed for the randomised sentinels (`empty`, `malformed`, `random`); recorded by the
            caller with the trial. Ignored by deterministic reviewers.

    Returns:
        The reviewer.

    Raises:
        InputError: For an unknown name (the message lists the known names).
    """
    if name in _SENTINELS:  # a sentinel's name wins over a policy reviewer of the same name
        return _SENTINELS[name](seed)
    if name not in REVIEWER_POLICIES:
        raise InputError(
            f"unknown reviewer {name!r}{did_you_mean(name, ALL_REVIEWER_NAMES)}; known "
            f"reviewers: {', '.join(ALL_REVIEWER_NAMES)}",
            location="reviewer",
        )
    # Of the policies naming it, the last registered one's reviewer (as a merged name table).
    return policy_reviewer(REVIEWER_POLICIES[name][-1], name)(seed)
