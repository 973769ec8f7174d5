"""Timestamps for ledger rows: UTC, ISO 8601, microseconds."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now() -> str:
    """Current UTC time as ISO 8601 with microseconds, always written.

    `2026-12-06T02:40:09.000000+00:00`: a fixed width, so that a ledger's timestamps sort and
    compare as text in time order.
    """
    return datetime.now(UTC).isoformat(timespec="microseconds")
