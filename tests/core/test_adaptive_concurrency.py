"""Adaptive concurrency: a server is never flooded past what it answers within the timeout.

The declared `concurrency` is a ceiling; calls in flight per endpoint halve on a timeout, 429 or
503 (once per burst) and grow back by one after as many answers in a row (AIMD). Against a local
server that answers one request at a time, slower than the timeout allows at concurrency 4, a
run completes its trials instead of timing them all out (issue 55: 0 of 12).
"""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path
from typing import Any

from tests.rtb.test_review_track import small_corpus, spec_text
from tests.support.openai_server import OpenAIServer, probe_reply

from trustbench.core import (
    RetryPolicy,
    RunSummary,
    build_manifest,
    read_ledger,
    read_manifest,
    run_experiment,
    write_manifest,
)
from trustbench.core._context import (
    ALONE_TIMEOUTS_TO_STOP,
    AdaptiveConcurrency,
    RunServices,
    send_under_policy,
)
from trustbench.core._report_run import _concurrency_record  # pyright: ignore[reportPrivateUsage]
from trustbench.providers import AttemptResult, ChatRequest, OpenAIChatProvider, new_session


def _ended(error_class: str | None = None, http_status: int | None = 200) -> AttemptResult:
    return AttemptResult(
        request_body={}, requested_model="m", request_json=None, endpoint="e",
        error_class=error_class, http_status=http_status,
    )  # fmt: skip


async def _burst(gate: AdaptiveConcurrency, endings: list[AttemptResult]) -> None:
    """As many calls as `endings` start together, then end as listed."""
    windows = [await gate.acquire() for _ in endings]
    for window, ended in zip(windows, endings, strict=True):
        assert window is not None  # the gate never stopped
        gate.release(window, ended)


def test_timeouts_of_one_burst_halve_the_limit_once() -> None:
    gate = AdaptiveConcurrency("e", 4)
    asyncio.run(_burst(gate, [_ended("timeout", None)] * 4))
    assert gate.limit == 2
    assert [(c["from"], c["to"]) for c in gate.changes] == [(4, 2)]


def test_a_429_and_a_503_halve_but_a_client_error_does_not() -> None:
    gate = AdaptiveConcurrency("e", 8)
    asyncio.run(_burst(gate, [_ended("client_error", 400)]))
    assert gate.limit == 8
    asyncio.run(_burst(gate, [_ended("rate_limited", 429)]))
    asyncio.run(_burst(gate, [_ended("server_error", 503)]))
    assert gate.limit == 2


def test_the_limit_grows_by_one_after_four_windows_answered_and_never_past_the_ceiling() -> None:
    gate = AdaptiveConcurrency("e", 3)
    asyncio.run(_burst(gate, [_ended("timeout", None)]))
    assert gate.limit == 1
    for _ in range(3):
        asyncio.run(_burst(gate, [_ended()]))
    assert gate.limit == 1  # three answers at limit 1: not yet four windows
    asyncio.run(_burst(gate, [_ended()]))
    assert gate.limit == 2
    for _ in range(4):
        asyncio.run(_burst(gate, [_ended()] * 2))
    assert gate.limit == 3
    for _ in range(8):
        asyncio.run(_burst(gate, [_ended()] * 3))
    assert gate.limit == 3 and [c["to"] for c in gate.changes] == [1, 2, 3]


def test_a_caller_waits_while_the_limit_is_reached() -> None:
    async def scenario() -> list[str]:
        gate = AdaptiveConcurrency("e", 1)
        order: list[str] = []
        window = await gate.acquire()
        assert window is not None
        waiting = asyncio.ensure_future(gate.acquire())
        await asyncio.sleep(0.01)
        order.append("second still waiting" if not waiting.done() else "second ran")
        gate.release(window, _ended())
        await waiting
        order.append("second ran")
        return order

    assert asyncio.run(scenario()) == ["second still waiting", "second ran"]


def test_a_one_at_a_time_server_slower_than_four_in_flight_allow_completes_the_run(
    tmp_path: Path,
) -> None:
    # 0.6 s a request, one at a time: at 4 in flight the last waits 2.4 s, past the 1.5 s
    # timeout. The limit halves on the first timeouts; each timed-out request's connection is
    # closed, so the server drops it instead of answering it to nobody.
    small_corpus(tmp_path / "corpus")
    with OpenAIServer(latency_s=0.6, one_at_a_time=True) as server:
        candidate = (f'[[candidates]]\nname = "llm"\nkind = "openai_chat"\nmodel = "m"\n'
                     f'base_url = "{server.base_url}"\n')  # fmt: skip
        text = spec_text(candidate, extra="retry = { transport_max_retries = 3 }")
        text = text.replace("timeout_s = 5.0", "timeout_s = 1.5")
        (tmp_path / "spec.toml").write_text(text)
        run_dir = tmp_path / "run"
        write_manifest(build_manifest(tmp_path / "spec.toml"), run_dir)
        summary = run_experiment(run_dir, limit=12)
        dropped = server.dropped
    assert summary.completed == 12 and summary.failed == 0
    ledger = read_ledger(run_dir)
    timed_out = [a for a in ledger.attempts if a["error_class"] == "timeout"]
    # Without adaptation 16 of 25 attempts timed out here (11 of 12 trials completed).
    assert 1 <= len(timed_out) <= 4
    assert dropped >= 1  # the server saw timed-out requests go away and dropped them
    concurrency = _concurrency_record(read_manifest(run_dir), ledger)
    assert concurrency["declared"] == 4 and concurrency["lowest"] <= 2
    first = concurrency["changes"][0]
    assert (first["from"], first["to"], first["reason"]) == (4, 2, "timeout")


def _run_on_a_server_too_slow_for_one_call(
    tmp_path: Path, *, retries: int
) -> tuple[RunSummary, Path, list[Any]]:
    """Run a review against a one-at-a-time server that answers the short probe but takes 1 s,
    over `timeout_s` = 0.3 s, for every trial's call: (summary, run folder, trial requests)."""
    small_corpus(tmp_path / "corpus")
    with OpenAIServer(latency_s=1.0, one_at_a_time=True) as server:
        server.script(lambda body, n: probe_reply(body))
        candidate = (f'[[candidates]]\nname = "llm"\nkind = "openai_chat"\nmodel = "m"\n'
                     f'base_url = "{server.base_url}"\n')  # fmt: skip
        text = spec_text(candidate, extra=f"retry = {{ transport_max_retries = {retries} }}")
        (tmp_path / "spec.toml").write_text(text.replace("timeout_s = 5.0", "timeout_s = 0.3"))
        run_dir = tmp_path / "run"
        write_manifest(build_manifest(tmp_path / "spec.toml"), run_dir)
        summary = run_experiment(run_dir)
        sent = [r for r in server.requests if probe_reply(r.body) is None]
    return summary, run_dir, sent


def test_a_server_that_cannot_answer_one_call_alone_stops_the_run_saying_so(
    tmp_path: Path,
) -> None:
    summary, _, _ = _run_on_a_server_too_slow_for_one_call(tmp_path, retries=0)
    why = summary.stopped["llm"]
    assert "did not answer ONE request within timeout_s = 0.3 s" in why
    assert "3 calls in a row, each sent alone" in why and "not known to be unreachable" in why
    assert summary.completed == 0 and summary.failed < summary.planned  # the rest not run


def test_a_server_that_cannot_answer_one_call_alone_is_stopped_at_the_timed_out_call(
    tmp_path: Path,
) -> None:
    # As above, with the default three transport retries: the stop takes effect at the call
    # that made it (the third timing out alone), not when the trials in flight have each
    # waited out their own retries (4 trials x 4 attempts x 0.3 s, plus their backoffs).
    summary, run_dir, sent = _run_on_a_server_too_slow_for_one_call(tmp_path, retries=3)
    assert "did not answer ONE request within timeout_s = 0.3 s" in summary.stopped["llm"]
    ledger = read_ledger(run_dir)
    [stop] = [e for e in ledger.events if e["kind"] == "candidate_stopped"]
    # No call (first or retry) is sent once the candidate is stopped.
    assert [a for a in ledger.attempts if a["started_at"] > stop["at"]] == []
    # 4 in flight, 2 after the halving, then 3 alone: at most 9 requests, where waiting out
    # every trial's retries sent 16 (4 trials in flight x 4 attempts).
    assert len(sent) <= 9
    # The trials in flight are recorded failed (never approvals, never dropped), the rest not
    # run, exactly as the stop records them.
    assert summary.completed == 0 and summary.failed == len(ledger.trials) <= 4
    assert {t["error_class"] for t in ledger.trials} == {"timeout"}
    assert summary.failed < summary.planned


class _Scripted:
    """A provider at a shared endpoint whose every call ends, after `delay_s`, as scripted."""

    def __init__(self, endpoint: str, delay_s: float, error_class: str) -> None:
        self.endpoint: str | None = endpoint
        self.requested_model: str | None = "m"
        self.delay_s = delay_s
        self.error_class = error_class
        self.sent = 0

    def for_trial(self) -> _Scripted:
        return self

    async def send(self, request: ChatRequest, timeout_s: float) -> AttemptResult:
        self.sent += 1
        await asyncio.sleep(self.delay_s)
        return _ended(self.error_class, None)


def test_a_stop_cancels_the_call_in_flight_and_sends_no_waiting_call_or_retry() -> None:
    # One endpoint, four calls: `slow` (a real server that would take 5 s) in flight, `last`
    # about to time out alone for the third time in a row, `backing_off` waiting 5 s before a
    # retry, `queued` waiting for room. The third timeout stops the endpoint at once.
    policy = RetryPolicy(transport_max_retries=3, backoff_base_s=5.0, jitter="none")
    recorded: dict[str, list[AttemptResult]] = {}
    stops: list[str] = []

    async def call(name: str, provider: Any, services: RunServices) -> AttemptResult:
        return await send_under_policy(
            provider, ChatRequest(messages=[{"role": "user", "content": name}]), services,
            lambda kind, at, result: recorded.setdefault(name, []).append(result),
            cancelled=lambda started: _ended("cancelled", None),
        )  # fmt: skip

    async def scenario(server: OpenAIServer) -> dict[str, AttemptResult]:
        async with new_session(4) as session:
            slow = OpenAIChatProvider(session, base_url=server.base_url, model="m")
            endpoint = slow.endpoint or ""
            gate = AdaptiveConcurrency(endpoint, 2)
            gate.on_stop = lambda: stops.append("stopped")
            services = RunServices(
                ledger=None,  # pyright: ignore[reportArgumentType] - calls record to `recorded`
                policy=policy, timeout_s=10.0, rng=random.Random(1), secrets=(),
                concurrency={endpoint: gate},
            )  # fmt: skip
            backing_off = _Scripted(endpoint, 0.0, "server_error")
            calls = {"backing_off": asyncio.create_task(call("backing_off", backing_off, services))}
            await asyncio.sleep(0.05)  # its first attempt failed: it rests before its retry
            calls["slow"] = asyncio.create_task(call("slow", slow, services))
            last = _Scripted(endpoint, 0.2, "timeout")
            calls["last"] = asyncio.create_task(call("last", last, services))
            await asyncio.sleep(0.05)
            # As after two calls timed out alone, `slow` in flight since before the limit fell.
            gate.limit, gate.alone_timeouts = 1, ALONE_TIMEOUTS_TO_STOP - 1
            queued = _Scripted(endpoint, 0.0, "timeout")
            calls["queued"] = asyncio.create_task(call("queued", queued, services))
            ended = {name: await task for name, task in calls.items()}
            assert queued.sent == 0 and backing_off.sent == 1 and last.sent == 1
            return ended

    with OpenAIServer(latency_s=5.0, one_at_a_time=True) as server:
        ended = asyncio.run(scenario(server))
        for _ in range(100):  # the server notices the closed connection on its own loop
            if server.dropped:
                break
            time.sleep(0.01)
        dropped = server.dropped
    assert stops == ["stopped"]  # `slow` cancelled, not waited out (its record below)
    assert dropped == 1  # the cancelled call's connection was closed: the server dropped it
    [cancelled] = recorded["slow"]
    assert cancelled.error_class == "cancelled"
    assert "cancelled mid-flight: the server at" in (cancelled.error_message or "")
    assert "so its candidates were stopped" in (ended["slow"].error_message or "")
    assert [r.error_class for r in recorded["last"]] == ["timeout"]  # no retry sent
    assert ended["last"] is recorded["last"][0]
    assert [r.error_class for r in recorded["backing_off"]] == ["server_error"]
    assert "queued" not in recorded  # nothing sent, nothing recorded
    assert {r.error_class for r in ended.values()} == {"timeout", "server_error"}
