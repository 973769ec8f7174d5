"""The ledger: a hash-chained, crash-safe SQLite record of every trial, attempt and event.

Tables: `experiments` (one row: the manifest hash this ledger belongs to), `trials` (one row per
*finished* trial), `attempts` (one row per call, written as soon as the call finishes) and
`events` (run started / finished, abandoned executions). Every row carries a global insertion
number `seq` and `row_hash = sha256(prev_row_hash || canonical_json({"table": ..., **row}))`,
where the first row's predecessor is the manifest hash. Changing one byte of a row, deleting a row
or reordering rows breaks the chain at that row, which `verify_ledger` names.

Durability: WAL journal with `synchronous=NORMAL`; each `append_many` call (an attempt, a
finished trial) is all-or-none. During a run the writer thread commits the calls of each 20 ms
together in one transaction (in this module), so a killed run loses at most its last 20 ms of
rows, whose trials are run again on resume. A committed WAL transaction survives the death of
the process (SIGKILL, crash): the threat this ledger is built for. It may not survive a power
loss or OS crash (that needs FULL, one fsync per commit); the run can then be resumed from what
was flushed, with the chain still verifiable.

Columns have no declared type (SQLite affinity NONE), so each value reads back exactly as it was
written and the hash recomputed at verification sees the same value that was hashed at write time.
"""

from __future__ import annotations

import hashlib
import heapq
import hmac
import json
import os
import queue
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from operator import itemgetter
from pathlib import Path
from typing import Any

from trustbench._canonical import canonical_json
from trustbench.core._clock import utc_now as utc_now
from trustbench.core.ledger._chain import JSON_COLUMNS as JSON_COLUMNS
from trustbench.core.ledger._chain import TABLE_COLUMNS, row_hash, verify_chain
from trustbench.core.ledger._chain import row_canonical_json as row_canonical_json
from trustbench.core.ledger._contents import (
    CONTENTS_DDL,
    FORMAT_3,
    BaseCompressor,
    ContentReader,
    ContentStore,
    NewContent,
    Statement,
    content_problems,
)
from trustbench.core.ledger._head import CutTail, cut_tail, head_problems, recorded_seq, write_head
from trustbench.errors import CheckFailed, InputError

# ------------------------------------------------------------------------------------------------
# The ledger's writer thread: SQLite commits and head anchors off the runner's event loop.
#
# A commit blocks for the disk write; on the event loop it stalls every in-flight trial for that
# long. `Ledger.start_writer` hands commits to this single thread, which runs them strictly in
# submission order, so the chain, the all-or-none rule for each appended group of rows and the
# head anchor (written after the rows it names are committed) are unchanged.
#
# Group commit: rows wait in one pending list, and the thread commits everything pending in one
# transaction, `GROUP_WINDOW_S` after the first of them arrived. Each commit rewrites the pages
# it touched (table tails and index pages) into the WAL, so fewer, larger commits cost less: in
# the latency-bound bench the writer's CPU went from about 0.15 to 0.09 ms per trial with a 20 ms
# window (about 300 commits down to 50 for 2,000 trials), and one commit per row had cost about
# 0.2 ms per trial. A group holds whole `append_many` calls, so each call's rows still survive or
# vanish together. A process killed with rows still pending loses only rows that were not yet
# committed (at most the last window's), as if it had been killed a moment earlier; resuming
# treats their trials as never run.
#
# Fail-stop: after a job fails, later jobs are dropped (a later row must never be committed after
# an earlier one was lost) and the error is raised by the next `submit`, `drain` or `close`.

Statements = list["Statement"]
"""SQL statements with their parameters, committed together."""

GROUP_WINDOW_S = 0.02
"""How long a group collects rows before it is committed (a killed run loses at most this)."""

MAX_PENDING = 4096
"""Statements that may wait for a commit; a submitter past this waits for the writer.

Back-pressure: without it, an event loop that makes rows faster than the thread commits them
(a fast in-process candidate, a slow disk) grows the pending list with the run, not with the
trials in flight (issue 30). Past this many the submitter waits (the GIL is free meanwhile)
until a commit takes them."""


class CommitThread:
    """One thread running submitted jobs in order; errors surface in the submitting thread.

    Args:
        commit: Commits a list of statements in one transaction (called on this thread).
    """

    def __init__(self, commit: Callable[[Statements], None]) -> None:
        self._commit = commit
        self._jobs: queue.Queue[Callable[[], object] | None] = queue.Queue()
        self._failure: BaseException | None = None
        self._pending: Statements = []
        self._flush_queued = False
        self._hurry = threading.Event()
        """Set while someone waits for the queue (drain, close): a group is committed at once."""
        self._lock = threading.Lock()
        self._taken = threading.Condition(self._lock)
        """Notified when a flush takes the pending statements (see `MAX_PENDING`)."""
        self._thread = threading.Thread(target=self._work, name="ledger-writer", daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[], object]) -> None:
        """Queue `job` after every job and every statement submitted before it.

        Raises:
            BaseException: the error of an earlier job that failed.
        """
        self._raise_failure()
        self._jobs.put(job)

    def submit_statements(self, statements: Statements) -> None:
        """Queue rows for the next group commit (after everything submitted before them).

        Raises:
            BaseException: the error of an earlier job that failed.
        """
        self._raise_failure()
        with self._lock:
            while len(self._pending) >= MAX_PENDING and self._flush_queued:
                if self._failure is not None or not self._thread.is_alive():
                    break  # nothing will take them: the failure is raised on the next call
                self._taken.wait(0.1)
            self._pending += statements
            if self._flush_queued:
                return  # a queued flush, ahead of any job submitted later, will take them
            self._flush_queued = True
        self._jobs.put(self._flush)

    def drain(self) -> None:
        """Wait until every submitted job has run; raise the first failure if there was one."""
        self._hurry.set()
        try:
            self._jobs.join()
        finally:
            self._hurry.clear()
        self._raise_failure()

    def close(self) -> None:
        """Run what is queued, stop the thread, and raise the first failure if there was one."""
        self._hurry.set()
        self._jobs.put(None)
        self._thread.join()
        self._raise_failure()

    def _flush(self) -> None:
        # Let the group grow (the GIL is free meanwhile), unless someone is waiting for it: the
        # end of a run waited out a whole window before its last commit.
        self._hurry.wait(GROUP_WINDOW_S)
        with self._lock:
            statements, self._pending = self._pending, []
            self._flush_queued = False
            self._taken.notify_all()
        if statements:
            self._commit(statements)

    def _raise_failure(self) -> None:
        if self._failure is not None:
            raise self._failure

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                if job is None:
                    return
                if self._failure is None:
                    job()
            except BaseException as error:
                self._failure = error
            finally:
                self._jobs.task_done()


# ------------------------------------------------------------------------------------------------
# The ledger file itself: SQLite's own integrity check and a schema nothing was added to.
#
# The hash chain covers what the tables hold as read through SQLite. It cannot see damage that no
# query of the chain reads: a byte changed in an index (a lookup by digest then finds the old row,
# so an edited `contents.digest` went unnoticed), a table, view or trigger added beside the
# ledger's (a trigger could rewrite rows as the runner appends them). So `verify` also runs
# `PRAGMA integrity_check` (every b-tree and every index against its table) and requires the
# schema to be exactly the one trustbench creates: the four chained tables with their DDL, the
# `contents` table of a known format, their indexes, and nothing else.
#
# `ledger_problems` is the whole check of a stored ledger: this, the chain, the stored bodies,
# the recorded head and the sign-offs. `verify` reports it and `Ledger.open` refuses to append
# to a ledger it finds anything in, so `run` never resumes onto a ledger `verify` would refuse.
#
# Remembered verifications (issue 56: resuming a finished 200,000-trial folder within 2 s, where
# the whole check costs about 25 s of CPU). Everything that check reads but the recorded head
# and the record statement is in the bytes of `ledger.sqlite`, so `run` may skip it for bytes it
# has already found intact: after a whole check finds nothing wrong, and the file's SHA-256 was
# the same before and after it, `run` writes an HMAC of (that SHA-256, the manifest hash) under
# the user's cache (`$TRUSTBENCH_CACHE/verified-ledgers`, default `~/.cache/trustbench`), keyed
# by a random secret made once there (readable by the user alone). On the next resume it hashes
# the file (about 0.6 s for 650 MB) and, when the HMAC matches, checks only the head and the
# statement, which live in other files. Any other byte, a `-wal` or `-journal` file with content
# beside the ledger (SQLite would read it as part of the database), another manifest, a missing
# or forged record (one in the run folder is never read; one in the cache is worthless without
# the key) or a key others could read: the whole check runs again. Appending rows changes the
# file, so only a ledger no run has appended to since its check is skipped (a finished folder,
# which `run` leaves byte for byte as it was). `verify` never uses a remembered result: it is
# the independent audit.

_OLD_CONTENTS_DDL = (
    "CREATE TABLE contents (digest PRIMARY KEY, body NOT NULL) WITHOUT ROWID",
    "CREATE TABLE contents (digest UNIQUE NOT NULL, body NOT NULL)",
)
"""`contents` as format 2 ledgers created it (still readable)."""
INDEXES = {
    "trials_trial_id": "CREATE UNIQUE INDEX trials_trial_id ON trials(trial_id)",
    "attempts_trial": "CREATE INDEX attempts_trial ON attempts(trial_id)",
}
"""The indexes the ledger creates besides SQLite's automatic ones, with their stored SQL."""


def _table_sql(table: str, columns: tuple[str, ...]) -> str:
    body = ", ".join(
        "id INTEGER PRIMARY KEY" if c == "id" else ("seq UNIQUE NOT NULL" if c == "seq" else c)
        for c in columns
    )
    return f"CREATE TABLE {table} ({body}, row_hash NOT NULL)"


TABLES: dict[str, tuple[str, ...]] = {
    table: (_table_sql(table, columns),) for table, columns in TABLE_COLUMNS.items()
}
TABLES["contents"] = (CONTENTS_DDL.replace(" IF NOT EXISTS", ""), *_OLD_CONTENTS_DDL)
"""Each table the ledger may hold and the stored SQL it may have been created with."""

UNREADABLE = (sqlite3.DatabaseError, UnicodeDecodeError)
"""What reading an edited ledger file raises: SQLite's errors, and Python's for a stored text
that is no longer UTF-8 (an edited byte in `sqlite_master` or a row). Both mean "not a ledger",
reported as such, never a traceback."""

MAX_REPORTED = 3
"""`integrity_check` messages quoted (it can list thousands)."""


def schema_problems(connection: sqlite3.Connection) -> list[str]:
    """Tables, indexes, views or triggers that trustbench did not create, or altered DDL."""
    problems = []
    for kind, name, table, sql in connection.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY rowid"
    ):
        if kind == "table" and name in TABLES:
            if sql not in TABLES[name]:
                problems.append(f"ledger.sqlite: table {name} was altered (its schema differs)")
        elif kind == "index" and name in INDEXES:
            if sql != INDEXES[name]:
                problems.append(f"ledger.sqlite: index {name} was altered (its schema differs)")
        elif kind == "index" and sql is None and table in TABLES:
            continue  # SQLite's own index of a UNIQUE / PRIMARY KEY column
        else:
            problems.append(
                f"ledger.sqlite holds an unknown {kind} {name!r}: a ledger has only the tables "
                f"{', '.join(TABLES)} (something was added to the file)"
            )
    return problems


def integrity_problems(connection: sqlite3.Connection) -> list[str]:
    """SQLite's `integrity_check` findings and schema problems; empty when the file is sound."""
    problems = schema_problems(connection)
    found = [row[0] for row in connection.execute("PRAGMA integrity_check")]
    if found != ["ok"]:
        quoted = "; ".join(found[:MAX_REPORTED]) + ("; …" if len(found) > MAX_REPORTED else "")
        problems.append(
            f"ledger.sqlite fails SQLite's integrity check (the file was edited or damaged): "
            f"{quoted}"
        )
    return problems


def ledger_problems(
    connection: sqlite3.Connection, run_dir: Path, manifest_sha256: str
) -> list[str]:
    """Everything wrong with a stored, non-empty ledger; empty when `verify` finds it intact.

    One implementation for `verify` (which reports the list) and `Ledger.open` (which refuses
    to append to a ledger with any problem): the file's integrity and schema, the hash chain,
    each stored body against its digest, the recorded head and the `run_finished` sign-offs.
    The first problem is the first altered or missing row when there is one.

    Raises:
        sqlite3.DatabaseError: when the file is not a readable SQLite database.
        UnicodeDecodeError: when a stored text is not UTF-8 (see `UNREADABLE`).
    """
    # What no query of the chain reads: indexes, free structure, tables added to the file.
    # Checked first (reported, or raised, in its place below): a sound file lets the content
    # check trust the digest index instead of asking it about every row.
    try:
        integrity: list[str] | Exception = integrity_problems(connection)
    except UNREADABLE as error:
        integrity = error
    problems = verify_chain(connection, manifest_sha256, recorded_seq(run_dir))
    # The chain commits to content digests; the stored bodies are re-hashed against them.
    problems += content_problems(connection, index_sound=integrity == [])
    chain_intact = not problems
    problems += head_problems(connection, run_dir, manifest_sha256, empty=False)
    if isinstance(integrity, Exception):
        raise integrity
    problems += integrity
    if chain_intact:
        problems += sign_off_problems(connection)
    return problems


def resume_problems(
    path: Path, run_dir: Path, manifest_sha256: str, ledger_format: str
) -> tuple[list[str], CutTail | None]:
    """`ledger_problems` of the ledger file at `path`, read only, before a writer opens it.

    Bytes a whole check already found intact (a remembered verification, see the module) get
    only the checks of what lies outside them: the recorded head and the record statement.
    Also refuses a ledger of another format than `ledger_format` (what this version appends),
    and returns the cut tail among the problems. A ledger without a row yet (a run killed
    before its first one) has none here: its head is checked once its tables exist.

    Raises:
        sqlite3.DatabaseError, UnicodeDecodeError: see `UNREADABLE`.
    """
    digest = ledger_digest(path)
    remembered = digest is not None and remembered_as_verified(path, manifest_sha256, digest)
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        if not _holds_rows(connection):
            return [], None
        problems = (
            # The file is bytes a whole check found intact: only what lies outside it is read.
            head_problems(connection, run_dir, manifest_sha256, empty=False)
            if remembered
            else ledger_problems(connection, run_dir, manifest_sha256)
        )
        if not problems and (found := ContentReader(connection).format) != ledger_format:
            problems.append(f"ledger.sqlite is format {found}; this writes {ledger_format}")
        cut = cut_tail(connection, run_dir, problems)
    finally:
        connection.close()
    # Hashed again: bytes changed during the check were not the bytes it found intact.
    if not (problems or remembered) and digest is not None and ledger_digest(path) == digest:
        remember_verified(path, manifest_sha256, digest)
    return problems, cut


def _holds_rows(connection: sqlite3.Connection) -> bool:
    """Whether any of the ledger's tables holds a row (a run killed before its first has none)."""
    tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master")}
    return any(
        connection.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone()
        for table in TABLE_COLUMNS
        if table in tables
    )


VERIFIED_FORMAT = "trustbench.verified-ledger/1"
"""What a remembered verification's HMAC covers, and under which check. Change it whenever
`ledger_problems` gains a check, so ledgers found intact by the older check are checked again."""

KEY_FILE = "key"
"""The secret, in the verified-ledgers folder: 32 random bytes, created once, mode 0600."""


def cache_root() -> Path:
    """`$TRUSTBENCH_CACHE`, or `~/.cache/trustbench`: the user's own trustbench cache.

    One definition for every part that caches (remembered ledger checks here, TRB's trained
    reference models), so setting the variable moves all of them.
    """
    return Path(os.environ.get("TRUSTBENCH_CACHE") or Path.home() / ".cache" / "trustbench")


def verified_folder() -> Path:
    """`$TRUSTBENCH_CACHE/verified-ledgers` (default `~/.cache/trustbench/verified-ledgers`).

    The user's own folder, never a run folder: whoever can edit a run folder must not be able
    to vouch for its ledger.
    """
    return cache_root() / "verified-ledgers"


def ledger_digest(path: Path) -> str | None:
    """SHA-256 of the ledger file, or None when SQLite would read more than the file's bytes.

    A `-wal` file with frames is part of the database until it is checkpointed, and a hot
    `-journal` is rolled back into it on open: neither is in the file's digest, so a ledger
    with either is never taken as remembered (nor remembered).
    """
    for side_file in (f"{path}-wal", f"{path}-journal"):
        try:
            if os.stat(side_file).st_size:
                return None
        except FileNotFoundError:
            continue
    try:
        with path.open("rb") as ledger:
            return hashlib.file_digest(ledger, "sha256").hexdigest()
    except OSError:
        return None  # unreadable: SQLite's own open says so, as before


def _record_path(ledger: Path) -> Path:
    """Where the remembered verification of the ledger at `ledger` is kept (one per path)."""
    return verified_folder() / hashlib.sha256(str(ledger.resolve()).encode()).hexdigest()[:32]


def _mac(key: bytes, manifest_sha256: str, digest: str) -> str:
    message = f"{VERIFIED_FORMAT}\n{manifest_sha256}\n{digest}".encode("ascii")
    return hmac.new(key, message, "sha256").hexdigest()


def _read_private(path: Path) -> bytes | None:
    """The file's bytes when only this user can read or write it, else None.

    A key or record another user could write (or read, for the key) vouches for nothing.

    Raises:
        OSError: when it cannot be read (FileNotFoundError when it does not exist).
    """
    with open(path, "rb", opener=lambda name, flags: os.open(name, flags | os.O_NOFOLLOW)) as found:
        status = os.fstat(found.fileno())
        if status.st_uid != os.getuid() or status.st_mode & 0o077:
            return None
        return found.read(4096)


def remembered_as_verified(ledger: Path, manifest_sha256: str, digest: str) -> bool:
    """Whether a whole check of this manifest's ledger found these exact bytes intact."""
    try:
        key = _read_private(verified_folder() / KEY_FILE)
        record = _read_private(_record_path(ledger))
    except OSError:
        return False
    if key is None or record is None:
        return False
    return hmac.compare_digest(record, _mac(key, manifest_sha256, digest).encode("ascii"))


def remember_verified(ledger: Path, manifest_sha256: str, digest: str) -> None:
    """Record that a whole check found the ledger with this digest intact (see the module).

    A cache that cannot be written (a read-only home) only means the next resume checks the
    whole ledger again: nothing is raised.
    """
    try:
        key = _secret_key()
        if key is None:
            return
        record = _record_path(ledger)
        written = record.with_name(f"{record.name}.{os.getpid()}.tmp")
        _write_private(written, _mac(key, manifest_sha256, digest).encode("ascii"))
        os.replace(written, record)
    except OSError:
        return


def _write_private(path: Path, content: bytes) -> None:
    """Write a new file only this user can read or write (a leftover of the same name goes)."""
    path.unlink(missing_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "wb") as written:
        written.write(content)


def _secret_key() -> bytes | None:
    """The HMAC key, made on first use; None when the one there is readable by others.

    Made under a temporary name and linked into place, which never replaces a key another
    process made first: both then use the one that won.

    Raises:
        OSError: when the cache folder cannot be made or written.
    """
    folder = verified_folder()
    path = folder / KEY_FILE
    try:
        return _read_private(path)
    except FileNotFoundError:
        pass
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    made = folder / f"{KEY_FILE}.{os.getpid()}.tmp"
    _write_private(made, secrets.token_bytes(32))
    try:
        os.link(made, path)
    except FileExistsError:
        pass
    finally:
        made.unlink()
    return _read_private(path)


def sign_off_problems(connection: sqlite3.Connection) -> list[str]:
    """Each `run_finished` must count the trials before it and name the head it closes."""
    for seq, data in connection.execute(
        "SELECT seq, data FROM events WHERE kind = 'run_finished' ORDER BY seq"
    ):
        signed = json.loads(data)
        before = connection.execute("SELECT COUNT(*) FROM trials WHERE seq < ?", (seq,)).fetchone()
        if signed.get("finished") != before[0]:
            return [
                f"events seq {seq}: the run_finished sign-off counts {signed.get('finished')} "
                f"finished trials, the ledger holds {before[0]} before it"
            ]
        previous = next(
            (
                found[0]
                for table in TABLE_COLUMNS
                if (
                    found := connection.execute(
                        f"SELECT row_hash FROM {table} WHERE seq = ?", (seq - 1,)
                    ).fetchone()
                )
            ),
            None,
        )
        if "head" in signed and signed["head"] != previous:
            return [f"events seq {seq}: the run_finished sign-off names another chain head"]
    return []


LEDGER_FILE = "ledger.sqlite"
"""Name of the ledger in a run folder."""

LEDGER_FORMAT = FORMAT_3
"""Format id stored in the experiments row (what this version writes; see `_contents`)."""

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
        this module).

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
        edit no longer verify (see `_head`).
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
        """From now on, commit and anchor on a writer thread, in order (see this module).

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
                `_contents`); the runner passes the trial's case id.
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


# ------------------------------------------------------------------------------------------------
# Stream a ledger's finished trials, each with its counted attempts, in chain order.
#
# `report` used to read every row of the ledger into lists before grading (about 4 kB per trial
# held for the whole report, issue 30). Here the trials and attempts tables are read by cursor in
# `seq` order and merged; a trial's attempts are held only until its trial row arrives (the runner
# writes a trial's attempts before its row), so what is held at once is bounded by the trials that
# were in flight together, not by the run. An attempt counts when its execution is the one its
# trial row finished in (attempts of abandoned executions are dropped, as `counted = False` drops
# them in `LedgerContents.attempts`).
#
# Read a ledger only after `verify` passed: rows out of `seq` order (a tampered ledger) are not
# looked for here.

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
