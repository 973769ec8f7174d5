"""Deterministic in-process candidates behind the same `ChatProvider` interface.

A factory (named by `entry = "module:callable"` in the spec) is called once per trial with the
candidate's settings and returns a responder: `responder(request) -> str | ChatReply` (sync or
async). A new responder per trial means no state is carried between independent trials.
"""

from __future__ import annotations

import dataclasses
import inspect
import time
from collections.abc import Callable
from typing import Any

from trustbench._canonical import canonical_json
from trustbench.providers._types import AttemptResult, ChatReply, ChatRequest

Responder = Callable[[ChatRequest], Any]
"""Answers one request with a `str` or a `ChatReply` (or an awaitable of either)."""
ResponderFactory = Callable[[dict[str, Any]], Responder]
"""Builds a fresh responder from the candidate's settings."""


def request_as_json(request: ChatRequest) -> dict[str, Any]:
    """The request as the JSON body recorded for an in-process call."""
    return {k: v for k, v in dataclasses.asdict(request).items() if v is not None}


def reply_as_json(reply: ChatReply) -> dict[str, Any]:
    """A reply as the JSON recorded as an in-process call's raw response."""
    return dataclasses.asdict(reply)


class InProcessProvider:
    """Runs a deterministic Python candidate; each call is timed and recorded like an API call."""

    adaptations: tuple[str, ...] = ()
    """No adaptation: the responder receives the provider-neutral request."""

    def __init__(self, factory: ResponderFactory, *, name: str, settings: dict[str, Any]) -> None:
        self.factory = factory
        self.settings = dict(settings)
        self.requested_model: str | None = name
        self.endpoint: str | None = None
        self.isolation: str = "in-process"
        """What the candidate's code runs under (a sandbox mode, or "none ..." where the spec
        says `isolation = "none"`)."""
        self._responder: Responder | None = None
        self.one_at_a_time: Any = None
        """An `asyncio.Lock` shared by every trial's copy when the candidate's code lives in one
        sandbox worker: its trials are then served one at a time, their responder built inside
        the lock, so a timed-out call never leaves another trial waiting on the worker."""

    def for_trial(self) -> InProcessProvider:
        """A provider holding a fresh responder built for one trial."""
        fresh = InProcessProvider(
            self.factory, name=str(self.requested_model), settings=self.settings
        )
        fresh.isolation = self.isolation
        fresh.one_at_a_time = self.one_at_a_time
        if self.one_at_a_time is None:
            fresh._responder = self.factory(dict(self.settings))
        return fresh

    async def _answer(self, request: ChatRequest) -> Any:
        responder = self._responder or self.factory(dict(self.settings))
        answer = responder(request)
        return await answer if inspect.isawaitable(answer) else answer

    async def send(self, request: ChatRequest, timeout_s: float) -> AttemptResult:
        """Call the responder once; an exception is a `candidate_error`, not a crash."""
        body = request_as_json(request)
        result = AttemptResult(
            request_body=body,
            requested_model=self.requested_model,
            request_json=canonical_json(body),
            endpoint=None,
        )
        started = time.perf_counter()
        try:
            if self.one_at_a_time is not None:
                async with self.one_at_a_time:
                    answer = await self._answer(request)
            else:
                answer = await self._answer(request)
        except Exception as error:  # a candidate defect is a measured result, not a harness crash
            result.latency_s = time.perf_counter() - started
            result.error_class = "candidate_error"
            result.error_message = f"{type(error).__name__}: {error}"
            return result
        result.latency_s = time.perf_counter() - started
        reply = answer if isinstance(answer, ChatReply) else ChatReply(text=str(answer))
        if reply.reported_model is None:
            reply = dataclasses.replace(reply, reported_model=self.requested_model)
        result.reply = reply
        result.reported_model = reply.reported_model
        result.raw_response = canonical_json(reply_as_json(reply)).decode("utf-8")
        return result
