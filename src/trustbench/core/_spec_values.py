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
from typing import Any
from urllib.parse import SplitResult

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
