"""OpenAI-compatible chat-completions client (vLLM, Ollama, llama.cpp server, hosted APIs)."""

from __future__ import annotations

import json
import os
from typing import Any

from trustbench._canonical import canonical_json
from trustbench.providers._http import post_json, reply_or_malformed
from trustbench.providers._pool import HttpPool, require_pool
from trustbench.providers._pricing import PriceSpec, attempt_cost
from trustbench.providers._types import (
    DEFAULT_MAX_RESPONSE_BYTES,
    AttemptResult,
    ChatReply,
    ChatRequest,
    TokenLogprob,
    ToolCall,
)


class OpenAIChatProvider:
    """POST `{base_url}/chat/completions`; one call per `send`, no hidden retries.

    Supports `response_format={"type": "json_object"}`, `logprobs`/`top_logprobs` and tools.
    """

    adaptations: tuple[str, ...] = ()
    """How requests are adapted to this API (none: the request format is OpenAI's own)."""

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
        self.endpoint: str | None = f"{base_url.rstrip('/')}/chat/completions"
        self.settings = dict(settings or {})
        self.price = price
        self.max_response_bytes = max_response_bytes
        """Largest response body read; a longer one is stored truncated, never parsed."""
        # The key is read once, kept only in the Authorization header, never in a body or record.
        self._headers: dict[str, str] = {}
        if api_key_env:
            self._headers["Authorization"] = f"Bearer {os.environ[api_key_env]}"

    def for_trial(self) -> OpenAIChatProvider:
        """Stateless over HTTP: every request carries its whole conversation."""
        return self

    def build_body(self, request: ChatRequest) -> dict[str, Any]:
        """Translate a request to the chat-completions JSON body (settings, then request)."""
        body: dict[str, Any] = {**self.settings, "model": self.requested_model}
        body["messages"] = request.messages
        if request.response_format == "json_object":
            body["response_format"] = {"type": "json_object"}
        elif isinstance(request.response_format, dict):
            body["response_format"] = request.response_format
        if request.logprobs:
            body["logprobs"] = True
            if request.top_logprobs is not None:
                body["top_logprobs"] = request.top_logprobs
        if request.tools is not None:
            body["tools"] = request.tools
        if request.tool_choice is not None:
            body["tool_choice"] = request.tool_choice
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
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
        reply_or_malformed(result, parse_chat_completion, document)
        usage = document.get("usage") if isinstance(document, dict) else None
        if isinstance(usage, dict):
            result.prompt_tokens = _int_or_none(usage.get("prompt_tokens"))
            result.completion_tokens = _int_or_none(usage.get("completion_tokens"))
        if isinstance(document, dict) and isinstance(document.get("model"), str):
            result.reported_model = document["model"]
        result.cost_usd = attempt_cost(self.price, result.prompt_tokens, result.completion_tokens)
        return result


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _arguments_text(arguments: Any) -> str:
    """Tool arguments as text: most servers send a JSON string, some an object."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def parse_chat_completion(document: dict[str, Any]) -> ChatReply:
    """Parse a chat-completions response; a wrong shape raises (and becomes malformed)."""
    choice = document["choices"][0]
    message = choice["message"]
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise TypeError("message.content is neither a string nor null")
    tool_calls = [
        ToolCall(
            id=call.get("id", ""),
            name=call["function"]["name"],
            arguments=_arguments_text(call["function"]["arguments"]),
        )
        for call in message.get("tool_calls") or []
    ]
    refusal = message.get("refusal")
    if refusal is not None and not isinstance(refusal, str):
        raise TypeError("message.refusal is neither a string nor null")
    if content is None and not tool_calls and refusal is None:
        raise ValueError("message has neither content, tool calls nor a refusal")
    logprobs = None
    block = choice.get("logprobs")
    if isinstance(block, dict) and block.get("content") is not None:
        logprobs = [
            TokenLogprob(
                token=item["token"],
                logprob=float(item["logprob"]),
                top=[
                    (alt["token"], float(alt["logprob"])) for alt in item.get("top_logprobs") or []
                ],
            )
            for item in block["content"]
        ]
    model = document.get("model")
    return ChatReply(
        text=content,
        tool_calls=tool_calls,
        finish_reason=choice.get("finish_reason"),
        logprobs=logprobs,
        reported_model=model if isinstance(model, str) else None,
        refusal=refusal,
    )
