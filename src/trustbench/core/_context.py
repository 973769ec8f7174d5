"""The per-trial context a track receives: settings, a recorded provider client, call recording.

A new `TrialContext` is made for every trial (and a fresh provider via `for_trial`), so nothing a
candidate saw or said in one trial can reach another. Every call made through it becomes an
attempt row in the ledger the moment it finishes, with its raw response, so grading can be redone
offline from the ledger alone.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import random
import secrets
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from trustbench._canonical import canonical_json, sha256_hex
from trustbench._imports import import_object
from trustbench.core._clock import utc_now
from trustbench.core._track import TrialKey
from trustbench.core.ledger._store import Ledger, cache_root
from trustbench.core.spec._spec import (
    CandidateSpec,
    ExperimentSpec,
    RetryPolicy,
    isolation_of,
)
from trustbench.errors import SKIP_PREFLIGHT_HINT, InputError, did_you_mean
from trustbench.providers._anthropic import AnthropicMessagesProvider
from trustbench.providers._inprocess import InProcessProvider
from trustbench.providers._openai import OpenAIChatProvider
from trustbench.providers._pool import HttpPool
from trustbench.providers._redact import redact
from trustbench.providers._types import (
    DEFAULT_MAX_RESPONSE_BYTES,
    AttemptResult,
    ChatProvider,
    ChatReply,
    ChatRequest,
)

if TYPE_CHECKING:
    import asyncio

    from trustbench.core.spec._manifest import Manifest


# ------------------------------------------------------------------------------------------------
# Pacing of calls: per-endpoint token-bucket rate limits and exponential backoff with jitter.


class TokenBucket:
    """Allow `rate` calls per second on average, with bursts of up to `burst` calls.

    Implemented as slot reservation (a "virtual scheduling" token bucket): each caller reserves
    the next free slot `1/rate` after the previous one, but may start up to `burst - 1` slots
    in the past, so an idle bucket lets a burst through at once. Callers are served in arrival
    order and no caller polls.
    """

    def __init__(self, rate: float, burst: int | None = None) -> None:
        self.rate = rate
        self.burst = burst if burst is not None else max(1, int(rate))
        self._next = 0.0

    async def acquire(self) -> None:
        """Wait until this caller's slot."""
        import asyncio

        now = time.monotonic()
        slot = max(self._next, now - (self.burst - 1) / self.rate)
        self._next = slot + 1.0 / self.rate
        if slot > now:
            await asyncio.sleep(slot - now)


OVERLOAD_SIGNS = ("timeout", "rate_limited")
"""Error classes that say the server has more than it can answer in time (with HTTP 503)."""


RECOVERY_WINDOWS = 4
"""Full windows (`limit` calls each) answered in a row before the limit grows by one: slower
than TCP's one window, because every probe past a server's capacity costs a whole `timeout_s`
of each call then in flight."""


ALONE_TIMEOUTS_TO_STOP = 3
"""Calls in a row that timed out at a limit of one before the endpoint's candidates stop: the
server cannot answer ONE request within `timeout_s`, so every further call would only wait out
its timeout (the preflight's short probe may still have passed). The stop takes effect at that
call: nothing more is sent to the endpoint (`AdaptiveConcurrency.stopped`)."""


class AdaptiveConcurrency:
    """Calls in flight to one endpoint, adapted to what the server answers in time (AIMD).

    The declared `concurrency` is a ceiling, not a target: a local server that answers one
    request at a time queues the rest, and at 4 in flight with an 8 s server and a 10 s
    timeout every request timed out (issue 55: 0 of 12 trials completed). As TCP's congestion
    control does (additive increase, multiplicative decrease, RFC 5681), the limit halves when
    a call shows overload (a timeout, a 429 or a 503) and grows by one after four windows
    (`limit` calls each) in a row answered, never above the ceiling nor below one. Calls that
    were in flight together when the server fell behind count as one sign: the limit halves
    once per window (a call started before the last decrease cannot decrease it again), so
    four timeouts of one burst make 4 -> 2, not 4 -> 1.

    Every change is kept in `changes` (and recorded by the runner as a `concurrency_changed`
    event, then in record.json), so a reader sees at which load the server kept up.

    When the server cannot answer one call alone (`ALONE_TIMEOUTS_TO_STOP` timeouts in a row
    at a limit of one), the gate stops at that call, not when the trials in flight have each
    waited out their own retries (issue 55: four trials of three retries took 16 timeouts
    where three decide it): a call waiting for room, a retry waiting out its backoff and any
    later call are not sent (`acquire` answers None, `rest` returns at once), and the calls
    then in flight are cancelled, which closes their connections as a timed-out call's is
    closed, so the server can drop them. `on_stop` tells the runner, which records the stop.
    """

    def __init__(self, endpoint: str, ceiling: int) -> None:
        self.endpoint = endpoint
        self.ceiling = max(ceiling, 1)
        self.limit = self.ceiling
        self.in_flight = 0
        self.changes: list[dict[str, Any]] = []
        """Each change: `{"from", "to", "reason", "at_call"}` (`at_call`: calls finished)."""
        self.on_change: Callable[[dict[str, Any]], None] | None = None
        """Called with each change as it happens (the runner records it in the ledger)."""
        self.alone_timeouts = 0
        """Calls in a row that timed out while the limit was one (reset by any answer)."""
        self.stopped = False
        """The server could not answer one call alone: nothing more is sent (see the class)."""
        self.on_stop: Callable[[], None] | None = None
        """Called once, when the gate stops (the runner stops the endpoint's candidates)."""
        self._window = 0
        self._answered_in_a_row = 0
        self._finished = 0
        self._waiting: list[asyncio.Future[None]] = []
        self._resting: list[asyncio.Future[None]] = []
        self._sending: set[asyncio.Task[Any]] = set()
        """The tasks whose call is in flight: what a stop cancels."""
        self._cancelled: set[asyncio.Task[Any]] = set()
        """The tasks the stop cancelled, until each takes its cancellation back (`stop_ended`)."""

    async def acquire(self) -> int | None:
        """Wait for room under the limit; return the window the call starts in (for `release`).

        None once the gate has stopped, before or while waiting: the call is not sent.
        """
        import asyncio

        while self.in_flight >= self.limit and not self.stopped:
            waiting = asyncio.get_running_loop().create_future()
            self._waiting.append(waiting)
            try:
                await waiting
            except asyncio.CancelledError:
                self._wake()  # any room this caller was woken for goes to the next one
                raise
            finally:
                if waiting in self._waiting:
                    self._waiting.remove(waiting)
        if self.stopped:
            return None
        self.in_flight += 1
        if (task := asyncio.current_task()) is not None:
            self._sending.add(task)
        return self._window

    def release(self, window: int, result: AttemptResult | None) -> None:
        """The call that started in `window` ended with `result` (None: cancelled mid-flight)."""
        import asyncio

        if (task := asyncio.current_task()) is not None:
            self._sending.discard(task)
        self.in_flight -= 1
        self._finished += 1
        if result is not None:
            self._adapt(window, result)
        self._wake()

    async def rest(self, seconds: float) -> None:
        """Wait `seconds` (a retry's backoff), or until the gate stops: no retry follows a stop."""
        import asyncio

        if self.stopped:
            return
        loop = asyncio.get_running_loop()
        woken = loop.create_future()
        timer = loop.call_later(seconds, _settle, woken)
        self._resting.append(woken)
        try:
            await woken
        finally:
            timer.cancel()
            self._resting.remove(woken)

    def stop_ended(self, task: asyncio.Task[Any] | None) -> bool:
        """Whether the stop, and nothing else, cancelled `task`'s call.

        The stop's cancellation is then taken back, so the call ends as stopped instead of
        cancelling its trial. Another cancellation at the same time (the trial's time limit,
        an interrupt) goes on.
        """
        if task is None or task not in self._cancelled:
            return False
        self._cancelled.discard(task)
        return task.uncancel() == 0

    def stopped_note(self, timeout_s: float) -> str:
        """What a call of a stopped endpoint records: why nothing more was sent."""
        return (
            f"the server at {self.endpoint} did not answer ONE request within timeout_s = "
            f"{timeout_s:g} s, so its candidates were stopped"
        )

    def stop(self) -> None:
        """Send nothing more: wake every waiting call and cancel every call in flight.

        Called by the gate itself at the third call timed out alone, and by a Ray worker whose
        driver learnt that another worker's gate for the same endpoint stopped
        (`_ray_executor.TrialWorker.stop_endpoint`): each worker has its own gate.
        """
        import asyncio

        self.stopped = True
        current = asyncio.current_task()
        for task in self._sending - {current}:
            self._cancelled.add(task)
            task.cancel("the endpoint's candidates were stopped")
        for waiting in [*self._waiting, *self._resting]:
            _settle(waiting)
        if self.on_stop is not None:
            self.on_stop()

    def _wake(self) -> None:
        """Wake as many waiting callers as there is room for (each checks again when it runs)."""
        room = self.limit - self.in_flight
        for waiting in [w for w in self._waiting if not w.done()][: max(room, 0)]:
            waiting.set_result(None)

    def _adapt(self, window: int, result: AttemptResult) -> None:
        overloaded = result.error_class in OVERLOAD_SIGNS or result.http_status == 503
        if result.error_class == "timeout" and self.limit == 1:
            self.alone_timeouts += 1
            if self.alone_timeouts >= ALONE_TIMEOUTS_TO_STOP and not self.stopped:
                self.stop()
        elif result.error_class is None:
            self.alone_timeouts = 0
        if overloaded:
            self._answered_in_a_row = 0
            if window == self._window and self.limit > 1:
                self._window += 1
                self._change(max(self.limit // 2, 1), f"{result.error_class or 'HTTP 503'}")
            return
        if result.error_class is not None:
            return  # a client error or a malformed reply says nothing about the load
        self._answered_in_a_row += 1
        wanted = RECOVERY_WINDOWS * self.limit
        if self._answered_in_a_row >= wanted and self.limit < self.ceiling:
            self._answered_in_a_row = 0
            self._change(self.limit + 1, f"{wanted} calls in a row answered")

    def stop_reason(self, timeout_s: float) -> str | None:
        """Why this endpoint's candidates stop (the server cannot answer one call), or None."""
        if not self.stopped:
            return None
        return (
            f"the server at {self.endpoint} did not answer ONE request within timeout_s = "
            f"{timeout_s:g} s: {self.alone_timeouts} calls in a row, each sent alone "
            "(concurrency 1), timed out. It is slow or stalled, not known to be unreachable: "
            "raise timeout_s (quick paths: --timeout) or lower max_tokens; the remaining "
            "trials were not run"
        )

    def _change(self, to: int, reason: str) -> None:
        change = {"from": self.limit, "to": to, "reason": reason, "at_call": self._finished}
        self.limit = to
        self.changes.append(change)
        if self.on_change is not None:
            self.on_change({"endpoint": self.endpoint, **change})


def endpoint_gates(
    providers: Iterable[Any], ceiling: int, on_change: Callable[[dict[str, Any]], None]
) -> dict[str, AdaptiveConcurrency]:
    """One adaptive gate per endpoint of `providers` (None and endpoint-less ones have none).

    `ceiling` bounds each gate's calls in flight; `on_change` gets each change (the local
    runner records it in the ledger, a Ray worker hands it back with its next trial).
    """
    gates: dict[str, AdaptiveConcurrency] = {}
    for provider in providers:
        endpoint = provider.endpoint if provider is not None else None
        if endpoint and endpoint not in gates:
            gates[endpoint] = AdaptiveConcurrency(endpoint, ceiling)
            gates[endpoint].on_change = on_change
    return gates


def _settle(waiting: asyncio.Future[None]) -> None:
    """Wake `waiting` unless it is already done (woken, or its waiter cancelled)."""
    if not waiting.done():
        waiting.set_result(None)


def backoff_delay(
    policy: RetryPolicy, retry_number: int, retry_after_s: float | None, rng: random.Random
) -> float:
    """Seconds to wait before transport retry `retry_number` (0 for the first retry).

    Exponential backoff with "full jitter" (AWS Architecture Blog, "Exponential Backoff and
    Jitter", 2015): wait U(0, min(max, base * 2**n)). Spreading waits uniformly keeps concurrent
    trials that failed together from retrying together. A server's Retry-After is a floor when
    honoured (capped by `retry_after_max_s`), because retrying earlier is known to fail.
    """
    ceiling = min(policy.backoff_max_s, policy.backoff_base_s * (2**retry_number))
    delay = rng.uniform(0.0, ceiling) if policy.jitter == "full" else ceiling
    if policy.honour_retry_after and retry_after_s is not None:
        delay = max(delay, min(retry_after_s, policy.retry_after_max_s))
    return delay


class CallFailed(Exception):
    """A call could not produce a usable answer after the declared retries.

    Raised by `TrialContext.chat` and `TrialContext.call`; the runner records the trial as
    failed with `error_class`, unless the track catches it and records its own outcome.
    """

    def __init__(self, error_class: str, message: str) -> None:
        self.error_class = error_class
        super().__init__(f"{error_class}: {message}")


class PolicyViolation(Exception):
    """A track asked for more candidate re-samples than the spec declared (a harness defect)."""


@dataclass
class RunServices:
    """What every trial context shares within one run (owned by the runner)."""

    ledger: Ledger
    """The ledger all attempts go to."""
    policy: RetryPolicy
    """The declared retry policy."""
    timeout_s: float
    """Per-call time limit."""
    rng: random.Random
    """Seeded source of backoff jitter."""
    secrets: tuple[str, ...]
    """The API key values to redact from everything stored: `secret_values` of the candidates'
    `api_key_env`, read from the environment once for the run."""
    limiters: dict[str, TokenBucket] = field(default_factory=dict)
    """Rate limiters by endpoint."""
    concurrency: dict[str, AdaptiveConcurrency] = field(default_factory=dict)
    """Calls in flight by endpoint, adapted to the server (none: in-process candidates)."""
    attempts: int = 0
    """Attempts recorded in this run session."""
    retries: int = 0
    """Transport retries in this run session."""
    on_retry: Callable[[], None] | None = None
    """Progress hook called on each transport retry."""


class TrialContext:
    """Everything one trial may use. Create through the runner; one per trial."""

    def __init__(
        self,
        key: TrialKey,
        candidate: CandidateSpec,
        manifest: Manifest,
        provider: ChatProvider | None,
        services: RunServices,
        execution: int,
    ) -> None:
        self.key = key
        """The trial being run."""
        self.candidate = candidate
        """The candidate's frozen spec entry (settings included)."""
        self.manifest = manifest
        """The frozen manifest (spec, corpus location, track options)."""
        self.provider = provider
        """The candidate's provider for this trial; None for an in-process candidate the track
        drives itself (then record its calls with `call` or `record_call`)."""
        self._services = services
        self._execution = execution
        self._attempt_index = 0
        self._call_index = -1
        self._resamples_used = 0
        self._secrets = services.secrets
        self.trial_limit: asyncio.Timeout | None = None
        """The trial's `trial_timeout_s` limit while it runs (set by `execute_trial`): a call
        cancelled when it has expired is a `trial_timeout`, any other cancellation `cancelled`."""

    def redact(self, text: str | None) -> str | None:
        """`text` with every API key of the run replaced by `[REDACTED]` (before it is stored)."""
        return redact(text, self._secrets)

    @property
    def attempts_recorded(self) -> int:
        """Attempts this trial has recorded so far."""
        return self._attempt_index

    @property
    def resamples_left(self) -> int:
        """Candidate re-samples still allowed by the declared policy (0 when re-sampling is off)."""
        return self._services.policy.candidate_resample - self._resamples_used

    async def chat(self, request: ChatRequest, *, resample: bool = False) -> ChatReply:
        """Send a chat request to the candidate under the retry policy; record every attempt.

        Args:
            request: The provider-neutral request (built fresh for this trial).
            resample: True to re-ask the candidate because the track judged its previous answer
                unusable: allowed only within `retry.candidate_resample` and recorded as a
                `candidate_retry` attempt of the same call.

        Returns:
            The parsed reply of the first successful attempt.

        Raises:
            CallFailed: when a non-retryable error occurs or the transport retries run out.
            PolicyViolation: when `resample` exceeds the declared re-sampling allowance.
        """
        if self.provider is None:
            raise CallFailed("client_error", f"candidate {self.candidate.name} has no provider")
        if resample:
            if self.resamples_left <= 0:
                raise PolicyViolation(
                    f"trial {self.key.trial_id}: candidate re-sampling beyond "
                    f"retry.candidate_resample={self._services.policy.candidate_resample}"
                )
            self._resamples_used += 1
            kind = "candidate_retry"
        else:
            self._call_index += 1
            kind = "first"
        result = await send_under_policy(
            self.provider,
            request,
            self._services,
            lambda attempt_kind, started_at, attempt: self._record(
                attempt_kind, "chat", started_at, attempt
            ),
            cancelled=lambda started: self._cancelled(request, started),
            first_kind=kind,
            on_retry=self._count_retry,
        )
        if result.error_class is None and result.reply is not None:
            return result.reply
        raise CallFailed(
            result.error_class or "malformed_response", result.error_message or "no reply"
        )

    def _count_retry(self) -> None:
        """A trial's transport retry counts in the run's figures and its progress line."""
        services = self._services
        services.retries += 1
        if services.on_retry is not None:
            services.on_retry()

    async def call(self, name: str, request: Any, function: Callable[[Any], Any]) -> Any:
        """Run a deterministic in-process candidate call and record it as an attempt.

        Args:
            name: What is being called (e.g. `reviewer.decide`), stored in the attempt's `call`.
            request: JSON-serialisable input passed to `function`.
            function: The candidate's code (sync or async).

        Returns:
            `function(request)`'s JSON-serialisable result.

        Raises:
            CallFailed: with `candidate_error` when the function raises.
        """
        import asyncio

        started_at = utc_now()
        started = time.perf_counter()

        def record(
            response: Any, error_class: str | None = None, message: str | None = None
        ) -> None:
            self.record_call(
                name,
                request=request,
                response=response,
                latency_s=time.perf_counter() - started,
                error_class=error_class,
                error_message=message,
                started_at=started_at,
            )

        try:
            response = function(request)
            if inspect.isawaitable(response):
                response = await response
        except asyncio.CancelledError:
            record(None, *self._cancel_cause())
            raise
        except Exception as error:  # the candidate's failure is a measured result
            failure = f"{type(error).__name__}: {error}"
            record(None, "candidate_error", failure)
            raise CallFailed("candidate_error", failure) from error
        record(response)
        return response

    def record_call(
        self,
        name: str,
        *,
        request: Any,
        response: Any,
        latency_s: float,
        error_class: str | None = None,
        error_message: str | None = None,
        model_id: str | None = None,
        started_at: str | None = None,
    ) -> None:
        """Record a call the track made itself (e.g. to a deterministic candidate) as an attempt.

        Args:
            name: What was called.
            request: JSON-serialisable input.
            response: JSON-serialisable output (None when there was none).
            latency_s: Seconds the call took.
            error_class: Failure class, if it failed.
            error_message: Failure detail.
            model_id: Identifier of the candidate implementation, if any.
            started_at: ISO time the call started (default: now).
        """
        self._call_index += 1
        body = canonical_json(request)
        result = AttemptResult(
            request_body=request,
            requested_model=model_id or self.candidate.model or self.candidate.name,
            request_json=body,
            endpoint=None,
            raw_response=None if response is None else canonical_json(response).decode("utf-8"),
            error_class=error_class,
            error_message=error_message,
            latency_s=latency_s,
            reported_model=model_id or self.candidate.model or self.candidate.name,
        )
        self._record("first", name, started_at or utc_now(), result)

    def _cancelled(self, request: ChatRequest, started: float) -> AttemptResult:
        """The attempt row of a call cancelled before it finished (no response observed)."""
        provider = self.provider
        build_body: Callable[[ChatRequest], dict[str, Any]] | None = getattr(
            provider, "build_body", None
        )
        body = build_body(request) if callable(build_body) else {"messages": request.messages}
        result = AttemptResult(
            request_body=body,
            requested_model=provider.requested_model if provider is not None else None,
            request_json=None,
            endpoint=provider.endpoint if provider is not None else None,
            latency_s=time.perf_counter() - started,
        )
        result.error_class, result.error_message = self._cancel_cause()
        return result

    def _cancel_cause(self) -> tuple[str, str]:
        """Why a call of this trial was cancelled mid-flight: (error class, message).

        `trial_timeout` only when the trial's own limit fired (`trial_limit` expired); anything
        else that cancels a trial (a failed preflight stopping the run, an interrupt) is
        `cancelled`, so a run with no trial timeout never reports one.
        """
        limit = self.trial_limit
        if limit is not None and limit.expired():
            return (
                "trial_timeout",
                "the call was cancelled before it finished (trial_timeout_s reached)",
            )
        return "cancelled", (
            "the run cancelled the call before it finished (a failed preflight, an interrupt or "
            "a shutdown; no trial timeout)"
        )

    def _record(self, kind: str, call: str, started_at: str, result: AttemptResult) -> None:
        body = (
            result.request_json
            if result.request_json is not None
            else canonical_json(result.request_body)
        )
        text = body.decode("utf-8")
        stored = self.redact(text)
        self._services.ledger.append(
            "attempts",
            {
                "trial_id": self.key.trial_id,
                "execution": self._execution,
                "call_index": self._call_index,
                "attempt_index": self._attempt_index,
                "kind": kind,
                "call": call,
                "started_at": started_at,
                "request_digest": sha256_hex(body),
                "request": stored,
                "raw_response": self.redact(result.raw_response),
                "http_status": result.http_status,
                "error_class": result.error_class,
                "error_message": self.redact(result.error_message),
                "latency_s": result.latency_s,
                "prompt_tokens": result.prompt_tokens,
                "completion_tokens": result.completion_tokens,
                "cost_usd": result.cost_usd,
                "requested_model": result.requested_model,
                "reported_model": self.redact(result.reported_model),  # a server may echo a key
                "endpoint": result.endpoint,
            },
            family=self.key.case_id,  # a case's trials send alike texts: compress them together
            # `body` is `request_body`'s canonical JSON (`AttemptResult.request_json`): the ledger
            # packs the body itself unless redaction changed the stored text.
            request=result.request_body if stored is text else None,
        )
        self._attempt_index += 1
        self._services.attempts += 1


RecordAttempt = Callable[[str, str, AttemptResult], None]
"""Records one attempt as it finishes: `(kind, started_at, result)`."""


async def send_under_policy(
    provider: ChatProvider,
    request: ChatRequest,
    services: RunServices,
    record: RecordAttempt,
    *,
    cancelled: Callable[[float], AttemptResult],
    first_kind: str = "first",
    on_retry: Callable[[], None] | None = None,
) -> AttemptResult:
    """Send `request` under the declared retry policy; return the last attempt's result.

    The one retry loop of a run, so a trial's calls and the preflight's probes are retried
    alike: the endpoint's rate limit is waited for before every attempt; a failure whose class
    is in `retry_on` is sent again up to `transport_max_retries` times, after the backoff (a
    429's or 503's Retry-After as its floor when honoured); each attempt (`first_kind`, then
    `transport_retry`) goes to `record` as soon as it finishes. Each attempt has the per-call
    `timeout_s`.

    Once the endpoint's gate has stopped (the server cannot answer one call alone,
    `AdaptiveConcurrency`), nothing more is sent: a retry not sent leaves the call ended by
    its last attempt (a timeout), and a call with no attempt left standing ends as a `timeout`
    saying why, unrecorded (no attempt was made), as the stopped trials' calls did when each
    waited out its timeouts.

    Args:
        provider: The client to send with.
        request: The request, sent unchanged on every attempt.
        services: The run's retry policy, per-call timeout, limiters and jitter source.
        record: Called with every attempt, before anything else reads it.
        cancelled: Builds the attempt of a call cancelled mid-flight from its start time
            (`time.perf_counter()`); it is recorded before the cancellation goes on.
        first_kind: The first attempt's kind (`first`, or `candidate_retry` for a re-sample).
        on_retry: Called once per transport retry (the run's retry count and progress).

    Returns:
        The successful attempt's result, or the last failed one (not retryable, the retries
        spent, or the endpoint stopped); the caller decides what a failure means.
    """
    import asyncio

    policy = services.policy
    limiter = services.limiters.get(provider.endpoint) if provider.endpoint else None
    gate = services.concurrency.get(provider.endpoint) if provider.endpoint else None
    kind = first_kind
    retry_number = 0
    last: AttemptResult | None = None
    while True:
        if gate is not None and gate.stopped:
            return last if last is not None else _stopped(provider, gate, services.timeout_s)
        if limiter is not None:
            await limiter.acquire()
        result = await _attempt(provider, request, services, gate, record, kind, cancelled)
        if result is None:
            continue  # the gate stopped: the call was not sent, or cancelled mid-flight
        last = result
        if result.error_class is None and result.reply is not None:
            return result
        error_class = result.error_class or "malformed_response"
        if error_class not in policy.retry_on or retry_number >= policy.transport_max_retries:
            return result
        delay = backoff_delay(policy, retry_number, result.retry_after_s, services.rng)
        retry_number += 1
        kind = "transport_retry"
        if on_retry is not None:
            on_retry()
        await (gate.rest(delay) if gate is not None else asyncio.sleep(delay))


async def _attempt(
    provider: ChatProvider,
    request: ChatRequest,
    services: RunServices,
    gate: AdaptiveConcurrency | None,
    record: RecordAttempt,
    kind: str,
    cancelled: Callable[[float], AttemptResult],
) -> AttemptResult | None:
    """One attempt, within the endpoint's gate, recorded; None when the gate stopped it.

    A stop while waiting for room sends nothing; a stop while in flight cancels the call (its
    connection closed) and records it as `cancelled`, saying the candidates were stopped.
    """
    import asyncio

    window = await gate.acquire() if gate is not None else 0
    if window is None:
        return None
    started_at = utc_now()
    started = time.perf_counter()
    ended: AttemptResult | None = None  # None for the gate: cancelled, says nothing of load
    try:
        result = ended = await provider.send(request, services.timeout_s)
    except asyncio.CancelledError:
        # A time limit, a failed preflight, a shutdown or the gate's stop ended this call
        # mid-flight: the attempt happened, so it is recorded before the cancellation goes on.
        attempt = cancelled(started)
        if gate is not None and gate.stop_ended(asyncio.current_task()):
            note = f"cancelled mid-flight: {gate.stopped_note(services.timeout_s)}"
            record(kind, started_at, dataclasses.replace(
                attempt, error_class="cancelled", error_message=note))  # fmt: skip
            return None
        record(kind, started_at, attempt)
        raise
    finally:
        if gate is not None:
            gate.release(window, ended)
    record(kind, started_at, result)
    return result


def _stopped(provider: ChatProvider, gate: AdaptiveConcurrency, timeout_s: float) -> AttemptResult:
    """How a call with no attempt left standing ends once its gate stopped (not recorded)."""
    return AttemptResult(
        request_body={}, requested_model=provider.requested_model, request_json=None,
        endpoint=provider.endpoint, error_class="timeout",
        error_message=gate.stopped_note(timeout_s),
    )  # fmt: skip


# ------------------------------------------------------------------------------------------------
# Build a candidate's provider from its spec entry.
#
# Core depends on providers, never the reverse: the provider clients know nothing of specs.


def provider_classes() -> dict[str, type]:
    """API provider class per candidate kind."""
    return {"openai_chat": OpenAIChatProvider, "anthropic_messages": AnthropicMessagesProvider}


def provider_adaptations(candidate: CandidateSpec) -> tuple[str, ...]:
    """How this candidate's provider adapts requests (frozen into the manifest)."""
    cls = provider_classes().get(candidate.kind)
    return cls.adaptations if cls else InProcessProvider.adaptations


def check_credentials(candidates: list[CandidateSpec]) -> None:
    """Fail before anything runs when a named API key variable is unset or not one line.

    A key holding a line break (a file read with its trailing newline) would make every request
    a refused header: refused here, once, instead of as a connection error in every trial.
    `candidates` are the spec's, in order: the error names `candidates/N/api_key_env`.

    Raises:
        InputError: naming the field, the candidate and the variable.
    """
    for index, candidate in enumerate(candidates):
        check_credential(candidate, where=f"candidates/{index}/api_key_env")


def check_credential(candidate: CandidateSpec, where: str) -> None:
    """`check_credentials` for one candidate, the error located at `where`.

    An `inprocess` candidate's `api_key_env` is checked the same way: it is the one variable
    its sandbox worker receives, so an unset one would fail every trial inside its code.
    """
    if not candidate.api_key_env:
        return
    value = os.environ.get(candidate.api_key_env)
    if value is None:
        raise InputError(
            f"environment variable {candidate.api_key_env} is not set (candidate {candidate.name})",
            location=where,
        )
    if "\r" in value or "\n" in value:
        raise InputError(
            f"environment variable {candidate.api_key_env} holds a line break "
            "(an API key is one line; strip the trailing newline)",
            location=where,
        )


TRUSTBENCH_SETTINGS = frozenset({"inspect_model"})
"""`settings` keys trustbench itself reads (the Inspect model name of an exported log)."""


def unknown_settings(candidates: list[CandidateSpec], track: object = None) -> list[str]:
    """A warning per candidate `settings` key that is not a request field of its API.

    A typo (`temprature`) used to be frozen silently and sent as written, where most servers
    ignore it: the run then measured the model at the server's default temperature. Warned, not
    refused: a server may take fields no list here knows. Keys the run's `track` reads itself
    are known too (its optional `candidate_settings(candidate)`, e.g. a TRB local model's
    `device`): core knows no suite's settings. A candidate whose kind is no API (`inprocess`)
    hands its settings to its own code (an entry's factory, a built-in reviewer's `reviewer`),
    which no list here knows: its keys are checked only against what the track declares.
    """
    declared = getattr(track, "candidate_settings", None)
    warnings = []
    for candidate in candidates:
        cls = provider_classes().get(candidate.kind)
        if not hasattr(cls, "request_fields") and not callable(declared):
            continue  # settings for the candidate's own code: nothing to check them against
        known = getattr(cls, "request_fields", frozenset()) | TRUSTBENCH_SETTINGS
        if callable(declared):
            known |= frozenset(cast("Iterable[str]", declared(candidate)))
        for key in sorted(set(candidate.settings or {}) - known):
            warnings.append(
                f"warning: candidate {candidate.name!r} settings key {key!r} is not a known "
                f"{candidate.kind} request field{did_you_mean(key, known)} (sent as written; "
                "servers usually ignore unknown fields)"
            )
    return warnings


# ------------------------------------------------------------------------------------------------
# Candidate code runs in the sandbox (`trustbench.sandbox`): one confined worker per candidate.
#
# An `inprocess` candidate whose `entry` is not trustbench's own is called through its worker
# (the factory, then each trial's responder, with the same arguments as in the harness process),
# unless the candidate or the spec says `isolation = "none"`. A machine where the sandbox cannot
# be set up refuses to freeze or run such a candidate (`check_isolation`). What each candidate
# ran under is a `candidate_isolation` event in the ledger, which the report shows.

ISOLATION_NONE = "none (in the harness process, with its rights)"
"""The isolation recorded for a candidate the spec runs with `isolation = "none"`."""


OWN_CODE = "in-process (trustbench's own code)"
"""The isolation recorded for trustbench's own entries (built-in reviewers and boundaries)."""


def candidate_entry(
    candidate: CandidateSpec, spec: ExperimentSpec, entry: str, hidden: Sequence[str] = ()
) -> tuple[Any, str]:
    """(the object `entry` names, the isolation it runs under) for one candidate.

    trustbench's own entries are imported here; any other runs in the candidate's sandbox
    worker (one per candidate and entry, started on first use, closed by `close_workers`) and
    the object returned stands for it, called with the same arguments; `isolation = "none"`
    imports it here, and the report says so.

    Raises:
        InputError: the worker could not confine itself or import the entry (named).
    """
    where = f"candidate {candidate.name} entry"
    if entry.startswith("trustbench."):
        return import_object(entry, what=where), OWN_CODE
    if isolation_of(candidate, spec) == "none":
        return import_object(entry, what=where), ISOLATION_NONE
    key = (candidate.name, entry)
    if key not in _WORKERS:
        _WORKERS[key] = _started_worker(candidate, entry, [*_RUN_SECRETS, *hidden])
    worker = _WORKERS[key]
    return worker.entry_object(), str(worker.sandbox) + _reach_note(worker.reached)


def _started_worker(candidate: CandidateSpec, entry: str, hidden: Sequence[str]) -> Any:
    from trustbench.sandbox import (
        CandidateWorker,
        WorkerFailed,
        endpoint_ports,
        plan_for,
        probe_paths,
    )

    try:
        ports = endpoint_ports(candidate.endpoints)
    except ValueError as error:
        raise InputError(str(error), location=f"candidate {candidate.name} endpoints") from None
    hidden = [str(cache_root()), *hidden]
    plan = plan_for(entry, hidden=hidden, ports=ports, variables=declared_variables(candidate))
    worker = CandidateWorker(entry, plan, probe=probe_paths(hidden))
    try:
        worker.start()
    except WorkerFailed as error:
        raise InputError(str(error), location=f"candidate {candidate.name} entry") from None
    return worker


def declared_variables(candidate: CandidateSpec) -> list[str]:
    """The environment variables passed to this candidate's sandbox worker beside the runtime's.

    Only its own `api_key_env`: a worker inherits nothing else of the harness's environment
    (`trustbench.sandbox`'s `RUNTIME_VARIABLES`), so no candidate reads another's key.
    """
    return [candidate.api_key_env] if candidate.api_key_env else []


def _reach_note(reached: Sequence[str]) -> str:
    return f"; could read {', '.join(reached)}" if reached else ""


_WORKERS: dict[tuple[str, str], Any] = {}
"""The workers started by this process, by (candidate, entry); `close_workers` stops them."""


_RUN_SECRETS: list[str] = []
"""What no worker of the run in progress may read (its folder, its corpus): `start_run_workers`."""


def run_secrets(run_dir: Path, manifest: Manifest) -> list[str]:
    """What no candidate worker may read: the run folder and a corpus given as a folder."""
    corpus = Path(manifest.base_dir) / manifest.corpus.root
    return [str(run_dir.resolve()), *([str(corpus.resolve())] if corpus.is_dir() else [])]


def close_workers() -> None:
    """Stop every candidate worker this process started."""
    _RUN_SECRETS.clear()
    while _WORKERS:
        _WORKERS.popitem()[1].close()


def start_run_workers(secrets: Sequence[str]) -> None:
    """Begin a run: earlier workers (a freeze's, in this process) stop; new ones hide `secrets`.

    Every worker started from now until `close_workers` may not read `secrets`.
    """
    close_workers()
    _RUN_SECRETS.extend(secrets)


def build_provider(
    candidate: CandidateSpec,
    session: HttpPool,
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    *,
    spec: ExperimentSpec | None = None,
    hidden: Sequence[str] = (),
) -> ChatProvider | None:
    """Create the provider for `candidate`, or None for an in-process one without an entry.

    `max_response_bytes` is the spec's cap on one response body (API candidates). With `spec`,
    candidate code runs in its sandbox worker (unless `isolation = "none"`), which may not read
    `hidden` (the run folder, the corpus); the provider's `isolation` says how it ran.

    Raises:
        InputError: when `api_key_env` names an unset variable or `entry` cannot be imported.
    """
    if candidate.kind == "inprocess":
        if candidate.entry is None:
            return None
        if spec is not None:
            factory, isolation = candidate_entry(candidate, spec, candidate.entry, hidden)
            provider = InProcessProvider(factory, name=candidate.name, settings=candidate.settings)
            provider.isolation = isolation
            if isolation not in (OWN_CODE, ISOLATION_NONE):
                import asyncio

                provider.one_at_a_time = asyncio.Lock()
            return provider
        factory = import_object(candidate.entry, what=f"candidate {candidate.name} entry")
        return InProcessProvider(factory, name=candidate.name, settings=candidate.settings)
    check_credential(candidate, where=f"candidate {candidate.name} api_key_env")
    assert candidate.base_url is not None and candidate.model is not None
    return provider_classes()[candidate.kind](
        session,
        base_url=candidate.base_url,
        model=candidate.model,
        api_key_env=candidate.api_key_env,
        settings=candidate.settings,
        price=candidate.price,
        max_response_bytes=max_response_bytes,
    )


# ------------------------------------------------------------------------------------------------
# Preflight: one small request per API candidate before the first trial, failing fast.
#
# A model-id typo used to run every planned trial to failure (720 of them, exit 3) while the
# server's own message (`The model ... does not exist`, `Server is pinned to ...`) sat unread
# in the ledger. At the start of a run, each API candidate (`openai_chat`,
# `anthropic_messages`) gets one short request through its provider's public call
# (`provider.send`): the model is known and the key accepted when it answers. When the track
# declares server-side structured output (`Track.requires_structured_output`, optional), a
# second request asks for JSON constrained to a probe schema with a one-value enum the prompt
# never mentions: a server that honours `response_format` returns exactly that object; one
# that accepts the field and ignores it (as `transformers serve` does, HTTP 200) returns free
# text, and is refused.
#
# The probes go out alone, before any trial (issue 55): sent beside the first trials, a probe
# to a server that answers one request at a time queued behind them and failed its timeout
# ("no complete response within 120 s", read as unreachable). Alone, it measures what it says:
# whether the server answers ONE request within `timeout_s`; when it does not, the run stops
# saying so (slow, not unreachable) before any trial is sent. A failed probe so leaves no trial
# attempt behind. (Issue 35 had moved the probes beside the trials to save a round trip: one
# short probe's latency, paid once per run.)
#
# A probe is sent under the spec's retry policy, through the same loop as a trial's call
# (`_context.send_under_policy`): a 429 or a 5xx (any class in `retry_on`) is sent again after
# the backoff, Retry-After honoured, up to `transport_max_retries` times, each attempt bounded by
# the per-call `timeout_s` (never by `trial_timeout_s`, which is a trial's). One 429 used to stop
# a run that, without the preflight, completed every trial through its retries. Only the last
# attempt's failure raises `InputError` (exit 2), naming the candidate and quoting the server's
# message.
#
# Every probe attempt is recorded as a ledger *event* (`preflight`, with its `attempt` number and
# `kind`: `first` or `transport_retry`), never as an attempt row or a trial, so it counts in no
# denominator. `trustbench run --no-preflight` skips it. A server can echo the key it received
# (in `model`, the reply or an error body, in any encoding): every probe's result is redacted
# with the run's secret values as soon as it arrives, as an attempt's is
# (`providers._redact.redact`), so neither the event nor the failure message quotes a key.
#
# During the run, `stop_reason` stops a candidate whose first N trials all failed with one and
# the same client error (`retry.stop_after_client_errors`, default 5): its remaining trials
# stay unrun ("not run", never zero) and the run says why.

API_KINDS = ("openai_chat", "anthropic_messages")
"""Candidate kinds that reach a server and are probed."""
PROBE_MAX_TOKENS = 16
"""Completion budget of a probe: enough for a word or the probe object, cheap on any server."""

_ASK = "Reply with the single word: ready"


def probe_schema(token: str) -> dict[str, Any]:
    """A schema only a constrained decoder satisfies: one key, one allowed value, no other."""
    return {
        "type": "object",
        "properties": {"preflight": {"type": "string", "enum": [token]}},
        "required": ["preflight"],
        "additionalProperties": False,
    }


def _message(result: AttemptResult) -> str:
    status = f"HTTP {result.http_status}, " if result.http_status is not None else ""
    return f"{status}{result.error_class}: {result.error_message or 'no message'}"


def server_hint(candidate: Any, result: AttemptResult) -> str:
    """What to try when the probe's HTTP status says the URL or the key is wrong ('' if none).

    A 404 from a base URL without `/v1` is almost always the missing API prefix (local servers
    serve `/v1/chat/completions`); a 401 or 403 is the key: unset, wrong, or not sent at all
    (a `--base-url` server gets no key unless `api_key_env` names one).
    """
    base_url = str(candidate.base_url or "").rstrip("/")
    if (
        result.http_status == 404
        and candidate.kind == "openai_chat"
        and not base_url.endswith("/v1")
    ):
        return f"; hint: OpenAI-compatible servers answer under /v1: try {base_url}/v1"
    if result.http_status in (401, 403):
        if candidate.api_key_env:
            return (f"; hint: the server refused the key in ${candidate.api_key_env}: check "
                    "that variable holds this server's key")  # fmt: skip
        return ("; hint: no key was sent (a --base-url server gets none): name the variable "
                "holding it with --api-key-env (spec: api_key_env)")  # fmt: skip
    return ""


def honours_schema(text: str | None, token: str) -> bool:
    """Whether a probe reply is the one object the probe schema allows."""
    try:
        value = json.loads((text or "").strip())
    except ValueError:
        return False
    return value == {"preflight": token}


def probed(
    spec: ExperimentSpec, providers: Mapping[str, ChatProvider | None]
) -> list[tuple[Any, ChatProvider]]:
    """The candidates a preflight probes (API kinds with a provider), with their providers."""
    return [
        (candidate, provider)
        for candidate in spec.candidates
        if candidate.kind in API_KINDS and (provider := providers.get(candidate.name)) is not None
    ]


async def preflight(
    spec: ExperimentSpec,
    providers: dict[str, ChatProvider | None],
    services: RunServices,
    structured_output: bool = False,
) -> None:
    """Probe every API candidate once (twice with structured output); raise on a failure.

    The candidates are probed at once (each candidate's probes in turn), so a run with several
    endpoints waits one or two round trips, not one or two per candidate. When several fail,
    the first in the spec's order is the one raised.

    Args:
        spec: The frozen spec (candidates).
        providers: The run's providers by candidate name.
        services: The run's retry policy, per-call timeout, rate limiters and ledger (each
            probe attempt is recorded there as a `preflight` event) and its secrets (replaced
            by `[REDACTED]` in everything a probe brings back before it is recorded or quoted).
        structured_output: The track declared server-side structured output: also check that
            the server honours `response_format` (see the module docstring).

    Raises:
        InputError: a candidate's probe failed; the message names it and quotes the server.
    """
    import asyncio

    probes = [
        _probe(candidate, provider, services, structured_output)
        for candidate, provider in probed(spec, providers)
    ]
    outcomes = await asyncio.gather(*probes, return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome


async def _probe(
    candidate: Any, provider: ChatProvider, services: RunServices, structured_output: bool
) -> None:
    """One candidate's probes: the model and key, then (when declared) structured output."""
    where = f"candidates/{candidate.name}"
    ask = ChatRequest(messages=[{"role": "user", "content": _ASK}],
                      max_tokens=PROBE_MAX_TOKENS, temperature=0.0)  # fmt: skip
    result = await _send(provider, ask, services, _Recorder(services, candidate.name, "model"))
    if result.error_class == "timeout":
        raise InputError(
            f"preflight: the server of candidate {candidate.name!r} ({candidate.base_url}) did "
            f"not answer one request within timeout_s = {services.timeout_s:g} s: the probe "
            f"(at most {PROBE_MAX_TOKENS} tokens) was sent alone, before any trial, and got no "
            "complete response in that time. The server is slow or stalled, not known to be "
            "unreachable: raise timeout_s (quick paths: --timeout) or free the server",
            location=where,
        )
    if result.error_class is not None or result.reply is None:
        raise InputError(
            f"preflight: candidate {candidate.name!r} (model {candidate.model!r} at "
            f"{candidate.base_url}) failed before any trial was sent: {_message(result)}"
            f"{server_hint(candidate, result)}{SKIP_PREFLIGHT_HINT}",
            location=where,
        )
    if not structured_output:
        return
    token = f"tb-{secrets.token_hex(4)}"
    constrained = ChatRequest(
        messages=[{"role": "user", "content": "Say hello."}],
        response_format={"type": "json_schema",
                         "json_schema": {"name": "preflight", "schema": probe_schema(token),
                                         "strict": True}},
        max_tokens=PROBE_MAX_TOKENS, temperature=0.0,
    )  # fmt: skip
    recorder = _Recorder(services, candidate.name, "structured_output", token=token)
    result = await _send(provider, constrained, services, recorder)
    if result.error_class is not None or result.reply is None:
        raise InputError(
            f"preflight: candidate {candidate.name!r} refused structured output "
            f"(answer_extraction structured_output): {_message(result)}",
            location=where,
        )
    if not honours_schema(result.reply.text, token):
        text = result.reply.text or ""
        raise InputError(
            f"preflight: candidate {candidate.name!r} accepted response_format but did not "
            f'honour it (asked for the object {{"preflight": "{token}"}}, got '
            f"{text[:120]!r}); declare another answer_extraction or use a server that "
            "constrains decoding",
            location=where,
        )


async def _send(
    provider: ChatProvider, request: ChatRequest, services: RunServices, recorder: _Recorder
) -> AttemptResult:
    """One probe under the run's retry policy (as a trial's call); its final result, redacted.

    A 429 or a 5xx is sent again after the backoff (Retry-After honoured), up to the trials'
    `transport_max_retries`, each attempt bounded by the per-call `timeout_s` and recorded; only
    the last attempt's failure stops the run. Probe retries are not counted among the run's
    transport retries (those are the trials').
    """

    def cancelled(started: float) -> AttemptResult:
        return AttemptResult(
            request_body={}, requested_model=provider.requested_model, request_json=None,
            endpoint=provider.endpoint, error_class="cancelled",
            error_message="the run was stopped while the probe was in flight",
            latency_s=time.perf_counter() - started,
        )  # fmt: skip

    await send_under_policy(provider, request, services, recorder, cancelled=cancelled)
    assert recorder.last is not None  # send_under_policy records every attempt it makes
    return recorder.last


@dataclasses.dataclass(slots=True)
class _Recorder:
    """Records each attempt of one probe as a `preflight` event, redacted before anything reads it.

    `token`: the structured-output probe's expected value; each of its successful attempts is
    recorded with `honoured` (whether the reply is exactly the probe object).
    """

    services: RunServices
    candidate: str
    check: str
    token: str | None = None
    last: AttemptResult | None = None
    """The last attempt, redacted: what the probe concludes from."""
    attempts: int = 0

    def __call__(self, kind: str, started_at: str, result: AttemptResult) -> None:
        result = self.last = _redacted(result, self.services.secrets)
        self.attempts += 1
        extra: dict[str, Any] = {}
        if self.token is not None:
            text = result.reply.text if result.reply is not None else None
            extra["honoured"] = result.error_class is None and honours_schema(text, self.token)
        _record(self.services.ledger, self.candidate, self.check, result,
                attempt=self.attempts, kind=kind, started_at=started_at, **extra)  # fmt: skip


def _redacted(result: AttemptResult, secret_values: tuple[str, ...]) -> AttemptResult:
    """`result` with every key replaced in each text a server sent back (it may echo one)."""
    if not secret_values:
        return result
    reply = result.reply
    if reply is not None:
        reply = dataclasses.replace(
            reply,
            text=redact(reply.text, secret_values),
            reported_model=redact(reply.reported_model, secret_values),
            refusal=redact(reply.refusal, secret_values),
        )
    return dataclasses.replace(
        result,
        reply=reply,
        raw_response=redact(result.raw_response, secret_values),
        error_message=redact(result.error_message, secret_values),
        reported_model=redact(result.reported_model, secret_values),
    )


def _record(
    ledger: Ledger, candidate: str, check: str, result: AttemptResult, **extra: Any
) -> None:
    ledger.event(
        "preflight",
        {
            "candidate": candidate,
            "check": check,
            "http_status": result.http_status,
            "error_class": result.error_class,
            "error_message": result.error_message,
            "reported_model": result.reported_model,
            "reply": result.reply.text if result.reply else None,
            "latency_s": result.latency_s,
            "retry_after_s": result.retry_after_s,
            **extra,
        },
    )


def stop_reason(seen: list[str | None], limit: int, row: dict[str, Any]) -> str | None:
    """Why a candidate stops after this finished trial row, or None (it goes on).

    `seen` holds the candidate's first finished trials' client errors (None for any other
    result) and grows here up to `limit`; when all `limit` of them are one and the same client
    error, retrying the rest would only repeat it (`retry.stop_after_client_errors`).
    """
    if limit == 0 or len(seen) >= limit:
        return None
    failed = row["status"] != "completed" and row.get("error_class") == "client_error"
    seen.append(f"client_error: {row.get('error')}" if failed else None)
    if len(seen) == limit and seen[0] is not None and len(set(seen)) == 1:
        return (f"its first {limit} trials all failed with the same client error "
                f"({seen[0]}); its remaining trials were not run")  # fmt: skip
    return None


def structured(track: Any, spec: ExperimentSpec) -> bool:
    """The track's own answer: does its spec declare server-side structured output?"""
    asks = getattr(track, "requires_structured_output", None)
    return bool(asks and asks(spec))
