"""Translate OpenAI-style chat history into the Anthropic messages format, tool use included.

Tracks speak one provider-neutral dialect (OpenAI-style messages: assistant turns carry
`tool_calls`, tool results are `role: "tool"` messages). The Anthropic messages API rejects that
shape: tool calls are `tool_use` content blocks of the assistant turn, their results are
`tool_result` blocks of the *next user turn*, roles must alternate user/assistant, and system text
is a top-level field. This module does that translation once, so a multi-turn agent works the
same through either API.
"""

from __future__ import annotations

import json
from typing import Any

UNPARSED_ARGUMENTS = "__unparsed_arguments__"
"""Key holding a model's tool arguments that were not a JSON object (Anthropic needs an object)."""


def _tool_input(arguments: Any) -> dict[str, Any]:
    """A tool call's arguments as the JSON object Anthropic's `input` requires."""
    if isinstance(arguments, dict):
        return arguments
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
    except json.JSONDecodeError:
        parsed = None
    return parsed if isinstance(parsed, dict) else {UNPARSED_ARGUMENTS: str(arguments)}


def _text_blocks(content: Any) -> list[dict[str, Any]]:
    if content is None or content == "":
        return []
    if isinstance(content, list):  # already content blocks
        return list(content)
    return [{"type": "text", "text": str(content)}]


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    role = message.get("role")
    if role == "tool":
        return [
            {
                "type": "tool_result",
                "tool_use_id": str(message.get("tool_call_id", "")),
                "content": str(message.get("content", "")),
            }
        ]
    blocks = _text_blocks(message.get("content"))
    if role == "assistant":
        for call in message.get("tool_calls") or []:
            function = call.get("function", {})
            blocks.append(
                {
                    "type": "tool_use",
                    "id": str(call.get("id", "")),
                    "name": str(function.get("name", "")),
                    "input": _tool_input(function.get("arguments", "{}")),
                }
            )
    return blocks


def to_anthropic_messages(messages: list[dict[str, Any]]) -> tuple[str | None, list[dict]]:
    """Split OpenAI-style `messages` into Anthropic's `system` text and alternating turns.

    Tool results become `tool_result` blocks of a user turn; consecutive turns of one role
    (several tool results, or tool results followed by a user message) merge into one turn, as
    the API requires strictly alternating roles.

    Returns:
        `(system, messages)`: the joined system text (None when there is none) and the turns.
    """
    system = [str(m.get("content", "")) for m in messages if m.get("role") == "system"]
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "system":
            continue
        anthropic_role = "assistant" if role == "assistant" else "user"
        blocks = _blocks(message)
        if turns and turns[-1]["role"] == anthropic_role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": anthropic_role, "content": blocks})
    for turn in turns:  # a plain single text turn keeps the simple string form
        content = turn["content"]
        if len(content) == 1 and content[0].get("type") == "text":
            turn["content"] = content[0]["text"]
    return ("\n\n".join(system) if system else None), turns


def to_anthropic_tool_choice(choice: Any) -> dict[str, Any] | None:
    """OpenAI-style `tool_choice` as Anthropic's (`auto`, `any`, `tool`, `none`)."""
    if choice is None:
        return None
    if choice == "auto":
        return {"type": "auto"}
    if choice == "required":
        return {"type": "any"}
    if choice == "none":
        return {"type": "none"}
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        return {"type": "tool", "name": str(choice["function"].get("name", ""))}
    return None
