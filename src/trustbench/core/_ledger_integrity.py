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
"""

from __future__ import annotations

import json
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

    Also refuses a ledger of another format than `ledger_format` (what this version appends),
    and returns the cut tail among the problems. A ledger without a row yet (a run killed
    before its first one) has none here: its head is checked once its tables exist.

    Raises:
        sqlite3.DatabaseError, UnicodeDecodeError: see `UNREADABLE`.
    """
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master")}
        if not any(
            connection.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone()
            for table in TABLE_COLUMNS
            if table in tables
        ):
            return [], None
        problems = ledger_problems(connection, run_dir, manifest_sha256)
        if not problems and (found := ContentReader(connection).format) != ledger_format:
            problems.append(f"ledger.sqlite is format {found}; this writes {ledger_format}")
        return problems, cut_tail(connection, run_dir, problems)
    finally:
        connection.close()


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
