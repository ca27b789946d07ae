"""Turning stored values into what pages show."""

from __future__ import annotations

import html
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any
from urllib.parse import quote

from django.urls import reverse
from django.utils import timezone
from django.utils.http import RFC3986_SUBDELIMS


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


def linker() -> Callable[..., str]:
    """`link(url_name, namespace, name=None)`: the address of a namespace's page (no
    `name`) or of an object's page, what `reverse` gives, reversed once per page kind and
    then filled in with each namespace and name, quoted as `reverse` quotes them: for lists
    of many rows (a search's rows are in as many namespaces as rows)."""
    # Letters only: reverse() leaves them as they are. Neither contains the other.
    ns_marker, name_marker = "LAKEVIEWNAMESPACE", "LAKEVIEWOBJECTNAME"
    pieces: dict[tuple[str, bool], tuple[str, str, str]] = {}

    def link(url_name: str, namespace: str, name: str | None = None) -> str:
        key = (url_name, name is None)
        if key not in pieces:
            arguments = {"namespace": ns_marker}
            if name is not None:
                arguments["name"] = name_marker
            head, _, rest = reverse(url_name, kwargs=arguments).partition(ns_marker)
            middle, _, tail = rest.partition(name_marker) if name is not None else (rest, "", "")
            pieces[key] = (head, middle, tail)
        head, middle, tail = pieces[key]
        address = f"{head}{quote(namespace, safe=_URL_SAFE)}{middle}"
        if name is not None:
            address += f"{quote(name, safe=_URL_SAFE)}{tail}"
        return address

    return link


#: What `reverse` leaves unquoted in a path argument (django.urls.resolvers).
_URL_SAFE = RFC3986_SUBDELIMS + "/~:@"


def minute(moment: datetime | None) -> str:
    """A list's "Updated" column: what `|date:"Y-m-d H:i"` shows, in the current timezone."""
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M") if moment else ""
