"""`report` verifying a large ledger in a second process: same files, same refusals."""

from __future__ import annotations

import pickle
import sqlite3
from pathlib import Path

import pytest
from tests.core.test_report_run import _graded_spec, _run, _truncate_after_trials

from trustbench.core import Manifest, Track, register_track, report_run
from trustbench.core import _report_run as report_module
from trustbench.core import _verify as beside
from trustbench.errors import CheckFailed, InputError

WRITTEN = ("record.json", "report.html", "record.trials.jsonl", "record.intoto.json")


@pytest.fixture(autouse=True)
def _graded_track() -> None:
    register_track("test/echo_graded", "tests.core.test_report_run:GradedEchoTrack")


def _force_beside(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Every report verifies beside from now on; lists each `Verification`'s choice."""
    chosen: list[bool] = []
    made = beside.Verification.__init__

    def spy(self: beside.Verification, *args: object, **kwargs: object) -> None:
        made(self, *args, **kwargs)  # type: ignore[arg-type]
        chosen.append(self.beside)

    monkeypatch.setattr(beside, "verifies_beside", lambda run_dir: True)
    monkeypatch.setattr(beside.Verification, "__init__", spy)
    return chosen


@pytest.fixture
def always_beside(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Every report of the test verifies beside, whatever its size."""
    return _force_beside(monkeypatch)


def _forge(run_dir: Path, outcome: str) -> None:
    connection = sqlite3.connect(run_dir / "ledger.sqlite")
    connection.execute("UPDATE trials SET outcome = ? WHERE id = 1", (outcome,))
    connection.commit()
    connection.close()


def test_a_report_verified_beside_writes_the_same_files_as_one_verified_first(
    experiment: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = _run(_graded_spec(experiment), tmp_path / "run")
    first = report_run(run_dir)
    written = {name: (run_dir / name).read_bytes() for name in WRITTEN}
    chosen = _force_beside(monkeypatch)
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


def test_only_a_large_ledger_on_a_second_core_is_verified_beside(
    experiment: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = _run(_graded_spec(experiment), tmp_path / "run")
    monkeypatch.setattr(beside, "_cores", lambda: 2)
    assert not beside.verifies_beside(run_dir)  # a few kB
    monkeypatch.setattr(beside, "BESIDE_FROM_BYTES", 1)
    assert beside.verifies_beside(run_dir)
    monkeypatch.setattr(beside, "_cores", lambda: 1)
    assert not beside.verifies_beside(run_dir)


def test_an_error_keeps_its_type_message_and_location_across_processes() -> None:
    for error in (InputError("no ledger", location="run/ledger.sqlite"), CheckFailed("bad")):
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error)
        assert (copy.message, copy.location, str(copy)) == (
            error.message,
            error.location,
            str(error),
        )
