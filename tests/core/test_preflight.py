"""Preflight: one small request per API candidate, alone before the first trial, never a trial.

No trial is sent before the probes pass; a failed probe stops the run with none sent.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tests.rtb.test_review_track import small_corpus, spec_text
from tests.support.cli import invoke
from tests.support.openai_server import (
    PREFLIGHT_ASK,
    Behaviour,
    OpenAIServer,
    drop_connection,
    openai_server,  # noqa: F401
    reply,
)

from trustbench.core import read_ledger
from trustbench.core._context import honours_schema

NOT_FOUND = '{"error": {"message": "The model `gpt-4o-mimi` does not exist", "code": 404}}'


def _llm(base_url: str, model: str = "m") -> str:
    return (f'[[candidates]]\nname = "llm"\nkind = "openai_chat"\nmodel = "{model}"\n'
            f'base_url = "{base_url}"\n')  # fmt: skip


def _frozen(
    tmp_path: Path,
    base_url: str,
    options: str = "",
    retry: str = "retry = { transport_max_retries = 0 }",
    timeout_s: float = 5.0,
) -> Path:
    small_corpus(tmp_path / "corpus")
    text = spec_text(_llm(base_url), extra=retry)
    text = text.replace("timeout_s = 5.0", f"timeout_s = {timeout_s}")
    if options:
        text = text.replace("[track_options]\n", f"[track_options]\n{options}\n")
    (tmp_path / "spec.toml").write_text(text)
    run_dir = tmp_path / "run"
    code, out = invoke("freeze", str(tmp_path / "spec.toml"), "--out", str(run_dir))
    assert code == 0, out
    return run_dir


def _preflight_events(run_dir: Path) -> list[dict[str, Any]]:
    events = read_ledger(run_dir).events
    return [json.loads(e["data"]) if isinstance(e["data"], str) else e["data"]
            for e in events if e["kind"] == "preflight"]  # fmt: skip


def _is_probe(body: Any) -> bool:
    return body["messages"][-1]["content"] == PREFLIGHT_ASK


def test_a_model_id_typo_stops_the_run_with_no_trial_finished_and_the_servers_message(
    tmp_path: Path,
    openai_server: OpenAIServer,  # noqa: F811
) -> None:
    openai_server.script(lambda body, n: Behaviour("status", status=404, body=NOT_FOUND))
    run_dir = _frozen(tmp_path, openai_server.base_url)
    code, message = invoke("run", str(run_dir), "--quiet")
    assert code == 2
    assert "does not exist" in message and "'llm'" in message and "HTTP 404" in message
    ledger = read_ledger(run_dir)
    assert ledger.trials == []
    assert [e["check"] for e in _preflight_events(run_dir)] == ["model"]
    assert sum(_is_probe(r.body) for r in openai_server.requests) == 1


def test_a_failed_preflight_sends_no_trial_request(
    tmp_path: Path,
    openai_server: OpenAIServer,  # noqa: F811
) -> None:
    # The probe goes out alone and fails: no trial was sent, so none waits in the ledger.
    def late_probe(body: Any, n: int) -> Behaviour:
        if _is_probe(body):
            return Behaviour("status", status=404, body=NOT_FOUND, latency_s=0.2)
        return reply("not a finding")

    openai_server.script(late_probe)
    run_dir = _frozen(tmp_path, openai_server.base_url)
    assert invoke("run", str(run_dir), "--quiet")[0] == 2
    ledger = read_ledger(run_dir)
    assert ledger.trials == [] and ledger.attempts == []
    assert all(_is_probe(r.body) for r in openai_server.requests)


def test_the_probe_goes_out_alone_and_every_trial_after_its_answer(
    tmp_path: Path,
    openai_server: OpenAIServer,  # noqa: F811
) -> None:
    # On a server that answers one request at a time, a probe sent beside the trials queued
    # behind them (issue 55): it is answered before the first trial request arrives.
    probe_latency = 0.3
    arrivals: dict[str, list[float]] = {"probe": [], "trial": []}

    def slow_probe(body: Any, n: int) -> Behaviour:
        arrivals["probe" if _is_probe(body) else "trial"].append(time.monotonic())
        return reply("ready", latency_s=probe_latency) if _is_probe(body) else reply("x")

    openai_server.script(slow_probe)
    run_dir = _frozen(tmp_path, openai_server.base_url)
    code, out = invoke("run", str(run_dir), "--quiet")
    assert code in (0, 1), out
    (probe_at,) = arrivals["probe"]
    assert arrivals["trial"] and min(arrivals["trial"]) >= probe_at + probe_latency
    ledger = read_ledger(run_dir)
    (passed,) = [e for e in ledger.events if e["kind"] == "preflight"]
    assert all(t["seq"] > passed["seq"] for t in ledger.trials)


def test_a_probe_with_no_answer_within_the_timeout_stops_the_run_saying_the_server_is_slow(
    tmp_path: Path,
    openai_server: OpenAIServer,  # noqa: F811
) -> None:
    openai_server.script(lambda body, n: reply("ready", latency_s=1.0) if _is_probe(body) else None)
    run_dir = _frozen(tmp_path, openai_server.base_url, timeout_s=0.3)
    code, message = invoke("run", str(run_dir), "--quiet")
    assert code == 2
    assert "did not answer one request within timeout_s = 0.3 s" in message
    assert "sent alone" in message and "unreachable" in message  # "not known to be unreachable"
    assert read_ledger(run_dir).attempts == []


def test_no_preflight_runs_the_trials_to_their_recorded_failure(
    tmp_path: Path,
    openai_server: OpenAIServer,  # noqa: F811
) -> None:
    openai_server.script(lambda body, n: Behaviour("status", status=404, body=NOT_FOUND))
    run_dir = _frozen(tmp_path, openai_server.base_url)
    code, _ = invoke("run", str(run_dir), "--quiet", "--no-preflight")
    assert code == 3
    assert _preflight_events(run_dir) == []
    assert read_ledger(run_dir).trials


def test_a_passing_preflight_is_an_event_not_a_trial_or_an_attempt(
    tmp_path: Path,
    openai_server: OpenAIServer,  # noqa: F811
) -> None:
    run_dir = _frozen(tmp_path, openai_server.base_url)
    code, out = invoke("run", str(run_dir), "--quiet")
    ledger = read_ledger(run_dir)
    planned = len(ledger.trials)
    assert planned > 0
    assert len(ledger.attempts) == planned  # one attempt per trial: the probe is not one
    assert len(openai_server.requests) == planned + 1
    assert [e["check"] for e in _preflight_events(run_dir)] == ["model"]
    assert code in (0, 1), out


def test_structured_output_on_a_server_that_ignores_response_format_is_refused(
    tmp_path: Path,
    openai_server: OpenAIServer,  # noqa: F811
) -> None:
    # The echo server accepts any field and answers in prose: it honours nothing.
    run_dir = _frozen(tmp_path, openai_server.base_url, 'answer_extraction = "structured_output"')
    code, message = invoke("run", str(run_dir), "--quiet")
    assert code == 2
    assert "did not honour" in message and "response_format" in message
    assert read_ledger(run_dir).trials == []
    (probe,) = [
        r.body
        for r in openai_server.requests
        if "response_format" in r.body
        and r.body["response_format"].get("json_schema", {}).get("name") == "preflight"
    ]
    assert probe["response_format"]["type"] == "json_schema"


def test_structured_output_on_a_server_that_honours_it_passes(
    tmp_path: Path,
    openai_server: OpenAIServer,  # noqa: F811
) -> None:
    def constrained(body: Any, n: int) -> Behaviour | None:
        fmt = body.get("response_format")
        if isinstance(fmt, dict) and fmt.get("json_schema", {}).get("name") == "preflight":
            token = fmt["json_schema"]["schema"]["properties"]["preflight"]["enum"][0]
            return reply(json.dumps({"preflight": token}))
        return None

    openai_server.script(constrained)
    run_dir = _frozen(tmp_path, openai_server.base_url, 'answer_extraction = "structured_output"')
    invoke("run", str(run_dir), "--quiet")
    events = _preflight_events(run_dir)
    assert [e["check"] for e in events] == ["model", "structured_output"]
    assert events[1]["honoured"] is True
    assert read_ledger(run_dir).trials


def test_a_cheating_probe_reply_is_not_taken_for_honoured_structured_output() -> None:
    assert honours_schema('{"preflight": "tb-1234"}', "tb-1234")
    assert not honours_schema('{"preflight": "tb-0000"}', "tb-1234")
    assert not honours_schema('Sure: {"preflight": "tb-1234"}', "tb-1234")
    assert not honours_schema('{"preflight": "tb-1234", "extra": 1}', "tb-1234")
    assert not honours_schema(None, "tb-1234")


def test_a_candidate_whose_first_trials_fail_with_one_client_error_is_stopped(
    tmp_path: Path,
    openai_server: OpenAIServer,  # noqa: F811
) -> None:
    openai_server.script(lambda body, n: Behaviour("status", status=404, body=NOT_FOUND))
    small_corpus(tmp_path / "corpus")
    text = spec_text(
        _llm(openai_server.base_url),
        trials=3,
        extra="retry = { transport_max_retries = 0, stop_after_client_errors = 2 }",
    )
    text = text.replace("concurrency = 4", "concurrency = 1")  # fmt: skip
    (tmp_path / "spec.toml").write_text(text)
    run_dir = tmp_path / "run"
    assert invoke("freeze", str(tmp_path / "spec.toml"), "--out", str(run_dir))[0] == 0
    code, out = invoke("run", str(run_dir), "--quiet", "--no-preflight")
    ledger = read_ledger(run_dir)
    assert len(ledger.trials) == 2  # the rest stay unrun ("not run"), never failed or zero
    stopped = [e for e in ledger.events if e["kind"] == "candidate_stopped"]
    assert len(stopped) == 1
    assert code == 3 and "stopped" in out and "does not exist" in out


def test_different_client_errors_do_not_stop_a_candidate(
    tmp_path: Path,
    openai_server: OpenAIServer,  # noqa: F811
) -> None:
    def varying(body: Any, n: int) -> Behaviour:
        return Behaviour("status", status=400, body=f'{{"error": "bad request {n}"}}')

    openai_server.script(varying)
    small_corpus(tmp_path / "corpus")
    text = spec_text(
        _llm(openai_server.base_url),
        extra="retry = { transport_max_retries = 0, stop_after_client_errors = 2 }",
    )
    (tmp_path / "spec.toml").write_text(text)
    run_dir = tmp_path / "run"
    assert invoke("freeze", str(tmp_path / "spec.toml"), "--out", str(run_dir))[0] == 0
    invoke("run", str(run_dir), "--quiet", "--no-preflight")
    ledger = read_ledger(run_dir)
    assert not [e for e in ledger.events if e["kind"] == "candidate_stopped"]
    assert len(ledger.trials) > 2


ONE_RETRY = "retry = { transport_max_retries = 1, backoff_base_s = 0.0 }"


def test_a_probe_whose_connection_drops_is_retried_under_the_policy_and_both_are_recorded(
    tmp_path: Path,
    openai_server: OpenAIServer,  # noqa: F811
) -> None:
    # A connection the server dropped says nothing about the model or the key (a pooled one a
    # server closed looks the same): the probe is retried as a trial's call would be.
    sent: list[int] = []

    def first_dropped(body: Any, number: int) -> Behaviour:
        if not _is_probe(body):
            return reply("x")
        sent.append(number)
        return drop_connection() if len(sent) == 1 else reply("ready")

    openai_server.script(first_dropped)
    run_dir = _frozen(tmp_path, openai_server.base_url, retry=ONE_RETRY)
    code, out = invoke("run", str(run_dir), "--quiet")
    assert code in (0, 1), out
    checks = _preflight_events(run_dir)
    assert [(e["check"], e["attempt"], e["kind"]) for e in checks] == [
        ("model", 1, "first"),
        ("model", 2, "transport_retry"),
    ]
    assert checks[0]["error_class"] == "connection_error" and checks[1]["error_class"] is None


def test_a_probe_dropped_at_every_attempt_stops_the_run_before_any_trial(
    tmp_path: Path,
    openai_server: OpenAIServer,  # noqa: F811
) -> None:
    openai_server.script(lambda body, n: drop_connection() if _is_probe(body) else reply("x"))
    run_dir = _frozen(tmp_path, openai_server.base_url, retry=ONE_RETRY)
    code, message = invoke("run", str(run_dir), "--quiet")
    assert code == 2 and "connection_error" in message, message
    assert read_ledger(run_dir).trials == [] and len(_preflight_events(run_dir)) == 2
