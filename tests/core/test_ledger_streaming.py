"""Reading the ledger streams rows in chain order, with the order rules the verifier relies on."""

from __future__ import annotations

import sqlite3
from pathlib import Path

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
