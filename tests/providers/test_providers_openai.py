from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from tests.support.openai_server import (
    OpenAIServer,
    drop_connection,
    json_reply,
    malformed_json,
    rate_limited,
    raw_body,
    server_error,
    stall,
    tool_call,
)

from trustbench.providers import (
    AttemptResult,
    ChatRequest,
    OpenAIChatProvider,
    PriceSpec,
    new_session,
)
from trustbench.providers._http import parse_retry_after

USER = [{"role": "user", "content": "hello there"}]


def _send(
    server: OpenAIServer,
    request: ChatRequest,
    *,
    timeout_s: float = 2.0,
    price: PriceSpec | None = None,
    api_key_env: str | None = None,
) -> AttemptResult:
    async def go() -> AttemptResult:
        async with new_session(4) as session:
            provider = OpenAIChatProvider(
                session,
                base_url=server.base_url,
                model="m-requested",
                api_key_env=api_key_env,
                settings={"temperature": 0.3, "seed": 7},
                price=price,
            )
            return await provider.send(request, timeout_s)

    return asyncio.run(go())


def test_openai_client_returns_text_usage_cost_and_reported_model(
    openai_server: OpenAIServer,
) -> None:
    result = _send(
        openai_server,
        ChatRequest(messages=USER),
        price=PriceSpec(input_per_mtok=3, output_per_mtok=15),
    )
    assert result.error_class is None and result.reply is not None
    assert result.reply.text == "echo: hello there"
    assert (result.prompt_tokens, result.completion_tokens) == (2, 3)
    assert result.cost_usd == pytest.approx((2 * 3 + 3 * 15) / 1e6)
    assert result.requested_model == "m-requested" and result.reported_model == "m-requested"
    assert result.http_status == 200 and result.latency_s > 0
    body = openai_server.requests[0].body
    assert body["temperature"] == 0.3 and body["seed"] == 7 and body["model"] == "m-requested"


def test_request_values_override_candidate_settings(openai_server: OpenAIServer) -> None:
    _send(openai_server, ChatRequest(messages=USER, temperature=0.0, max_tokens=5))
    body = openai_server.requests[0].body
    assert body["temperature"] == 0.0 and body["max_tokens"] == 5


def test_json_response_format_is_requested_and_the_reply_kept_as_text(
    openai_server: OpenAIServer,
) -> None:
    openai_server.on("hello", json_reply({"decision": "deny"}))
    result = _send(openai_server, ChatRequest(messages=USER, response_format="json_object"))
    assert openai_server.requests[0].body["response_format"] == {"type": "json_object"}
    assert result.reply is not None and json.loads(result.reply.text or "") == {"decision": "deny"}


def test_token_logprobs_are_returned_when_asked(openai_server: OpenAIServer) -> None:
    result = _send(openai_server, ChatRequest(messages=USER, logprobs=True, top_logprobs=2))
    body = openai_server.requests[0].body
    assert body["logprobs"] is True and body["top_logprobs"] == 2
    assert result.reply is not None and result.reply.logprobs is not None
    assert [t.token for t in result.reply.logprobs] == ["echo:", "hello", "there"]
    assert result.reply.logprobs[0].logprob == -0.25 and len(result.reply.logprobs[0].top) == 2


def test_no_logprobs_unless_asked(openai_server: OpenAIServer) -> None:
    result = _send(openai_server, ChatRequest(messages=USER))
    assert "logprobs" not in openai_server.requests[0].body
    assert result.reply is not None and result.reply.logprobs is None


def test_tool_calls_are_parsed_with_raw_arguments(openai_server: OpenAIServer) -> None:
    openai_server.on("hello", tool_call("lookup", {"id": 3}))
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    result = _send(openai_server, ChatRequest(messages=USER, tools=tools))
    assert openai_server.requests[0].body["tools"] == tools
    assert result.reply is not None and result.reply.text is None
    assert [(c.name, json.loads(c.arguments)) for c in result.reply.tool_calls] == [
        ("lookup", {"id": 3})
    ]


def test_api_key_travels_only_in_the_authorization_header(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TB_PROVIDER_KEY", "sk-provider-secret-42")
    result = _send(openai_server, ChatRequest(messages=USER), api_key_env="TB_PROVIDER_KEY")
    assert openai_server.requests[0].headers["authorization"] == "Bearer sk-provider-secret-42"
    assert "sk-provider-secret-42" not in json.dumps(result.request_body)


@pytest.mark.parametrize(
    ("behaviour", "error_class", "status"),
    [
        (rate_limited("1.5"), "rate_limited", 429),
        (server_error(502), "server_error", 502),
        (drop_connection(), "connection_error", None),
        (malformed_json(), "malformed_response", 200),
    ],
    ids=["429", "5xx", "dropped", "malformed"],
)
def test_each_fault_is_classified_and_never_turned_into_a_reply(
    openai_server: OpenAIServer, behaviour: Any, error_class: str, status: int | None
) -> None:
    openai_server.on("hello", behaviour)
    result = _send(openai_server, ChatRequest(messages=USER))
    assert result.error_class == error_class and result.http_status == status
    assert result.reply is None


def test_retry_after_of_a_429_is_recorded(openai_server: OpenAIServer) -> None:
    openai_server.on("hello", rate_limited("1.5"))
    assert _send(openai_server, ChatRequest(messages=USER)).retry_after_s == 1.5


def test_a_stall_past_the_timeout_is_a_timeout(openai_server: OpenAIServer) -> None:
    openai_server.on("hello", stall(1.0))
    result = _send(openai_server, ChatRequest(messages=USER), timeout_s=0.2)
    assert result.error_class == "timeout" and 0.2 <= result.latency_s < 0.9


def test_malformed_body_keeps_its_raw_text(openai_server: OpenAIServer) -> None:
    openai_server.on("hello", malformed_json('{"choices": ['))
    result = _send(openai_server, ChatRequest(messages=USER))
    assert result.raw_response == '{"choices": ['


def test_json_without_choices_is_malformed_not_a_reply(openai_server: OpenAIServer) -> None:
    openai_server.on("hello", raw_body('{"id": "x", "choices": []}'))
    result = _send(openai_server, ChatRequest(messages=USER))
    assert result.error_class == "malformed_response" and result.reply is None


def test_unknown_price_gives_a_null_cost_not_zero(openai_server: OpenAIServer) -> None:
    assert _send(openai_server, ChatRequest(messages=USER)).cost_usd is None


def test_retry_after_accepts_seconds_and_http_dates() -> None:
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


def test_a_refusal_is_a_reply_without_text_that_keeps_the_refusal(
    openai_server: OpenAIServer,
) -> None:
    body = {
        "model": "m",
        "choices": [
            {"message": {"content": None, "refusal": "I can't help."}, "finish_reason": "stop"}
        ],
    }
    openai_server.on("hello", raw_body(json.dumps(body)))
    result = _send(openai_server, ChatRequest(messages=USER))
    assert result.error_class is None and result.reply is not None
    assert result.reply.text is None and result.reply.refusal == "I can't help."


def test_reasoning_content_is_kept_apart_from_the_text_it_never_joins(
    openai_server: OpenAIServer,
) -> None:
    message = {"content": '{"decision": "deny"}', "reasoning_content": "draft: permit"}
    body = {"model": "m", "choices": [{"message": message, "finish_reason": "stop"}]}
    openai_server.on("hello", raw_body(json.dumps(body)))
    result = _send(openai_server, ChatRequest(messages=USER))
    assert result.reply is not None
    assert result.reply.text == '{"decision": "deny"}'
    assert result.reply.reasoning == "draft: permit"


def test_a_reply_cut_while_reasoning_is_a_reply_with_no_text_not_a_malformed_body(
    openai_server: OpenAIServer,
) -> None:
    message = {"content": None, "reasoning_content": "Let me check the appro"}
    body = {"model": "m", "choices": [{"message": message, "finish_reason": "length"}]}
    openai_server.on("hello", raw_body(json.dumps(body)))
    result = _send(openai_server, ChatRequest(messages=USER))
    assert result.error_class is None and result.reply is not None
    assert result.reply.text is None and result.reply.finish_reason == "length"
