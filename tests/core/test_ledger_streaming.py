"""Reading the ledger streams rows in chain order, with the order rules the verifier relies on."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from trustbench.core import _export
from trustbench.core._export import open_ledger, read_ledger
from trustbench.core.ledger._chain import iter_rows, verify_chain
from trustbench.core.ledger._store import Ledger

ANCHOR = "0" * 64


def _ledger(tmp_path: Path) -> sqlite3.Connection:
    ledger = Ledger.open(tmp_path, ANCHOR)
    ledger.event("run_started", {"n": 1})
    ledger.append("attempts", {"trial_id": "c/x/0", "execution": 1})
    ledger.append("trials", {"trial_id": "c/x/0", "status": "completed", "outcome": "null"})
    ledger.event("run_finished", {"n": 1})
    ledger.close()
    return sqlite3.connect(tmp_path / "ledger.sqlite")


def test_rows_of_all_tables_come_back_merged_in_seq_order(tmp_path: Path) -> None:
    connection = _ledger(tmp_path)
    rows = list(iter_rows(connection))
    assert [row["seq"] for _, row in rows] == [1, 2, 3, 4, 5]
    assert [table for table, _ in rows] == [
        "experiments", "events", "attempts", "trials", "events",
    ]  # fmt: skip
    assert verify_chain(connection, ANCHOR) == []


def test_a_row_whose_seq_was_made_text_comes_last_and_breaks_the_chain_there(
    tmp_path: Path,
) -> None:
    connection = _ledger(tmp_path)
    connection.execute("UPDATE attempts SET seq = 'x' WHERE seq = 3")
    connection.commit()
    rows = list(iter_rows(connection))
    assert [row["seq"] for _, row in rows] == [1, 2, 4, 5, "x"]
    assert verify_chain(connection, ANCHOR) == [
        "row seq 3 is missing (deleted?) before trials id 1 (seq 4)"
    ]


def _ledger_with_changes(tmp_path: Path) -> None:
    ledger = Ledger.open(tmp_path, ANCHOR)
    ledger.event("run_started", {"n": 1})
    ledger.event("concurrency_changed", {"from": 4, "to": 2, "reason": "timeout"})
    ledger.append("attempts", {"trial_id": "c/x/0", "execution": 1})
    ledger.append("trials", {"trial_id": "c/x/0", "status": "completed", "outcome": "null"})
    ledger.event("concurrency_changed", {"from": 2, "to": 3, "reason": "recovered"})
    ledger.event("run_finished", {"n": 1})
    ledger.close()


def test_events_of_one_kind_streamed_are_those_read_with_every_row(tmp_path: Path) -> None:
    _ledger_with_changes(tmp_path)
    held = read_ledger(tmp_path)
    expected = [event for event in held.events if event["kind"] == "concurrency_changed"]
    assert [event["data"]["to"] for event in expected] == [2, 3]
    assert open_ledger(tmp_path).events_of("concurrency_changed") == expected
    assert held.events_of("concurrency_changed") == expected


def test_events_of_a_streamed_ledger_reads_no_trial_or_attempt_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `report` streams the ledger; reading `events` there parsed every trial row a second time.
    _ledger_with_changes(tmp_path)
    streamed = open_ledger(tmp_path)

    def every_row(*_: object) -> None:
        raise AssertionError("every row of the ledger was read for one kind of event")

    monkeypatch.setattr(_export, "_read_all", every_row)
    assert len(streamed.events_of("concurrency_changed")) == 2
