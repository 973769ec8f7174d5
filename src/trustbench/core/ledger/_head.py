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

The record statement (`record.intoto.json`, written by `report`) is a second anchor: it states
the head the record was graded from. Cutting the ledger's tail and rewriting `ledger.head` to
match leaves that statement behind, so `head_problems` also requires the stated head's row to be
in the ledger with its hash: `verify`, `report` and `run` (which would otherwise re-run the cut
trials as if new) all refuse such a ledger. Deleting the statement too defeats this; a signed
statement kept elsewhere (`verify --record --public-key`) does not.

The head also counts the finished trials (trial rows) up to its row (`trials`, issue 56): a
tail cut with `seq` and `row_hash` rewritten to the new last row, and the statement deleted,
leaves that count behind, and the check names it a cut (`CUT_OFF`). `run` then refuses, naming
the cut trials, unless told to re-run them (`run --rerun-cut`, recorded in the ledger). A forger
who rewrites the count too is, like every forger of `ledger.head`, stopped only by an anchor
kept elsewhere.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trustbench._canonical import DuplicateKeyError, loads_refusing_duplicate_keys
from trustbench.core._signing import decode_base64
from trustbench.errors import CheckFailed

STATEMENT_FILE = "record.intoto.json"
"""Name of the record statement (or its DSSE envelope) in a run folder (see `_attestation`)."""

HEAD_FILE = "ledger.head"
"""Name of the head anchor in a run folder."""

_TABLES = ("experiments", "trials", "attempts", "events")
"""The ledger's tables (as in `_ledger.TABLE_COLUMNS`; not imported: `_store` imports this)."""

HEAD_FORMAT = "trustbench.ledger-head/1"
"""Format id written into the head file."""


def write_head(
    run_dir: Path, manifest_sha256: str, seq: int, row_hash: str, *, trials: int | None = None
) -> None:
    """Atomically record the chain head (call only after the row is committed).

    `trials` is how many finished trials (trial rows) the ledger holds up to the head: a tail
    cut down to an earlier row, with the head rewritten to that row, leaves this count behind.
    """
    path = run_dir / HEAD_FILE
    body: dict[str, Any] = {
        "format": HEAD_FORMAT,
        "manifest_sha256": manifest_sha256,
        "seq": seq,
        "row_hash": row_hash,
    }
    if trials is not None:
        body["trials"] = trials
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
        or type(data.get("trials", 0)) is not int
    ):
        raise CheckFailed("ledger.head is not a ledger head record", location=str(path))
    return data


def recorded_seq(run_dir: Path) -> int | None:
    """The `seq` that `ledger.head` records, or None when it is missing or unreadable."""
    try:
        head = read_head(run_dir)
    except CheckFailed:
        return None
    return None if head is None else head["seq"]


def stated_head(run_dir: Path) -> tuple[int, str | None] | None:
    """`(seq, row_hash)` of the head `record.intoto.json` states, or None without a statement.

    `row_hash` is None when the statement was written for an empty ledger.

    Read without checking a signature: a consistency anchor, not a proof (`verify --record
    --public-key` checks the signature).

    Raises:
        CheckFailed: when the statement exists but states no readable head.
    """
    path = run_dir / STATEMENT_FILE
    try:
        # Strictly: a second "payload" would let this read another head than the signed one.
        document = loads_refusing_duplicate_keys(path.read_text(encoding="utf-8"))
        if isinstance(document, dict) and "payload" in document:
            document = loads_refusing_duplicate_keys(decode_base64(document["payload"]))
        head = document["predicate"]["ledger_head"]
        seq, row_hash = head["seq"], head["row_hash"]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError, KeyError, TypeError) as error:
        raise CheckFailed(
            f"{STATEMENT_FILE} states no readable ledger head ({_why(error)}): restore "
            "it, or move it away if it is not this run's",
            location=str(path),
        ) from None
    if type(seq) is not int or not (row_hash is None or isinstance(row_hash, str)):
        raise CheckFailed(f"{STATEMENT_FILE} states a malformed ledger head", location=str(path))
    return seq, row_hash


def _why(error: Exception) -> str:
    if isinstance(error, DuplicateKeyError):
        return f"it names the key {error.args[0]!r} twice in one object"
    return type(error).__name__


def _row_hash_at(connection: sqlite3.Connection, seq: int) -> str | None:
    for table in _TABLES:
        found = connection.execute(f"SELECT row_hash FROM {table} WHERE seq = ?", (seq,)).fetchone()
        if found is not None:
            return found[0]
    return None


def _last_seq(connection: sqlite3.Connection) -> int:
    return max(
        connection.execute(f"SELECT COALESCE(MAX(seq), 0) FROM {t}").fetchone()[0] for t in _TABLES
    )


def statement_problems(connection: sqlite3.Connection, run_dir: Path) -> list[str]:
    """The head the record statement states must be in the ledger, with its hash."""
    try:
        stated = stated_head(run_dir)
    except CheckFailed as error:
        return [error.message]
    if stated is None or stated[1] is None:
        return []
    seq, row_hash = stated
    found = _row_hash_at(connection, seq)
    if found == row_hash:
        return []
    if found is None:
        return [
            f"the ledger disagrees with {STATEMENT_FILE}: the record was graded from a ledger "
            f"reaching row seq {seq}, this one ends at seq {_last_seq(connection)}: rows were "
            "cut off after the record was written (and ledger.head rewritten?)"
        ]
    return [
        f"the ledger disagrees with {STATEMENT_FILE}: row seq {seq} no longer carries the hash "
        "the record was graded from: the ledger was rewritten after the record was written"
    ]


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
            return statement_problems(connection, run_dir)
        return [
            "ledger.head is missing (deleted, or the ledger was copied without it): rows cut "
            "off the ledger's end or a re-hashed chain could not be detected"
        ]
    if head["manifest_sha256"] != manifest_sha256:
        return ["ledger.head belongs to another manifest"]
    seq = head["seq"]
    found = _row_hash_at(connection, seq)
    if found is None:
        return [
            f"{CUT_OFF}: ledger.head records row seq {seq} but the ledger ends at seq "
            f"{_last_seq(connection)}"
        ]
    if found != head["row_hash"]:
        return [
            f"the ledger was rewritten: row seq {seq} does not carry the hash ledger.head "
            f"recorded ({head['row_hash'][:12]}…); the chain was re-hashed after an edit"
        ]
    return statement_problems(connection, run_dir) or _trial_count_problems(connection, head)


CUT_OFF = "rows were cut off the ledger's end"
"""How every problem of a cut tail begins (`run --rerun-cut` accepts these, and only these)."""


def _trial_count_problems(connection: sqlite3.Connection, head: dict[str, Any]) -> list[str]:
    """The finished trials `ledger.head` counts must all be in the ledger up to its row.

    The chain and the head's row cannot tell a cut tail, with the head rewritten to the new
    last row, from a run interrupted there; the count the head kept of the finished trials
    can. (An attacker who also rewrites this count is not caught by anything in the folder:
    only a statement or head kept elsewhere is.)
    """
    if "trials" not in head:
        return []  # written before heads counted trials
    held = _trials_up_to(connection, head["seq"])
    if held < head["trials"]:
        return [
            f"{CUT_OFF}: ledger.head counts {head['trials']} finished trials up to row seq "
            f"{head['seq']}, the ledger holds {held}: {head['trials'] - held} finished trials "
            "were cut off and ledger.head rewritten to match"
        ]
    if held > head["trials"]:
        return [
            f"the ledger was rewritten: it holds {held} finished trials up to row seq "
            f"{head['seq']}, ledger.head counts {head['trials']}"
        ]
    return []


def _trials_up_to(connection: sqlite3.Connection, seq: int) -> int:
    found = connection.execute("SELECT COUNT(*) FROM trials WHERE seq <= ?", (seq,)).fetchone()
    return int(found[0])


@dataclass(frozen=True)
class CutTail:
    """Rows cut off a ledger's end, as the head check found them."""

    problem: str
    """`verify`'s message for the cut."""
    trials: int | None
    """Finished trials cut: how many `ledger.head` counts beyond the ledger's (None: unknown,
    a head written before heads counted trials)."""


def cut_tail(connection: sqlite3.Connection, run_dir: Path, problems: list[str]) -> CutTail | None:
    """The cut tail among a ledger's `problems` (None without one), with its trials counted."""
    problem = next((found for found in problems if found.startswith(CUT_OFF)), None)
    if problem is None:
        return None
    try:
        head = read_head(run_dir)
    except CheckFailed:
        head = None
    if head is None or "trials" not in head:
        return CutTail(problem, None)
    return CutTail(problem, max(head["trials"] - _trials_up_to(connection, head["seq"]), 0))
