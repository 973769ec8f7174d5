"""The ledger file itself: SQLite's own integrity check and a schema nothing was added to.

The hash chain covers what the tables hold as read through SQLite. It cannot see damage that no
query of the chain reads: a byte changed in an index (a lookup by digest then finds the old row,
so an edited `contents.digest` went unnoticed), a table, view or trigger added beside the
ledger's (a trigger could rewrite rows as the runner appends them). So `verify` also runs
`PRAGMA integrity_check` (every b-tree and every index against its table) and requires the
schema to be exactly the one trustbench creates: the four chained tables with their DDL, the
`contents` table of a known format, their indexes, and nothing else.
"""

from __future__ import annotations

import sqlite3

from trustbench.core._ledger_contents import CONTENTS_DDL
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
