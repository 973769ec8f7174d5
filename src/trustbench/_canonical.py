"""Canonical JSON and SHA-256: the one encoding every hash in a run is computed over.

RFC 8785 (JSON Canonicalization Scheme) fixes key order, number formatting and string escaping,
so the same content always yields the same bytes and therefore the same hash, on any machine.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

import rfc8785

from trustbench.errors import InputError


def canonical_json(value: Any) -> bytes:
    """Encode `value` as RFC 8785 canonical JSON bytes (`rfc8785.dumps`).

    The one encoding every hash in a run is computed over, named once so that every ledger row,
    manifest and record hashes the same bytes. Issue 47 removed trustbench's own encoder in
    front of the library (byte-identical, and no bench showed it saving 5 % of a real workload:
    `bench/README.md`); `tests/core/test_canonical_fast.py` keeps the bytes that ledgers were
    written with.

    Args:
        value: Any JSON-compatible value (dict, list, str, int, float, bool, None).

    Returns:
        The canonical UTF-8 encoding; equal values give equal bytes.

    Raises:
        rfc8785.CanonicalizationError: for values RFC 8785 cannot encode (NaN, integers beyond
            2**53 - 1, lone surrogates, non-string keys, other types).
    """
    return rfc8785.dumps(value)


def float_text(value: float) -> str:
    """A float as RFC 8785 writes it (ECMAScript Number::toString), for the ledger's row text."""
    return rfc8785.dumps(value).decode("ascii")


_GIL_KEEPING_CHUNK = 2047
"""hashlib releases the GIL while it hashes 2,048 bytes or more in one call (CPython's
`HASHLIB_GIL_MINSIZE`); chunks below that keep it."""


def sha256_hex(data: bytes) -> str:
    """Return the lowercase hex SHA-256 of `data`.

    Hashed in chunks that keep the GIL: on the runner's event loop, a call that releases it
    must win it back from the ledger's writer thread, and under load that wait cost more than
    the hashing itself (about a sixth of a trial's wall time in a profile of the latency-bound
    bench). The digest is the same.
    """
    if len(data) <= _GIL_KEEPING_CHUNK:
        return hashlib.sha256(data).hexdigest()
    digest = hashlib.sha256()
    view = memoryview(data)
    for start in range(0, len(view), _GIL_KEEPING_CHUNK):
        digest.update(view[start : start + _GIL_KEEPING_CHUNK])
    return digest.hexdigest()


def json_sha256(value: Any) -> str:
    """Return the SHA-256 of the canonical JSON of `value` (a content digest)."""
    return sha256_hex(canonical_json(value))


def file_sha256(path: Path) -> str:
    """Return the SHA-256 of a file's bytes (`file_digest` without the size)."""
    return file_digest(path)[0]


def file_digest(path: Path) -> tuple[str, int]:
    """Return the SHA-256 of a regular file's bytes and their number, from one read of it.

    The size is the count of the bytes hashed, not a second `stat`, so both describe the same
    bytes. Read with `os.read` in 1 MiB blocks (a small file in one), no buffer or file object
    between: a run re-hashes every pinned file at start-up (the ~920 files of an in-process
    reviewer's package; 16 against 22 ms with `open`, `read` and two `stat`s, issue 35).

    Raises:
        FileNotFoundError: `path` is missing, or not a regular file (a folder, a pipe: opened
            without blocking and refused, never read).
    """
    fd = _open_regular(path)
    try:
        digest, size = hashlib.sha256(), 0
        while block := os.read(fd, 1 << 20):
            digest.update(block)
            size += len(block)
    finally:
        os.close(fd)
    return digest.hexdigest(), size


class DuplicateKeyError(ValueError):
    """A JSON object names one key twice (the key is the message)."""


def refuse_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`json.loads`'s `object_pairs_hook` that refuses a key named twice in one object.

    A duplicate makes the dict shorter than its pairs. Comparing lengths keeps the parser's hook
    cheap for every object; the per-key loop that names the duplicate runs only then (it ran for
    every object of every corpus file once: 40% of reading the corpus).

    Raises:
        DuplicateKeyError: naming the first key found twice.
    """
    document = dict(pairs)
    if len(document) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(key)
            seen.add(key)
    return document


def loads_refusing_duplicate_keys(text: str | bytes) -> Any:
    """`json.loads`, but an object that names a key twice, at any depth, is refused.

    `json.loads` keeps the last of two same-named keys and other parsers the first, so a
    document with a duplicate can show two readers two different contents (a signed payload to
    the verifier, another to whoever reads the file): anything checked must be unambiguous.

    Raises:
        DuplicateKeyError: naming the first key found twice in one object.
        ValueError: when `text` is not JSON (`json.JSONDecodeError`).
    """
    return json.loads(text, object_pairs_hook=refuse_duplicate_keys)


_NOT_REGULAR = "not a regular file"


def _open_regular(path: Path) -> int:
    """A read-only descriptor of `path`, which must be a regular file (checked before a read).

    Opened without blocking: a FIFO with no writer would otherwise hang the `open` itself, and
    `/dev/zero` or a pipe would be read for ever; both are refused here, never read.

    Raises:
        FileNotFoundError: `path` is missing, or not a regular file.
        OSError: it cannot be opened (permissions, a folder on some systems).
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise FileNotFoundError(errno.ENOENT, _NOT_REGULAR, str(path))
    except BaseException:
        os.close(fd)
        raise
    return fd


MAX_INPUT_FILE_BYTES = 256 * 1024 * 1024
"""Largest user-named input file read whole (a spec, a corpus file, a protocol): far above any
real one, so only a runaway or mistaken file (a disk image, a log) meets it."""


def read_input_file(
    path: Path, *, max_bytes: int = MAX_INPUT_FILE_BYTES, missing: str = "not found"
) -> bytes:
    """The bytes of a user-named input file, read only if it is a regular file of bounded size.

    Every command that reads a file a user names (a spec, a corpus's files, a collection
    protocol, a review prompt) reads it here, so `/dev/zero`, a FIFO or a socket is refused at
    once with exit 2 instead of hanging the command, and an oversized file is refused instead of
    filling memory.

    Args:
        path: The file.
        max_bytes: Most bytes accepted; a longer file is refused (read at most one byte more).
        missing: The message when there is no such file (say what makes it, where one does).

    Raises:
        InputError: located at `path`: missing, a folder, not a regular file, unreadable, or
            longer than `max_bytes`.
    """
    if path.is_dir():
        raise InputError("is a folder, not a file", location=str(path))
    try:
        fd = _open_regular(path)
    except FileNotFoundError as error:
        irregular = error.strerror == _NOT_REGULAR
        message = f"{_NOT_REGULAR} (a device, FIFO or socket)" if irregular else missing
        raise InputError(message, location=str(path)) from None
    except OSError as error:
        raise InputError(f"cannot read: {error.strerror}", location=str(path)) from None
    chunks: list[bytes] = []
    size = 0
    try:
        while size <= max_bytes and (block := os.read(fd, min(1 << 20, max_bytes + 1 - size))):
            chunks.append(block)
            size += len(block)
    finally:
        os.close(fd)
    if size > max_bytes:
        raise InputError(f"larger than {max_bytes} bytes; not read", location=str(path))
    return b"".join(chunks)
