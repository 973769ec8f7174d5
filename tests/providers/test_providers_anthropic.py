from __future__ import annotations

import asyncio

import pytest
from tests.support.openai_server import OpenAIServer, tool_call

from trustbench.providers import (
    AnthropicMessagesProvider,
    AttemptResult,
    ChatRequest,
    PriceSpec,
    new_session,
)

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi you"}]


def _send(
    server: OpenAIServer, request: ChatRequest, monkeypatch: pytest.MonkeyPatch
) -> AttemptResult:
    monkeypatch.setenv("TB_ANTHROPIC_KEY", "sk-ant-test-secret")

    async def go() -> AttemptResult:
        async with new_session(2) as session:
            provider = AnthropicMessagesProvider(
                session,
                base_url=server.root_url,
                model="claude-test",
                api_key_env="TB_ANTHROPIC_KEY",
                price=PriceSpec(input_per_mtok=1, output_per_mtok=5),
            )
            return await provider.send(request, 2.0)

    return asyncio.run(go())


def test_anthropic_client_moves_system_to_top_level_and_records_usage_and_cost(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _send(openai_server, ChatRequest(messages=MESSAGES), monkeypatch)
    sent = openai_server.requests[0]
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == "sk-ant-test-secret" and "anthropic-version" in sent.headers
    assert sent.body["system"] == "Be brief." and [m["role"] for m in sent.body["messages"]] == [
        "user"
    ]
    assert sent.body["max_tokens"] == 1024
    assert result.reply is not None and result.reply.text == "echo: hi you"
    assert (result.prompt_tokens, result.completion_tokens) == (2, 3)
    assert result.cost_usd == pytest.approx((2 * 1 + 3 * 5) / 1e6)
    assert result.reported_model == "claude-test"


def test_anthropic_tools_are_converted_and_tool_use_parsed(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    openai_server.on("hi", tool_call("lookup", {"id": 1}))
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    result = _send(openai_server, ChatRequest(messages=MESSAGES, tools=tools), monkeypatch)
    assert openai_server.requests[0].body["tools"][0]["input_schema"] == {"type": "object"}
    assert result.reply is not None and result.reply.tool_calls[0].name == "lookup"


def test_anthropic_logprobs_request_fails_as_client_error_without_being_sent(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _send(openai_server, ChatRequest(messages=MESSAGES, logprobs=True), monkeypatch)
    assert result.error_class == "client_error" and not openai_server.requests


def test_thinking_blocks_are_kept_as_reasoning_never_as_the_text() -> None:
    from trustbench.providers._anthropic import parse_message

    reply = parse_message(
        {
            "model": "claude-x",
            "stop_reason": "end_turn",
            "content": [
                {"type": "thinking", "thinking": "draft: permit", "signature": "s"},
                {"type": "text", "text": '{"decision": "deny"}'},
            ],
        }
    )
    assert reply.text == '{"decision": "deny"}' and reply.reasoning == "draft: permit"
