"""The Ray executor gives the same results, trial for trial, as the local one on one manifest."""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.support.cli import invoke
from tests.support.crash import crash_after_seq
from tests.support.echo_track import two_candidate_spec, write_corpus
from tests.support.openai_server import OpenAIServer, server_error

from trustbench.core import build_manifest, run_experiment, verify_run, write_manifest
from trustbench.errors import InputError

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
