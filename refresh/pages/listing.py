"""A namespace's materialized tables: a page of them in name order, each with its state,
freshness, lag and last refresh."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_http_methods

from catalog.pages import access as page_access
from catalog.pages.access import catalog_page
from catalog.pages.formatting import linker, moment, places, text
from refresh import selectors
from refresh.pages.common import summary

#: Materialized tables per page of a namespace's list.
LIST_PAGE_SIZE = 50


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def mt_list(request: HttpRequest, namespace: str) -> HttpResponse:
    ns = page_access.namespace_for(request, namespace)
    visible = page_access.visible(request, namespace=ns.name, prefix="table__")
    tables = selectors.ListedTables(ns.name, visible)
    page = Paginator(tables, LIST_PAGE_SIZE).get_page(request.GET.get("page"))
    # What templates/catalog/_pagination.html reads to build its links.
    page.parameter = "page"
    page.other_parameters = request.GET.copy()
    page.other_parameters.pop("page", None)
    link = linker()
    rows = [
        {**summary(mt), "url": link("refresh:mt-detail", ns.name, mt.table.name)}
        for mt in page.object_list
    ]
    context = {"namespace": ns, "rows": rows, "page": page, "rows_html": _list_rows_html(rows)}
    return render(request, "refresh/mt_list.html", context)


def _list_rows_html(rows: list[dict[str, Any]]) -> SafeString:
    """The list's rows, written here with the template's markup (every value escaped): fifty
    rows through the template engine, two includes each, took most of the page."""
    out = []
    for row in rows:
        mt = row["mt"]
        name, state = text(mt.table.name), text(mt.state)
        last = row["last_refresh"]
        if last:
            last_html = (
                f'<span class="run-state-{text(last.state.lower())}">{text(last.state)}</span> '
                f"{moment(last.finished_at)}"
            )
        else:
            last_html = '<span class="muted">never</span>'
        if row["lag_seconds"] is None:
            lag = '<span class="muted">no data yet</span>'
        else:
            lag = f'<span title="{places(row["lag_seconds"], 0)} s">{text(row["lag_text"])}</span>'
            if row["late"]:
                lag += ' <span class="badge late">late</span>'
        out.append(
            f'<tr id="mt-{name}" class="{"late" if row["late"] else ""}">'
            f'<td><a href="{text(row["url"])}">{name}</a></td>'
            f'<td><span class="badge state state-{text(mt.state.lower())}">{state}</span></td>'
            f"<td>{text(mt.refresh_mode)}</td><td><code>{text(mt.freshness)}</code></td>"
            f'<td>{last_html}</td><td class="lag">{lag}</td>'
            f"<td>{moment(row['next_run']) or '—'}</td></tr>"
        )
    return mark_safe("\n".join(out))  # noqa: S308 - every value above is escaped
