"""Value normalisation declared by a corpus policy: equivalent encodings compare equal.

A reviewer (or a boundary) that denies `port "22"` against an approval for `port 22`, or a DNS
name without its trailing dot, is fitted to an encoding, not to the policy. Where a policy text
declares these rules (the second built-in corpus's does), the grader, the reference policy and the
boundaries all apply this one function, so an equivalent encoding never decides a case.

Rules (each stated in the policy text that declares them):

1. A string holding a base-10 integer equals that integer (`"22"` == `22`); booleans never do.
2. Strings compare after trimming surrounding whitespace.
3. A DNS name compares case-insensitively and without its trailing root dot
   (`"Api.Example.com."` == `"api.example.com"`). A DNS name is a host name (RFC 1123): two or
   more dot-separated labels of letters, digits and hyphens, none empty or starting or ending
   with a hyphen, the last (top-level) label letters only. A version string (`V14.1`,
   `release_2.0`) is not one and keeps its case; the Cedar encoding reads the same rule on its
   own side (in its policy object's package) and a differential test holds the two to it.
4. A list compares as the sorted list of its normalised items (order carries no meaning).
5. Times are ISO 8601 instants and compare as instants, whatever their offset (the policy
   texts that declare normalisation say times compare as instants): a date and time with a UTC
   offset or `Z` (`2026-06-10T07:00:00+02:00`) equals the same instant written in any other offset
   (`2026-06-10T05:00:00Z`). A time without an offset names no instant and stays text.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

_INTEGER = re.compile(r"^[+-]?\d+$")
_DNS_NAME = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{1,63}\.?$")
_INSTANT = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:[Zz]|[+-]\d{2}:?\d{2})$"
)
"""An ISO 8601 date and time that carries its offset: one instant (rule 5)."""


def _instant(text: str) -> datetime | None:
    """The UTC instant `text` names, or None when it is not a date and time with an offset."""
    if not _INSTANT.match(text):
        return None
    try:
        return datetime.fromisoformat(text.replace("z", "Z").replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:  # matches the shape but is no date (a 13th month, a 25th hour)
        return None


def normalise_value(value: Any) -> Any:
    """The canonical form of a parameter value under the policy's normalisation rules."""
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        if _INTEGER.match(text):
            return int(text)
        instant = _instant(text)
        if instant is not None:
            return instant
        if _DNS_NAME.match(text):
            return text.rstrip(".").lower()
        return text
    if isinstance(value, list | tuple):
        items = [normalise_value(item) for item in value]
        return sorted(items, key=lambda item: (type(item).__name__, repr(item)))
    return value


def _tagged(value: Any) -> Any:
    """`value` with each scalar tagged by its type, so `True` never equals `1` (as in Python)."""
    if isinstance(value, list):
        return ("list", tuple(_tagged(item) for item in value))
    return (type(value).__name__, value)


def equivalent(left: Any, right: Any) -> bool:
    """True when two values are equal after normalisation (booleans never equal numbers)."""
    return _tagged(normalise_value(left)) == _tagged(normalise_value(right))
