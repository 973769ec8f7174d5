"""The ledger file itself: SQLite's own integrity check and a schema nothing was added to.

The hash chain covers what the tables hold as read through SQLite. It cannot see damage that no
query of the chain reads: a byte changed in an index (a lookup by digest then finds the old row,
so an edited `contents.digest` went unnoticed), a table, view or trigger added beside the
ledger's (a trigger could rewrite rows as the runner appends them). So `verify` also runs
`PRAGMA integrity_check` (every b-tree and every index against its table) and requires the
schema to be exactly the one trustbench creates: the four chained tables with their DDL, the
`contents` table of a known format, their indexes, and nothing else.

`ledger_problems` is the whole check of a stored ledger: this, the chain, the stored bodies,
the recorded head and the sign-offs. `verify` reports it and `Ledger.open` refuses to append
to a ledger it finds anything in, so `run` never resumes onto a ledger `verify` would refuse.

Remembered verifications (issue 56: resuming a finished 200,000-trial folder within 2 s, where
the whole check costs about 25 s of CPU). Everything that check reads but the recorded head
and the record statement is in the bytes of `ledger.sqlite`, so `run` may skip it for bytes it
has already found intact: after a whole check finds nothing wrong, and the file's SHA-256 was
the same before and after it, `run` writes an HMAC of (that SHA-256, the manifest hash) under
the user's cache (`$TRUSTBENCH_CACHE/verified-ledgers`, default `~/.cache/trustbench`), keyed
by a random secret made once there (readable by the user alone). On the next resume it hashes
the file (about 0.6 s for 650 MB) and, when the HMAC matches, checks only the head and the
statement, which live in other files. Any other byte, a `-wal` or `-journal` file with content
beside the ledger (SQLite would read it as part of the database), another manifest, a missing
or forged record (one in the run folder is never read; one in the cache is worthless without
the key) or a key others could read: the whole check runs again. Appending rows changes the
file, so only a ledger no run has appended to since its check is skipped (a finished folder,
which `run` leaves byte for byte as it was). `verify` never uses a remembered result: it is
the independent audit.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import sqlite3
from pathlib import Path

from trustbench.core._ledger_chain import verify_chain
from trustbench.core._ledger_contents import CONTENTS_DDL, ContentReader
from trustbench.core._ledger_contents_check import content_problems
from trustbench.core._ledger_head import CutTail, cut_tail, head_problems, recorded_seq
from trustbench.core._ledger_rows import TABLE_COLUMNS

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
