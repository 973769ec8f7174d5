"""The in-process chat responder: built-in reviewers answer the messages an LLM receives."""

from __future__ import annotations

import pytest

from trustbench.errors import InputError
from trustbench.providers import ChatRequest
from trustbench.rtb.corpus import load_corpus, new_evaluation_id, to_candidate_input
from trustbench.rtb.review.reviewers import build_review_messages, chat_responder, make_reviewer


def _request() -> tuple[ChatRequest, str, object]:
    corpus = load_corpus()
    candidate_input = to_candidate_input(corpus.cases[0], new_evaluation_id())
    messages = build_review_messages(corpus.review_prompt, candidate_input)
    return ChatRequest(messages=messages), corpus.review_prompt, candidate_input


def test_responder_returns_exactly_what_the_named_reviewer_returns_for_the_parsed_input() -> None:
    request, prompt, candidate_input = _request()
    reply = chat_responder({"reviewer": "reference-policy"})(request)
    assert reply.text == make_reviewer("reference-policy").review(prompt, candidate_input)
    assert reply.reported_model == "trustbench-inprocess/reference-policy"


def test_no_output_stays_none_never_the_text_none() -> None:
    request, _, _ = _request()
    texts = {
        chat_responder({"reviewer": "empty", "seed": seed})(request).text for seed in range(40)
    }
    assert None in texts and "None" not in texts


@pytest.mark.parametrize(
    "settings", [{}, {"reviewer": "oracle"}, {"reviewer": "random", "seed": "1"}]
)
def test_bad_reviewer_settings_are_refused(settings: dict[str, object]) -> None:
    with pytest.raises(InputError):
        chat_responder(settings)
