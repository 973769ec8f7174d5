"""`ReplyGrader` gives exactly what `validate_response` then `support_gaps` give, reply by reply.

The grader remembers a case's graded reply by the reply with its evaluation id blanked, so the
same reply under two fresh ids (the second one is looked up) is compared here with a full
validation each time, for every built-in policy, its reviewers and sentinels, and replies built
to fail each check (a wrong or escaped id, the id elsewhere in the reply, duplicate keys, ...).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, field_validator

from trustbench.rtb.corpus._export import to_candidate_input
from trustbench.rtb.corpus._load import builtin_corpus_root, load_corpus
from trustbench.rtb.policy._protocol import AuthoredCase
from trustbench.rtb.review._grading import (
    Graded,
    ReplyGrader,
    _keeps_id,  # pyright: ignore[reportPrivateUsage]
)
from trustbench.rtb.review._validation import support_gaps, validate_response
from trustbench.rtb.review.reviewers import make_reviewer
from trustbench.rtb.review.reviewers._registry import reviewer_names

IDS = ("rtb-" + "1" * 32, "rtb-" + "2" * 32, "rtb-" + "1" * 32)
"""Two fresh ids, then the first again: the second and third replies are looked up."""


def _expected(raw: str | None, case: AuthoredCase, evaluation_id: str, extraction: str) -> Graded:
    validated = validate_response(raw, to_candidate_input(case, evaluation_id), extraction)
    response = validated.response
    return (
        validated.model_copy(update={"response": None}),
        response.explanation if response is not None else None,
        tuple(support_gaps(validated, case)),
    )


def _escaped(text: str) -> str:
    """`text` as a JSON string whose every character is a \\u escape."""
    return '"' + "".join(f"\\u{ord(c):04x}" for c in text) + '"'


def _variants(finding: dict[str, Any], evaluation_id: str, other: str) -> list[str]:
    """Replies to the input under `evaluation_id`, built the same way for every id."""
    own = {**finding, "evaluation_id": evaluation_id}
    text = json.dumps(own)
    first, *rest = list(own)
    refs = list(own.get("evidence_refs") or ["x"])
    return [
        text,
        json.dumps(dict(reversed(own.items()))),  # the same members in another order
        json.dumps({**own, "evaluation_id": other}),  # another input's id
        text.replace(json.dumps(evaluation_id), _escaped(evaluation_id)),  # the id escaped
        # The id escaped, and the same text as an escape in the explanation: neither is the
        # reply's id under another trial's id.
        text.replace(json.dumps(evaluation_id), _escaped(IDS[0])).replace(
            '"explanation": "', '"explanation": "\\' + IDS[0] + " "
        ),
        json.dumps({**own, "explanation": f"{own.get('explanation')} {evaluation_id}"}),
        json.dumps({**own, "explanation": "   "}),
        json.dumps({**own, "explanation": ""}),
        json.dumps({**own, "evidence_refs": [*refs, "no-such-record"]}),
        json.dumps({**own, "evidence_refs": [evaluation_id]}),
        json.dumps({**own, "reason_codes": ["not_a_code"]}),
        json.dumps({**own, "reason_codes": [evaluation_id]}),
        json.dumps({**own, "decision": "maybe"}),
        json.dumps({**own, "extra": evaluation_id}),
        json.dumps({key: own[key] for key in rest}),  # a required member left out
        json.dumps({**own, "evaluation_id": 7}),
        json.dumps({**own, first: own[first]})[:-1] + f', "{first}": 1}}',  # duplicate key
        text[:-1],  # not JSON
        "```json\n" + text + "\n```",
        "Here it is:\n```json\n" + text + "\n```\nThanks.",
        text + " " + text,
        "\ufeff" + text,
        json.dumps([own]),
    ]


def _findings(case: AuthoredCase, prompt: str, policy_id: str) -> list[str | None]:
    """Each reviewer's and sentinel's reply to the case under the first id."""
    candidate = to_candidate_input(case, IDS[0])
    return [
        make_reviewer(name, seed=seed).review(prompt, candidate)
        for name in reviewer_names(policy_id)
        for seed in (0, 1)
    ]


@pytest.fixture(scope="module", params=["v0.1", "v0.2", "v0.3"])
def replies(request: pytest.FixtureRequest) -> list[tuple[AuthoredCase, str | None]]:
    """A few cases of the built-in corpus of a version, each with every reviewer's reply."""
    corpus = load_corpus(builtin_corpus_root(str(request.param).removeprefix("v")))
    return [
        (case, reply)
        for case in corpus.cases[::17]
        for reply in dict.fromkeys(_findings(case, corpus.review_prompt, corpus.policy_id))
    ]


@pytest.mark.parametrize("extraction", ["strict", "fenced", "first_json_object"])
def test_grades_equal_a_full_validation(
    replies: list[tuple[AuthoredCase, str | None]], extraction: str
) -> None:
    grader = ReplyGrader(to_candidate_input)
    graded = 0
    varied: set[str] = set()
    for case, reply in replies:
        finding = _finding_of(reply)
        if finding is not None and case.case_id in varied:
            finding = None  # the variants of one valid finding per case are enough
        elif finding is not None:
            varied.add(case.case_id)
        for index, evaluation_id in enumerate(IDS):
            other = IDS[1 - index % 2]
            raws = [reply.replace(IDS[0], evaluation_id) if reply is not None else None]
            if finding is not None:
                raws += _variants(finding, evaluation_id, other)
            for raw in raws:
                got = grader.grade(raw, case, evaluation_id, extraction)
                assert got == _expected(raw, case, evaluation_id, extraction), raw
                graded += 1
    # The test means something only if replies were looked up, not only graded in full.
    assert 0 < len(grader._graded) < graded / 2  # pyright: ignore[reportPrivateUsage]


def _finding_of(reply: str | None) -> dict[str, Any] | None:
    try:
        found = json.loads(reply or "")
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


class _Plain(BaseModel):
    evaluation_id: str


class _Stripped(BaseModel):
    model_config = ConfigDict(str_strip_whitespace=True)
    evaluation_id: str


class _Validated(BaseModel):
    evaluation_id: str

    @field_validator("evaluation_id")
    @classmethod
    def _lower(cls, value: str) -> str:
        return value.lower()


class _Other(BaseModel):
    evaluation_id: int


def test_only_a_model_that_keeps_the_id_as_given_is_graded_by_the_rest() -> None:
    assert _keeps_id(_Plain)
    assert not _keeps_id(_Stripped)
    assert not _keeps_id(_Validated)
    assert not _keeps_id(_Other)
