"""Preflight: one small request per API candidate beside the first trials, failing fast.

A model-id typo used to run every planned trial to failure (720 of them, exit 3) while the
server's own message (`The model ... does not exist`, `Server is pinned to ...`) sat unread
in the ledger. At the start of a run, each API candidate (`openai_chat`,
`anthropic_messages`) gets one short request through its provider's public call
(`provider.send`): the model is known and the key accepted when it answers. When the track
declares server-side structured output (`Track.requires_structured_output`, optional), a
second request asks for JSON constrained to a probe schema with a one-value enum the prompt
never mentions: a server that honours `response_format` returns exactly that object; one
that accepts the field and ignores it (as `transformers serve` does, HTTP 200) returns free
text, and is refused.

The probes go out with the first trials (each candidate's on a connection of its own), so
they add no round trip before the run: at 1.5 s a call, probing first made a short run wait
1.5 s more (issue 35). No trial finishes until every probe passed (the runner holds each
finished trial back, `_runner._Execution.cleared`); a failed probe cancels the trials in
flight, so the run stops with no trial finished. Their requests were sent, though: up to
`concurrency` attempts stay in the ledger (error class `cancelled`, never `trial_timeout`),
never counted, and the next `run` marks their executions abandoned, as after a killed run.

A probe is sent under the spec's retry policy, through the same loop as a trial's call
(`_context.send_under_policy`): a 429 or a 5xx (any class in `retry_on`) is sent again after
the backoff, Retry-After honoured, up to `transport_max_retries` times, each attempt bounded by
the per-call `timeout_s` (never by `trial_timeout_s`, which is a trial's). One 429 used to stop
a run that, without the preflight, completed every trial through its retries. Only the last
attempt's failure raises `InputError` (exit 2), naming the candidate and quoting the server's
message.

Every probe attempt is recorded as a ledger *event* (`preflight`, with its `attempt` number and
`kind`: `first` or `transport_retry`), never as an attempt row or a trial, so it counts in no
denominator. `trustbench run --no-preflight` skips it. A server can echo the key it received
(in `model`, the reply or an error body, in any encoding): every probe's result is redacted
with the run's secret values as soon as it arrives, as an attempt's is
(`providers._redact.redact`), so neither the event nor the failure message quotes a key.

During the run, `stop_reason` stops a candidate whose first N trials all failed with one and
the same client error (`retry.stop_after_client_errors`, default 5): its remaining trials
stay unrun ("not run", never zero) and the run says why.
"""

from __future__ import annotations

import dataclasses
import json
import secrets
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from trustbench.core._context import RunServices, send_under_policy
from trustbench.core._ledger import Ledger
from trustbench.core._spec import ExperimentSpec
from trustbench.errors import InputError
from trustbench.providers._redact import redact
from trustbench.providers._types import AttemptResult, ChatProvider, ChatRequest

if TYPE_CHECKING:  # asyncio is imported where a run uses it: `--help` imports this module
    import asyncio

    from trustbench.core._track import Track

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
    if result.error_class is not None or result.reply is None:
        raise InputError(
            f"preflight: candidate {candidate.name!r} (model {candidate.model!r} at "
            f"{candidate.base_url}) failed before any trial finished: {_message(result)} "
            "(trustbench run --no-preflight skips this check)",
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


def probe_connections(spec: ExperimentSpec, probing: bool) -> int:
    """Connections the pool holds for the probes (one per API candidate) beside the trials'."""
    return sum(c.kind in API_KINDS for c in spec.candidates) if probing else 0


def start_preflight(
    track: Track,
    spec: ExperimentSpec,
    providers: dict[str, ChatProvider | None],
    services: RunServices,
) -> asyncio.Task[None]:
    """Start the preflight: a small request per API candidate (events), beside the first trials."""
    import asyncio

    return asyncio.create_task(preflight(spec, providers, services, structured(track, spec)))


async def supervised(
    workers: list[asyncio.Task[None]],
    checking: asyncio.Task[None] | None,
    cleared: asyncio.Event,
) -> None:
    """Wait for the workers, the preflight (when there is one) deciding first.

    The first trials are sent while the preflight's probes are in flight, so the probes cost
    no round trip of their own before the run; no trial finishes until they pass
    (`_Execution.cleared`). A failed preflight (or an interrupted one) cancels every worker,
    so the run stops with no trial finished, and its error is raised.
    """
    import asyncio

    if checking is not None:
        try:
            await checking
        except BaseException:
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
    cleared.set()  # before any worker ran, when there is no preflight
    await asyncio.gather(*workers)
