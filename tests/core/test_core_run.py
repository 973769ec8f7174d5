from __future__ import annotations

import asyncio
import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from tests.support.cli import ALPHA_KEY, invoke
from tests.support.openai_server import (
    OpenAIServer,
    client_error,
    drop_connection,
    malformed_json,
    rate_limited,
    reply,
    server_error,
    stall,
)

from trustbench.core import (
    build_manifest,
    read_ledger,
    register_track,
    run_experiment,
    trial_order,
    verify_run,
    write_manifest,
)
from trustbench.errors import CheckFailed


def _freeze(spec: Path, run_dir: Path) -> Path:
    write_manifest(build_manifest(spec), run_dir)
    return run_dir


def test_two_candidates_with_three_trials_run_to_completion_against_the_local_server(
    experiment: Path, tmp_path: Path, openai_server: OpenAIServer
) -> None:
    run_dir = _freeze(experiment, tmp_path / "run")
    summary = run_experiment(run_dir)
    assert (summary.planned, summary.completed, summary.failed) == (24, 24, 0)
    ledger = read_ledger(run_dir)
    assert Counter(t["candidate"] for t in ledger.trials) == {"alpha": 12, "beta": 12}
    assert {t["trial_index"] for t in ledger.trials} == {0, 1, 2}
    for trial in ledger.trials:
        assert trial["outcome"]["reply"] == f"echo: prompt of {trial['case_id']}"
    assert verify_run(run_dir).ok
    # One request per trial, plus each API candidate's one preflight probe (never a trial).
    assert len(openai_server.requests) == 24 + 2


def test_attempts_record_usage_cost_and_requested_and_reported_model(
    experiment: Path, tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.on("case-000", reply("fine", model="alpha-model-2026-01-01"))
    run_dir = _freeze(experiment, tmp_path / "run")
    run_experiment(run_dir)
    attempts = read_ledger(run_dir).attempts
    alpha = [a for a in attempts if a["trial_id"].split("/")[1] == "alpha"]
    beta = [a for a in attempts if a["trial_id"].split("/")[1] == "beta"]
    for attempt in alpha:
        assert attempt["prompt_tokens"] > 0 and attempt["completion_tokens"] > 0
        expected = (attempt["prompt_tokens"] * 1.0 + attempt["completion_tokens"] * 2.0) / 1e6
        assert attempt["cost_usd"] == pytest.approx(expected)
        assert attempt["requested_model"] == "alpha-model"
        assert attempt["latency_s"] >= 0 and attempt["http_status"] == 200
        assert attempt["request_digest"] and attempt["raw_response"]
    assert all(a["cost_usd"] is None for a in beta), "no price declared: cost unknown, not 0"
    assert "alpha-model-2026-01-01" in {a["reported_model"] for a in attempts}


def test_transport_faults_are_retried_as_attempts_with_their_error_class_and_no_trial_is_lost(
    experiment: Path, tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.on("case-001", rate_limited("0.01"), server_error(), drop_connection())
    openai_server.on("case-002", stall(0.8))
    experiment.write_text(experiment.read_text().replace("timeout_s = 2.0", "timeout_s = 0.4"))
    run_dir = _freeze(experiment, tmp_path / "run")
    summary = run_experiment(run_dir)
    assert summary.completed == 24 and summary.transport_retries == 4
    ledger = read_ledger(run_dir)
    assert len(ledger.trials) == 24
    failures = Counter(a["error_class"] for a in ledger.attempts if a["error_class"])
    assert failures == {"rate_limited": 1, "server_error": 1, "connection_error": 1, "timeout": 1}
    kinds = Counter(a["kind"] for a in ledger.attempts)
    assert kinds == {"first": 24, "transport_retry": 4}
    limited = next(a for a in ledger.attempts if a["error_class"] == "rate_limited")
    assert limited["http_status"] == 429 and "rate limited" in limited["raw_response"]


def test_trial_whose_attempts_all_fail_is_recorded_failed_with_its_error(
    experiment: Path, tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.script(
        lambda body, n: server_error(503) if "case-003" in json.dumps(body) else None
    )
    run_dir = _freeze(experiment, tmp_path / "run")
    summary = run_experiment(run_dir)
    assert (summary.completed, summary.failed) == (18, 6)
    ledger = read_ledger(run_dir)
    failed = [t for t in ledger.trials if t["status"] == "failed"]
    assert {t["case_id"] for t in failed} == {"case-003"}
    for trial in failed:
        assert trial["error_class"] == "server_error" and trial["outcome"] is None
        assert len(ledger.attempts_of(trial["trial_id"])) == 1 + 3  # first + transport cap
    assert verify_run(run_dir).ok


def test_malformed_json_body_is_recorded_raw_and_never_becomes_a_reply(
    experiment: Path, tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.on("case-000", malformed_json('{"choices": [{"message": {"content": "permit'))
    run_dir = _freeze(experiment, tmp_path / "run")
    run_experiment(run_dir)
    ledger = read_ledger(run_dir)
    bad = next(a for a in ledger.attempts if a["error_class"] == "malformed_response")
    assert bad["raw_response"] == '{"choices": [{"message": {"content": "permit'
    trial = next(t for t in ledger.trials if t["trial_id"] == bad["trial_id"])
    assert trial["status"] == "failed" and trial["error_class"] == "malformed_response"


def test_client_error_is_not_retried(
    experiment: Path, tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.on("case-000", client_error(400))
    run_dir = _freeze(experiment, tmp_path / "run")
    summary = run_experiment(run_dir)
    assert summary.transport_retries == 0 and summary.failed == 1


def test_api_key_reaches_the_server_only_in_the_header_and_never_the_ledger(
    experiment: Path, tmp_path: Path, openai_server: OpenAIServer
) -> None:
    run_dir = _freeze(experiment, tmp_path / "run")
    run_experiment(run_dir)
    auth = {r.headers.get("authorization") for r in openai_server.requests}
    assert auth == {f"Bearer {ALPHA_KEY}", None}
    for path in run_dir.iterdir():
        assert ALPHA_KEY.encode() not in path.read_bytes(), path.name


def test_trials_of_all_candidates_run_interleaved_in_the_seeded_order(
    experiment: Path, tmp_path: Path
) -> None:
    run_dir = _freeze(experiment, tmp_path / "run")
    run_experiment(run_dir)
    trials = read_ledger(run_dir).trials
    by_position = sorted(trials, key=lambda t: t["order_position"])
    manifest_keys = sorted(trials, key=lambda t: t["trial_id"])
    assert [t["trial_id"] for t in by_position] != [t["trial_id"] for t in manifest_keys]
    first_half = Counter(t["candidate"] for t in by_position[:12])
    assert first_half["alpha"] > 0 and first_half["beta"] > 0
    from trustbench.core import TrialKey

    keys = [TrialKey(t["case_id"], t["candidate"], t["trial_index"]) for t in trials]
    assert trial_order(keys, 11) == trial_order(list(reversed(keys)), 11)
    assert trial_order(keys, 11) != trial_order(keys, 12)


def test_each_trial_starts_with_a_fresh_inprocess_candidate(tmp_path: Path) -> None:
    from tests.support.echo_track import write_corpus

    write_corpus(tmp_path / "corpus", 3)
    spec = tmp_path / "exp.toml"
    spec.write_text(
        'suite = "test"\ntrack = "echo"\ntrials_per_case = 4\n[corpus]\npath = "corpus"\n'
        '[[candidates]]\nname = "echoer"\nkind = "inprocess"\n'
        'entry = "tests.support.echo_track:echo_responder"\nsettings = { prefix = "> " }\n'
    )
    run_dir = _freeze(spec, tmp_path / "run")
    manifest = build_manifest(spec)
    assert any(f.role == "candidate_code" for f in manifest.files)
    run_experiment(run_dir)
    ledger = read_ledger(run_dir)
    assert len(ledger.trials) == 12
    for trial in ledger.trials:
        assert trial["outcome"]["reply"].endswith("(calls in this context: 1)")
    assert all(a["http_status"] is None and a["raw_response"] for a in ledger.attempts)


def test_run_refuses_a_corpus_file_changed_after_freeze(experiment: Path, tmp_path: Path) -> None:
    run_dir = _freeze(experiment, tmp_path / "run")
    (experiment.parent / "corpus" / "cases" / "case-001.json").write_text(
        '{"id": "case-001", "prompt": "x"}'
    )
    code, message = invoke("run", str(run_dir), "--quiet")
    assert code == 1
    assert "cases/case-001.json changed after freeze" in message
    assert not (run_dir / "ledger.sqlite").exists()


def test_run_refuses_a_corpus_file_added_or_removed_after_freeze(
    experiment: Path, tmp_path: Path
) -> None:
    run_dir = _freeze(experiment, tmp_path / "run")
    cases = experiment.parent / "corpus" / "cases"
    (cases / "case-001.json").rename(tmp_path / "moved.json")
    with pytest.raises(CheckFailed, match=r"case-001\.json was removed after freeze"):
        run_experiment(run_dir)
    (tmp_path / "moved.json").rename(cases / "case-001.json")
    (cases / "case-zzz.json").write_text('{"id": "case-zzz", "prompt": "new"}')
    with pytest.raises(CheckFailed, match=r"case-zzz\.json was added after freeze"):
        run_experiment(run_dir)


def test_run_refuses_an_edited_manifest(experiment: Path, tmp_path: Path) -> None:
    run_dir = _freeze(experiment, tmp_path / "run")
    manifest = run_dir / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"concurrency": 4', '"concurrency": 5'))
    code, message = invoke("run", str(run_dir), "--quiet")
    assert code == 1 and "manifest.json changed after freeze" in message


def test_running_a_finished_experiment_again_runs_nothing(experiment: Path, tmp_path: Path) -> None:
    run_dir = _freeze(experiment, tmp_path / "run")
    run_experiment(run_dir)
    again = run_experiment(run_dir)
    assert (again.finished_before, again.completed, again.failed, again.attempts) == (24, 0, 0, 0)
    assert len(read_ledger(run_dir).trials) == 24
    assert verify_run(run_dir).ok


def test_resume_marks_an_interrupted_execution_abandoned_and_reruns_the_trial(
    experiment: Path, tmp_path: Path
) -> None:
    from trustbench.core.ledger._store import Ledger

    run_dir = _freeze(experiment, tmp_path / "run")
    manifest_hash = build_manifest(experiment).manifest_sha256
    ledger = Ledger.open(run_dir, manifest_hash)
    ledger.append(
        "attempts",
        {
            "trial_id": "case-000/alpha/0",
            "execution": 1,
            "call_index": 0,
            "attempt_index": 0,
            "kind": "first",
            "call": "chat",
            "request": "{}",
            "raw_response": '{"partial": true}',
        },
    )
    ledger.close()
    run_experiment(run_dir)
    ledger_rows = read_ledger(run_dir)
    trial = next(t for t in ledger_rows.trials if t["trial_id"] == "case-000/alpha/0")
    assert trial["execution"] == 2
    attempts = [a for a in ledger_rows.attempts if a["trial_id"] == "case-000/alpha/0"]
    assert [(a["execution"], a["counted"]) for a in attempts] == [(1, False), (2, True)]
    abandoned = [e for e in ledger_rows.events if e["kind"] == "execution_abandoned"]
    assert abandoned[0]["data"] == {
        "trial_id": "case-000/alpha/0",
        "execution": 1,
        "attempt_ids": [1],
    }
    assert len(ledger_rows.trials) == 24 and verify_run(run_dir).ok


class _GreedyResampler:
    """A track that re-asks the candidate until it likes the answer (a different policy)."""

    from tests.support.echo_track import EchoTrack as _Echo

    uses_candidate_resample = True

    def __init__(self) -> None:
        self._echo = self._Echo()

    def resolve(self, spec, base_dir):  # type: ignore[no-untyped-def]
        return self._echo.resolve(spec, base_dir)

    def plan(self, manifest):  # type: ignore[no-untyped-def]
        return self._echo.plan(manifest)

    async def run_trial(self, key, ctx):  # type: ignore[no-untyped-def]
        from trustbench.core import TrialOutcome
        from trustbench.providers import ChatRequest

        request = ChatRequest(messages=[{"role": "user", "content": key.case_id}])
        answer = await ctx.chat(request)
        while ctx.resamples_left >= 0:
            answer = await ctx.chat(request, resample=True)
        return TrialOutcome("completed", answer.text)


def test_candidate_resampling_beyond_the_declared_policy_is_a_recorded_harness_error(
    experiment: Path, tmp_path: Path
) -> None:
    register_track("test/greedy", f"{__name__}:_GreedyResampler")
    text = experiment.read_text().replace('track = "echo"', 'track = "greedy"')
    experiment.write_text(
        text.replace("backoff_max_s = 0.05", "backoff_max_s = 0.05\ncandidate_resample = 1")
    )
    run_dir = _freeze(experiment, tmp_path / "run")
    summary = run_experiment(run_dir)
    assert summary.failed == 24
    ledger = read_ledger(run_dir)
    assert {t["error_class"] for t in ledger.trials} == {"harness_error"}
    assert Counter(a["kind"] for a in ledger.attempts) == {"first": 24, "candidate_retry": 24}


def test_a_second_concurrent_run_on_the_same_folder_is_refused(
    experiment: Path, tmp_path: Path
) -> None:
    from trustbench.core._run_folder import RunLock
    from trustbench.errors import InputError

    run_dir = _freeze(experiment, tmp_path / "run")
    with RunLock(run_dir), pytest.raises(InputError, match="another `trustbench run`"):
        run_experiment(run_dir)


def test_ledger_uses_wal_journal(experiment: Path, tmp_path: Path) -> None:
    run_dir = _freeze(experiment, tmp_path / "run")
    run_experiment(run_dir)
    connection = sqlite3.connect(run_dir / "ledger.sqlite")
    assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    connection.close()


def test_run_without_the_named_key_variable_fails_before_anything_runs(
    experiment: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = _freeze(experiment, tmp_path / "run")
    monkeypatch.delenv("TB_TEST_ALPHA_KEY")
    code, message = invoke("run", str(run_dir), "--quiet")
    assert code == 2 and "TB_TEST_ALPHA_KEY is not set" in message
    assert not (run_dir / "ledger.sqlite").exists()


def test_a_key_with_a_line_break_fails_before_anything_runs(
    experiment: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = _freeze(experiment, tmp_path / "run")
    monkeypatch.setenv("TB_TEST_ALPHA_KEY", "sk-test\n")
    code, message = invoke("run", str(run_dir), "--quiet")
    assert code == 2 and "TB_TEST_ALPHA_KEY holds a line break" in message
    assert "sk-test" not in message  # the key itself is never shown
    assert not (run_dir / "ledger.sqlite").exists()


def test_run_on_a_folder_without_a_manifest_is_a_usage_error(tmp_path: Path) -> None:
    code, message = invoke("run", str(tmp_path), "--quiet")
    assert code == 2 and "trustbench freeze" in message


class _BrokenTrack:
    """Echo track whose trial code raises for one case (a harness defect)."""

    from tests.support.echo_track import EchoTrack as _Echo

    def __init__(self) -> None:
        self._echo = self._Echo()

    def resolve(self, spec, base_dir):  # type: ignore[no-untyped-def]
        return self._echo.resolve(spec, base_dir)

    def plan(self, manifest):  # type: ignore[no-untyped-def]
        return self._echo.plan(manifest)

    async def run_trial(self, key, ctx):  # type: ignore[no-untyped-def]
        if key.case_id == "case-001":
            raise KeyError("fixture field missing")
        if key.case_id == "case-002":
            await asyncio.sleep(5)
        return await self._echo.run_trial(key, ctx)


def test_track_defects_and_trial_timeouts_are_recorded_as_failed_trials_not_dropped(
    experiment: Path, tmp_path: Path
) -> None:
    register_track("test/broken", f"{__name__}:_BrokenTrack")
    text = experiment.read_text().replace('track = "echo"', 'track = "broken"')
    experiment.write_text(text.replace("order_seed = 11", "order_seed = 11\ntrial_timeout_s = 0.2"))
    run_dir = _freeze(experiment, tmp_path / "run")
    summary = run_experiment(run_dir)
    assert (summary.completed, summary.failed) == (12, 12)
    errors = {
        (t["case_id"], t["error_class"])
        for t in read_ledger(run_dir).trials
        if t["status"] == "failed"
    }
    assert errors == {("case-001", "harness_error"), ("case-002", "trial_timeout")}
    assert verify_run(run_dir).ok


def test_plain_progress_reports_done_total_failures_and_retries() -> None:
    import io

    from trustbench.core._runner import PlainProgress

    stream = io.StringIO()
    progress = PlainProgress(stream, every_s=0.0)
    progress.start(10, 4)
    progress.update(6, 1, 2)
    progress.close()
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("trials 4/10 done, 0 failed, 0 transport retries")
    assert lines[-1].startswith("trials 6/10 done, 1 failed, 2 transport retries")
    assert "ETA" in lines[1]


def test_rich_progress_bar_runs_through_a_whole_run() -> None:
    from trustbench.core._runner import RichProgress

    progress = RichProgress()
    progress.start(3, 1)
    progress.update(2, 1, 4)
    progress.close()


def _decide(request: dict[str, str]) -> dict[str, str]:
    if request["case"] == "case-001":
        raise ValueError("no rule for this case")
    return {"decision": "deny"}


class _DeterministicTrack:
    """Drives an in-process candidate itself and records each call through `ctx.call`."""

    from tests.support.echo_track import EchoTrack as _Echo

    def __init__(self) -> None:
        self._echo = self._Echo()

    def resolve(self, spec, base_dir):  # type: ignore[no-untyped-def]
        return self._echo.resolve(spec, base_dir)

    def plan(self, manifest):  # type: ignore[no-untyped-def]
        return self._echo.plan(manifest)

    async def run_trial(self, key, ctx):  # type: ignore[no-untyped-def]
        from trustbench.core import TrialOutcome

        assert ctx.provider is None
        answer = await ctx.call("reviewer.decide", {"case": key.case_id}, _decide)
        return TrialOutcome("completed", answer)


def test_track_driven_inprocess_calls_are_recorded_as_attempts(tmp_path: Path) -> None:
    from tests.support.echo_track import write_corpus

    register_track("test/deterministic", f"{__name__}:_DeterministicTrack")
    write_corpus(tmp_path / "corpus", 3)
    spec = tmp_path / "exp.toml"
    spec.write_text(
        'suite = "test"\ntrack = "deterministic"\ntrials_per_case = 2\n[corpus]\npath = "corpus"\n'
        '[[candidates]]\nname = "rules"\nkind = "inprocess"\n'
    )
    run_dir = _freeze(spec, tmp_path / "run")
    summary = run_experiment(run_dir)
    assert (summary.completed, summary.failed, summary.attempts) == (4, 2, 6)
    ledger = read_ledger(run_dir)
    for attempt in ledger.attempts:
        assert attempt["call"] == "reviewer.decide" and attempt["kind"] == "first"
        assert attempt["request"] == {"case": attempt["trial_id"].split("/")[0]}
    failed = [a for a in ledger.attempts if a["error_class"]]
    assert {a["error_class"] for a in failed} == {"candidate_error"}
    assert all(a["raw_response"] is None for a in failed)
    ok = [a for a in ledger.attempts if not a["error_class"]]
    assert all(json.loads(a["raw_response"]) == {"decision": "deny"} for a in ok)


def test_the_wal_checkpoint_starts_once_every_trial_is_handed_out(
    experiment: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trustbench.core import _runner
    from trustbench.core.ledger._store import Ledger

    started: list[str] = []
    at_checkpoint: list[int] = []
    execute = _runner.execute_trial

    async def counting(*args: object, **options: object) -> object:
        started.append("trial")
        return await execute(*args, **options)  # type: ignore[arg-type]

    checkpoint_ahead = Ledger.checkpoint_ahead

    def recording(self: Ledger) -> None:
        at_checkpoint.append(len(started))
        checkpoint_ahead(self)

    monkeypatch.setattr(_runner, "execute_trial", counting)
    monkeypatch.setattr(Ledger, "checkpoint_ahead", recording)
    summary = run_experiment(_freeze(experiment, tmp_path / "run"))
    assert at_checkpoint == [summary.planned] == [24]
    assert verify_run(tmp_path / "run").ok
