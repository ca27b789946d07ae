"""The monitoring page (/monitoring/): every materialized table across namespaces, failing
and late ones first, and the refresh and maintenance history of all tables with filters
(as Snowflake's dynamic-table monitoring shows them). Reads go through
`refresh.monitoring`; any user with a role may see it."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Page, Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from catalog.core.errors import InvalidInput
from catalog.pages.views import catalog_page, linker
from refresh import monitoring
from refresh.pages.views import duration_text


def _page(request: HttpRequest, items: Any, parameter: str) -> Page:
    """One page of `items` from `?<parameter>=`, with what templates/catalog/_pagination.html
    reads to build its links (the other parameters, filters included, are kept)."""
    page = Paginator(items, monitoring.PAGE_SIZE).get_page(request.GET.get(parameter))
    page.parameter = parameter
    page.other_parameters = request.GET.copy()
    page.other_parameters.pop(parameter, None)
    return page


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def monitoring_page(request: HttpRequest) -> HttpResponse:
    now = timezone.now()
    link = linker()
    errors: dict[str, str] = {}

    try:
        table_filters = monitoring.table_filters({"status": request.GET.get("status")})
    except InvalidInput as error:
        errors[error.field or "status"] = error.message
        table_filters = monitoring.TableFilters()
    tables = _page(request, monitoring.tables(table_filters, now=now), "page")
    rows = []
    for mt in tables.object_list:
        row = monitoring.table_row(mt, now)
        lag = row["lag_seconds"]
        row["lag_text"] = duration_text(lag) if lag is not None else ""
        row["url"] = link("refresh:mt-detail", row["namespace"], row["name"])
        rows.append(row)

    history = None
    entries: list[dict[str, Any]] = []
    try:
        history_filters = monitoring.history_filters(request.GET, now=now)
    except InvalidInput as error:
        errors[error.field or "history"] = error.message
    else:
        history = _page(request, monitoring.history(history_filters), "history_page")
        for entry in map(monitoring.history_row, history.object_list):
            if entry["namespace"] is not None and entry["name"] is not None:
                detail = "refresh:mt-detail" if entry["kind"] == monitoring.REFRESH else None
                entry["url"] = link(
                    detail or "catalog:table-detail", entry["namespace"], entry["name"]
                )
            entries.append(entry)

    context = {
        "rows": rows,
        "page": tables,
        "status": table_filters.status or "",
        "statuses": monitoring.STATUSES,
        "counts": monitoring.counts(now=now),
        "history": history,
        "entries": entries,
        "filters": {
            name: request.GET.get(name, "")
            for name in ("kind", "state", "namespace", "table", "since")
        },
        "kinds": monitoring.KINDS,
        "run_states": monitoring.RUN_STATES,
        "errors": errors,
        "since_help": monitoring.SINCE_HELP,
        "stream_hosts": monitoring.streaming_hosts(now=now),
    }
    return render(request, "refresh/monitoring.html", context, status=400 if errors else 200)
