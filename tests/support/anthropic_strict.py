"""The shape rules of the Anthropic messages API that a strict fake enforces (400 on a breach).

Written from the API's documented contract, not from our translator: roles alternate starting
with `user`; only `user` and `assistant` roles; no OpenAI-only keys (`tool_calls`,
`tool_call_id`, role `tool`); every `tool_use` of an assistant turn is answered by a
`tool_result` with its id in the next user turn, and a `tool_result` answers a `tool_use` of the
turn just before; a `tool_use` input is an object.
"""

from __future__ import annotations

from typing import Any

_BLOCKS = {"user": {"text", "tool_result", "image"}, "assistant": {"text", "tool_use"}}


def _blocks(content: Any) -> list[dict[str, Any]] | str:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not content:
        return "content must be a non-empty string or list of blocks"
    return content


def anthropic_shape_error(body: Any) -> str | None:
    """The first rule the request body breaks, or None when it is well formed."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return "messages: required list"
    if not isinstance(body.get("max_tokens"), int):
        return "max_tokens: required integer"
    messages = body["messages"]
    if not messages or messages[0].get("role") != "user":
        return "messages: first message must use the user role"
    pending: set[str] = set()
    previous_role = None
    for index, message in enumerate(messages):
        extra = set(message) - {"role", "content"}
        if extra:
            return f"messages.{index}: unexpected keys {sorted(extra)}"
        role = message.get("role")
        if role not in _BLOCKS:
            return f"messages.{index}.role: must be user or assistant, got {role!r}"
        if role == previous_role:
            return f"messages.{index}: roles must alternate between user and assistant"
        blocks = _blocks(message.get("content"))
        if isinstance(blocks, str):
            return f"messages.{index}.{blocks}"
        answered: set[str] = set()
        uses: set[str] = set()
        for block in blocks:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind not in _BLOCKS[role]:
                return f"messages.{index}: block type {kind!r} not allowed in a {role} turn"
            if kind == "tool_result":
                if block.get("tool_use_id") not in pending:
                    return f"messages.{index}: tool_result for unknown tool_use_id"
                answered.add(block["tool_use_id"])
            if kind == "tool_use":
                if not isinstance(block.get("input"), dict):
                    return f"messages.{index}: tool_use.input must be an object"
                uses.add(str(block.get("id")))
        if role == "user" and pending - answered:
            return f"messages.{index}: tool_use ids {sorted(pending - answered)} have no result"
        pending = uses if role == "assistant" else set()
        previous_role = role
    return None
