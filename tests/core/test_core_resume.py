"""SIGKILL `trustbench run` mid-run, run it again, compare with an uninterrupted run."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tests.support.child_env import child_env
from tests.support.cli import ALPHA_KEY
from tests.support.echo_track import two_candidate_spec, write_corpus
from tests.support.openai_server import OpenAIServer

from trustbench.core import build_manifest, read_ledger, verify_run, write_manifest

ROOT = Path(__file__).resolve().parents[2]


def _cli(tmp: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.trustbench_cli", *args],
        cwd=ROOT,
        env=child_env(tmp, pythonpath=[ROOT], extra={"TB_TEST_ALPHA_KEY": ALPHA_KEY}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _finished_trials(run_dir: Path) -> int:
    path = run_dir / "ledger.sqlite"
    if not path.exists():
        return 0
    try:
        connection = sqlite3.connect(path, timeout=0.2)
        try:
            return connection.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
        finally:
            connection.close()
    except sqlite3.OperationalError:
        return 0


def _trial_set(run_dir: Path) -> set[tuple[str, str, str]]:
    return {(t["trial_id"], t["status"], str(t["outcome"])) for t in read_ledger(run_dir).trials}


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_yields_the_same_trials_as_an_uninterrupted_run(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.latency_s = 0.01
    write_corpus(tmp_path / "corpus", 8)
    spec = tmp_path / "exp.toml"
    spec.write_text(
        two_candidate_spec(openai_server.base_url, extra="[track_options]\nsleep_s = 0.08")
    )
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    manifest = build_manifest(spec)
    write_manifest(manifest, killed)
    write_manifest(manifest, clean)

    process = _cli(tmp_path, "run", str(killed), "--quiet")
    deadline = time.monotonic() + 180  # returns as soon as 10 trials are in; bound for hangs
    while _finished_trials(killed) < 10 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.01)
    # Trials run in waves of `concurrency` (call 10 ms, then sleep 80 ms); kill mid-sleep so the
    # trials in flight have recorded attempts but no finished row.
    time.sleep(0.04)
    assert process.poll() is None, "the run ended before it could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    partial = _finished_trials(killed)
    assert 10 <= partial < 48

    resumed = _cli(tmp_path, "run", str(killed))
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err.decode()
    assert f"({partial} before this run)" in out.decode()

    from trustbench.core import run_experiment

    run_experiment(clean)
    assert _trial_set(killed) == _trial_set(clean)
    ledger = read_ledger(killed)
    assert len(ledger.trials) == 48 == len({t["trial_id"] for t in ledger.trials})
    counted = [a for a in ledger.attempts if a["counted"]]
    assert len(counted) == 48, "exactly one counted attempt per trial (no faults were injected)"
    abandoned = {
        (e["data"]["trial_id"], e["data"]["execution"])
        for e in ledger.events
        if e["kind"] == "execution_abandoned"
    }
    uncounted = {(a["trial_id"], a["execution"]) for a in ledger.attempts if not a["counted"]}
    assert uncounted == abandoned
    assert abandoned, "trials in flight at the kill had recorded attempts that must be abandoned"
    assert verify_run(killed).ok


def test_ctrl_c_mid_run_says_how_far_it_got_and_the_command_that_resumes_it(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.latency_s = 0.01
    write_corpus(tmp_path / "corpus", 8)
    spec = tmp_path / "exp.toml"
    spec.write_text(
        two_candidate_spec(openai_server.base_url, extra="[track_options]\nsleep_s = 0.08")
    )
    run_dir = tmp_path / "run"
    write_manifest(build_manifest(spec), run_dir)

    process = _cli(tmp_path, "run", str(run_dir), "--quiet")
    deadline = time.monotonic() + 60
    while _finished_trials(run_dir) < 4 and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.01)
    assert process.poll() is None, "the run ended before Ctrl-C could reach it"
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=30)
    message = err.decode()
    assert process.returncode == 130, message
    assert "Traceback" not in message
    finished = _finished_trials(run_dir)
    assert f"interrupted: {finished}/48 trials finished and recorded" in message
    assert message.rstrip().endswith(f"resume with: trustbench run {run_dir}")
    assert 4 <= finished < 48
