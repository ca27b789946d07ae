"""What the pages of materialized tables share: the table a request may see with a given
privilege (else the missing table's 404, or a 403), the way back to its page after a
button, a duration in words, and a table's summary as the list and its page show it.
Reads go through `refresh.selectors`; every button calls one function of
`refresh.services` and shows its `CatalogError` as a message."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect

from catalog.core.errors import CatalogError
from catalog.pages import access as page_access
from refresh import selectors
from refresh.models import (
    MaterializedTable,
)


def table_for(request: HttpRequest, namespace: str, name: str, privilege: str) -> MaterializedTable:
    """The materialized table, when the user may see it (else the missing table's 404) and
    holds `privilege` on it (its data table's grants) (else 403). Its definition is SQL,
    as a view's: its pages need read_data."""
    try:
        mt = selectors.get_materialized_table(namespace, name)
    except CatalogError as error:
        raise Http404(error.message) from error
    missing = f"Materialized table does not exist: {namespace}.{name}"
    page_access.check(request, mt.table, privilege, missing=missing)
    return mt


def back_to_table(mt: MaterializedTable) -> HttpResponse:
    return redirect("refresh:mt-detail", namespace=mt.table.namespace.name, name=mt.table.name)


def _seconds(delta: Any) -> float | None:
    return delta.total_seconds() if delta is not None else None


def duration_text(seconds: float) -> str:
    """3725 -> "1 h 2 min", 42 -> "42 s": how lag is read at a glance."""
    seconds = int(round(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours} h"
    if hours:
        return f"{hours} h {minutes} min"
    if minutes:
        return f"{minutes} min {secs} s"
    return f"{secs} s"


def summary(mt: MaterializedTable) -> dict[str, Any]:
    """What the list and the page show about a table's freshness."""
    as_of = selectors.data_timestamp(mt)
    lag = selectors.lag(mt, as_of=as_of)
    return {
        "data_timestamp": as_of,
        "mt": mt,
        "last_refresh": selectors.last_refresh(mt),
        "lag": lag,
        "lag_seconds": _seconds(lag),
        "lag_text": duration_text(lag.total_seconds()) if lag is not None else "",
        "late": lag is not None and lag > mt.freshness.to_timedelta(),
        "next_run": selectors.next_run(mt),
    }
