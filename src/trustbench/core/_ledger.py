"""The ledger: a hash-chained, crash-safe SQLite record of every trial, attempt and event.

Tables: `experiments` (one row: the manifest hash this ledger belongs to), `trials` (one row per
*finished* trial), `attempts` (one row per call, written as soon as the call finishes) and `events`
(run started / finished, abandoned executions). Every row carries a global insertion number `seq`
and `row_hash = sha256(prev_row_hash || canonical_json({"table": ..., **row}))`, where the first
row's predecessor is the manifest hash. Changing one byte of a row, deleting a row or reordering
rows breaks the chain at that row, which `verify_ledger` names.

Durability: WAL journal with `synchronous=NORMAL`; each `append_many` call (an attempt, a
finished trial) is all-or-none. During a run the writer thread commits the calls of each 20 ms
together in one transaction (`_ledger_writer`), so a killed run loses at most its last 20 ms of
rows, whose trials are run again on resume. A committed WAL transaction survives the death of
the process (SIGKILL, crash): the threat this ledger is built for. It may not survive a power
loss or OS crash (that needs FULL, one fsync per commit); the run can then be resumed from what
was flushed, with the chain still verifiable.

Columns have no declared type (SQLite affinity NONE), so each value reads back exactly as it was
written and the hash recomputed at verification sees the same value that was hashed at write time.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from trustbench._canonical import canonical_json
from trustbench.core._clock import utc_now as utc_now
from trustbench.core._ledger_contents import (
    CONTENTS_DDL,
    FORMAT_3,
    BaseCompressor,
    ContentStore,
    NewContent,
    Statement,
)
from trustbench.core._ledger_head import CutTail, head_problems, write_head
from trustbench.core._ledger_integrity import UNREADABLE, resume_problems
from trustbench.core._ledger_rows import JSON_COLUMNS as JSON_COLUMNS
from trustbench.core._ledger_rows import TABLE_COLUMNS, row_hash
from trustbench.core._ledger_rows import row_canonical_json as row_canonical_json
from trustbench.core._ledger_writer import CommitThread
from trustbench.errors import CheckFailed, InputError

LEDGER_FILE = "ledger.sqlite"
"""Name of the ledger in a run folder."""

LEDGER_FORMAT = FORMAT_3
"""Format id stored in the experiments row (what this version writes; see `_ledger_contents`)."""

EMPTY_FILE = (
    "ledger.sqlite is empty (0 bytes): it was truncated or replaced; restore it from a copy or "
    "freeze into a new run folder"
)
NOT_A_LEDGER = "ledger.sqlite is corrupted or not a SQLite ledger"


_STORABLE = (str, int, float, type(None))
"""What a column may hold (bool excluded: it would read back as an integer)."""
_PLAIN = frozenset(_STORABLE)
"""The exact types of `_STORABLE`: checked first, as nearly every value is one of them."""

_INSERT: dict[str, str] = {
    table: f"INSERT INTO {table} ({', '.join(columns)}, row_hash) "
    f"VALUES ({', '.join('?' * (len(columns) + 1))})"
    for table, columns in TABLE_COLUMNS.items()
}
"""The `INSERT` statement of each table, built once."""


def _connect(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    return connection


def _create_tables(connection: sqlite3.Connection) -> None:
    # One transaction: all or none of the schema, and one WAL write instead of seven.
    connection.execute("BEGIN")
    try:
        for table, columns in TABLE_COLUMNS.items():
            body = ", ".join(
                "id INTEGER PRIMARY KEY"
                if c == "id"
                else ("seq UNIQUE NOT NULL" if c == "seq" else c)
                for c in columns
            )
            connection.execute(f"CREATE TABLE IF NOT EXISTS {table} ({body}, row_hash NOT NULL)")
        connection.execute("CREATE UNIQUE INDEX IF NOT EXISTS trials_trial_id ON trials(trial_id)")
        connection.execute("CREATE INDEX IF NOT EXISTS attempts_trial ON attempts(trial_id)")
        connection.execute(CONTENTS_DDL)
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise


def _last_row(connection: sqlite3.Connection) -> tuple[int, str] | None:
    """`(seq, row_hash)` of the most recent row, or None for an empty ledger."""
    last: tuple[int, str] | None = None
    for table in TABLE_COLUMNS:
        found = connection.execute(
            f"SELECT seq, row_hash FROM {table} ORDER BY seq DESC LIMIT 1"
        ).fetchone()
        if found is not None and (last is None or found[0] > last[0]):
            last = (found[0], found[1])
    return last


def _refuse_altered(run_dir: Path, manifest_sha256: str, accept_cut: bool) -> CutTail | None:
    """Refuse a stored ledger `verify` finds altered, reading it only; return a cut accepted."""
    path = run_dir / LEDGER_FILE
    if path.stat().st_size == 0:
        raise CheckFailed(f"refusing to resume: {EMPTY_FILE}", location=str(path))
    try:
        problems, cut = resume_problems(path, run_dir, manifest_sha256, LEDGER_FORMAT)
    except UNREADABLE as error:
        raise CheckFailed(f"{NOT_A_LEDGER}: {error}", location=str(path)) from None
    if accept_cut and cut is not None:
        problems.remove(cut.problem)
    if problems:
        raise CheckFailed(f"refusing to resume: {problems[0]}", location=str(path))
    return cut


class Ledger:
    """Single-writer append-only ledger of one run folder.

    Only the runner's event loop writes; every `append_*` call is one committed transaction,
    committed inline or, after `start_writer`, on the writer thread in call order.
    """

    def __init__(self, connection: sqlite3.Connection, head: str, seq: int, ids: dict[str, int]):
        self._db = connection
        self._head = head
        self._seq = seq
        self._ids = ids
        self._trials = 0
        """Finished trials (trial rows) up to the head, recorded with it in `ledger.head`."""
        self.cut: CutTail | None = None
        """The cut tail `open(accept_cut=True)` found (None: none): the caller decides."""
        self._anchor_to: tuple[Path, str] | None = None
        self._anchored_at = float("-inf")
        self._contents = ContentStore()
        self._compressor = BaseCompressor()
        self._writer: CommitThread | None = None

    @classmethod
    def open(cls, run_dir: Path, manifest_sha256: str, *, accept_cut: bool = False) -> Ledger:
        """Open (or create) the run's ledger, refusing one that `verify` would refuse.

        An existing ledger gets `verify`'s own check (`ledger_problems`) before anything is
        written to it: a refused one is left byte for byte as it was. Bytes that check already
        found intact get only its checks of other files (a remembered verification, see
        `_ledger_integrity`).

        Args:
            run_dir: The run folder.
            manifest_sha256: The manifest the ledger must belong to.
            accept_cut: Open a ledger whose only problem is a cut tail and say so in `cut`, for
                a caller that names the cut trials or re-runs them (`run --rerun-cut`).

        Raises:
            CheckFailed: when the ledger belongs to another manifest, its chain is broken, a
                stored body differs from its digest, rows were cut off its end or re-hashed
                (see `ledger.head`), or the file is empty, damaged or not a SQLite database.
        """
        path = run_dir / LEDGER_FILE
        cut = _refuse_altered(run_dir, manifest_sha256, accept_cut) if path.exists() else None
        try:
            connection = _connect(path)
            _create_tables(connection)
            last = _last_row(connection)
            problems = (
                [] if last else head_problems(connection, run_dir, manifest_sha256, empty=True)
            )
            if problems:
                # A ledger killed before its first row was committed is empty: start it afresh,
                # unless ledger.head says rows had been committed (then they were cut off).
                connection.close()
                raise CheckFailed(f"refusing to resume: {problems[0]}", location=str(path))
            ids = {
                table: connection.execute(f"SELECT COALESCE(MAX(id), 0) FROM {table}").fetchone()[0]
                for table in TABLE_COLUMNS
            }
            trials = connection.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
        except UNREADABLE as error:
            raise CheckFailed(f"{NOT_A_LEDGER}: {error}", location=str(path)) from None
        seq, head = last if last is not None else (0, manifest_sha256)
        ledger = cls(connection, head, seq, ids)
        ledger._anchor_to, ledger._trials, ledger.cut = (run_dir, manifest_sha256), trials, cut
        if last is None:
            ledger.append(
                "experiments",
                {
                    "manifest_sha256": manifest_sha256,
                    "ledger_format": LEDGER_FORMAT,
                    "created_at": utc_now(),
                },
            )
            ledger.anchor(force=True)
        return ledger

    @property
    def head(self) -> str:
        """Hash of the most recent row (the manifest hash for an empty ledger)."""
        return self._head

    def anchor(self, *, force: bool = False) -> None:
        """Record the current chain head in `ledger.head` (at most once a second unless `force`).

        With the head outside the SQLite file, rows cut off the end or a chain re-hashed after an
        edit no longer verify (see `_ledger_head`).
        """
        now = time.monotonic()
        if self._anchor_to is None or (not force and now - self._anchored_at < 1.0):
            return
        run_dir, manifest_sha256 = self._anchor_to
        seq, head = self._seq, self._head
        trials = self._trials
        self._run(lambda: write_head(run_dir, manifest_sha256, seq, head, trials=trials))
        self._anchored_at = now

    def start_writer(self) -> None:
        """From now on, commit and anchor on a writer thread, in order (see `_ledger_writer`).

        Appends then return once their rows are hashed and queued; reads and `close` wait for
        the queue to drain.
        """
        if self._writer is None:
            self._writer = CommitThread(self._commit)

    def _run(self, job: Callable[[], object]) -> None:
        if self._writer is None:
            job()
        else:
            self._writer.submit(job)

    def _drained(self) -> sqlite3.Connection:
        if self._writer is not None:
            self._writer.drain()
        return self._db

    def checkpoint_ahead(self) -> None:
        """Start copying the WAL into the database file on the writer thread, now.

        `close` must checkpoint everything left in the WAL (a `ledger.sqlite` copied without
        its `-wal` file would lack those rows), with an fsync of each file: at the end of a
        2,000-trial run that was 10 to 30 ms, after the last trial. The runner calls this
        when it hands out its last trial, so most of that copying overlaps the trials still in
        flight (SQLite releases the GIL while it checkpoints); `close` then copies only the
        rows committed since. A no-op without a writer thread (it would block the caller).
        """
        if self._writer is not None:
            self._writer.submit(lambda: self._db.execute("PRAGMA wal_checkpoint(PASSIVE)"))

    def close(self) -> None:
        """Commit what is queued, checkpoint the WAL into the database file and close."""
        try:
            if self._writer is not None:
                self._writer.close()
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            self._db.close()

    def append(
        self,
        table: str,
        values: dict[str, Any],
        *,
        family: str | None = None,
        request: Any = None,
    ) -> int:
        """Append one row in its own transaction; return its id.

        Args:
            table: One of `TABLE_COLUMNS`.
            values: Column values except id/seq (JSON columns already encoded as text); only
                str, int, float and None are stored.
            family: For attempts, what groups alike texts for compression (see
                `_ledger_contents`); the runner passes the trial's case id.
            request: For attempts, the request as a JSON value whose canonical JSON is exactly
                `values["request"]`, so it is packed without parsing the text again (None: parse).
        """
        return self._append([(table, values)], family, request)[0]

    def append_many(
        self, rows: list[tuple[str, dict[str, Any]]], *, family: str | None = None
    ) -> list[int]:
        """Append several rows in one transaction (all or none survive a crash)."""
        return self._append(rows, family, None)

    def _append(
        self, rows: list[tuple[str, dict[str, Any]]], family: str | None, request: Any
    ) -> list[int]:
        ids: list[int] = []
        statements: list[Statement] = []
        head, seq, trials = self._head, self._seq, self._trials
        next_ids = dict(self._ids)
        batch = self._contents.begin()
        for table, values in rows:
            columns = TABLE_COLUMNS[table]
            if table == "attempts":
                values, inserts = batch.pack_attempt(values, family, request)
                statements += inserts
            next_ids[table] += 1
            seq += 1
            trials += table == "trials"
            row = {"id": next_ids[table], "seq": seq, **values}
            ordered = {name: row.get(name) for name in columns}
            for name, value in ordered.items():
                if type(value) not in _PLAIN and (
                    isinstance(value, bool) or not isinstance(value, _STORABLE)
                ):
                    raise TypeError(f"{table}.{name} must be str, int, float or None")
            if len(row) != len(columns) and (unknown := sorted(row.keys() - ordered.keys())):
                raise KeyError(f"unknown columns for {table}: {unknown}")
            head = row_hash(head, table, ordered)
            statements.append((_INSERT[table], (*ordered.values(), head)))
            ids.append(next_ids[table])
        # Synchronously, the state advances only once committed. On the writer thread it
        # advances now: a failed commit stops the writer, and every later call raises.
        if self._writer is None:
            self._commit(statements)
        else:
            self._writer.submit_statements(statements)
        self._head, self._seq, self._ids, self._trials = head, seq, next_ids, trials
        batch.commit()
        return ids

    def _commit(self, statements: list[Statement]) -> None:
        # Contents are compressed here, on the writer thread when there is one (zlib releases
        # the GIL), not on the event loop that appended them. The rows of one statement go in
        # one `executemany`, in their order (inside one transaction the order across tables
        # changes nothing stored: every row carries its id and seq), which saves the writer a
        # Python-level call and a statement-cache lookup per row.
        grouped: dict[str, list[tuple[Any, ...]]] = {}
        for statement in statements:
            sql, parameters = (
                statement.statement(self._compressor)
                if isinstance(statement, NewContent)
                else statement
            )
            grouped.setdefault(sql, []).append(parameters)
        self._db.execute("BEGIN")
        try:
            for sql, rows in grouped.items():
                self._db.executemany(sql, rows)
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def event(self, kind: str, data: Any) -> None:
        """Append an event with JSON data."""
        self.append(
            "events", {"at": utc_now(), "kind": kind, "data": canonical_json(data).decode()}
        )

    def ends_signed_off(self) -> bool:
        """Whether the ledger's last row is a `run_finished` sign-off (a finished run)."""
        return ends_signed_off(self._drained())

    def finished_trial_ids(self) -> set[str]:
        """Ids of trials that have a finished row (completed or failed)."""
        return {row[0] for row in self._drained().execute("SELECT trial_id FROM trials")}

    def finished_trial_ids_sorted(self) -> Iterator[str]:
        """Ids of the finished trials in sorted order, streamed (SQLite reads its index)."""
        for (trial_id,) in self._drained().execute("SELECT trial_id FROM trials ORDER BY trial_id"):
            yield trial_id

    def finished_trial_count(self) -> int:
        """How many trials have a finished row (counted by SQLite, no id held)."""
        return int(self._drained().execute("SELECT COUNT(*) FROM trials").fetchone()[0])

    def unfinished_executions(self) -> dict[str, list[tuple[int, list[int]]]]:
        """Attempts of trials without a finished row: `{trial_id: [(execution, attempt_ids)]}`."""
        found: dict[str, dict[int, list[int]]] = {}
        for trial_id, execution, attempt_id in self._drained().execute(
            "SELECT trial_id, execution, id FROM attempts WHERE trial_id NOT IN "
            "(SELECT trial_id FROM trials) ORDER BY id"
        ):
            found.setdefault(trial_id, {}).setdefault(execution, []).append(attempt_id)
        return {t: sorted(e.items()) for t, e in found.items()}

    def abandoned_marked(self) -> set[tuple[str, int]]:
        """`(trial_id, execution)` pairs already marked abandoned by an event."""
        marked: set[tuple[str, int]] = set()
        for (data,) in self._drained().execute(
            "SELECT data FROM events WHERE kind = 'execution_abandoned'"
        ):
            parsed = json.loads(data)
            marked.add((parsed["trial_id"], parsed["execution"]))
        return marked


def ends_signed_off(connection: sqlite3.Connection) -> bool:
    """Whether the ledger's last row is a `run_finished` event (else: interrupted, or empty)."""
    last = max(
        connection.execute(f"SELECT COALESCE(MAX(seq), 0) FROM {t}").fetchone()[0]
        for t in TABLE_COLUMNS
    )
    found = connection.execute("SELECT kind FROM events WHERE seq = ?", (last,)).fetchone()
    return found is not None and found[0] == "run_finished"


def open_for_reading(run_dir: Path) -> sqlite3.Connection:
    """Open an existing ledger for reading.

    Raises:
        InputError: when the run folder has no ledger.
        CheckFailed: when the ledger file is empty or not a SQLite database.
    """
    path = run_dir / LEDGER_FILE
    if not path.exists():
        raise InputError("no ledger.sqlite: run `trustbench run` first", location=str(path))
    if path.stat().st_size == 0:
        raise CheckFailed(EMPTY_FILE, location=str(path))
    # Not `mode=ro`: a ledger left by a killed writer may need its WAL recovered on open, which a
    # read-only connection cannot do. Nothing here writes rows.
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master")}
    except UNREADABLE as error:
        connection.close()
        raise CheckFailed(f"{NOT_A_LEDGER}: {error}", location=str(path)) from None
    if not set(TABLE_COLUMNS) <= tables:
        connection.close()
        raise CheckFailed(f"{NOT_A_LEDGER}: tables are missing", location=str(path))
    return connection
