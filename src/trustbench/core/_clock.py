"""Timestamps for ledger rows: UTC, ISO 8601, microseconds."""

from __future__ import annotations

import time
from datetime import UTC, datetime

_second_prefix: tuple[int, str] = (-1, "")
"""The last whole second `utc_now` formatted, and its text up to the seconds."""


def utc_now() -> str:
    """Current UTC time as ISO 8601 with microseconds (`datetime.now(UTC).isoformat(...)`).

    Each trial stamps several rows; the date and time of day are formatted once per second and
    only the microseconds per call (tested equal to `isoformat` across second boundaries).
    """
    global _second_prefix
    second, nanoseconds = divmod(time.time_ns(), 1_000_000_000)
    cached = _second_prefix
    if cached[0] != second:
        text = datetime.fromtimestamp(second, UTC).isoformat()[:19]  # YYYY-MM-DDTHH:MM:SS
        cached = _second_prefix = (second, text)
    return f"{cached[1]}.{nanoseconds // 1000:06d}+00:00"
