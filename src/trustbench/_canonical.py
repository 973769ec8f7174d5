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
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any

import rfc8785

from trustbench.errors import InputError

_MAX_SAFE_INT = 2**53 - 1
"""RFC 8785 §3.2.2.3: integers must be exactly representable as IEEE 754 doubles."""


class _NotFastPath(Exception):
    """A value the fast encoder leaves to `rfc8785` (rare types, domain errors)."""


def canonical_json(value: Any) -> bytes:
    """Encode `value` as RFC 8785 canonical JSON bytes.

    Args:
        value: Any JSON-compatible value (dict, list, str, int, float, bool, None).

    Returns:
        The canonical UTF-8 encoding; equal values give equal bytes.

    Raises:
        rfc8785.CanonicalizationError: for values RFC 8785 cannot encode (NaN, integers beyond
            2**53 - 1, lone surrogates, non-string keys, other types).
    """
    # Fast path, byte-identical to `rfc8785.dumps` (property-tested against it): the reference
    # implementation escapes strings with a Python callback per escaped character, which made
    # hashing a ledger row of a ~7 kB review prompt cost ~0.1 ms, the largest single CPU cost of a
    # trial. Strings here go through the C JSON string encoder instead: with `ensure_ascii` off it
    # escapes exactly `"`, `\\`, and U+0000-U+001F (as \b \f \n \r \t or lowercase \u00xx) and
    # writes everything else verbatim, which is RFC 8785 §3.2.2.2 (= ECMAScript JSON.stringify).
    # Floats keep rfc8785's ECMAScript number formatting; anything unusual (subclasses, NaN, big
    # integers, surrogates) falls back to rfc8785 itself, so its errors are unchanged too.
    parts: list[str] = []
    try:
        _encode(value, parts)
        return "".join(parts).encode("utf-8")
    except (_NotFastPath, UnicodeEncodeError):
        return rfc8785.dumps(value)


def float_text(value: float) -> str:
    """A float as RFC 8785 writes it (ECMAScript Number::toString).

    `rfc8785` starts from Python's shortest round-trip `repr` and only rewrites exponents,
    integral values ("2.0" -> "2") and zero; a repr without any of those is already the answer,
    so only those cases pay for the reference routine.
    """
    if value.is_integer() and -_MAX_SAFE_INT <= value <= _MAX_SAFE_INT:
        # ECMAScript writes an integral value as an integer ("2"; "0" for -0.0), from its
        # shortest round-trip digits, which below 2^53 are the integer itself (above, they are
        # not: 9.999999999999999e20 is "999999999999999900000"). A request's
        # `temperature = 0.0` took the slow path below in every trial.
        return str(int(value))
    text = repr(value)
    if "e" in text or text.endswith(".0") or not text[-1].isdigit():
        return rfc8785.dumps(value).decode("ascii")
    return text


def _utf16_key(key: str) -> bytes:
    # RFC 8785 §3.2.3: members sorted by the UTF-16 code units of their names.
    return key.encode("utf-16-be")


_MEMO_MIN_CHARS = 1024
_MEMO_MAX_CHARS = 65536
_MEMO_ENTRIES = 64
_encoded_long_strings: dict[str, str] = {}
"""Encoded form of recently encoded long strings. Every review request carries the same 3.7 kB
prompt (the same string object, so a lookup is an identity check), whose escaping cost 7.6 us
per trial; bounded in entries and in the length of what it keeps."""


def _encoded_string(value: str) -> str:
    if not _MEMO_MIN_CHARS <= len(value) <= _MEMO_MAX_CHARS:
        return encode_basestring(value)
    encoded = _encoded_long_strings.get(value)
    if encoded is None:
        encoded = encode_basestring(value)
        if len(_encoded_long_strings) >= _MEMO_ENTRIES:
            _encoded_long_strings.clear()
        _encoded_long_strings[value] = encoded
    return encoded


def _encode(value: Any, parts: list[str]) -> None:
    kind = type(value)
    if kind is str:
        parts.append(_encoded_string(value))
    elif value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif kind is int:
        if not -_MAX_SAFE_INT <= value <= _MAX_SAFE_INT:
            raise _NotFastPath
        parts.append(str(value))
    elif kind is float:
        parts.append(float_text(value))
    elif kind is dict:
        _encode_object(value, parts)
    elif kind is list or kind is tuple:
        _encode_array(value, parts)
    else:
        raise _NotFastPath


def _encode_object(value: dict[Any, Any], parts: list[str]) -> None:
    """An object's members, sorted by name as RFC 8785 orders them."""
    if not value:
        parts.append("{}")
        return
    keys = list(value)
    for key in keys:  # a loop, not all(...): most objects here have two to five members
        if type(key) is not str:
            raise _NotFastPath
    # For ASCII names code-point order is UTF-16 order; sort the cheap way when it is safe.
    keys.sort(key=None if "".join(keys).isascii() else _utf16_key)
    separator = "{"
    for key in keys:
        parts.append(separator)
        parts.append(encode_basestring(key))
        parts.append(":")
        _encode(value[key], parts)
        separator = ","
    parts.append("}")


def _encode_array(value: list[Any] | tuple[Any, ...], parts: list[str]) -> None:
    """An array's items in order."""
    if not value:
        parts.append("[]")
        return
    separator = "["
    for item in value:
        parts.append(separator)
        _encode(item, parts)
        separator = ","
    parts.append("]")


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
