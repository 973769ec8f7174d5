"""Reviewer candidates for the RTB reviewer track, and a registry by name.

Deterministic reviewers run in-process: each corpus policy's reference reviewer(s)
(`CorpusPolicy.reviewers`: the policy wording as code, reading only candidate-visible evidence)
and the sentinels used by the harness self-audit. Chat-model reviewers are sent through
`trustbench.providers` with the messages from `build_review_messages`; their raw replies go to
`validate_response` unchanged.
"""

from __future__ import annotations

from trustbench.rtb.review.reviewers._chat import chat_responder
from trustbench.rtb.review.reviewers._llm import build_review_messages, extract_json_object
from trustbench.rtb.review.reviewers._protocol import Reviewer
from trustbench.rtb.review.reviewers._registry import (
    ALL_REVIEWER_NAMES,
    REVIEWER_NAMES,
    REVIEWER_POLICIES,
    SENTINEL_NAMES,
    make_reviewer,
    require_reviewer_policy,
    reviewer_names,
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

__all__ = [
    "ALL_REVIEWER_NAMES",
    "REVIEWER_NAMES",
    "REVIEWER_POLICIES",
    "SENTINEL_NAMES",
    "ContradictoryReviewer",
    "EmptyReviewer",
    "FixedDecisionReviewer",
    "ForgedRefsReviewer",
    "KeywordStufferReviewer",
    "MalformedReviewer",
    "RandomReviewer",
    "Reviewer",
    "build_review_messages",
    "chat_responder",
    "extract_json_object",
    "make_reviewer",
    "require_reviewer_policy",
    "reviewer_names",
]
