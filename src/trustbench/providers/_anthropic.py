"""Anthropic messages client: POST `{base_url}/v1/messages`, one call per `send`."""

from __future__ import annotations

import json
import os
from typing import Any

from trustbench._canonical import canonical_json
from trustbench.providers._anthropic_messages import (
    to_anthropic_messages,
    to_anthropic_tool_choice,
)
from trustbench.providers._http import post_json, reply_or_malformed
from trustbench.providers._pool import HttpPool, require_pool
from trustbench.providers._pricing import PriceSpec, attempt_cost
from trustbench.providers._types import (
    DEFAULT_MAX_RESPONSE_BYTES,
    AttemptResult,
    ChatReply,
    ChatRequest,
    ToolCall,
)

ANTHROPIC_VERSION = "2023-06-01"
"""The `anthropic-version` header sent with every request."""
DEFAULT_MAX_TOKENS = 1024
"""Anthropic requires `max_tokens`; used when neither the request nor the settings give one."""


class AnthropicMessagesProvider:
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

    def __init__(
        self,
        session: HttpPool,
        *,
        base_url: str,
        model: str,
        api_key_env: str | None = None,
        settings: dict[str, Any] | None = None,
        price: PriceSpec | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        self.session = require_pool(session)
        self.requested_model: str | None = model
        self.endpoint: str | None = f"{base_url.rstrip('/')}/v1/messages"
        self.settings = dict(settings or {})
        self.price = price
        self.max_response_bytes = max_response_bytes
        """Largest response body read; a longer one is stored truncated, never parsed."""
        self._headers = {"anthropic-version": ANTHROPIC_VERSION}
        if api_key_env:
            self._headers["x-api-key"] = os.environ[api_key_env]

    def for_trial(self) -> AnthropicMessagesProvider:
        """Stateless over HTTP: every request carries its whole conversation."""
        return self

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

    async def send(self, request: ChatRequest, timeout_s: float) -> AttemptResult:
        """Make one call and return everything observed about it."""
        body = self.build_body(request)
        result = AttemptResult(
            request_body=body,
            requested_model=self.requested_model,
            request_json=canonical_json(body),
            endpoint=self.endpoint,
        )
        if request.logprobs:
            result.error_class = "client_error"
            result.error_message = "the Anthropic messages API does not return logprobs"
            return result
        assert self.endpoint is not None
        document = await post_json(
            self.session,
            self.endpoint,
            self._headers,
            body,
            timeout_s,
            result,
            max_bytes=self.max_response_bytes,
        )
        if document is None:
            return result
        reply_or_malformed(result, parse_message, document)
        usage = document.get("usage") if isinstance(document, dict) else None
        if isinstance(usage, dict):
            tokens_in, tokens_out = usage.get("input_tokens"), usage.get("output_tokens")
            result.prompt_tokens = tokens_in if isinstance(tokens_in, int) else None
            result.completion_tokens = tokens_out if isinstance(tokens_out, int) else None
        result.cost_usd = attempt_cost(self.price, result.prompt_tokens, result.completion_tokens)
        return result


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
