"""The ledger's writer thread: commits off the caller's thread, in order, fail-stop."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from trustbench.core.ledger._chain import verify_chain
from trustbench.core.ledger._head import head_problems
from trustbench.core.ledger._store import Ledger

ANCHOR = "0" * 64


def test_queued_appends_commit_in_order_on_another_thread_and_close_drains_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    committing_threads: set[int] = set()
    commit = Ledger._commit

    def recording_commit(self: Ledger, statements: list) -> None:
        committing_threads.add(threading.get_ident())
        commit(self, statements)

    monkeypatch.setattr(Ledger, "_commit", recording_commit)
    ledger = Ledger.open(tmp_path, ANCHOR)  # commits its experiments row inline
    ledger.start_writer()
    committing_threads.clear()
    for trial in range(50):
        ledger.append_many(
            [("attempts", {"trial_id": f"t{trial}"}), ("trials", {"trial_id": f"t{trial}"})]
        )
        ledger.anchor()
    ledger.event("run_finished", {})
    ledger.anchor(force=True)
    ledger.close()
    assert committing_threads and threading.get_ident() not in committing_threads
    db = sqlite3.connect(tmp_path / "ledger.sqlite")
    assert verify_chain(db, ANCHOR) == []
    assert [r[0] for r in db.execute("SELECT trial_id FROM trials ORDER BY seq")] == [
        f"t{trial}" for trial in range(50)
    ]
    # The anchor written last names the last committed row (the sign-off event).
    assert head_problems(db, tmp_path, ANCHOR, empty=False) == []


def test_reads_wait_for_queued_appends(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path, ANCHOR)
    ledger.start_writer()
    ledger.append("trials", {"trial_id": "t0"})
    assert ledger.finished_trial_ids() == {"t0"}
    ledger.close()


def _ledger_whose_disk_fills_at_trial_bad(run_dir: Path) -> tuple[Ledger, sqlite3.Connection]:
    """A ledger on its writer thread whose insert of trial `bad` fails, and a reader of it."""
    ledger = Ledger.open(run_dir, ANCHOR)
    db = sqlite3.connect(run_dir / "ledger.sqlite", isolation_level=None)
    db.execute(
        "CREATE TRIGGER full BEFORE INSERT ON trials WHEN NEW.trial_id = 'bad' "
        "BEGIN SELECT RAISE(ABORT, 'disk full'); END"
    )
    ledger.start_writer()
    return ledger, db


def test_a_failed_commit_stops_the_writer_and_no_later_row_is_committed(tmp_path: Path) -> None:
    ledger, db = _ledger_whose_disk_fills_at_trial_bad(tmp_path)
    ledger.append("trials", {"trial_id": "before"})
    ledger.finished_trial_ids()  # waits until "before" is committed on its own
    ledger.append("trials", {"trial_id": "bad"})
    ledger.append("trials", {"trial_id": "after"})
    with pytest.raises(sqlite3.IntegrityError, match="disk full"):
        ledger.close()
    assert [r[0] for r in db.execute("SELECT trial_id FROM trials")] == ["before"]


def test_rows_appended_while_the_writer_is_busy_are_committed_in_one_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    groups: list[int] = []
    commit = Ledger._commit

    def counting_commit(self: Ledger, statements: list) -> None:
        groups.append(len(statements))
        commit(self, statements)

    monkeypatch.setattr(Ledger, "_commit", counting_commit)
    ledger = Ledger.open(tmp_path, ANCHOR)
    ledger.start_writer()
    groups.clear()
    busy, release = threading.Event(), threading.Event()
    ledger._run(lambda: (busy.set(), release.wait(10)))  # the writer is busy with a slow job
    busy.wait(10)
    for trial in range(20):
        ledger.append_many(
            [("attempts", {"trial_id": f"t{trial}"}), ("trials", {"trial_id": f"t{trial}"})]
        )
    release.set()
    ledger.close()
    assert groups == [40]  # one transaction for all twenty appends
    db = sqlite3.connect(tmp_path / "ledger.sqlite")
    assert verify_chain(db, ANCHOR) == []
    assert db.execute("SELECT COUNT(*) FROM trials").fetchone() == (20,)


def test_a_group_with_a_failing_row_commits_none_of_its_appends(tmp_path: Path) -> None:
    ledger, db = _ledger_whose_disk_fills_at_trial_bad(tmp_path)
    release = threading.Event()
    ledger._run(lambda: release.wait(10))
    for name in ("grouped", "bad", "after"):
        ledger.append("trials", {"trial_id": name})
    release.set()
    with pytest.raises(sqlite3.IntegrityError, match="disk full"):
        ledger.close()
    # All or none per group, and never a row after a lost one: the trials are run again.
    assert db.execute("SELECT COUNT(*) FROM trials").fetchone() == (0,)
    assert verify_chain(db, ANCHOR) == []


def test_an_unknown_column_or_a_value_that_would_not_read_back_is_refused_and_not_stored(
    tmp_path: Path,
) -> None:
    ledger = Ledger.open(tmp_path, ANCHOR)
    with pytest.raises(KeyError, match=r"unknown columns for trials: \['colour'\]"):
        ledger.append("trials", {"trial_id": "t0", "colour": "red"})
    with pytest.raises(TypeError, match=r"trials\.attempts must be str, int, float or None"):
        ledger.append("trials", {"trial_id": "t0", "attempts": True})  # would read back as 1
    ledger.append("trials", {"trial_id": "t0", "attempts": 1})
    ledger.close()
    db = sqlite3.connect(tmp_path / "ledger.sqlite")
    assert db.execute("SELECT trial_id, attempts FROM trials").fetchall() == [("t0", 1)]
    assert verify_chain(db, ANCHOR) == []


def test_drain_and_close_commit_the_pending_group_without_waiting_out_its_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("trustbench.core.ledger._store.GROUP_WINDOW_S", 30.0)
    ledger = Ledger.open(tmp_path, ANCHOR)
    ledger.start_writer()
    started = time.monotonic()
    ledger.append("trials", {"trial_id": "t0"})
    assert ledger.finished_trial_ids() == {"t0"}  # a read drains the queue
    ledger.append("trials", {"trial_id": "t1"})
    ledger.close()
    assert time.monotonic() - started < 10  # not the 30 s window, twice
    connection = sqlite3.connect(tmp_path / "ledger.sqlite")
    assert {row[0] for row in connection.execute("SELECT trial_id FROM trials")} == {"t0", "t1"}


def test_checkpoint_ahead_copies_the_committed_rows_into_the_database_file_before_close(
    tmp_path: Path,
) -> None:
    ledger = Ledger.open(tmp_path, ANCHOR)
    ledger.start_writer()
    for trial in range(200):
        ledger.append_many(
            [("attempts", {"trial_id": f"t{trial}", "request": "x" * 300}), ("trials", {})]
        )
    ledger.finished_trial_ids()  # committed, still in the WAL only
    database = tmp_path / "ledger.sqlite"
    before = database.stat().st_size
    ledger.checkpoint_ahead()
    ledger.finished_trial_ids()  # waits for the checkpoint job too
    assert database.stat().st_size > before + 100 * 300
    ledger.append("trials", {"trial_id": "late"})  # rows after it still commit and close
    ledger.close()
    db = sqlite3.connect(database)
    assert verify_chain(db, ANCHOR) == []
    assert db.execute("SELECT COUNT(*) FROM trials").fetchone()[0] == 201


def test_a_submitter_waits_once_too_many_statements_are_pending() -> None:
    from trustbench.core.ledger._store import MAX_PENDING, CommitThread

    committed: list[int] = []

    def slow_commit(statements: list) -> None:
        time.sleep(0.05)  # a disk slower than the producer
        committed.append(len(statements))

    writer = CommitThread(slow_commit)
    batch = [("INSERT", ())] * 100
    for _ in range(200):  # 20,000 statements, far more than may wait
        writer.submit_statements(batch)
    writer.close()
    assert sum(committed) == 20_000
    # Each commit takes at most what was pending: the cap plus the batch that found it full.
    assert max(committed) <= MAX_PENDING + len(batch)
