"""Refusal of inline credentials in a spec, at freeze.

A key written into a spec would be frozen into the manifest, shared with the run folder and
hashed into the ledger's anchor.

Keys are given only by the *name* of an environment variable (`api_key_env`); these checks
refuse credential-looking keys at any depth of `settings` and `track_options` (so nested
`headers = { Authorization = ... }` too) and credential-looking query parameters in a URL.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl

_SECRET_LIKE_KEY = re.compile(
    r"(api[_-]?key|authorization|password|passwd|secret|token$|bearer|credential|cookie)", re.I
)
_SECRET_QUERY_NAMES = frozenset({"key", "token", "sig", "signature", "auth", "code"})
"""Query parameter names that carry credentials in URLs (`?key=...`, `?sig=...`)."""


def refuse_inline_credentials(value: Any, path: str) -> None:
    """Refuse a credential-like key anywhere inside `value` (nested tables and lists too).

    Catches `settings = { api_key = ... }` as well as `settings.headers.Authorization` or
    `track_options.client.token`: a key written into the spec is frozen into the manifest.

    Raises:
        ValueError: naming the dotted path of the first offending key.
    """
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}"
            if _SECRET_LIKE_KEY.search(str(key)):
                raise ValueError(
                    f"{where} looks like a credential; name an environment variable in "
                    "api_key_env instead (keys are never written into a spec)"
                )
            refuse_inline_credentials(item, where)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            refuse_inline_credentials(item, f"{path}[{index}]")


def refuse_credential_query(query: str) -> None:
    """Refuse a URL query string carrying a credential-like parameter (`?api_key=`, `?token=`).

    Raises:
        ValueError: naming the parameter.
    """
    for name, _ in parse_qsl(query, keep_blank_values=True):
        if _SECRET_LIKE_KEY.search(name) or name.lower() in _SECRET_QUERY_NAMES:
            raise ValueError(
                f"base_url query parameter {name!r} looks like a credential; name an "
                "environment variable in api_key_env instead"
            )
