"""Ledger format 3: message contents and raw responses stored once, by SHA-256, compressed.

Every attempt of a review repeats the same 3.7 kB review prompt, and in format 1 each attempt
row held its full request and its full raw response. Format 2 moved each request message's
`content` of `MIN_STORED_CHARS` or more into the `contents` table (`digest` = SHA-256 hex of the
UTF-8 text, `body` = its zlib compression), stored once however many attempts send it.

Format 3 adds two things:

- The raw response is stored in `contents` too: the attempt's `raw_response` column holds its
  digest (or null when there was no response).
- A body may be compressed against a *base*: the text of another `contents` row, used as zlib's
  preset dictionary (`base` = that row's digest; null for a body compressed alone). The writer
  picks as base the first text it stored for the same message slot of the same *family* (the
  caller's grouping, the trial's case for the runner). Trials of one case send messages that
  differ only in their fresh evaluation id, so a 2.7 kB user message shrinks to about 0.1 kB
  instead of about 1.1 kB alone, and a repeated reply likewise.

The attempt's `request` column holds `canonical_json({"refs": {message index: digest},
"request": request})`, where each referenced message's content is replaced by null. The chain
hashes the `request` and `raw_response` columns, so it commits to the digests;
`content_problems` (run by `verify`) decompresses and re-hashes every stored body against its
digest and checks every referenced digest is stored, so an edited or deleted body (or base) is
caught. Readers get the request and response back as sent (`ContentReader`).

Format 1 and 2 ledgers stay readable; resuming one is refused (see `Ledger.open`), so a ledger
never mixes formats.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from trustbench._canonical import canonical_json, sha256_hex
from trustbench.errors import CheckFailed

FORMAT_1 = "trustbench.ledger/1"
"""Full requests and responses inline in each attempt row."""
FORMAT_2 = "trustbench.ledger/2"
"""Request message contents stored once by digest."""
FORMAT_3 = "trustbench.ledger/3"
"""Request message contents and raw responses stored once by digest, against bases (this module)."""
READABLE_FORMATS = (FORMAT_1, FORMAT_2, FORMAT_3)

MIN_STORED_CHARS = 256
"""Request contents shorter than this stay inline: a digest (64 chars) plus a row would save
nothing. (Raw responses always go by digest in format 3, so the column has one meaning.)"""

COMPRESSION_LEVEL = 3
"""zlib level. Against a base, a review's 2.7 kB user message compresses in 8.5 us to 80 bytes at
level 3 and in 12.9 us to 75 bytes at level 6 (9 is no smaller); level 1 costs as much as 3 and
is 30% larger. The compression runs on the writer thread, mostly outside the GIL, but under a
CPU load every microsecond of the process counts (hence `BaseCompressor`)."""

MAX_BASE_DEPTH = 8
"""A body's base may itself have a base (a resumed run reuses earlier rows); deeper chains than
this, or a cycle, can only come from tampering."""

CONTENTS_DDL = "CREATE TABLE IF NOT EXISTS contents (digest UNIQUE NOT NULL, body NOT NULL, base)"
"""A rowid table: bodies of about 1 kB in a WITHOUT ROWID table took a 4 kB page each."""
INSERT_CONTENT = "INSERT OR IGNORE INTO contents (digest, body, base) VALUES (?, ?, ?)"

RESPONSE_SLOT = "response"
"""The slot of raw responses (request messages use their index)."""


@dataclass(frozen=True)
class NewContent:
    """A text to insert into `contents`; compressed only when committed (on the writer thread)."""

    digest: str
    data: bytes
    base: tuple[str, bytes] | None
    """`(digest, text)` of the base whose text is the compression dictionary, or None."""

    def statement(self, compressor: BaseCompressor) -> tuple[str, tuple[Any, ...]]:
        """The `INSERT` of this content, its body compressed now by `compressor`."""
        if self.base is None:
            return INSERT_CONTENT, (self.digest, zlib.compress(self.data, COMPRESSION_LEVEL), None)
        return INSERT_CONTENT, (self.digest, compressor.against(self.data, self.base), self.base[0])


_ZLIB_LOOKAHEAD = 262
"""zlib's MIN_LOOKAHEAD: a window of 2**w bytes reaches back at most 2**w - 262 bytes."""


def window_bits(base_size: int, data_size: int) -> int:
    """The smallest zlib window (9 to 15 bits) reaching the same offset in the base from the body.

    It also spans the whole body itself. A body that differs from its base in a few places (a
    case's trials differ only in their evaluation id) matches the base about `len(base)` bytes
    back; a larger window finds nothing more there and costs more to set up and copy.
    """
    return max(9, min(15, (max(base_size, data_size) + _ZLIB_LOOKAHEAD).bit_length()))


class BaseCompressor:
    """zlib compression against a base, with each recent base's dictionary loaded once.

    Loading a preset dictionary (`deflateSetDictionary`) cost about as much as compressing a
    review's 2.7 kB user message against it, and it was redone for every body. Here a
    compressor primed with the base is kept and copied for each body (`Compress.copy`, zlib's
    `deflateCopy`), with its window sized to the texts (`window_bits`) so the copy stays small:
    `python -m bench.ledger_compress` times a review trial's two bodies at 0.82x to 0.84x of
    loading the dictionary afresh, with the same bytes. The output is an ordinary zlib stream
    with the base as preset dictionary, which `ContentReader` (and any format 3 reader)
    decompresses as before.

    One per ledger, used only by whichever thread commits (never two at once). Memory is
    bounded: primed compressors are dropped, oldest first, beyond `MAX_BYTES` of zlib state.
    """

    MAX_BYTES = 8 << 20

    def __init__(self) -> None:
        self._primed: OrderedDict[tuple[str, int], Any] = OrderedDict()
        self._bytes = 0

    def against(self, data: bytes, base: tuple[str, bytes]) -> bytes:
        """`data` compressed with `base`'s text as zlib's preset dictionary."""
        wbits = window_bits(len(base[1]), len(data))
        key = (base[0], wbits)
        primed = self._primed.get(key)
        if primed is None:
            primed = zlib.compressobj(
                COMPRESSION_LEVEL, zlib.DEFLATED, wbits, mem_level(wbits), zdict=base[1]
            )
            self._primed[key] = primed
            self._bytes += _state_bytes(wbits)
            while self._bytes > self.MAX_BYTES and len(self._primed) > 1:
                (_, old_wbits), _ = self._primed.popitem(last=False)
                self._bytes -= _state_bytes(old_wbits)
        else:
            self._primed.move_to_end(key)
        packer = primed.copy()
        return packer.compress(data) + packer.flush()


def mem_level(wbits: int) -> int:
    """The zlib `memLevel` whose hash table fits a window of `2**wbits` bytes (8 for 15 bits)."""
    return max(1, min(8, wbits - 7))


def _state_bytes(wbits: int) -> int:
    """Bytes of a deflate state: window and chain (4 per window byte), hash head and buffer."""
    return (4 << wbits) + (6 << (mem_level(wbits) + 7))


Statement = tuple[str, tuple[Any, ...]] | NewContent
"""A row insert: plain SQL with parameters, or a content compressed when committed."""


class ContentStore:
    """The writer's side of format 3: which texts are stored and which serve as bases.

    Memory is bounded: at most `MAX_KNOWN` stored digests, `MAX_BASES` bases and
    `MAX_DIGESTS` text-to-digest entries are remembered; a text forgotten and seen again is
    inserted again and ignored by `INSERT OR IGNORE`.
    """

    MAX_KNOWN = 8192
    MAX_BASES = 1024
    MAX_DIGESTS = 1024

    def __init__(self) -> None:
        self._known: set[str] = set()
        self._bases: OrderedDict[tuple[str | None, str], tuple[str, bytes]] = OrderedDict()
        self._digests: dict[str, str] = {}
        """Digest of each recently stored text: the review prompt, sent by every trial, is
        looked up (the same string object: an identity check) instead of hashed again."""

    def digest(self, text: str) -> tuple[str, bytes | None]:
        """The SHA-256 of `text`'s UTF-8, and the encoded bytes when they had to be made."""
        digest = self._digests.get(text)
        if digest is not None:
            return digest, None
        data = text.encode("utf-8")
        digest = sha256_hex(data)
        if len(self._digests) >= self.MAX_DIGESTS:
            self._digests.clear()
        self._digests[text] = digest
        return digest, data

    def begin(self) -> _Batch:
        """A batch of packs whose new texts and bases count only once `commit`ted."""
        return _Batch(self)

    def _remember(self, batch: _Batch) -> None:
        if len(self._known) > self.MAX_KNOWN:
            self._known.clear()
        self._known |= batch.new
        for key, base in batch.bases.items():
            self._bases[key] = base
            self._bases.move_to_end(key)
        while len(self._bases) > self.MAX_BASES:
            self._bases.popitem(last=False)


class _Batch:
    """The packs of one `append_many`: rolled back with it when it fails."""

    def __init__(self, store: ContentStore) -> None:
        self._store = store
        self.new: set[str] = set()
        self.bases: dict[tuple[str | None, str], tuple[str, bytes]] = {}

    def commit(self) -> None:
        """The batch's rows are committed (or queued for commit): remember its texts."""
        self._store._remember(self)

    def pack_attempt(
        self, values: dict[str, Any], family: str | None, request: Any = None
    ) -> tuple[dict[str, Any], list[Statement]]:
        """The format 3 form of an attempt row and the `contents` inserts it needs.

        Args:
            values: The attempt's column values; `request` is the request's JSON text.
            family: Groups attempts whose texts are alike (the runner passes the case id);
                None groups by message slot only.
            request: The request as a JSON value whose canonical JSON is exactly
                `values["request"]` (the body the runner sent), or None to parse the text.
                Parsing a 7 kB review request again was a tenth of a trial's harness CPU; the
                packed row is the same either way (tested).

        Returns:
            The values with `request` and `raw_response` packed, and the inserts they need.
        """
        inserts: list[Statement] = []
        packed = dict(values)
        raw = values.get("raw_response")
        if isinstance(raw, str):
            packed["raw_response"] = self._stored(raw, family, RESPONSE_SLOT, inserts)
        text = values.get("request")
        if not isinstance(text, str):
            return packed, inserts
        if request is None:
            try:
                request = json.loads(text)
            except ValueError:
                request = None
        messages = request.get("messages") if type(request) is dict else None
        if type(messages) is tuple:  # a body's tuple is a JSON array, as the parsed text's list
            messages = list(messages)
        if not isinstance(messages, list):
            # Not a chat request: stored whole, by digest (ref "*").
            packed["request"] = _packed({"*": self._stored(text, family, "*", inserts)}, None)
            return packed, inserts
        refs: dict[str, str] = {}
        packed_messages = []
        for index, message in enumerate(messages):
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, str) and len(content) >= MIN_STORED_CHARS:
                refs[str(index)] = self._stored(content, family, str(index), inserts)
                message = {**message, "content": None}  # its digest is in `refs`
            packed_messages.append(message)
        packed["request"] = _packed(refs, {**request, "messages": packed_messages})
        return packed, inserts

    def _stored(self, text: str, family: str | None, slot: str, inserts: list[Statement]) -> str:
        digest, data = self._store.digest(text)
        if digest in self._store._known or digest in self.new:
            return digest
        if data is None:  # known by digest but not stored (forgotten, or rolled back)
            data = text.encode("utf-8")
        self.new.add(digest)
        key = (family, slot)
        base = self.bases.get(key) or self._store._bases.get(key)
        if base is None:
            self.bases[key] = (digest, data)  # the first of its kind is stored alone
        inserts.append(NewContent(digest, data, base))
        return digest


def _packed(refs: dict[str, str], request: Any) -> str:
    return canonical_json({"refs": refs, "request": request}).decode("utf-8")


class ContentReader:
    """Materialises stored requests and responses from one open ledger; a no-op for format 1."""

    MAX_ZDICTS = 256

    def __init__(self, connection: sqlite3.Connection):
        found = connection.execute(
            "SELECT ledger_format FROM experiments ORDER BY seq LIMIT 1"
        ).fetchone()
        self.format = FORMAT_1 if found is None else found[0]
        if self.format not in READABLE_FORMATS:
            raise CheckFailed(
                f"ledger.sqlite is format {self.format!r}; this trustbench reads "
                f"{', '.join(READABLE_FORMATS)}: use the trustbench that wrote it",
                location="ledger.sqlite",
            )
        self._db = connection
        self._cache: dict[str, str] = {}
        self._zdicts: dict[str, bytes] = {}
        """The UTF-8 of cached bases: every text against a base had it encoded again."""
        self._select = (
            "SELECT body, base FROM contents WHERE digest = ?"
            if self.format == FORMAT_3
            else "SELECT body, NULL FROM contents WHERE digest = ?"
        )

    def request_text(self, stored: Any) -> Any:
        """The request JSON text as sent, from the stored `request` column."""
        if self.format == FORMAT_1 or not isinstance(stored, str):
            return stored
        packed = json.loads(stored)
        refs, request = packed["refs"], packed["request"]
        if "*" in refs:
            return self.text(refs["*"])
        for index, digest in refs.items():
            request["messages"][int(index)]["content"] = self.text(digest)
        return canonical_json(request).decode("utf-8")

    def response_text(self, stored: Any) -> Any:
        """The raw response as received, from the stored `raw_response` column."""
        if self.format != FORMAT_3 or not isinstance(stored, str):
            return stored
        return self.text(stored)

    def text(self, digest: str, depth: int = 0) -> str:
        """The stored text of `digest`, decompressed against its base.

        Raises:
            CheckFailed: when it (or its base) is missing, undecodable, or bases nest too deep.
        """
        text = self._cache.get(digest)
        if text is not None:
            return text
        found = self._db.execute(self._select, (digest,)).fetchone()
        if found is None:
            raise CheckFailed(
                f"ledger.sqlite: stored content {digest} is missing (run `trustbench verify`)",
                location="ledger.sqlite",
            )
        body, base = found
        text = self.decoded(digest, body, base, depth)
        if len(self._cache) < 4096:
            self._cache[digest] = text
        return text

    def decoded(self, digest: Any, body: Any, base: Any, depth: int = 0) -> str:
        """The text of the `contents` row (`digest`, `body`, `base`), read by the caller.

        Raises:
            CheckFailed: when its base is missing, it is undecodable or not UTF-8, or its bases
                nest too deep.
        """
        data = self._inflated(digest, body, base, depth)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise _undecodable(digest) from None

    def utf8(self, digest: Any, body: Any, base: Any) -> bytes:
        """`decoded(...).encode("utf-8")`, without making the text: what `verify` hashes.

        Raises:
            CheckFailed: as `decoded` does.
        """
        data = self._inflated(digest, body, base, 0)
        try:
            data.decode("utf-8")  # not UTF-8 is an edit, as for `decoded`
        except UnicodeDecodeError:
            raise _undecodable(digest) from None
        return data

    def _inflated(self, digest: Any, body: Any, base: Any, depth: int) -> bytes:
        if base is not None and depth >= MAX_BASE_DEPTH:
            raise CheckFailed(
                f"ledger.sqlite: stored content {digest}: its bases nest deeper than "
                f"{MAX_BASE_DEPTH} (edited?)",
                location="ledger.sqlite",
            )
        try:
            if base is None:
                return zlib.decompress(body)
            zdict = self._zdicts.get(base)
            if zdict is None:
                zdict = self.text(base, depth + 1).encode("utf-8")
                if base in self._cache and len(self._zdicts) < self.MAX_ZDICTS:
                    self._zdicts[base] = zdict  # what `text` would return again, encoded
            unpacker = zlib.decompressobj(zdict=zdict)
            return unpacker.decompress(body) + unpacker.flush()
        except (zlib.error, TypeError, ValueError):
            raise _undecodable(digest) from None


def _undecodable(digest: Any) -> CheckFailed:
    return CheckFailed(
        f"ledger.sqlite: stored content {digest} cannot be decompressed (edited?)",
        location="ledger.sqlite",
    )


# ------------------------------------------------------------------------------------------------
# `verify`'s check of the content store: each body hashes to its digest, each reference is stored.
#
# Apart from this module (which stores and reads the texts) because only `verify` asks
# this, and it reads the whole store at once: one scan of the bodies, referenced digests looked
# up a batch at a time.


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
