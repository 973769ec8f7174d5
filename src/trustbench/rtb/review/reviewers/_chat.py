"""In-process reviewers behind the chat interface: the same messages an LLM reviewer receives.

The reviewer track sends every candidate, built-in or not, the messages from
`build_review_messages`. `chat_responder` lets a built-in reviewer (the reference policy or a
sentinel) answer those messages: it reads the shared prompt from the system message and parses
the user message back into a `CandidateInput`. It therefore sees exactly what an LLM sees and
can never reach a `Case` or its answer key.

Spec usage (an `inprocess` candidate):

    [[candidates]]
    name = "reference-policy"
    kind = "inprocess"
    entry = "trustbench.rtb.review.reviewers:chat_responder"
    settings = { reviewer = "reference-policy", seed = 0 }
"""

from __future__ import annotations

from typing import Any

# `trustbench.core` first: importing `trustbench.providers` before core is a circular import.
import trustbench.core  # noqa: F401  isort: skip
from trustbench.errors import InputError
from trustbench.providers._types import ChatReply, ChatRequest
from trustbench.rtb.policy._registry import parse_candidate_input
from trustbench.rtb.review.reviewers._protocol import Reviewer

REPORTED_MODEL_PREFIX = "trustbench-inprocess/"
"""Prefix of the model id an in-process reviewer reports (`trustbench-inprocess/<reviewer>`)."""


def _message_text(request: ChatRequest, role: str) -> str:
    texts = [m.get("content") for m in request.messages if m.get("role") == role]
    if len(texts) != 1 or not isinstance(texts[0], str):
        raise ValueError(f"expected exactly one {role} message with text content")
    return texts[0]


def chat_responder(settings: dict[str, Any]) -> Any:
    """Factory of a fresh responder for one trial (the `entry` of an in-process reviewer).

    Args:
        settings: The candidate's settings: `reviewer` (a name from `REVIEWER_NAMES`, required)
            and `seed` (int, default 0) for the randomised sentinels. Their replies also depend
            on each trial's fresh evaluation id, so K trials of one case are K draws.
            `without_rule` (a rule id of the reviewer's policy, e.g. `approved-parameters`)
            answers as that policy reviewer with the one rule removed (the policy's
            `ablated_reviewer`): a reviewer with a known blind spot, such as a "self" reviewer
            that shares an agent's in the workflow loop.

    Returns:
        `respond(request) -> ChatReply`; `ChatReply.text` is the reviewer's raw reply, None when
        it produced none (so "no output" reaches the grader as missing, never as text "None").

    Raises:
        InputError: `reviewer` is missing or unknown, or `seed` is not an integer.
    """
    from trustbench.rtb.review.reviewers._registry import make_reviewer

    name = settings.get("reviewer")
    if not isinstance(name, str):
        raise InputError("an in-process reviewer needs settings.reviewer", location="settings")
    seed = settings.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise InputError(f"settings.seed must be an integer, got {seed!r}", location="settings")
    without = settings.get("without_rule")
    reviewer: Reviewer = (
        make_reviewer(name, seed=seed) if without is None else _ablated(name, without)
    )

    def respond(request: ChatRequest) -> ChatReply:
        prompt = _message_text(request, "system")
        text_in = _message_text(request, "user")
        # Read back in the policy format it was written in (each policy's model forbids the
        # fields of the others).
        candidate_input = parse_candidate_input(text_in)
        text = reviewer.review(prompt, candidate_input)  # type: ignore[arg-type]
        return ChatReply(
            text=text, finish_reason="stop", reported_model=REPORTED_MODEL_PREFIX + name
        )

    return respond


def _ablated(name: str, rule_id: object) -> Reviewer:
    """The policy reviewer `name` without rule `rule_id`, named in the error when unknown."""
    from trustbench.rtb.policy._registry import policy_for
    from trustbench.rtb.review.reviewers._registry import REVIEWER_POLICIES

    if name not in REVIEWER_POLICIES:
        raise InputError(
            f"settings.without_rule needs a policy reviewer, not {name!r}", location="settings"
        )
    policy = policy_for(REVIEWER_POLICIES[name][-1])
    rules = [rule.rule_id for rule in policy.rules]
    if rule_id not in rules:
        raise InputError(
            f"unknown rule {rule_id!r} of {policy.policy_id}; known: {', '.join(rules)}",
            location="settings.without_rule",
        )
    return policy.ablated_reviewer(str(rule_id))
