"""Turning stored values into what pages show."""

from __future__ import annotations

from datetime import UTC, datetime


def time_of(timestamp_ms: int | None) -> datetime | None:
    """A metadata timestamp (milliseconds since the epoch) as a datetime; None when there is
    none, or when it is too large or small to be a date (a valid metadata file may hold any
    long, and a page must still render)."""
    if not timestamp_ms:
        return None
    try:
        return datetime.fromtimestamp(timestamp_ms / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None
