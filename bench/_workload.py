"""The benches' workload: RTB reviewer trials of the real `rtb/review` track on the built-in corpus.

Every bench runs `rtb/review` itself (the track users run), with one reviewer candidate: an
OpenAI-compatible endpoint served by `bench/_server.py`, or the in-process reference policy. This
module holds what the baselines need to do the same work without the harness: the first `cases`
case ids, the exact messages a trial sends (`to_candidate_input` + `build_review_messages`, as the
track builds them, with a fresh 128-bit evaluation id per trial as the track issues), and the
reference-policy reply the server returns.
"""

from __future__ import annotations

import json
from typing import Any

from trustbench.providers import ChatRequest
from trustbench.rtb.corpus import (
    CandidateInput,
    Corpus,
    load_corpus,
    new_evaluation_id,
    to_candidate_input,
)
from trustbench.rtb.policy.narrow_v1 import ReferencePolicyReviewer
from trustbench.rtb.review.reviewers import build_review_messages

TRACK = "rtb/review"
"""The track every bench runs."""
INPROCESS_ENTRY = "trustbench.rtb.review.reviewers:chat_responder"
"""The in-process reviewer entry (with `settings = { reviewer = "reference-policy" }`)."""

_CORPUS: Corpus | None = None


def corpus() -> Corpus:
    """The built-in corpus, loaded (and validated) once per process."""
    global _CORPUS
    if _CORPUS is None:
        _CORPUS = load_corpus()
    return _CORPUS


def case_ids(cases: int) -> list[str]:
    """The first `cases` case ids of the built-in corpus (what `track_options.cases` selects)."""
    return [case.case_id for case in corpus().cases[:cases]]


def review_messages(
    case_index: int, evaluation_id: str | None = None
) -> tuple[list[dict[str, str]], CandidateInput]:
    """The messages and candidate input of one trial of the case at `case_index`."""
    loaded = corpus()
    candidate_input = to_candidate_input(
        loaded.cases[case_index], evaluation_id or new_evaluation_id()
    )
    return build_review_messages(loaded.review_prompt, candidate_input), candidate_input


def reference_reply(body: dict[str, Any]) -> str:
    """The reference-policy reviewer's reply to a chat body carrying a review (server side)."""
    candidate_input = CandidateInput.model_validate_json(body["messages"][-1]["content"])
    reply = ReferencePolicyReviewer().review(body["messages"][0]["content"], candidate_input)
    return reply or ""


def reference_responder(settings: dict[str, Any]) -> Any:
    """The reference-policy reviewer answering a chat request (for the in-process baseline)."""

    def respond(request: ChatRequest) -> str:
        return reference_reply({"messages": request.messages})

    return respond


def reply_cache_key(content: str) -> tuple[str, str]:
    """`(evaluation_id, content without it)`: replies differ per trial only by the id."""
    eid = json.loads(content)["evaluation_id"]
    return eid, content.replace(eid, "")
