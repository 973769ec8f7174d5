"""Simulate a run killed after a given ledger row (for interrupted-run tests)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from trustbench.core import TABLE_COLUMNS, write_head


def crash_after_seq(run_dir: Path, seq: int) -> None:
    """Leave the run folder as a run killed right after row `seq` would.

    Deletes every later row and records that row as the head in `ledger.head`: a real crash
    leaves the head file at or before the ledger's last committed row, never beyond it. (Cutting
    rows without moving the head is tampering, which `verify` reports.)
    """
    manifest_sha = json.loads((run_dir / "manifest.json").read_text())["manifest_sha256"]
    with sqlite3.connect(run_dir / "ledger.sqlite") as db:
        for table in TABLE_COLUMNS:
            db.execute(f"DELETE FROM {table} WHERE seq > ?", (seq,))
        last = max(
            (
                found
                for table in TABLE_COLUMNS
                if (
                    found := db.execute(
                        f"SELECT seq, row_hash FROM {table} WHERE seq = ?", (seq,)
                    ).fetchone()
                )
            ),
            default=None,
        )
    db.close()
    assert last is not None, f"no row seq {seq} to crash after"
    write_head(run_dir, manifest_sha, last[0], last[1])
