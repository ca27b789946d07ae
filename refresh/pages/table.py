"""A materialized table's page: its definition (and Trino's reading of it), schedule,
refresh history a page at a time with its charts, verifications, definition versions and
the sections other apps add (PANELS)."""

from __future__ import annotations

import functools
from typing import Any

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import get_token
from django.shortcuts import render
from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_http_methods

from catalog.core.access import MANAGE, READ_DATA, WRITE_DATA
from catalog.core.errors import CatalogError
from catalog.core.sql import qualify_table_names, transpile
from catalog.pages import access as page_access
from catalog.pages import permissions
from catalog.pages.access import catalog_page
from catalog.pages.formatting import moment, places, text
from catalog.pages.tables import Panel
from maintenance import pages as maintenance_pages
from refresh import checks, schedules, selectors
from refresh.core.freshness import RefreshMode
from refresh.models import (
    MaterializedTable,
    RefreshRun,
)
from refresh.pages.common import summary, table_for
from refresh.pages.versions import definition_versions

RUNS_PER_PAGE = 25


#: Verifications the page lists (the API pages through all that are kept).
VERIFICATIONS_SHOWN = 10


ACTIVE = (RefreshRun.State.QUEUED, RefreshRun.State.RUNNING)


#: Sections other apps add to a materialized table's page, after maintenance's
#: (alerts/apps.py adds notifications'); this app knows none of them.
PANELS: list[Panel] = []


def _schedule(mt: MaterializedTable) -> dict[str, Any] | None:
    found = schedules.shown(mt)
    if found is None:
        return None
    schedule, task = found
    return {
        "text": str(schedule),
        "flink_cron": schedule.flink_cron,
        "task_name": task.name if task else None,
        "enabled": bool(task and task.enabled),
    }


@functools.lru_cache(maxsize=1024)
def _trino(query: str, namespace: str) -> tuple[str | None, str | None]:
    """The query in Trino's dialect with its tables qualified (Trino does not know the
    default namespace), or why it cannot be transpiled. Kept per process by its text: sqlglot
    took several milliseconds of every page of the table."""
    try:
        qualified = qualify_table_names(query, dialect="spark", namespace=namespace.split("."))
        return transpile(qualified, source="spark", target="trino"), None
    except CatalogError as error:
        return None, error.message
    except Exception as error:  # sqlglot may fail in ways of its own on odd SQL
        return None, f"Cannot transpile the query to Trino: {error}"


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def mt_detail(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    mt = table_for(request, namespace, name, READ_DATA)
    definitions = definition_versions(request, mt)
    hidden = definitions["query_hidden"]
    trino, trino_error = (
        (None, None)
        if hidden
        else _trino(mt.query, mt.default_namespace or mt.table.namespace.name)
    )
    page = Paginator(selectors.RunPages(mt), RUNS_PER_PAGE).get_page(request.GET.get("page"))
    runs = list(page.object_list)
    active = [run["pk"] for run in runs if run["state"] in ACTIVE]
    can_cancel = (
        bool(active)
        and page_access.holds(request, mt.table, WRITE_DATA)
        and mt.refresh_mode != RefreshMode.CONTINUOUS
    )
    context = {
        **summary(mt),
        "namespace": mt.table.namespace,
        "table": mt.table,
        "trino": trino,
        "trino_error": trino_error,
        "fields": selectors.schema_fields(mt.table),
        "options": sorted(mt.options.items()),
        "schedule": _schedule(mt),
        "runs": runs,
        "runs_html": _run_rows_html(request, mt, runs, can_cancel=can_cancel),
        "page": page,
        "active_runs": active,
        "partition_columns": list(mt.partitioned_by),
        # The charts' points (hundreds) are fetched once the page has loaded (mt_charts).
        "has_charts": selectors.has_chart_points(mt),
        "charts_url": reverse("refresh:mt-charts", args=[namespace, name]),
        "run_url": reverse("api:run-detail", kwargs={"run_id": 0}),
        "answer": selectors.current_answer(mt),
        "verifications": selectors.latest_verifications(mt, VERIFICATIONS_SHOWN),
        # Sample rows only to a reader no row filter or mask of the table applies to.
        "sample_withheld": checks.sample_withheld(request.user, mt),
        **definitions,
        "can_edit": page_access.holds(request, mt.table, MANAGE),
        "permissions_url": permissions.later(namespace, name),
    }
    context["maintenance"] = maintenance_pages.later(request, mt.table)
    context["panel_templates"] = [panel.template for panel in PANELS]
    context.update({panel.name: panel.context(request, mt.table) for panel in PANELS})
    return render(request, "refresh/mt_detail.html", context)


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def mt_charts(request: HttpRequest, namespace: str, name: str) -> JsonResponse:
    """The points of a materialized table's charts (static/js/mt_charts.js): each finished
    run's duration, the lag before and after each successful one, and the freshness."""
    mt = table_for(request, namespace, name, READ_DATA)
    return JsonResponse(
        {
            "durations": selectors.duration_series(mt),
            "lag": selectors.lag_series(mt),
            "freshness_seconds": mt.freshness.seconds,
            "expectations": selectors.expectation_series(mt),
        }
    )


def _day_and_time(value: Any) -> str:
    """A moment as the history shows it: its date and its time, each kept on one line."""
    shown = moment(value)
    return f'<span class="nowrap">{shown[:10]}</span> <span class="nowrap">{shown[11:]}</span>'


def _run_rows_html(
    request: HttpRequest, mt: MaterializedTable, runs: list[dict[str, Any]], *, can_cancel: bool
) -> SafeString:
    """The refresh history's rows (#runs), written here with the markup the template wrote
    (every value escaped): twenty-five rows of ten cells through the template engine took
    about half of the page."""
    out = []
    for run in runs:
        pk, state = text(run["pk"]), text(run["state"])
        active = run["state"] in ACTIVE
        trigger = text(run["trigger"])
        if run["trigger"] == RefreshRun.Trigger.REBUILD:
            version = text(run["definition_version"])
            trigger += f' <span class="small muted">for version {version}</span>'
        if run["requested_by__username"]:
            by = text(run["requested_by__username"])
            trigger += f'<div class="small muted run-by">by {by}</div>'
        action = f'<span class="run-action">{text(run["action"])}</span>'
        if run["batches"] > 1:
            batches = text(run["batches"])
            action += (
                f' <span class="run-batches" title="{batches} runs of this hour, folded">'
                f"×{batches}</span>"
            )
        if run["reason"]:
            action += f'<div class="small muted run-reason">{text(run["reason"])}</div>'
        lower = text(run["state"].lower())
        state_html = f'<span class="run-state run-state-{lower}">{state}</span>'
        if run["error"]:
            state_html += (
                '<div class="run-error"><details><summary>error</summary>'
                f'<pre class="error-text">{text(run["error"])}</pre></details></div>'
            )
        if active:
            cancel = ""
            if run["cancel_requested_at"]:
                asker = text(run["cancel_requested_by__username"] or "?")
                cancel = f'<span class="small muted">stopping (asked by {asker})</span>'
            elif can_cancel:
                action_url = reverse(
                    "refresh:mt-run-cancel",
                    args=[mt.table.namespace.name, mt.table.name, run["pk"]],
                )
                token = text(get_token(request))
                cancel = (
                    f'<form method="post" action="{text(action_url)}" class="inline">'
                    f'<input type="hidden" name="csrfmiddlewaretoken" value="{token}">'
                    '<button type="submit" class="small run-cancel-button" title="Stop this run: '
                    'its Spark jobs end and the table stays as it was">Cancel</button></form>'
                )
            state_html += f'<div class="run-cancel">{cancel}</div>'
        scheduled = _day_and_time(run["schedule_time"]) if run["schedule_time"] else ""
        scheduled += "".join(
            f'<div><code class="nowrap">{text(key)}={text(value)}</code></div>'
            for key, value in (run["partition"] or {}).items()
        )
        started, queued, finished = run["started_at"], run["queued_at"], run["finished_at"]
        if started:
            start_html = (
                f'<td class="when" title="queued {moment(queued)}">'
                f'<span class="run-started">{_day_and_time(started)}</span></td>'
            )
        else:
            start_html = (
                '<td class="when"><span class="run-started"></span>'
                f'<span class="small muted">queued {_day_and_time(queued)}</span></td>'
            )
        duration = ""
        if started is not None and finished is not None:
            duration = f"{places((finished - started).total_seconds(), 1)} s"
        written = ""
        if run["rows_written"] is not None:
            written += f"<div>{text(run['rows_written'])} rows</div>"
        if run["bytes_written"] is not None:
            written += f"<div>{text(filesizeformat(run['bytes_written']))}</div>"
        for expectation, violated in (run["expectations"] or {}).items():
            written += (
                f'<div class="run-expectation small" title="rows that violated expectation '
                f'{text(expectation)}"><code>{text(expectation)}</code>: '
                f"{text(violated)} violated</div>"
            )
        snapshot = "" if run["snapshot_id"] is None else text(run["snapshot_id"])
        out.append(
            f'<tr id="run-{pk}" class="run{" run-active" if active else ""}" data-run-id="{pk}"'
            f' data-state="{state}"><td>{pk}</td><td>{trigger}</td><td>{action}</td>'
            f'<td>{state_html}</td><td class="when">{scheduled}</td>{start_html}'
            f'<td class="run-finished when">{_day_and_time(finished) if finished else ""}</td>'
            f"<td>{duration}</td><td>{written}</td><td><code>{snapshot}</code></td></tr>"
        )
    return mark_safe("\n".join(out))  # noqa: S308 - every value above is escaped
