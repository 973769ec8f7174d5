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
`concurrency` attempts stay in the ledger, never counted, and the next `run` marks their
executions abandoned, as after a killed run.

A failure raises `InputError` (exit 2) naming the candidate and quoting the server's message.
Every probe is recorded as a ledger *event* (`preflight`), never as an attempt or a trial,
so it counts in no denominator. `trustbench run --no-preflight` skips it. A server can echo
the key it received (in `model`, the reply or an error body): every probe's result is redacted
with the run's secret values as soon as it arrives, as an attempt's is (`RunContext.redact`),
so neither the event nor the failure message quotes a key.

During the run, `stop_reason` stops a candidate whose first N trials all failed with one and
the same client error (`retry.stop_after_client_errors`, default 5): its remaining trials
stay unrun ("not run", never zero) and the run says why.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from trustbench.core._ledger import Ledger
from trustbench.core._spec import ExperimentSpec
from trustbench.errors import InputError
from trustbench.providers._redact import redact
from trustbench.providers._types import AttemptResult, ChatProvider, ChatRequest

if TYPE_CHECKING:
    from trustbench.core._context import RunServices
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
    ledger: Ledger,
    structured_output: bool = False,
    secret_values: tuple[str, ...] = (),
) -> None:
    """Probe every API candidate once (twice with structured output); raise on a failure.

    The candidates are probed at once (each candidate's probes in turn), so a run with several
    endpoints waits one or two round trips, not one or two per candidate. When several fail,
    the first in the spec's order is the one raised.

    Args:
        spec: The frozen spec (candidates, `timeout_s`).
        providers: The run's providers by candidate name.
        ledger: Where each probe is recorded as a `preflight` event.
        structured_output: The track declared server-side structured output: also check that
            the server honours `response_format` (see the module docstring).
        secret_values: The run's API keys, replaced by `[REDACTED]` in everything a probe
            brings back before it is recorded or quoted.

    Raises:
        InputError: a candidate's probe failed; the message names it and quotes the server.
    """
    probes = [
        _probe(candidate, provider, spec.timeout_s, ledger, structured_output, secret_values)
        for candidate, provider in probed(spec, providers)
    ]
    outcomes = await asyncio.gather(*probes, return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome


async def _probe(
    candidate: Any,
    provider: ChatProvider,
    timeout_s: float,
    ledger: Ledger,
    structured_output: bool,
    secret_values: tuple[str, ...],
) -> None:
    """One candidate's probes: the model and key, then (when declared) structured output."""
    where = f"candidates/{candidate.name}"
    ask = ChatRequest(messages=[{"role": "user", "content": _ASK}],
                      max_tokens=PROBE_MAX_TOKENS, temperature=0.0)  # fmt: skip
    send = _Sender(provider, timeout_s, ledger, candidate.name, secret_values)
    result = await send(ask, "model")
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
    result = await send(constrained, "structured_output", record_last=False)
    ok = result.error_class is None and result.reply is not None
    honoured = ok and honours_schema(result.reply.text if result.reply else None, token)
    _record(ledger, candidate.name, "structured_output", result, honoured=honoured)
    if not ok:
        raise InputError(
            f"preflight: candidate {candidate.name!r} refused structured output "
            f"(answer_extraction structured_output): {_message(result)}",
            location=where,
        )
    if not honoured:
        text = (result.reply.text if result.reply else "") or ""
        raise InputError(
            f"preflight: candidate {candidate.name!r} accepted response_format but did not "
            f'honour it (asked for the object {{"preflight": "{token}"}}, got '
            f"{text[:120]!r}); declare another answer_extraction or use a server that "
            "constrains decoding",
            location=where,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class _Sender:
    """Sends one candidate's probes and records them, redacted."""

    provider: ChatProvider
    timeout_s: float
    ledger: Ledger
    name: str
    secret_values: tuple[str, ...]

    async def __call__(
        self, request: ChatRequest, probe: str, *, record_last: bool = True
    ) -> AttemptResult:
        """Send a probe; one that met a connection the server had closed is sent once more.

        The pool resends such a request on a fresh connection (`providers._pool`), as the
        runner's retry of a trial would: a pooled connection a server dropped says nothing about
        the model or the key. Every send is recorded (the last one by the caller when
        `record_last` is false, with what it concluded), and redacted before anything reads it.
        """
        result = _redacted(await self.provider.send(request, self.timeout_s), self.secret_values)
        if result.error_class == "connection_error":
            _record(self.ledger, self.name, probe, result)
            result = await self.provider.send(request, self.timeout_s)
            result = _redacted(result, self.secret_values)
        if record_last:
            _record(self.ledger, self.name, probe, result)
        return result


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
    structured_output = structured(track, spec)
    return asyncio.create_task(
        preflight(spec, providers, services.ledger, structured_output, services.secrets)
    )


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
