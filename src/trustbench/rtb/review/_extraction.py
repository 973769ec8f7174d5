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
  after it is ignored. The most lenient rule: a reviewer is credited with what it wrote first.
- `structured_output`: the request asks the server for JSON constrained by the corpus
  policy's response schema (`response_format` of type `json_schema`, the schema taken from the
  policy's response model, never pasted into settings); the reply is then read as `strict`.
  A server that accepts the field and ignores it is found by the preflight probe
  (`trustbench.core._context`) before any trial.

Every rule returns the object's text or the reason it found none; JSON parsing (with the
duplicate-key check) and schema validation stay in `_validation.validate_response`.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal, get_args

from trustbench.rtb.review.reviewers._llm import extract_json_object

AnswerExtraction = Literal["strict", "fenced", "first_json_object", "structured_output"]
"""The declared extraction rules (see the module docstring)."""
EXTRACTIONS: tuple[str, ...] = get_args(AnswerExtraction)
"""Every rule's name, in the order documented."""

_BLOCK = re.compile(r"```(?:json)?[ \t]*\r?\n(?P<body>.*?)\r?\n?```", re.DOTALL | re.IGNORECASE)

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


def extract_answer(raw: str, extraction: str) -> tuple[str | None, str | None]:
    """The JSON-object text of a reply under a declared rule.

    Args:
        raw: The reply (not blank: a blank reply is `missing` before this is asked).
        extraction: One of `EXTRACTIONS`.

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
    decoder = json.JSONDecoder()
    start = raw.find("{")
    while start != -1:
        try:
            _, end = decoder.raw_decode(raw, start)  # from a "{", a success is an object
        except ValueError:
            start = raw.find("{", start + 1)
            continue
        return raw[start:end], None
    return None, "reply holds no complete JSON object (answer_extraction first_json_object)"


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
