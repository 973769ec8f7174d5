"""Values as the Cedar encoding sees them: rule 7 of the v0.2 policy text, written on this side.

The Cedar encoding must be able to contradict the reference reviewer, so it shares no
normalisation or decision helper with it (`trustbench.rtb.corpus._normalise` is the reference
side's). This module reads rule 7 of the policy text on its own:

    Values compare after normalisation: a string holding a base-10 integer equals that integer
    ("22" equals 22; booleans never equal numbers); strings are trimmed of surrounding
    whitespace; a DNS name compares case-insensitively and without its trailing dot; a list
    compares as the sorted list of its normalised items.

"A DNS name" is read as a host name (RFC 1123): two or more dot-separated labels of ASCII
letters, digits and hyphens, no label empty or starting or ending with a hyphen, the last label
(the top-level domain) letters only; one trailing root dot allowed. So `Api.Example.com.` is
`api.example.com`, while a version string (`V14.1`, `release_2.0`) is not a DNS name and keeps
its case. Every value becomes one Cedar string (a typed JSON text), so equal strings in Cedar are
exactly equivalent values under rule 7.
"""

from __future__ import annotations

import json
import string
from datetime import datetime
from typing import Any

NEVER = 2**62
"""Stand-in epoch for "no expiry" / "never revoked" (Cedar has no null)."""

_LABEL_CHARS = frozenset(string.ascii_letters + string.digits + "-")


def _is_host_name(text: str) -> bool:
    """Whether `text` (trimmed) is a DNS host name in the reading above."""
    name = text[:-1] if text.endswith(".") else text
    labels = name.split(".")
    if len(labels) < 2:
        return False
    for label in labels:
        if not label or len(label) > 63 or label[0] == "-" or label[-1] == "-":
            return False
        if not set(label) <= _LABEL_CHARS:
            return False
    return labels[-1].isascii() and labels[-1].isalpha()


def _is_integer_text(text: str) -> bool:
    body = text[1:] if text[:1] in "+-" else text
    return body.isascii() and body.isdigit()


def _canonical(value: Any) -> Any:
    """A tagged canonical form: equal forms are equivalent values under rule 7."""
    if isinstance(value, bool):
        return ["bool", value]
    if value is None:
        return ["null", None]
    if isinstance(value, int):
        return ["int", value]
    if isinstance(value, float):
        return ["float", value]
    if isinstance(value, str):
        text = value.strip()
        if _is_integer_text(text):
            return ["int", int(text)]
        if _is_host_name(text):
            return ["str", text.rstrip(".").lower()]
        return ["str", text]
    if isinstance(value, list | tuple):
        items = [_canonical(item) for item in value]
        return ["list", sorted(items, key=lambda item: json.dumps(item, sort_keys=True))]
    return ["other", repr(value)]


def cedar_value(value: Any) -> str:
    """The Cedar string standing for `value` (equal strings = equivalent values)."""
    return json.dumps(_canonical(value), sort_keys=True, separators=(",", ":"))


def cedar_epoch(text: str | None) -> int:
    """An ISO 8601 instant as epoch seconds (`NEVER` for none)."""
    if text is None:
        return NEVER
    return int(datetime.fromisoformat(text.strip().replace("Z", "+00:00")).timestamp())
