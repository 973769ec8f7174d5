"""Canonical JSON and SHA-256: the one encoding every hash in a run is computed over.

RFC 8785 (JSON Canonicalization Scheme) fixes key order, number formatting and string escaping,
so the same content always yields the same bytes and therefore the same hash, on any machine.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import rfc8785


def canonical_json(value: Any) -> bytes:
    """Encode `value` as RFC 8785 canonical JSON bytes.

    Args:
        value: Any JSON-compatible value (dict, list, str, int, float, bool, None).

    Returns:
        The canonical UTF-8 encoding; equal values give equal bytes.
    """
    return rfc8785.dumps(value)


def sha256_hex(data: bytes) -> str:
    """Return the lowercase hex SHA-256 of `data`."""
    return hashlib.sha256(data).hexdigest()


def json_sha256(value: Any) -> str:
    """Return the SHA-256 of the canonical JSON of `value` (a content digest)."""
    return sha256_hex(canonical_json(value))


def file_sha256(path: Path) -> str:
    """Return the SHA-256 of a file's bytes, read in 1 MiB blocks so large files stay cheap."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
