"""Ledger format 2: message contents stored once, by SHA-256, outside the chained rows.

Every attempt of a review repeats the same 3.7 kB review prompt, and in format 1 each attempt
row held its full request. Format 2 moves each message's `content` of `MIN_STORED_CHARS` or more
into the `contents` table (`digest` = SHA-256 hex of the UTF-8 text, `body` = its zlib
compression), stored once however many attempts send it. The attempt's `request` column holds
`canonical_json({"refs": {message index: digest}, "request": request})`, where each referenced
message's content is replaced by null (its digest is in `refs`). The chain hashes that column,
so it commits to the digests; `content_problems` (run by `verify`) re-hashes every stored body
against its digest and checks every referenced digest is stored, so an edited or deleted body is
caught. Readers get the request back as sent (`ContentReader.request_text`).

Format 1 ledgers (full requests inline) stay readable; resuming one is refused (see
`Ledger.open`), so a ledger never mixes the two.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import zlib
from typing import Any

from trustbench._canonical import canonical_json
from trustbench.errors import CheckFailed

FORMAT_1 = "trustbench.ledger/1"
"""Full requests inline in each attempt row."""
FORMAT_2 = "trustbench.ledger/2"
"""Message contents stored once by digest (this module)."""
READABLE_FORMATS = (FORMAT_1, FORMAT_2)

MIN_STORED_CHARS = 256
"""Contents shorter than this stay inline: a digest (64 chars) plus a row would save nothing."""

CONTENTS_DDL = "CREATE TABLE IF NOT EXISTS contents (digest UNIQUE NOT NULL, body NOT NULL)"
"""A rowid table: bodies of about 1 kB in a WITHOUT ROWID table took a 4 kB page each."""
INSERT_CONTENT = "INSERT OR IGNORE INTO contents (digest, body) VALUES (?, ?)"


def pack_attempt(
    values: dict[str, Any], known: set[str], new: set[str]
) -> tuple[dict[str, Any], list[tuple[str, tuple[Any, ...]]]]:
    """The format 2 form of an attempt row and the `contents` inserts it needs.

    Args:
        values: The attempt's column values; `request` is the request's JSON text.
        known: Digests this writer has committed: their bodies are not compressed again.
        new: Digests inserted by this transaction so far (updated); the caller adds them to
            `known` once it commits, so a rolled-back body is never taken as stored.

    Returns:
        The values with `request` packed, and `(sql, parameters)` inserts for new contents.
    """
    text = values.get("request")
    if not isinstance(text, str):
        return values, []
    try:
        request = json.loads(text)
    except ValueError:
        request = None
    messages = request.get("messages") if isinstance(request, dict) else None
    if not isinstance(messages, list):
        # Not a chat request: stored whole, by digest (ref "*").
        digest, inserts = _stored(text, known, new)
        return {**values, "request": _packed({"*": digest}, None)}, inserts
    refs: dict[str, str] = {}
    inserts: list[tuple[str, tuple[Any, ...]]] = []
    packed_messages = []
    for index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str) and len(content) >= MIN_STORED_CHARS:
            digest, added = _stored(content, known, new)
            refs[str(index)] = digest
            inserts += added
            message = {**message, "content": None}  # its digest is in `refs`
        packed_messages.append(message)
    return {**values, "request": _packed(refs, {**request, "messages": packed_messages})}, inserts


def _packed(refs: dict[str, str], request: Any) -> str:
    return canonical_json({"refs": refs, "request": request}).decode("utf-8")


def _stored(
    text: str, known: set[str], new: set[str]
) -> tuple[str, list[tuple[str, tuple[Any, ...]]]]:
    data = text.encode("utf-8")
    digest = hashlib.sha256(data).hexdigest()
    if digest in known or digest in new:
        return digest, []
    new.add(digest)
    return digest, [(INSERT_CONTENT, (digest, zlib.compress(data, 6)))]


class ContentReader:
    """Materialises format 2 requests from one open ledger; a no-op for format 1."""

    def __init__(self, connection: sqlite3.Connection):
        found = connection.execute(
            "SELECT ledger_format FROM experiments ORDER BY seq LIMIT 1"
        ).fetchone()
        self.format = FORMAT_1 if found is None else found[0]
        if self.format not in READABLE_FORMATS:
            raise CheckFailed(
                f"ledger.sqlite is format {self.format!r}; this trustbench reads "
                f"{' and '.join(READABLE_FORMATS)}: use the trustbench that wrote it",
                location="ledger.sqlite",
            )
        self._db = connection
        self._cache: dict[str, str] = {}

    def request_text(self, stored: Any) -> Any:
        """The request JSON text as sent, from the stored `request` column."""
        if self.format == FORMAT_1 or not isinstance(stored, str):
            return stored
        packed = json.loads(stored)
        refs, request = packed["refs"], packed["request"]
        if "*" in refs:
            return self._body(refs["*"])
        for index, digest in refs.items():
            request["messages"][int(index)]["content"] = self._body(digest)
        return canonical_json(request).decode("utf-8")

    def _body(self, digest: str) -> str:
        text = self._cache.get(digest)
        if text is None:
            found = self._db.execute(
                "SELECT body FROM contents WHERE digest = ?", (digest,)
            ).fetchone()
            if found is None:
                raise CheckFailed(
                    f"ledger.sqlite: stored content {digest} is missing (run `trustbench verify`)",
                    location="ledger.sqlite",
                )
            text = zlib.decompress(found[0]).decode("utf-8")
            if len(self._cache) < 4096:
                self._cache[digest] = text
        return text


def content_problems(connection: sqlite3.Connection) -> list[str]:
    """Format 2 contents that do not match their digests or are missing; empty when intact."""
    try:
        if ContentReader(connection).format != FORMAT_2:
            return []
    except CheckFailed as error:  # an unknown format id (the chain says whether it was edited)
        return [str(error)]
    stored: set[str] = set()
    for digest, body in connection.execute("SELECT digest, body FROM contents"):
        try:
            actual = hashlib.sha256(zlib.decompress(body)).hexdigest()
        except (zlib.error, TypeError):
            actual = None
        if actual != digest:
            return [f"contents {digest}: the stored body does not match its digest (edited?)"]
        stored.add(digest)
    for attempt_id, request in connection.execute("SELECT id, request FROM attempts"):
        try:
            refs = json.loads(request)["refs"].values() if isinstance(request, str) else ()
        except (ValueError, KeyError, TypeError, AttributeError):
            return [f"attempts id {attempt_id}: its request is not a format 2 request"]
        missing = next((digest for digest in refs if digest not in stored), None)
        if missing is not None:
            return [f"attempts id {attempt_id}: its content {missing} is missing (deleted?)"]
    return []
