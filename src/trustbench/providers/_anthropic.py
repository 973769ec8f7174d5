"""Anthropic messages client: POST `{base_url}/v1/messages`, one call per `send`."""

from __future__ import annotations

import json
from typing import Any

from trustbench.providers._http import HttpChatProvider
from trustbench.providers._types import ChatReply, ChatRequest, ToolCall

# ------------------------------------------------------------------------------------------------
# Translate OpenAI-style chat history into the Anthropic messages format, tool use included.
#
# Tracks speak one provider-neutral dialect (OpenAI-style messages: assistant turns carry
# `tool_calls`, tool results are `role: "tool"` messages). The Anthropic messages API rejects that
# shape: tool calls are `tool_use` content blocks of the assistant turn, their results are
# `tool_result` blocks of the *next user turn*, roles must alternate user/assistant, and system text
# is a top-level field. This module does that translation once, so a multi-turn agent works the
# same through either API.

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


ANTHROPIC_VERSION = "2023-06-01"
"""The `anthropic-version` header sent with every request."""
DEFAULT_MAX_TOKENS = 1024
"""Anthropic requires `max_tokens`; used when neither the request nor the settings give one."""


class AnthropicMessagesProvider(HttpChatProvider):
    """Anthropic messages API client recording usage, latency, cost and model ids."""

    adaptations: tuple[str, ...] = (
        "system messages are joined into the top-level `system` field",
        "OpenAI-style function tools are converted to Anthropic `input_schema` tools",
        "assistant tool_calls become tool_use blocks and role=tool results become tool_result "
        "blocks of the next user turn; same-role turns are merged so roles alternate",
        "tool arguments that are not a JSON object are sent as {'__unparsed_arguments__': text}",
        "tool_choice auto/required/none/function becomes auto/any/none/tool",
        "response_format=json_object has no native equivalent: the request is sent unchanged "
        "and JSON must come from the prompt",
        "logprobs are not available: such requests fail as client_error without being sent",
    )
    """How the provider-neutral request is adapted to this API (recorded in the manifest)."""

    usage_fields = ("input_tokens", "output_tokens")

    request_fields = frozenset({
        "max_tokens", "metadata", "service_tier", "stop_sequences", "stream", "system",
        "temperature", "thinking", "tool_choice", "tools", "top_k", "top_p",
    })  # fmt: skip
    """Messages API request fields a `settings` key may name (others are warned about)."""

    path = "/v1/messages"

    def headers_for(self, api_key: str | None) -> dict[str, str]:
        """The API version header, and the key as `x-api-key` when one is configured."""
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if api_key is not None:
            headers["x-api-key"] = api_key
        return headers

    def build_body(self, request: ChatRequest) -> dict[str, Any]:
        """Translate a request to the messages JSON body."""
        system, turns = to_anthropic_messages(request.messages)
        body: dict[str, Any] = {**self.settings, "model": self.requested_model}
        body["messages"] = turns
        if system is not None:
            body["system"] = system
        if request.tools is not None:
            body["tools"] = [
                {
                    "name": tool["function"]["name"],
                    "description": tool["function"].get("description", ""),
                    "input_schema": tool["function"].get("parameters", {"type": "object"}),
                }
                for tool in request.tools
            ]
        choice = to_anthropic_tool_choice(request.tool_choice)
        if choice is not None:
            body["tool_choice"] = choice
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        body.setdefault("max_tokens", DEFAULT_MAX_TOKENS)
        if request.temperature is not None:
            body["temperature"] = request.temperature
        return body

    def refusal(self, request: ChatRequest) -> str | None:
        """Logprobs cannot be had from this API, so such a request is never sent."""
        return "the Anthropic messages API does not return logprobs" if request.logprobs else None

    def parse(self, document: dict[str, Any]) -> ChatReply:
        """Parse a messages response (see `parse_message`)."""
        return parse_message(document)


def parse_message(document: dict[str, Any]) -> ChatReply:
    """Parse a messages response; a wrong shape raises (and becomes malformed)."""
    texts: list[str] = []
    thoughts: list[str] = []
    tool_calls: list[ToolCall] = []
    for block in document["content"]:
        if block["type"] == "text":
            texts.append(block["text"])
        elif block["type"] == "thinking":
            thoughts.append(block["thinking"])
        elif block["type"] == "tool_use":
            tool_calls.append(ToolCall(block["id"], block["name"], json.dumps(block["input"])))
    if not texts and not tool_calls and not thoughts:
        raise ValueError("content has neither text, thinking nor tool_use blocks")
    model = document.get("model")
    return ChatReply(
        text="".join(texts) if texts else None,
        tool_calls=tool_calls,
        finish_reason=document.get("stop_reason"),
        reported_model=model if isinstance(model, str) else None,
        reasoning="".join(thoughts) if thoughts else None,
    )
