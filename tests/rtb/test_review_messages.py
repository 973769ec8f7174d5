"""Review messages: a case input serialised once gives the same text as serialising it whole."""

from __future__ import annotations

import pytest

from trustbench.rtb.corpus import load_corpus
from trustbench.rtb.corpus._export import new_evaluation_id, to_candidate_input
from trustbench.rtb.corpus._load import builtin_corpus_root
from trustbench.rtb.review.reviewers._llm import ReviewMessages, build_review_messages


@pytest.mark.parametrize("version", ["v0.1", "v0.2"])
def test_templated_messages_equal_build_review_messages_on_every_builtin_case(
    version: str,
) -> None:
    corpus = load_corpus(builtin_corpus_root(version))
    messages = ReviewMessages(corpus.review_prompt)
    for case in corpus.cases:
        for _ in range(2):  # the first call serialises, the second reuses
            evaluation_id = new_evaluation_id()
            expected = build_review_messages(
                corpus.review_prompt, to_candidate_input(case, evaluation_id)
            )
            assert messages.messages(case, evaluation_id) == expected


def test_an_id_of_another_shape_is_serialised_in_full() -> None:
    corpus = load_corpus()
    case = corpus.cases[0]
    odd = 'rtb-"quoted"'
    messages = ReviewMessages(corpus.review_prompt).messages(case, odd)
    assert messages == build_review_messages(corpus.review_prompt, to_candidate_input(case, odd))
