"""Reading a ledger's rows in chain order and recomputing the chain over them.

Apart from the writer (`_ledger`); `Ledger.open` (before resuming), `verify` and the export
read the chain through it.
"""

from __future__ import annotations

import heapq
import sqlite3
from collections.abc import Iterator
from typing import Any

from trustbench.core._ledger_rows import TABLE_COLUMNS, row_hash


def iter_rows(connection: sqlite3.Connection) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield `(table, row)` for every row of every table, in `seq` order (row includes hash).

    Streams: each table is read in `seq` order (its unique index) and the four streams are
    merged, so memory stays flat however long the ledger is (it used to hold every row at once:
    about 2 GB for a 100,000-trial run of the reviewer workload). Ties between tables keep
    table order, as the former stable sort did.
    """
    streams = []
    strays: list[tuple[str, dict[str, Any]]] = []
    for table, columns in TABLE_COLUMNS.items():
        names = (*columns, "row_hash")
        select = f"SELECT {', '.join(names)} FROM {table}"
        cursor = connection.execute(f"{select} WHERE typeof(seq) = 'integer' ORDER BY seq, id")
        streams.append(_table_stream(table, names, cursor))
        # A tampered seq may not be an integer; such rows come last and fail verification there.
        strays += [
            (table, dict(zip(names, values, strict=True)))
            for values in connection.execute(f"{select} WHERE typeof(seq) != 'integer'")
        ]
    for _, table, row in heapq.merge(*streams, key=lambda item: item[0]):
        yield table, row
    strays.sort(key=lambda item: str(item[1]["seq"]))
    yield from strays


def _table_stream(
    table: str, names: tuple[str, ...], cursor: sqlite3.Cursor
) -> Iterator[tuple[int, str, dict[str, Any]]]:
    for values in cursor:
        row = dict(zip(names, values, strict=True))
        yield row["seq"], table, row


def verify_chain(
    connection: sqlite3.Connection, manifest_sha256: str, head_seq: int | None = None
) -> list[str]:
    """Recompute the chain; return problems, the first altered, missing or inserted row first.

    Args:
        connection: An open ledger.
        manifest_sha256: The anchor: the hash of the run's manifest.
        head_seq: The `seq` that `ledger.head` records, when known: a row past it that does not
            chain was written by someone other than the run (named as inserted, not altered).

    Returns:
        Human-readable problems (empty when the chain is intact).
    """
    head, expected_seq = manifest_sha256, 1
    first = True
    for table, row in iter_rows(connection):
        where = f"{table} id {row['id']} (seq {row['seq']})"
        past_head = head_seq is not None and expected_seq > head_seq
        if type(row["seq"]) is not int or row["seq"] < expected_seq:
            return [f"{where} was inserted: its seq repeats or precedes the chain's (row seq "
                    f"{expected_seq} was expected)"]  # fmt: skip
        if row["seq"] != expected_seq:
            if past_head:
                return [_inserted(where, head_seq)]
            return [f"row seq {expected_seq} is missing (deleted?) before {where}"]
        if first:
            if table != "experiments" or row["manifest_sha256"] != manifest_sha256:
                return [f"{where}: the ledger is not anchored at this manifest"]
            first = False
        stored = row.pop("row_hash")
        head = row_hash(head, table, row)
        if head != stored:
            twin = _same_seq(connection, table, row["seq"])
            if twin is not None:
                return [f"{where} and {twin} carry the same seq: one of them was inserted"]
            if past_head:
                return [_inserted(where, head_seq)]
            return [f"first altered row: {where}: its hash does not match its content and chain"]
        expected_seq += 1
    if first:
        return ["the ledger is empty: no experiments row"]
    return []


def _inserted(where: str, head_seq: int | None) -> str:
    return (
        f"{where} was inserted: it lies past the last head the run recorded (ledger.head, seq "
        f"{head_seq}) and does not chain onto the rows before it"
    )


def _same_seq(connection: sqlite3.Connection, table: str, seq: int) -> str | None:
    """Another table's row carrying `seq` (seq is unique per table, not across tables)."""
    for other in TABLE_COLUMNS:
        if other != table:
            found = connection.execute(f"SELECT id FROM {other} WHERE seq = ?", (seq,)).fetchone()
            if found is not None:
                return f"{other} id {found[0]} (seq {seq})"
    return None
