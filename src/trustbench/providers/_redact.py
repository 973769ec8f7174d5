"""Redaction of credentials from everything a run stores.

A server can echo what it received (a debugging proxy returning the request headers, an error
page quoting `Authorization: Bearer ...`), and an exception message can quote a URL or a header.
The ledger is shared as evidence, so every stored response body, error message and request is
passed through `redact` first: each occurrence of a secret value is replaced by `[REDACTED]`.
The secrets are the values of the environment variables the spec names in `api_key_env`, i.e.
exactly what travels in the `Authorization` / `x-api-key` headers.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

REDACTED = "[REDACTED]"
"""What a secret value is replaced with."""

MIN_SECRET_LENGTH = 8
"""Shorter values are not redacted: replacing a 3-letter string everywhere would corrupt the
evidence, and no real API key is that short (freeze refuses keys that appear in the manifest)."""


def secret_values(variable_names: Iterable[str | None]) -> tuple[str, ...]:
    """The values of the named environment variables that are set and long enough to redact."""
    values = {os.environ.get(name or "", "") for name in variable_names}
    # Longest first, so a secret containing another is replaced whole.
    return tuple(sorted((v for v in values if len(v) >= MIN_SECRET_LENGTH), key=len, reverse=True))


def redact(text: str | None, secrets: tuple[str, ...]) -> str | None:
    """`text` with every occurrence of every secret replaced by `[REDACTED]`."""
    if text is None or not secrets:
        return text
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text
