"""Values no spec may hold, wherever they appear: non-finite floats and unrepresentable integers.

A spec is frozen into a manifest hashed as canonical JSON (RFC 8785), whose numbers are finite
IEEE doubles: `inf`/`nan` (legal TOML) have no JSON form at all, and an integer beyond 2**53 - 1
(a seed of 2**70) cannot be written exactly. Either one used to pass validation and end in a
traceback when the manifest was hashed, a seed was given to numpy or a value reached SQLite. So
`parse_spec` refuses both anywhere in the spec (`settings` and `track_options` included) with
the JSON pointer of the first one, before any field is validated.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import SplitResult, parse_qsl, unquote, urlsplit

from trustbench.errors import InputError

MAX_SAFE_INTEGER = 2**53 - 1
"""Largest integer canonical JSON (RFC 8785, I-JSON) represents exactly."""
MAX_BOOTSTRAP_RESAMPLES = 100_000
"""Beyond this the bootstrap's Monte Carlo error is far below any interval's width, and its time
(linear in resamples) turns a report into hours: 1e9 resamples is a typo, refused at freeze."""


def refuse_control_characters(value: str, field: str) -> None:
    """Refuse whitespace or control characters in a URL (a CR/LF would split the request line).

    Raises:
        ValueError: naming the field.
    """
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise ValueError(
            f"{field} must not contain spaces or control characters (a CR or LF would break "
            "the HTTP request line)"
        )


def refuse_port_out_of_range(parts: SplitResult) -> None:
    """Refuse a base_url port outside 1-65535 or not a number (`:99999`, `:abc`, `:-1`).

    `urlsplit` parses such a URL and only raises when `.port` is read, which the HTTP client
    does at the first request: a spec that froze cleanly then crashed `run` with a traceback.

    Raises:
        ValueError: naming the field.
    """
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        raise ValueError("base_url port must be a number from 1 to 65535")


def _first_unrepresentable(value: Any, pointer: str) -> tuple[str, str] | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return pointer, f"{value!r} is not a finite number"
    if isinstance(value, int) and abs(value) > MAX_SAFE_INTEGER:
        return pointer, (
            f"{value} is out of range: a spec's integers lie within ±(2**53 - 1) (what the "
            "manifest's canonical JSON holds exactly)"
        )
    if isinstance(value, dict):
        for key, item in value.items():
            escaped = str(key).replace("~", "~0").replace("/", "~1")
            if (found := _first_unrepresentable(item, f"{pointer}/{escaped}")) is not None:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            if (found := _first_unrepresentable(item, f"{pointer}/{index}")) is not None:
                return found
    return None


def refuse_unrepresentable(data: Any, source: str) -> None:
    """Refuse the first non-finite float or out-of-range integer in spec data.

    Raises:
        InputError: located at `source#/json/pointer`.
    """
    found = _first_unrepresentable(data, "")
    if found is not None:
        pointer, message = found
        raise InputError(message, location=f"{source}#{pointer or '/'}")


# ------------------------------------------------------------------------------------------------
# Refusal of inline credentials in a spec, at freeze.
#
# A key written into a spec would be frozen into the manifest, shared with the run folder and
# hashed into the ledger's anchor.
#
# Keys are given only by the *name* of an environment variable (`api_key_env`); these checks
# refuse credential-looking keys at any depth of `settings` and `track_options` (so nested
# `headers = { Authorization = ... }` too) and credential-looking query parameters in a URL.
# A harmless name does not make a key harmless (`settings = { note = "sk-..." }`): the string
# values of a candidate's settings, its `model`, the spec's `description` and every part of a
# URL are checked for the shape of a key too, and refused without repeating the value.

_Text = TypeVar("_Text", str, str | None)

_SECRET_LIKE_KEY = re.compile(
    r"(api[_-]?key|authorization|password|passwd|secret|token$|bearer|credential|cookie"
    r"|(^|[^a-z])key$)",
    re.I,
)
"""Setting names that hold a credential (`api_key`, `headers.Authorization`, plain `key`)."""
_KEY_PREFIXES = re.compile(
    r"^(sk[-_]|pk[-_]|rk[-_]|ghp_|gho_|github_pat_|xox[abprs]-|AKIA|AIza|hf_)"
)
"""Prefixes of widely used API-key formats (OpenAI/Stripe, GitHub, Slack, AWS, Google, HF)."""
_JWT = re.compile(r"^eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}$")
"""A JSON Web Token: three base64url parts, the first an encoded `{"...`."""
_OPAQUE = re.compile(r"^(?=.*[a-z])(?=.*[A-Z])(?=.*[0-9])[A-Za-z0-9]{32,}$")
"""A long unbroken run mixing cases and digits: random key material. Model ids and words break
with `-`, `.`, `/` or `:` (`Llama-3.1-8B-Instruct`), digests are one case (a git revision)."""
_WORD_BREAKS = re.compile(r"[\s\"'`,;:()<>\[\]{}=/&?#|]+")
"""What separates the words of free text (a description, `Bearer <key>`, a path)."""
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


def looks_like_a_key(text: str) -> bool:
    """Whether `text` has the shape of an API key rather than a name.

    16+ characters starting with a known key prefix (`sk-`, `ghp_`, `AKIA`, ...), or 20+
    characters mixing lowercase letters and digits with uppercase letters or, unseparated, with
    many digits: variable names and URL path segments are words (`OPENAI_API_KEY`,
    `deployments`, `gpt-4o-2024-08-06`), keys are not.
    """
    if len(text) >= 16 and _KEY_PREFIXES.match(text):
        return True
    if len(text) < 20 or not any(c.isdigit() for c in text) or not any(c.islower() for c in text):
        return False
    digits = sum(c.isdigit() for c in text)
    return any(c.isupper() for c in text) or ("-" not in text and digits * 4 >= len(text))


def refuse_key_shaped_name(name: str | None) -> str | None:
    """Refuse an `api_key_env` that is itself a key (pasted where its variable's name belongs).

    Raises:
        ValueError: without quoting the value (it may be a live key).
    """
    if name is not None and looks_like_a_key(name):
        raise ValueError(
            "api_key_env looks like an API key itself, not the name of the environment "
            "variable holding one (the value is not repeated here)"
        )
    return name


def refuse_credential_path(path: str) -> None:
    """Refuse a URL path segment shaped like a key (`/bot<token>/`, `/key/sk-...`).

    Raises:
        ValueError: without quoting the segment.
    """
    for index, segment in enumerate(unquote(s) for s in path.split("/") if s):
        if looks_like_a_key(segment) or contains_a_key(segment):
            raise ValueError(
                f"base_url path segment {index + 1} looks like a credential; name an "
                "environment variable in api_key_env instead"
            )


def contains_a_key(text: str) -> bool:
    """Whether any word of free text has the shape of a key (`"Bearer sk-..."`, a JWT).

    Stricter than `looks_like_a_key` about words without a known prefix (only long unbroken
    mixed-case runs), so model ids (`meta-llama/Llama-3.1-8B-Instruct`) and prose pass.
    """
    return any(
        (len(word) >= 16 and _KEY_PREFIXES.match(word)) or _JWT.match(word) or _OPAQUE.match(word)
        for word in _WORD_BREAKS.split(text)
    )


def refuse_key_values(value: Any, path: str) -> None:
    """Refuse a key-shaped string anywhere inside `value`: nested tables, lists, key names.

    Raises:
        ValueError: naming the dotted path, never quoting the value (it may be a live key).
    """
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and contains_a_key(key):
                raise ValueError(
                    f"a key name in {path} looks like a credential (the name is not repeated "
                    "here); name an environment variable in api_key_env instead"
                )
            refuse_key_values(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            refuse_key_values(item, f"{path}[{index}]")
    elif isinstance(value, str) and contains_a_key(value):
        raise ValueError(
            f"{path} looks like it holds a credential (the value is not repeated here); name "
            "an environment variable in api_key_env instead"
        )


def refuse_credential_url_parts(path: str, query: str, fragment: str) -> None:
    """Refuse a key in a URL's path, query values or fragment, percent-encoded or not.

    Raises:
        ValueError: naming the part, without quoting it.
    """
    refuse_credential_path(path)
    for name, item in parse_qsl(query, keep_blank_values=True):
        if looks_like_a_key(item) or contains_a_key(item):
            raise ValueError(
                f"base_url query parameter {name!r} holds what looks like a credential; name "
                "an environment variable in api_key_env instead"
            )
    pieces = _WORD_BREAKS.split(unquote(fragment))
    if any(looks_like_a_key(piece) or contains_a_key(piece) for piece in pieces):
        raise ValueError("base_url fragment looks like a credential; remove it")


def key_free(field: str) -> Callable[[_Text], _Text]:
    """A field validator refusing a key-shaped `field` (a key pasted as `model`, `description`)."""

    def check(value: _Text) -> _Text:
        refuse_key_values(value, field)
        return value

    return check


def checked_base_url(value: str | None) -> str | None:
    """`base_url` without its trailing `/`, refused unless an http(s) URL free of credentials.

    Raises:
        ValueError: naming what is wrong (a port out of range, userinfo, a key in the path,
            query or fragment), never quoting a part that may be a key.
    """
    if value is None:
        return value
    parts = urlsplit(value)
    refuse_control_characters(value, "base_url")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"base_url must be an http(s) URL with a host, got scheme {parts.scheme!r}"
        )
    if parts.username or parts.password:
        raise ValueError("base_url must not carry credentials; use api_key_env")
    refuse_port_out_of_range(parts)
    refuse_credential_query(parts.query)
    refuse_credential_url_parts(parts.path, parts.query, parts.fragment)
    return value.rstrip("/")
