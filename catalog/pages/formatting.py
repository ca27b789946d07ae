"""Turning stored values into what pages show."""

from __future__ import annotations

import html
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.utils import timezone


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


# What templates show, for the rows a page writes in Python (a list of dozens of rows
# through the template engine took more than the rest of its page).


def text(value: Any) -> str:
    """A value as the templates show it, escaped."""
    return html.escape(str(value))


def moment(value: datetime | None) -> str:
    """What `|date:"Y-m-d H:i:s"` shows: the moment in the current time zone ("" for none)."""
    if value is None:
        return ""
    if timezone.is_aware(value):
        value = timezone.localtime(value)
    return value.strftime("%Y-%m-%d %H:%M:%S")


def places(value: float, digits: int) -> str:
    """What `|floatformat:digits` shows for a number of at least zero (rounded half up)."""
    exponent = Decimal(1).scaleb(-digits)
    return str(Decimal(repr(value)).quantize(exponent, rounding=ROUND_HALF_UP))
