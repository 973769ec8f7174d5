"""The Ray executor gives the same results, trial for trial, as the local one on one manifest."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from tests.rtb.test_review_track import small_corpus
from tests.rtb.test_review_track import spec_text as review_spec_text
from tests.support.child_env import child_env
from tests.support.cli import ALPHA_KEY, invoke
from tests.support.crash import crash_after_seq
from tests.support.echo_track import two_candidate_spec, write_corpus
from tests.support.openai_server import OpenAIServer, probe_reply, server_error

from trustbench.core import (
    _ray_executor,
    build_manifest,
    read_ledger,
    run_experiment,
    verify_run,
    write_manifest,
)
from trustbench.core.cli import RUN_ALL_FAILED_EXIT
from trustbench.errors import CheckFailed, InputError

# Ray's own processes on the loopback address only: without this Ray replaces 127.0.0.1 with the
# machine's address reachable from other hosts (its "cluster" mode), read when ray is imported.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
ray = pytest.importorskip(
    "ray", reason="ray is not installed (install the `ray` extra to test --executor ray)"
)

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """A local Ray instance on 2 CPUs whose workers can import `trustbench` and `tests`."""
    path = os.pathsep.join([str(REPO / "src"), str(REPO), *sys.path])
    ray.init(
        num_cpus=2,
        _node_ip_address="127.0.0.1",
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": path}},
    )
    yield
    ray.shutdown()


def _frozen_twice(tmp_path: Path, spec_text: str) -> tuple[Path, Path]:
    """Freeze one spec once; copy the same frozen manifest into two run folders."""
    spec = tmp_path / "exp.toml"
    spec.write_text(spec_text)
    local_dir, ray_dir = tmp_path / "local", tmp_path / "ray"
    write_manifest(build_manifest(spec), local_dir)
    ray_dir.mkdir()
    shutil.copy(local_dir / "manifest.json", ray_dir / "manifest.json")
    return local_dir, ray_dir


_TRIAL_FIELDS = (
    "trial_id, case_id, candidate, trial_index, execution, order_position, status, outcome, "
    "error_class, error, attempts"
)
_ATTEMPT_FIELDS = (
    "trial_id, execution, call_index, attempt_index, kind, call, request_digest, request, "
    "raw_response, http_status, error_class, prompt_tokens, completion_tokens, cost_usd, "
    "requested_model, reported_model, endpoint"
)


def _results(run_dir: Path) -> tuple[list[Any], list[Any]]:
    """Every trial and attempt in a canonical order, without times, ids and hashes."""
    with sqlite3.connect(run_dir / "ledger.sqlite") as db:
        trials = db.execute(f"SELECT {_TRIAL_FIELDS} FROM trials ORDER BY trial_id").fetchall()
        attempts = db.execute(
            f"SELECT {_ATTEMPT_FIELDS} FROM attempts ORDER BY trial_id, execution, attempt_index"
        ).fetchall()
    return trials, attempts


def test_ray_executor_records_the_same_trials_and_attempts_as_the_local_executor(
    local_ray: None, tmp_path: Path, openai_server: OpenAIServer
) -> None:
    write_corpus(tmp_path / "corpus", 5)
    local_dir, ray_dir = _frozen_twice(tmp_path, two_candidate_spec(openai_server.base_url))

    # Every beta request about case-002 fails: the same trials fail after the same retries,
    # whichever executor runs them and in whatever order the requests arrive.
    openai_server.script(
        lambda body, n: (
            server_error()
            if body.get("model") == "beta-model" and "case-002" in str(body.get("messages"))
            else None
        )
    )
    local = run_experiment(local_dir)
    remote = run_experiment(ray_dir, executor="ray")

    assert (remote.completed, remote.failed, remote.attempts, remote.transport_retries) == (
        local.completed,
        local.failed,
        local.attempts,
        local.transport_retries,
    )
    assert (remote.completed, remote.failed, remote.transport_retries) == (27, 3, 9)
    assert _results(ray_dir) == _results(local_dir)
    assert verify_run(ray_dir).ok


def test_ray_executor_runs_inprocess_candidates_with_a_fresh_responder_per_trial(
    local_ray: None, tmp_path: Path
) -> None:
    write_corpus(tmp_path / "corpus", 4)
    spec = """
suite = "test"
track = "echo"
trials_per_case = 3
concurrency = 4
order_seed = 5

[corpus]
path = "corpus"

[[candidates]]
name = "echoer"
kind = "inprocess"
entry = "tests.support.echo_track:echo_responder"
settings = { prefix = "> " }
"""
    local_dir, ray_dir = _frozen_twice(tmp_path, spec)
    run_experiment(local_dir)
    run_experiment(ray_dir, executor="ray")
    trials, attempts = _results(ray_dir)
    assert (trials, attempts) == _results(local_dir)
    assert len(trials) == 12
    assert all("(calls in this context: 1)" in row[7] for row in trials)


def test_ray_executor_resumes_a_run_the_local_executor_started(
    local_ray: None, tmp_path: Path, openai_server: OpenAIServer
) -> None:
    write_corpus(tmp_path / "corpus", 3)
    local_dir, ray_dir = _frozen_twice(tmp_path, two_candidate_spec(openai_server.base_url))
    run_experiment(local_dir)
    # Simulate an interrupted run: keep only the first half of the finished trials.
    shutil.copy(local_dir / "ledger.sqlite", ray_dir / "ledger.sqlite")
    with sqlite3.connect(ray_dir / "ledger.sqlite") as db:
        kept = db.execute("SELECT MAX(seq) FROM trials WHERE order_position < 9").fetchone()[0]
    db.close()
    crash_after_seq(ray_dir, kept)
    summary = run_experiment(ray_dir, executor="ray")
    assert summary.finished_before == 9 and summary.completed == 9
    assert _results(ray_dir) == _results(local_dir)
    assert verify_run(ray_dir).ok


def test_ray_executor_refuses_rate_limited_candidates(
    local_ray: None, tmp_path: Path, openai_server: OpenAIServer
) -> None:
    write_corpus(tmp_path / "corpus", 2)
    text = two_candidate_spec(openai_server.base_url).replace(
        'name = "beta"', 'name = "beta"\nrate_limit_per_s = 5.0'
    )
    _, ray_dir = _frozen_twice(tmp_path, text)
    with pytest.raises(InputError, match="rate_limit_per_s"):
        run_experiment(ray_dir, executor="ray")
    assert not (ray_dir / "ledger.sqlite").exists()


def test_run_command_accepts_executor_ray(
    local_ray: None, tmp_path: Path, openai_server: OpenAIServer
) -> None:
    write_corpus(tmp_path / "corpus", 2)
    _, ray_dir = _frozen_twice(tmp_path, two_candidate_spec(openai_server.base_url))
    code, output = invoke("run", str(ray_dir), "--quiet", "--executor", "ray")
    assert code == 0, output
    assert "12/12 trials finished" in output


_CRASH_ONCE_SPEC = """
suite = "test"
track = "echo"
trials_per_case = 2
concurrency = 2
order_seed = 3
{retry}

[corpus]
path = "corpus"

[[candidates]]
name = "fragile"
kind = "inprocess"
entry = "tests.support.echo_track:crash_once_responder"
settings = {{ marker = "{marker}" }}
# The candidate kills the process it runs in to stand for a lost Ray worker: in its sandbox
# worker it would kill only that, and it writes its marker outside its own folder.
isolation = "none"
"""


def _crash_once_run(tmp_path: Path, retry: str = "") -> tuple[Path, Path]:
    """A frozen run whose candidate kills its Ray worker on the run's first call."""
    write_corpus(tmp_path / "corpus", 3)
    marker = tmp_path / "worker-killed"
    spec = tmp_path / "exp.toml"
    spec.write_text(_CRASH_ONCE_SPEC.format(retry=retry, marker=marker))
    run_dir = tmp_path / "ray"
    write_manifest(build_manifest(spec), run_dir)
    return run_dir, marker


def _worker_losses(run_dir: Path) -> list[dict[str, Any]]:
    return [e["data"] for e in read_ledger(run_dir).events if e["kind"] == "worker_lost"]


def test_a_lost_workers_trial_is_rescheduled_and_every_trial_is_recorded(
    local_ray: None, tmp_path: Path
) -> None:
    run_dir, marker = _crash_once_run(tmp_path)
    summary = run_experiment(run_dir, executor="ray")
    assert marker.exists(), "the candidate never killed its worker"
    assert (summary.completed, summary.failed) == (6, 0)
    trials, attempts = _results(run_dir)
    assert len(trials) == 6 and all(row[6] == "completed" for row in trials)
    assert len(attempts) == 6  # the lost attempt left no row: it died with its worker
    # One dead worker; a trial sent to it before its death was noticed is lost with it too.
    losses = _worker_losses(run_dir)
    assert losses and all(loss["rescheduled"] is True for loss in losses)
    assert {loss["trial_id"] for loss in losses} <= {row[0] for row in trials}
    assert verify_run(run_dir).ok


def test_a_trial_lost_more_often_than_the_retry_policy_allows_stops_the_run(
    local_ray: None, tmp_path: Path
) -> None:
    run_dir, _ = _crash_once_run(tmp_path, retry="retry = { transport_max_retries = 0 }")
    with pytest.raises(CheckFailed, match="lost 1 times while running trial"):
        run_experiment(run_dir, executor="ray")
    losses = _worker_losses(run_dir)
    assert losses and all(loss["rescheduled"] is False for loss in losses)


def _run_at_address(tmp_path: Path, address: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`trustbench run RUN --executor ray --address ADDRESS` as a process; its result and the
    marker its candidate would leave had any trial run."""
    run_dir, marker = _crash_once_run(tmp_path)
    env = child_env(tmp_path, pythonpath=[REPO], extra={"TB_TEST_ALPHA_KEY": ALPHA_KEY})
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.support.trustbench_cli",
            "run",
            str(run_dir),
            "--quiet",
            "--executor",
            "ray",
            "--address",
            address,
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    return result, marker


def test_run_with_an_unreachable_ray_address_exits_2_naming_it_within_30_s(
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    result, marker = _run_at_address(tmp_path, "127.0.0.1:1")
    assert time.monotonic() - started < 30
    assert result.returncode == 2, result.stdout + result.stderr
    assert "127.0.0.1:1" in result.stderr and "Traceback" not in result.stderr
    assert not marker.exists()


class _RefuseHTTP2(BaseHTTPRequestHandler):
    """Answers as a plain HTTP/1 server does: 505 to the HTTP/2 preface (nothing of Ray's)."""

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the test's output free of the server's request log."""


def test_run_with_an_http_server_as_ray_address_exits_2_naming_it_at_once(
    tmp_path: Path,
) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RefuseHTTP2)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    address = f"127.0.0.1:{server.server_address[1]}"
    try:
        started = time.monotonic()
        result, marker = _run_at_address(tmp_path, address)
    finally:
        server.shutdown()
        server.server_close()
    assert time.monotonic() - started < 30  # ray.init retried it for minutes before
    assert result.returncode == 2, result.stdout + result.stderr
    assert address in result.stderr and "not gRPC" in result.stderr
    assert "Traceback" not in result.stderr and not marker.exists()


def test_a_ray_address_that_accepts_tcp_but_never_answers_is_refused_within_the_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The kernel accepts connections into a listening socket's backlog: a port that is open and
    # says nothing, as a stuck or foreign server is. The 10 s timeout is shortened to 0.5 s to
    # keep the test fast.
    monkeypatch.delenv("RAY_USE_TLS", raising=False)  # the user's shell may export it
    monkeypatch.setattr(_ray_executor, "ADDRESS_TIMEOUT_S", 0.5)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(InputError, match=f"no Ray cluster reachable at {address} .*no answer"):
            _ray_executor.check_reachable(address)
    assert time.monotonic() - started < 5


def test_with_ray_over_tls_a_ray_address_is_checked_for_a_tcp_connection_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A TLS server answers a cleartext HTTP/2 preface with an alert: not a refusal reason.
    monkeypatch.setenv("RAY_USE_TLS", "1")
    monkeypatch.setattr(_ray_executor, "ADDRESS_TIMEOUT_S", 0.5)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        _ray_executor.check_reachable(f"127.0.0.1:{silent.getsockname()[1]}")


# ------------------------------------------------------------------------------------------------
# A server that cannot answer one call alone within `timeout_s` stops its candidate under Ray as
# under the local executor (issue 55). Ray runs are slow: the assertions share one stopped run
# and its resume.


@pytest.fixture(scope="module")
def ray_run_stopped_by_a_slow_server(
    local_ray: None, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    """`trustbench run RUN --executor ray` against a one-at-a-time server that answers the short
    probe but takes 1 s a call over `timeout_s` = 0.3 s (three transport retries), then, the
    server made fast, the same run resumed: what each stage left."""
    tmp = tmp_path_factory.mktemp("ray-stop")
    small_corpus(tmp / "corpus")
    with OpenAIServer(latency_s=1.0, one_at_a_time=True) as server:
        server.script(lambda body, n: probe_reply(body))
        candidate = (f'[[candidates]]\nname = "llm"\nkind = "openai_chat"\nmodel = "m"\n'
                     f'base_url = "{server.base_url}"\n')  # fmt: skip
        text = review_spec_text(candidate, extra="retry = { transport_max_retries = 3 }")
        (tmp / "spec.toml").write_text(text.replace("timeout_s = 5.0", "timeout_s = 0.3"))
        run_dir = tmp / "run"
        write_manifest(build_manifest(tmp / "spec.toml"), run_dir)
        code, output = invoke("run", str(run_dir), "--quiet", "--executor", "ray")
        sent = [r for r in server.requests if probe_reply(r.body) is None]
        ledger = read_ledger(run_dir)
        verified = verify_run(run_dir).ok
        server.latency_s = 0.0  # the user fixed the server: a resume runs what was not run
        resumed = run_experiment(run_dir, executor="ray")
    return {
        "code": code, "output": output, "sent": sent, "ledger": ledger, "verified": verified,
        "resumed": resumed, "resumed_verified": verify_run(run_dir).ok, "run_dir": run_dir,
    }  # fmt: skip


def test_under_ray_a_server_that_cannot_answer_one_call_alone_stops_its_candidate_once(
    ray_run_stopped_by_a_slow_server: dict[str, Any],
) -> None:
    stopped = ray_run_stopped_by_a_slow_server
    # The local executor's message and exit code: the candidate stopped, none of its trials
    # completed (exit 3, as `run` ends locally), never a Ray error.
    assert stopped["code"] == RUN_ALL_FAILED_EXIT, stopped["output"]
    assert "candidate 'llm' stopped: the server at" in stopped["output"]
    assert "did not answer ONE request within timeout_s = 0.3 s" in stopped["output"]
    assert "3 calls in a row, each sent alone" in stopped["output"]
    [stop] = [e for e in stopped["ledger"].events if e["kind"] == "candidate_stopped"]
    assert stop["data"]["candidate"] == "llm"
    assert "did not answer ONE request within timeout_s = 0.3 s" in stop["data"]["reason"]


def test_under_ray_nothing_is_sent_after_the_stop_and_the_remaining_trials_are_not_run(
    ray_run_stopped_by_a_slow_server: dict[str, Any],
) -> None:
    stopped = ray_run_stopped_by_a_slow_server
    ledger = stopped["ledger"]
    [stop] = [e for e in ledger.events if e["kind"] == "candidate_stopped"]
    # Every worker's gate stops before the event is recorded: no call (first or retry) of any
    # worker starts after it.
    assert [a for a in ledger.attempts if a["started_at"] > stop["at"]] == []
    # Two workers of two trials each: each gate stops after at most two calls together and two
    # alone, where every trial waiting out its retries sent 48 (12 trials x 4 attempts).
    assert len(stopped["sent"]) <= 8
    # The trials in flight are recorded failed (never dropped), the other 8 or more not run.
    assert len(ledger.trials) <= 4
    assert {(t["status"], t["error_class"]) for t in ledger.trials} == {("failed", "timeout")}
    assert f"{len(ledger.trials)}/12 trials finished" in stopped["output"]


def test_under_ray_each_workers_concurrency_changes_are_recorded_naming_the_worker(
    ray_run_stopped_by_a_slow_server: dict[str, Any],
) -> None:
    events = ray_run_stopped_by_a_slow_server["ledger"].events
    changes = [e["data"] for e in events if e["kind"] == "concurrency_changed"]
    # Each worker's gate has its share of `concurrency` (4 over 2 workers) as its ceiling and
    # halved to one on its first timeouts.
    assert changes
    assert all((c["from"], c["to"], c["reason"]) == (2, 1, "timeout") for c in changes)
    assert {c["worker"] for c in changes} <= {0, 1}


def test_a_ray_run_stopped_by_a_slow_server_verifies_and_resumes_what_was_not_run(
    ray_run_stopped_by_a_slow_server: dict[str, Any],
) -> None:
    stopped = ray_run_stopped_by_a_slow_server
    assert stopped["verified"] and stopped["resumed_verified"]
    resumed = stopped["resumed"]
    # As after a local stop: the failed trials stay finished, the rest run now.
    assert resumed.finished_before == len(stopped["ledger"].trials)
    assert resumed.completed >= 8  # the trials the stop left unrun
    assert (resumed.completed, resumed.failed) == (12 - resumed.finished_before, 0)
    assert resumed.stopped == {}


def test_a_trial_reaching_a_ray_worker_after_its_endpoint_stopped_is_not_run(
    ray_run_stopped_by_a_slow_server: dict[str, Any],
) -> None:
    # The driver handed it out before it learnt of the stop; the worker sends nothing for it
    # and hands back no row, so it stays unrun (the worker runs here in-process, without Ray).
    stopped = ray_run_stopped_by_a_slow_server
    manifest = json.loads((stopped["run_dir"] / "manifest.json").read_text())
    worker = _ray_executor.TrialWorker(manifest, 0, {}, 2)
    [trial, *_] = stopped["ledger"].trials
    endpoint = stopped["ledger"].attempts[0]["endpoint"]

    async def stop_then_run() -> Any:
        await worker.stop_endpoint(endpoint, "the server could not answer one call alone")
        try:
            return await worker.run_trial(0, trial["case_id"], "llm", trial["trial_index"], 2)
        finally:
            await worker.close()

    assert asyncio.run(stop_then_run()) is None
