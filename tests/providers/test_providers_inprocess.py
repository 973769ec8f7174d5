from __future__ import annotations

import asyncio
from typing import Any

from trustbench.providers import ChatReply, ChatRequest, InProcessProvider

REQUEST = ChatRequest(messages=[{"role": "user", "content": "x"}])


def _counter_factory(settings: dict[str, Any]) -> Any:
    calls: list[str] = []

    def respond(request: ChatRequest) -> str:
        calls.append("x")
        return f"{settings['word']} {len(calls)}"

    return respond


def test_each_trial_provider_gets_a_fresh_responder() -> None:
    provider = InProcessProvider(_counter_factory, name="counter", settings={"word": "n"})

    async def go() -> list[str | None]:
        first, second = provider.for_trial(), provider.for_trial()
        texts = []
        for trial in (first, first, second):
            result = await trial.send(REQUEST, 1.0)
            texts.append(result.reply.text if result.reply else None)
        return texts

    assert asyncio.run(go()) == ["n 1", "n 2", "n 1"]


def test_inprocess_exception_is_a_candidate_error_with_no_reply() -> None:
    def factory(settings: dict[str, Any]) -> Any:
        def respond(request: ChatRequest) -> ChatReply:
            raise RuntimeError("boom")

        return respond

    result = asyncio.run(
        InProcessProvider(factory, name="x", settings={}).for_trial().send(REQUEST, 1.0)
    )
    assert result.error_class == "candidate_error" and "boom" in (result.error_message or "")
    assert result.reply is None and result.raw_response is None


def test_inprocess_reply_is_recorded_as_canonical_json() -> None:
    provider = InProcessProvider(
        _counter_factory, name="counter", settings={"word": "w"}
    ).for_trial()
    result = asyncio.run(provider.send(REQUEST, 1.0))
    assert result.raw_response is not None and '"text":"w 1"' in result.raw_response
    assert result.reported_model == "counter" and result.http_status is None
