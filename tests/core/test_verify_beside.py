"""`report` verifying a ledger in a second process, forked or spawned: same files, same refusals."""

from __future__ import annotations

import os
import pickle
import sqlite3
import threading
from pathlib import Path

import pytest
from tests.core.test_report_run import _graded_spec, _run, _truncate_after_trials

from trustbench.core import Manifest, Track, register_track, report_run
from trustbench.core import _report_run as report_module
from trustbench.core import _verify as beside
from trustbench.errors import CheckFailed, InputError, TrustbenchError

WRITTEN = ("record.json", "report.html", "record.trials.jsonl", "record.intoto.json")


@pytest.fixture(autouse=True)
def _graded_track() -> None:
    register_track("test/echo_graded", "tests.core.test_report_run:GradedEchoTrack")


def _force_beside(monkeypatch: pytest.MonkeyPatch, start: str) -> list[bool]:
    """Every report verifies beside from now on, in a process started by `start` (fork, spawn).

    Lists each `Verification`'s choice.
    """
    chosen: list[bool] = []
    made = beside.Verification.__init__

    def spy(self: beside.Verification, *args: object, **kwargs: object) -> None:
        made(self, *args, **kwargs)  # type: ignore[arg-type]
        chosen.append(self.beside)

    monkeypatch.setattr(beside, "beside_start", lambda run_dir: start)
    monkeypatch.setattr(beside.Verification, "__init__", spy)
    return chosen


@pytest.fixture(params=["fork", "spawn"])
def always_beside(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Every report of the test verifies beside, whatever its size, forked and then spawned."""
    return _force_beside(monkeypatch, request.param)


def _forge(run_dir: Path, outcome: str) -> None:
    connection = sqlite3.connect(run_dir / "ledger.sqlite")
    connection.execute("UPDATE trials SET outcome = ? WHERE id = 1", (outcome,))
    connection.commit()
    connection.close()


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_a_report_verified_beside_writes_the_same_files_as_one_verified_first(
    experiment: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, start: str
) -> None:
    run_dir = _run(_graded_spec(experiment), tmp_path / "run")
    monkeypatch.setattr(beside, "beside_start", lambda run_dir: None)
    first = report_run(run_dir)
    written = {name: (run_dir / name).read_bytes() for name in WRITTEN}
    chosen = _force_beside(monkeypatch, start)
    second = report_run(run_dir)
    assert chosen == [True]
    assert {name: (run_dir / name).read_bytes() for name in WRITTEN} == written
    assert (second.complete, second.gates) == (first.complete, first.gates)


def test_a_tampered_ledger_verified_beside_is_refused_and_nothing_is_written(
    experiment: Path, tmp_path: Path, always_beside: list[bool]
) -> None:
    run_dir = _run(_graded_spec(experiment), tmp_path / "run")
    _forge(run_dir, '{"model":"x","reply":"forged"}')
    with pytest.raises(CheckFailed, match="refusing to report an altered run"):
        report_run(run_dir)
    assert always_beside == [True]
    assert not any((run_dir / name).exists() for name in WRITTEN)


def test_grading_that_fails_on_an_altered_ledger_reports_the_alteration(
    experiment: Path, tmp_path: Path, always_beside: list[bool]
) -> None:
    run_dir = _run(_graded_spec(experiment), tmp_path / "run")
    _forge(run_dir, "{}")  # the echo grader reads outcome["reply"]: a KeyError mid-grading
    with pytest.raises(CheckFailed, match="refusing to report an altered run"):
        report_run(run_dir)
    assert always_beside == [True]


def test_an_interrupted_run_verified_beside_is_still_reported_incomplete(
    experiment: Path, tmp_path: Path, always_beside: list[bool]
) -> None:
    run_dir = _run(_graded_spec(experiment), tmp_path / "run")
    _truncate_after_trials(run_dir, 5)
    result = report_run(run_dir)
    assert always_beside == [True]
    assert result.complete is False
    assert result.incomplete is not None and "interrupted" in result.incomplete


def test_beside_the_frozen_inputs_are_hashed_once_and_grading_uses_the_track_that_hashed_them(
    experiment: Path, tmp_path: Path, always_beside: list[bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = _run(_graded_spec(experiment), tmp_path / "run")
    checks: list[str] = []
    check = report_module.check_inputs

    def counted(manifest: Manifest, track: Track) -> None:
        checks.append(manifest.spec.track_id)
        check(manifest, track)

    monkeypatch.setattr(beside, "check_inputs", counted)
    monkeypatch.setattr(report_module, "check_inputs", counted)
    report_run(run_dir)
    assert always_beside == [True]
    assert checks == ["test/echo_graded"]


def test_a_ledger_is_verified_beside_on_a_second_core_forked_where_safe_spawned_when_large(
    experiment: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = _run(_graded_spec(experiment), tmp_path / "run")
    monkeypatch.setattr(beside, "_cores", lambda: 2)
    monkeypatch.setattr(beside, "forks_safely", lambda run_dir: True)
    assert beside.beside_start(run_dir) == "fork"  # a few kB: a fork costs milliseconds
    monkeypatch.setattr(beside, "forks_safely", lambda run_dir: False)
    assert beside.beside_start(run_dir) is None  # spawning costs more than verifying a few kB
    monkeypatch.setattr(beside, "BESIDE_FROM_BYTES", 1)
    assert beside.beside_start(run_dir) == "spawn"  # large: worth a spawned interpreter
    monkeypatch.setattr(beside, "_cores", lambda: 1)
    assert beside.beside_start(run_dir) is None


def test_no_fork_while_a_thread_started_without_threading_runs(tmp_path: Path) -> None:
    import _thread

    done = threading.Event()
    _thread.start_new_thread(done.wait, ())  # as pytest-xdist's worker starts its receiver
    try:
        assert not beside.forks_safely(tmp_path)
    finally:
        done.set()


def test_no_fork_while_another_thread_of_this_process_runs(tmp_path: Path) -> None:
    done = threading.Event()
    waiting = threading.Thread(target=done.wait)
    waiting.start()
    try:
        assert not beside.forks_safely(tmp_path)
    finally:
        done.set()
        waiting.join()


def test_no_fork_while_this_process_holds_the_ledger_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(beside, "_threads", lambda: 1)  # pytest's own threads aside
    assert beside.forks_safely(tmp_path)
    connection = sqlite3.connect(tmp_path / "ledger.sqlite")
    connection.execute("CREATE TABLE t (x)")  # the file is opened on first use
    try:
        assert not beside.forks_safely(tmp_path)
    finally:
        connection.close()
    assert beside.forks_safely(tmp_path)


def _dies(*arguments: object) -> None:
    os._exit(3)


def test_a_verification_process_that_dies_without_answering_stops_the_report_and_writes_nothing(
    experiment: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = _run(_graded_spec(experiment), tmp_path / "run")
    _force_beside(monkeypatch, "fork")
    monkeypatch.setattr(beside, "verify_ledger", _dies)
    with pytest.raises(TrustbenchError, match=r"ended without an answer \(exit code 3\)"):
        report_run(run_dir)
    assert not any((run_dir / name).exists() for name in WRITTEN)


def test_an_error_keeps_its_type_message_and_location_across_processes() -> None:
    for error in (InputError("no ledger", location="run/ledger.sqlite"), CheckFailed("bad")):
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error)
        assert (copy.message, copy.location, str(copy)) == (
            error.message,
            error.location,
            str(error),
        )
