"""The monitoring page (/monitoring/): every materialized table across namespaces, failing
and late ones first, and the refresh and maintenance history of all tables with filters
(as Snowflake's dynamic-table monitoring shows them). Reads go through
`refresh.monitoring`; each user sees the tables, and the runs of tables, they may see."""

from __future__ import annotations

import dataclasses
from typing import Any

from django.core.paginator import Page, Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.defaultfilters import truncatechars
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_http_methods

from catalog import access
from catalog.core.errors import InvalidInput
from catalog.pages import access as page_access
from catalog.pages.access import catalog_page
from catalog.pages.formatting import linker, moment, places, text
from refresh.monitoring import filters
from refresh.monitoring import history as run_history
from refresh.monitoring import tables as table_status
from refresh.monitoring.hosts import streaming_hosts
from refresh.pages.common import duration_text


def _page(request: HttpRequest, items: Any, parameter: str) -> Page:
    """One page of `items` from `?<parameter>=`, with what templates/catalog/_pagination.html
    reads to build its links (the other parameters, filters included, are kept)."""
    page = Paginator(items, filters.PAGE_SIZE).get_page(request.GET.get(parameter))
    page.parameter = parameter
    page.other_parameters = request.GET.copy()
    page.other_parameters.pop(parameter, None)
    return page


# The lists' rows are written here, not by the template: fifty rows of each through the
# template engine took most of the page. The markup is the template's, every value escaped.

_STATUS_BADGES = {
    filters.FAILING: '<span class="badge err">failing</span>',
    filters.LATE: '<span class="badge late">late</span>',
    filters.OK: '<span class="badge ok">ok</span>',
}


def table_rows_html(rows: list[dict[str, Any]]) -> SafeString:
    out = []
    for row in rows:
        status = row["status"]
        qualified = text(f"{row['namespace']}.{row['name']}")
        state = text(row["state"])
        reason = row["suspended_reason"]
        suspended = (
            f' <span class="small muted" title="{text(reason)}">'
            f"{text(truncatechars(reason, 60))}</span>"
            if reason
            else ""
        )
        if row["lag_seconds"] is None:
            lag = '<span class="muted">no data yet</span>'
        else:
            seconds = places(row["lag_seconds"], 0)
            lag = f'<span title="{seconds} s">{text(row["lag_text"])}</span>'
        ratio = places(row["lag_ratio"], 2) if row["lag_ratio"] is not None else ""
        last = row["last_refresh"]
        if last:
            finished = moment(last["finished_at"])
            last_html = (
                f'<span class="run-state-{text(last["state"].lower())}">{text(last["state"])}'
                f"</span> {finished}"
            )
        else:
            last_html = '<span class="muted">never</span>'
        out.append(
            f'<tr id="mt-{qualified}" class="monitored status-{text(status)}'
            f'{" late" if status != filters.OK else ""}" data-status="{text(status)}">'
            f"<td>{_STATUS_BADGES[status]}</td>"
            f'<td><a href="{text(row["url"])}">{qualified}</a></td>'
            f'<td><span class="badge state state-{text(row["state"].lower())}">{state}</span>'
            f"{suspended}</td>"
            f"<td><code>{text(row['freshness']['text'])}</code></td>"
            f'<td class="lag">{lag}</td><td>{ratio}</td><td>{last_html}</td>'
            f"<td>{text(row['consecutive_failures'])}</td></tr>"
        )
    return mark_safe("\n".join(out))  # noqa: S308 - every value above is escaped


def history_rows_html(entries: list[dict[str, Any]]) -> SafeString:
    out = []
    for entry in entries:
        kind, state = text(entry["kind"]), text(entry["state"])
        name = text(entry["table_name"])
        table = (
            f'<a href="{text(entry["url"])}">{name}</a>'
            if entry.get("url")
            else f'{name} <span class="muted small">(dropped)</span>'
        )
        count = entry["count"]
        batches = f' <span class="run-batches">×{text(count)}</span>' if count > 1 else ""
        seconds = entry["duration_seconds"]
        duration = f"{places(seconds, 1)} s" if seconds is not None else ""
        error = (
            f'<details><summary>error</summary><pre class="error-text">{text(entry["error"])}'
            "</pre></details>"
            if entry["error"]
            else ""
        )
        out.append(
            f'<tr id="{kind}-run-{text(entry["id"])}" class="run" data-kind="{kind}" '
            f'data-state="{state}"><td><span class="badge">{kind}</span></td>'
            f"<td>{text(entry['id'])}</td><td>{table}</td>"
            f"<td>{text(entry['action'])}{batches}</td><td>{text(entry['trigger'])}</td>"
            f'<td class="run-state run-state-{text(entry["state"].lower())}">{state}</td>'
            f"<td>{moment(entry['queued_at'])}</td><td>{moment(entry['finished_at'])}</td>"
            f'<td>{duration}</td><td class="run-error">{error}</td></tr>'
        )
    return mark_safe("\n".join(out))  # noqa: S308 - every value above is escaped


#: No page number beyond this one is read (a number is a LIMIT: it must stay an integer the
#: database takes).
LAST_PAGE_READ = 100_000


def _number(request: HttpRequest, parameter: str) -> int:
    try:
        return min(max(int(request.GET.get(parameter) or 1), 1), LAST_PAGE_READ)
    except ValueError:
        return 1


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def monitoring_page(request: HttpRequest) -> HttpResponse:
    """Every materialized table's status and every run, of the tables the user may see
    (read_metadata, catalog.access: the lists' queries carry the filter, so counts and pages
    stay right). The streaming hosts, which serve every continuous table, are listed to
    those who see the whole catalog."""
    now = timezone.now()
    whole = page_access.sees_catalog(request)
    # What the user may see, as values of the lists' queries compiled once; else as
    # catalog.access's filter.
    visibility = None if whole else access.visibility(page_access.principal(request))
    condition = (
        None if whole or visibility is not None else page_access.visible(request, prefix="table__")
    )
    link = linker()
    errors: dict[str, str] = {}

    try:
        table_filters = filters.table_filters({"status": request.GET.get("status")})
    except InvalidInput as error:
        errors[error.field or "status"] = error.message
        table_filters = filters.TableFilters()
    if condition is None:
        listed: Any = table_status.TableList(table_filters, now=now, visibility=visibility)
        by_status = listed.by_status
    else:
        listed = table_status.tables(table_filters, now=now).filter(condition)
        by_status = table_status.counts_by_status(now=now, condition=condition)
    tables = _page(request, listed, "page")
    rows = []
    for mt in tables.object_list:
        row = table_status.table_row(mt, now)
        lag = row["lag_seconds"]
        row["lag_text"] = duration_text(lag) if lag is not None else ""
        row["url"] = link("refresh:mt-detail", row["namespace"], row["name"])
        rows.append(row)

    history = None
    entries: list[dict[str, Any]] = []
    try:
        history_filters = filters.history_filters(request.GET, now=now)
    except InvalidInput as error:
        errors[error.field or "history"] = error.message
    else:
        if visibility is not None:
            history_filters = dataclasses.replace(history_filters, visibility=visibility)
        elif condition is not None:
            history_filters = dataclasses.replace(
                history_filters,
                refreshes=page_access.visible(request, prefix="materialized_table__table__"),
                maintenance=condition,
            )
        # Counted up to HISTORY_COUNTED rows, or up to the page asked for: "more than".
        asked = _number(request, "history_page") * filters.PAGE_SIZE
        upto = max(run_history.HISTORY_COUNTED, asked)
        runs = run_history.HistoryList(history_filters, upto=upto)
        history = _page(request, runs, "history_page")
        history.more = runs.more
        for entry in map(run_history.history_row, history.object_list):
            if entry["namespace"] is not None and entry["name"] is not None:
                detail = "refresh:mt-detail" if entry["kind"] == filters.REFRESH else None
                entry["url"] = link(
                    detail or "catalog:table-detail", entry["namespace"], entry["name"]
                )
            entries.append(entry)

    context = {
        "rows": rows,
        "table_rows": table_rows_html(rows),
        "page": tables,
        "status": table_filters.status or "",
        "statuses": filters.STATUSES,
        # The list counted every table by status already.
        "counts": {key: by_status[key] for key in (filters.LATE, filters.FAILING)},
        "history": history,
        "entries": entries,
        "history_rows": history_rows_html(entries),
        "filters": {
            name: request.GET.get(name, "")
            for name in ("kind", "state", "namespace", "table", "since")
        },
        "kinds": filters.KINDS,
        "run_states": filters.RUN_STATES,
        "errors": errors,
        "since_help": filters.SINCE_HELP,
        "whole_catalog": whole,
        "stream_hosts": streaming_hosts(now=now) if whole else [],
    }
    return render(request, "refresh/monitoring.html", context, status=400 if errors else 200)
