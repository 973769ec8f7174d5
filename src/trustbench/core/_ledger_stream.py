"""Stream a ledger's finished trials, each with its counted attempts, in chain order.

`report` used to read every row of the ledger into lists before grading (about 4 kB per trial
held for the whole report, issue 30). Here the trials and attempts tables are read by cursor in
`seq` order and merged; a trial's attempts are held only until its trial row arrives (the runner
writes a trial's attempts before its row), so what is held at once is bounded by the trials that
were in flight together, not by the run. An attempt counts when its execution is the one its
trial row finished in (attempts of abandoned executions are dropped, as `counted = False` drops
them in `LedgerContents.attempts`).

Read a ledger only after `verify` passed: rows out of `seq` order (a tampered ledger) are not
looked for here.
"""

from __future__ import annotations

import heapq
import sqlite3
from collections.abc import Callable, Iterator
from operator import itemgetter
from typing import Any

from trustbench.core._ledger_rows import TABLE_COLUMNS

TrialWithAttempts = tuple[dict[str, Any], list[dict[str, Any]]]
"""A finished trial row and its counted attempts, in order."""


def _stream(
    connection: sqlite3.Connection, table: str, columns: tuple[str, ...]
) -> Iterator[tuple[int, str, dict[str, Any]]]:
    cursor = connection.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY seq")
    seq = columns.index("seq")
    for values in cursor:  # a row holds exactly the columns selected
        yield values[seq], table, dict(zip(columns, values, strict=False))


def iter_trials_with_attempts(
    connection: sqlite3.Connection,
    parse: Callable[[dict[str, Any]], dict[str, Any]],
    *,
    attempt_texts: bool = True,
) -> Iterator[TrialWithAttempts]:
    """Yield `(trial, counted attempts)` for every finished trial, in chain order.

    Args:
        connection: An open ledger (see `open_for_reading`).
        parse: Turns a stored row into its parsed form (JSON columns, stored texts).
        attempt_texts: Whether attempts carry `request` and `raw_response`; without them the
            two columns are not even selected.

    Each attempt gets `counted = True`, as in `LedgerContents.attempts`.
    """
    attempt_columns = (*TABLE_COLUMNS["attempts"], "row_hash")
    if not attempt_texts:
        attempt_columns = tuple(c for c in attempt_columns if c not in {"request", "raw_response"})
    streams = [
        _stream(connection, "trials", (*TABLE_COLUMNS["trials"], "row_hash")),
        _stream(connection, "attempts", attempt_columns),
    ]
    pending: dict[str, list[dict[str, Any]]] = {}  # attempts of trials still in flight
    for _, table, row in heapq.merge(*streams, key=itemgetter(0)):
        if table == "attempts":
            pending.setdefault(row["trial_id"], []).append(row)
            continue
        trial = parse(row)
        attempts = []
        for attempt in pending.pop(trial["trial_id"], ()):
            if attempt["execution"] == trial["execution"]:
                attempt = parse(attempt)
                attempt["counted"] = True
                attempts.append(attempt)
        yield trial, attempts


def finished_trial_count(connection: sqlite3.Connection) -> int:
    """Finished trials (completed and failed): one row each in `trials`."""
    return int(connection.execute("SELECT COUNT(*) FROM trials").fetchone()[0])
