"""OpenAI-style tool history reaches the Anthropic API in its own shape (strict fake)."""

from __future__ import annotations

import json

from tests.support.anthropic_strict import anthropic_shape_error

from trustbench.providers._anthropic import (
    UNPARSED_ARGUMENTS,
    to_anthropic_messages,
    to_anthropic_tool_choice,
)

HISTORY = [
    {"role": "system", "content": "You are an agent."},
    {"role": "user", "content": "Rotate the key."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "list", "arguments": '{"a": 1}'}},
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": '{"ok": true}'},
    {"role": "tool", "tool_call_id": "c2", "content": "[]"},
    {"role": "assistant", "content": "Done."},
    {"role": "user", "content": "Thanks."},
]


def _body(messages: list[dict]) -> dict:
    return {"model": "m", "max_tokens": 16, "messages": messages}


def test_the_strict_fake_rejects_openai_shaped_tool_history() -> None:
    raw = [m for m in HISTORY if m["role"] != "system"]
    assert anthropic_shape_error(_body(raw)) is not None


def test_translated_history_passes_the_strict_fake() -> None:
    system, turns = to_anthropic_messages(HISTORY)
    assert system == "You are an agent."
    assert anthropic_shape_error(_body(turns)) is None
    assert [t["role"] for t in turns] == ["user", "assistant", "user", "assistant", "user"]


def test_both_tool_results_go_in_the_one_user_turn_after_the_tool_use() -> None:
    _, turns = to_anthropic_messages(HISTORY)
    uses = [b["id"] for b in turns[1]["content"] if b["type"] == "tool_use"]
    results = [b["tool_use_id"] for b in turns[2]["content"] if b["type"] == "tool_result"]
    assert uses == results == ["c1", "c2"]
    assert turns[1]["content"][1]["input"] == {"a": 1}


def test_a_missing_tool_result_is_caught_by_the_strict_fake() -> None:
    _, turns = to_anthropic_messages(HISTORY[:4] + HISTORY[5:])
    assert "have no result" in (anthropic_shape_error(_body(turns)) or "")


def test_non_object_tool_arguments_are_kept_verbatim_not_dropped() -> None:
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": "not json"}}
    _, turns = to_anthropic_messages(
        [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [call]}]
    )
    assert turns[1]["content"][0]["input"] == {UNPARSED_ARGUMENTS: "not json"}


def test_tool_choice_is_translated() -> None:
    assert to_anthropic_tool_choice("required") == {"type": "any"}
    named = {"type": "function", "function": {"name": "f"}}
    assert to_anthropic_tool_choice(named) == {"type": "tool", "name": "f"}
    assert json.dumps(to_anthropic_tool_choice(None)) == "null"
