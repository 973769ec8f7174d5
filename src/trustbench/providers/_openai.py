"""OpenAI-compatible chat-completions client (vLLM, Ollama, llama.cpp server, hosted APIs)."""

from __future__ import annotations

import json
from typing import Any

from trustbench.providers._http import HttpChatProvider
from trustbench.providers._types import (
    AttemptResult,
    ChatReply,
    ChatRequest,
    TokenLogprob,
    ToolCall,
)


class OpenAIChatProvider(HttpChatProvider):
    """POST `{base_url}/chat/completions`; one call per `send`, no hidden retries.

    Supports `response_format={"type": "json_object"}`, `logprobs`/`top_logprobs` and tools.
    """

    adaptations: tuple[str, ...] = ()
    """How requests are adapted to this API (none: the request format is OpenAI's own)."""

    request_fields = frozenset({
        # OpenAI's chat-completions request body
        "audio", "frequency_penalty", "logit_bias", "logprobs", "max_completion_tokens",
        "max_tokens", "metadata", "modalities", "n", "parallel_tool_calls", "prediction",
        "presence_penalty", "reasoning_effort", "response_format", "seed", "service_tier", "stop",
        "store", "stream", "stream_options", "temperature", "tool_choice", "tools",
        "top_logprobs", "top_p", "user", "verbosity", "web_search_options",
        # sampling fields the common local servers add (vLLM, llama.cpp, Ollama, LM Studio)
        "top_k", "min_p", "repetition_penalty", "typical_p", "chat_template_kwargs",
        "skip_special_tokens", "guided_json", "guided_choice", "guided_regex", "guided_grammar",
        "ignore_eos", "min_tokens", "keep_alive", "options",
    })  # fmt: skip
    """Request fields a `settings` key may name (the body is settings, then the request's own);
    another key is sent as written but warned about at freeze (`temprature`)."""

    path = "/chat/completions"

    def headers_for(self, api_key: str | None) -> dict[str, str]:
        """The key as a bearer `Authorization` header when one is configured."""
        return {} if api_key is None else {"Authorization": f"Bearer {api_key}"}

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

    def parse(self, document: dict[str, Any]) -> ChatReply:
        """Parse a chat-completions response (see `parse_chat_completion`)."""
        return parse_chat_completion(document)

    def read_usage(self, document: Any, result: AttemptResult) -> None:
        """Token counts (a JSON boolean is not a count) and the model id the server reports."""
        usage = document.get("usage") if isinstance(document, dict) else None
        if isinstance(usage, dict):
            result.prompt_tokens = _int_or_none(usage.get("prompt_tokens"))
            result.completion_tokens = _int_or_none(usage.get("completion_tokens"))
        if isinstance(document, dict) and isinstance(document.get("model"), str):
            result.reported_model = document["model"]


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
    reasoning = _reasoning(message)
    if content is None and not tool_calls and refusal is None and reasoning is None:
        raise ValueError("message has neither content, tool calls, a refusal nor reasoning")
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
        reasoning=reasoning,
    )


def _reasoning(message: dict[str, Any]) -> str | None:
    """The reasoning a server sent beside the content, if any.

    vLLM, SGLang, DeepSeek and llama.cpp's server (with a reasoning parser) send it as
    `reasoning_content`; newer vLLM and OpenRouter as `reasoning`. A reply cut while the model
    was still reasoning has reasoning and no content: a reply, not a malformed body.
    """
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return None
