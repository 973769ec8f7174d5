"""`ledger.head`: the ledger's chain head, kept outside the SQLite file it vouches for.

The hash chain alone proves that no row *inside* the ledger was altered, removed or reordered. It
cannot prove that rows were not cut off the end (a shorter chain is still a valid chain), nor
that someone did not edit a row and then recompute every later hash (a re-hashed chain is valid
too). Both attacks touch only `ledger.sqlite`. This module records, next to it, the `seq` and
`row_hash` of the chain head at each sign-off point (ledger creation, every `run_started` and
`run_finished`, and at most once a second while trials finish). `verify` then requires the row at
that `seq` to exist and carry that hash:

- rows cut off at or before the recorded head: detected (the row is missing);
- a row edited at or before the recorded head and the chain re-hashed: detected (the hash at the
  recorded `seq` differs);
- rows cut or re-hashed *after* the last recorded head (at most about one second of an
  interrupted run's tail): not detected;
- an attacker who rewrites both `ledger.sqlite` and `ledger.head` (and `manifest.json`) can forge
  anything: only a signature or a copy of the head held elsewhere (an attestation, a record sent
  to a third party) defeats that.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

from trustbench.errors import CheckFailed

HEAD_FILE = "ledger.head"
"""Name of the head anchor in a run folder."""

_TABLES = ("experiments", "trials", "attempts", "events")
"""The ledger's tables (as in `_ledger.TABLE_COLUMNS`; not imported: `_ledger` imports this)."""

HEAD_FORMAT = "trustbench.ledger-head/1"
"""Format id written into the head file."""


def write_head(run_dir: Path, manifest_sha256: str, seq: int, row_hash: str) -> None:
    """Atomically record the chain head (call only after the row is committed)."""
    path = run_dir / HEAD_FILE
    body = {
        "format": HEAD_FORMAT,
        "manifest_sha256": manifest_sha256,
        "seq": seq,
        "row_hash": row_hash,
    }
    temporary = path.with_name(HEAD_FILE + ".tmp")
    temporary.write_text(json.dumps(body, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(temporary, path)


def read_head(run_dir: Path) -> dict[str, Any] | None:
    """The recorded head, or None when there is no head file.

    Raises:
        CheckFailed: when the head file exists but is not a valid head record.
    """
    path = run_dir / HEAD_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as error:
        raise CheckFailed(f"ledger.head is unreadable: {error}", location=str(path)) from None
    if (
        not isinstance(data, dict)
        or data.get("format") != HEAD_FORMAT
        or not isinstance(data.get("seq"), int)
        or not isinstance(data.get("row_hash"), str)
        or not isinstance(data.get("manifest_sha256"), str)
    ):
        raise CheckFailed("ledger.head is not a ledger head record", location=str(path))
    return data


def head_problems(
    connection: sqlite3.Connection, run_dir: Path, manifest_sha256: str, *, empty: bool
) -> list[str]:
    """Check the ledger against its recorded head; return problems (empty when consistent).

    Args:
        connection: The open ledger (its chain already verified, or about to be).
        run_dir: The run folder holding `ledger.head`.
        manifest_sha256: The manifest the run belongs to.
        empty: True when the ledger holds no rows at all.
    """
    try:
        head = read_head(run_dir)
    except CheckFailed as error:
        return [error.message]
    if head is None:
        if empty:
            return []
        return [
            "ledger.head is missing (deleted, or the ledger was copied without it): rows cut "
            "off the ledger's end or a re-hashed chain could not be detected"
        ]
    if head["manifest_sha256"] != manifest_sha256:
        return ["ledger.head belongs to another manifest"]
    seq = head["seq"]
    found = None
    for table in _TABLES:
        found = connection.execute(f"SELECT row_hash FROM {table} WHERE seq = ?", (seq,)).fetchone()
        if found is not None:
            break
    if found is None:
        last = max(
            connection.execute(f"SELECT COALESCE(MAX(seq), 0) FROM {t}").fetchone()[0]
            for t in _TABLES
        )
        return [
            f"rows were cut off the ledger's end: ledger.head records row seq {seq} but the "
            f"ledger ends at seq {last}"
        ]
    if found[0] != head["row_hash"]:
        return [
            f"the ledger was rewritten: row seq {seq} does not carry the hash ledger.head "
            f"recorded ({head['row_hash'][:12]}…); the chain was re-hashed after an edit"
        ]
    return []
