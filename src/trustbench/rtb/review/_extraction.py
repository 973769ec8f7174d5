"""How the answer is taken out of a reviewer's reply: one declared rule, part of the protocol.

A real model often writes a polite line before its ```` ```json ```` fence. Whether that reply
is a finding or `invalid` is a choice of the protocol, so it is declared in the spec
(`[track_options] answer_extraction`), frozen and hashed with it, recorded with every trial,
stated in the prompt every candidate reads (`prompt_note`), and applied identically to every
candidate at grading time:

- `strict` (the default, the rule before this option existed): the reply is one JSON object,
  optionally inside exactly one fence that is the whole reply; any other text makes it invalid.
- `fenced`: the reply holds exactly one fenced block (```` ```json ```` or ```` ``` ````)
  whose body is one JSON object; text before and after the fence is ignored. A bare object
  (the `strict` form) is accepted too; two fenced blocks are ambiguous, so invalid.
- `first_json_object`: the first `{` at which a complete JSON object parses; text before and
  after it is ignored. A reviewer is credited with what it wrote first, reasoning drafts
  included: not for reasoning models (see `final_json_object`).
- `final_json_object` (recommended for chat models, the quick path's rule): the answer the model
  meant, after its reasoning. Reasoning is cut off first and never graded: everything up to the
  last `</think>` (a `<think>` or `<thinking>` block, or the closing tag alone, as templates
  that open the block in the prompt produce), and everything up to the last occurrence of the
  candidate's declared `reasoning_delimiter`. The answer is the last complete JSON object after
  it. Invalid, never a guess: a `<think>` left open (the reasoning was cut, e.g. by
  `max_tokens`), a declared delimiter that never occurs, no object after the reasoning (prose
  such as "Initial: permit ... Correction: deny"), and two different answer objects
  ("conflicting answers"; an object repeated unchanged is one answer). An answer object is one
  with a `decision` member; other objects (a quoted record) are passed over when one is there.
  An OpenAI-compatible server's `reasoning_content` never reaches this rule: it is kept apart
  from the reply text (`ChatReply.reasoning`) and recorded with the trial.
- `structured_output`: the request asks the server for JSON constrained by the corpus
  policy's response schema (`response_format` of type `json_schema`, the schema taken from the
  policy's response model, never pasted into settings); the reply is then read as `strict`.
  A server that accepts the field and ignores it is found by the preflight probe
  (`trustbench.core._context`) before any trial.

Every rule returns the object's text or the reason it found none; JSON parsing (with the
duplicate-key check) and schema validation stay in `_validation.validate_response`.

Why `final_json_object` is a rule of its own rather than a new meaning of `first_json_object`:
a rule's name is frozen in the manifest, recorded with every trial and stated in the prompt
("the first JSON object in your reply is taken as your answer"), so a run reported again must be
graded as its candidates were told; changing what `first_json_object` means would re-grade every
existing run under a rule its candidates never read. The new rule's prompt note says what it
takes, and the docs and `trustbench rtb review --model` now use it.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal, get_args

from trustbench.rtb.review.reviewers._llm import extract_json_object

AnswerExtraction = Literal[
    "strict", "fenced", "first_json_object", "final_json_object", "structured_output"
]
"""The declared extraction rules (see the module docstring)."""
EXTRACTIONS: tuple[str, ...] = get_args(AnswerExtraction)
"""Every rule's name, in the order documented."""

_BLOCK = re.compile(r"```(?:json)?[ \t]*\r?\n(?P<body>.*?)\r?\n?```", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think(?:ing)?>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think(?:ing)?>", re.IGNORECASE)

_NOTES: dict[str, str] = {
    "strict": "",
    "fenced": (
        "\n\nAnswer format: reply with the JSON object inside one ```json fenced block. Text "
        "outside the block is ignored; a reply with no block or with several is invalid."
    ),
    "first_json_object": (
        "\n\nAnswer format: the first JSON object in your reply is taken as your answer; any "
        "text before or after it is ignored."
    ),
    "final_json_object": (
        "\n\nAnswer format: you may reason first (for example inside <think>...</think>); "
        "the last JSON object after your reasoning is taken as your answer, any text around "
        "it is ignored. A reply with two different JSON objects after the reasoning, or whose "
        "reasoning never ends, is invalid."
    ),
    "structured_output": (
        "\n\nAnswer format: reply with the JSON object alone; the server constrains the reply "
        "to the response schema."
    ),
}


def prompt_note(extraction: str) -> str:
    """What the review prompt adds to say which replies are accepted (empty for `strict`).

    `strict` adds nothing: the corpus prompts already say that a reply which is not a single
    JSON object is invalid, and the messages of a `strict` run stay exactly as before.
    """
    return _NOTES[extraction]


def extract_answer(
    raw: str, extraction: str, reasoning_delimiter: str | None = None
) -> tuple[str | None, str | None]:
    """The JSON-object text of a reply under a declared rule.

    Args:
        raw: The reply (not blank: a blank reply is `missing` before this is asked).
        extraction: One of `EXTRACTIONS`.
        reasoning_delimiter: The candidate's declared end of reasoning (`final_json_object`
            only; the other rules never cut reasoning off, so their runs grade as before).

    Returns:
        `(text, None)` with the text to parse, or `(None, reason)` when the rule finds no
        object (the reason names the rule).
    """
    if extraction in ("strict", "structured_output"):
        text = extract_json_object(raw)
        if text is None:
            return None, (
                f"reply is not a single JSON object (optionally in one ```json fence; "
                f"answer_extraction {extraction})"
            )
        return text, None
    if extraction == "fenced":
        return _fenced(raw)
    if extraction == "first_json_object":
        return _first_object(raw)
    if extraction == "final_json_object":
        return _final_object(raw, reasoning_delimiter)
    raise ValueError(f"unknown answer extraction {extraction!r}")


def _fenced(raw: str) -> tuple[str | None, str | None]:
    blocks = list(_BLOCK.finditer(raw))
    if len(blocks) > 1:
        return None, f"reply holds {len(blocks)} fenced blocks (answer_extraction fenced)"
    if not blocks:
        text = extract_json_object(raw)
        if text is None:
            return None, "reply holds no fenced block and is not one JSON object (fenced)"
        return text, None
    body = blocks[0].group("body").strip()
    if body.startswith("{") and body.endswith("}"):
        return body, None
    return None, "the fenced block is not one JSON object (answer_extraction fenced)"


def _first_object(raw: str) -> tuple[str | None, str | None]:
    objects = _complete_objects(raw)
    if objects:
        return objects[0][0], None
    return None, "reply holds no complete JSON object (answer_extraction first_json_object)"


def final_answer_text(raw: str, reasoning_delimiter: str | None) -> tuple[str | None, str | None]:
    """The part of a reply after its reasoning, or (None, why the reasoning never ended).

    The reasoning is everything up to the last occurrence of the declared delimiter, then up to
    the last closing `</think>` (`</thinking>`) tag. A `<think>` tag after that point was never
    closed: the model was cut off (or never finished) before it gave an answer.
    """
    rest = raw
    if reasoning_delimiter:
        at = rest.rfind(reasoning_delimiter)
        if at == -1:
            return None, (
                f"the declared reasoning_delimiter {reasoning_delimiter!r} does not occur: no "
                "final answer after the reasoning (answer_extraction final_json_object)"
            )
        rest = rest[at + len(reasoning_delimiter) :]
    closes = list(_THINK_CLOSE.finditer(rest))
    if closes:
        rest = rest[closes[-1].end() :]
    if _THINK_OPEN.search(rest):
        return None, (
            "unclosed <think> block: the reasoning never ended, so the reply gave no final "
            "answer (answer_extraction final_json_object)"
        )
    return rest, None


def _complete_objects(text: str) -> list[tuple[str, Any]]:
    """Every complete top-level JSON object of `text` with its value, in order (none nested)."""
    decoder = json.JSONDecoder()
    found: list[tuple[str, Any]] = []
    start = text.find("{")
    while start != -1:
        try:
            value, end = decoder.raw_decode(text, start)  # from a "{", a success is an object
        except ValueError:
            start = text.find("{", start + 1)
            continue
        found.append((text[start:end], value))
        start = text.find("{", end)
    return found


def _final_object(raw: str, reasoning_delimiter: str | None) -> tuple[str | None, str | None]:
    answer, why = final_answer_text(raw, reasoning_delimiter)
    if answer is None:
        return None, why
    objects = _complete_objects(answer)
    answers = [(text, value) for text, value in objects if "decision" in value]
    candidates = answers or objects
    if not candidates:
        return None, (
            "reply holds no complete JSON object after its reasoning (answer_extraction "
            "final_json_object)"
        )
    distinct: list[Any] = []
    for _, value in candidates:
        if value not in distinct:
            distinct.append(value)
    if len(distinct) > 1:
        return None, (
            f"conflicting answers: the reply holds {len(distinct)} different answer objects "
            "after its reasoning (answer_extraction final_json_object)"
        )
    return candidates[-1][0], None


def response_format(extraction: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    """The OpenAI `response_format` a rule sends (None: the request carries none).

    Args:
        extraction: The declared rule.
        schema: The corpus policy's response JSON Schema (`response_model.model_json_schema()`).
    """
    if extraction != "structured_output":
        return None
    named = {"name": "reviewer_response", "schema": schema, "strict": True}
    return {"type": "json_schema", "json_schema": named}
