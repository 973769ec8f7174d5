"""Anthropic messages client: POST `{base_url}/v1/messages`, one call per `send`."""

from __future__ import annotations

import json
from typing import Any

from trustbench.providers._anthropic_messages import (
    to_anthropic_messages,
    to_anthropic_tool_choice,
)
from trustbench.providers._http_provider import HttpChatProvider
from trustbench.providers._types import (
    ChatReply,
    ChatRequest,
    ToolCall,
)

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
    tool_calls: list[ToolCall] = []
    for block in document["content"]:
        if block["type"] == "text":
            texts.append(block["text"])
        elif block["type"] == "tool_use":
            tool_calls.append(ToolCall(block["id"], block["name"], json.dumps(block["input"])))
    if not texts and not tool_calls:
        raise ValueError("content has neither text nor tool_use blocks")
    model = document.get("model")
    return ChatReply(
        text="".join(texts) if texts else None,
        tool_calls=tool_calls,
        finish_reason=document.get("stop_reason"),
        reported_model=model if isinstance(model, str) else None,
    )
