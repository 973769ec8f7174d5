"""`verify`'s check of the content store: each body hashes to its digest, each reference is stored.

Apart from `_ledger_contents` (which stores and reads the texts) because only `verify` asks
this, and it reads the whole store at once: one scan of the bodies, referenced digests looked
up a batch at a time.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from typing import Any

from trustbench.core._ledger_contents import (
    CONTENTS_DDL,
    FORMAT_1,
    FORMAT_2,
    FORMAT_3,
    ContentReader,
)
from trustbench.errors import CheckFailed


def content_problems(connection: sqlite3.Connection, *, index_sound: bool = False) -> list[str]:
    """Contents that do not match their digests or are missing; empty when intact.

    Args:
        connection: An open ledger.
        index_sound: The caller found the file's schema as trustbench creates it and SQLite's
            `integrity_check` clean (so the unique index of `digest` holds exactly the table's
            digests, each once): a lookup of a row's digest then finds that row, which is not
            asked again for every row.
    """
    try:
        reader = ContentReader(connection)
    except CheckFailed as error:  # an unknown format id (the chain says whether it was edited)
        return [str(error)]
    if reader.format == FORMAT_1:
        return []
    return _body_problems(connection, reader, index_sound) or _reference_problems(
        connection, reader
    )


ROWID_CONTENTS_DDL = {
    FORMAT_3: CONTENTS_DDL.replace(" IF NOT EXISTS", ""),
    FORMAT_2: "CREATE TABLE contents (digest UNIQUE NOT NULL, body NOT NULL)",
}
"""`contents` as format 3, and (of its two forms) format 2, created it: rowid tables with the
unique index of `digest` beside them."""


def _body_problems(
    connection: sqlite3.Connection, reader: ContentReader, index_sound: bool
) -> list[str]:
    """The first stored body (in table order) that does not hash to its digest."""
    # NOT INDEXED: read each digest from the table itself. Through the digest's unique index
    # (which SQLite would use here) a digest edited in the table was never seen.
    select = "SELECT digest, NULL, NULL, 0 FROM contents NOT INDEXED"
    schema = connection.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'contents'"
    ).fetchone()
    if schema is not None and schema[0] == ROWID_CONTENTS_DDL.get(reader.format):
        # Each row's body and base are read with its digest, and whether a lookup of that
        # digest by the index finds this very row: its text is then the one the lookup would
        # decompress (a query per digest was a quarter of `verify`). A row the lookup does not
        # find (an edited index, a repeated digest) is judged through the lookup, as before.
        # On a sound file (`index_sound`: `integrity_check` found the unique index holding
        # each digest of the table once, with its row) the lookup would find the row itself.
        base = "base" if reader.format == FORMAT_3 else "NULL"
        lookup_finds_row = (
            "1"
            if index_sound
            else "(SELECT rowid FROM contents WHERE digest = stored.digest) IS stored.rowid"
        )
        select = (
            f"SELECT digest, body, {base}, {lookup_finds_row} FROM contents AS stored NOT INDEXED"
        )
    for digest, body, base, found_here in connection.execute(select):
        try:
            data = reader.utf8(digest, body, base) if found_here else None
            if data is None:
                data = reader.text(digest).encode("utf-8")
            actual = hashlib.sha256(data).hexdigest()
        except CheckFailed:
            actual = None
        if actual != digest:
            return [f"contents {digest}: the stored body does not match its digest (edited?)"]
    return []


_REFERENCE_BATCH = 400
"""Referenced digests looked up in one query (within SQLite's oldest limits: 999 bound
parameters, 500 compound terms)."""


def _reference_problems(connection: sqlite3.Connection, reader: ContentReader) -> list[str]:
    """The first attempt (in table order) whose request or response refers to a missing text.

    Every stored digest now matches its body; referenced ones are looked up by the unique index
    (checked against the table by `integrity_check`), not held in a set: a million-trial ledger
    stores two million texts, and their digests were 0.3 GB of `report`. They are looked up a
    batch of attempts at a time, one query per `_REFERENCE_BATCH` digests that returns the
    missing ones (a query per digest was a sixth of `verify`); memory stays that of one batch.
    """
    batch: list[tuple[int, list[Any]]] = []
    references = 0
    for attempt_id, request, raw in connection.execute(
        "SELECT id, request, raw_response FROM attempts"
    ):
        try:
            refs = list(_loaded(request)["refs"].values()) if isinstance(request, str) else []
        except (ValueError, KeyError, TypeError, AttributeError):
            return _first_missing(connection, batch) or [
                f"attempts id {attempt_id}: its request is not a packed request"
            ]
        if reader.format == FORMAT_3 and isinstance(raw, str):
            refs.append(raw)
        batch.append((attempt_id, refs))
        references += len(refs)
        odd = False
        for digest in refs:
            odd = odd or type(digest) is not str
        # A digest that is no string is looked up alone, in order (binding some types fails).
        if references >= _REFERENCE_BATCH or odd:
            if problems := _first_missing(connection, batch):
                return problems
            batch, references = [], 0
    return _first_missing(connection, batch)


_DECODER = json.JSONDecoder()


def _loaded(text: str) -> Any:
    """`json.loads(text)`, the common case without its wrapper (a third of its cost here).

    A text that parses from its first character to its last is what `json.loads` returns for
    it; anything else (surrounding whitespace, a byte-order mark, an error) is left to
    `json.loads`, so its value or its error is unchanged.
    """
    try:
        value, end = _DECODER.raw_decode(text)
        if end == len(text):
            return value
    except ValueError:
        pass
    return json.loads(text)


_MISSING = (
    f"SELECT column1 FROM (VALUES {', '.join(['(?)'] * _REFERENCE_BATCH)}) "
    "WHERE NOT EXISTS (SELECT 1 FROM contents WHERE digest = column1)"
)
"""Which of `_REFERENCE_BATCH` digests are not stored (each looked up by the unique index)."""


def _first_missing(connection: sqlite3.Connection, batch: list[tuple[int, list[Any]]]) -> list[str]:
    """The first attempt of `batch` with a referenced digest that is not stored, in order."""
    texts = list({digest for _, refs in batch for digest in refs if type(digest) is str})
    missing: set[str] = set()
    for start in range(0, len(texts), _REFERENCE_BATCH):
        chunk = texts[start : start + _REFERENCE_BATCH]
        # Always as many parameters (the first repeated): one statement, prepared once.
        chunk += chunk[:1] * (_REFERENCE_BATCH - len(chunk))
        missing.update(digest for (digest,) in connection.execute(_MISSING, chunk))
    if not missing and all(type(digest) is str for _, refs in batch[-1:] for digest in refs):
        return []  # (only a batch's last attempt can refer to a digest that is no string)
    for attempt_id, refs in batch:
        for digest in refs:
            if digest in missing if type(digest) is str else not _stored(connection, digest):
                return [f"attempts id {attempt_id}: its content {digest} is missing (deleted?)"]
    return []


def _stored(connection: sqlite3.Connection, digest: Any) -> bool:
    """Whether a digest is stored, looked up by the unique index."""
    found = connection.execute("SELECT 1 FROM contents WHERE digest = ?", (digest,))
    return found.fetchone() is not None
