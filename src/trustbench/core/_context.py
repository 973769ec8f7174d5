"""The per-trial context a track receives: settings, a recorded provider client, call recording.

A new `TrialContext` is made for every trial (and a fresh provider via `for_trial`), so nothing a
candidate saw or said in one trial can reach another. Every call made through it becomes an
attempt row in the ledger the moment it finishes, with its raw response, so grading can be redone
offline from the ledger alone.
"""

from __future__ import annotations

import inspect
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trustbench._canonical import canonical_json, sha256_hex
from trustbench.core._clock import utc_now
from trustbench.core._ledger import Ledger
from trustbench.core._pacing import TokenBucket, backoff_delay
from trustbench.core._spec import CandidateSpec, RetryPolicy
from trustbench.core._track import TrialKey
from trustbench.providers._redact import redact
from trustbench.providers._types import AttemptResult, ChatProvider, ChatReply, ChatRequest

if TYPE_CHECKING:  # asyncio is imported where a run uses it: `--help` imports this module
    import asyncio

    from trustbench.core._manifest import Manifest


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
        The successful attempt's result, or the last failed one (not retryable, or the retries
        spent); the caller decides what a failure means.
    """
    import asyncio

    policy = services.policy
    limiter = services.limiters.get(provider.endpoint) if provider.endpoint else None
    kind = first_kind
    retry_number = 0
    while True:
        if limiter is not None:
            await limiter.acquire()
        started_at = utc_now()
        started = time.perf_counter()
        try:
            result = await provider.send(request, services.timeout_s)
        except asyncio.CancelledError:
            # A time limit, a failed preflight or a shutdown ended this call mid-flight: the
            # attempt happened, so it is recorded before the cancellation goes on.
            record(kind, started_at, cancelled(started))
            raise
        record(kind, started_at, result)
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
        await asyncio.sleep(delay)
