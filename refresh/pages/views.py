"""Pages for materialized tables: a namespace's list, a table's page (definition, schedule,
refresh history and charts, the lifecycle buttons) and the SQL console. Reads go through
`refresh.selectors`; every button calls one function of `refresh.services` and shows its
`CatalogError` as a message."""

from __future__ import annotations

import functools
from typing import Any

from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import get_token
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_http_methods, require_POST

from catalog import access, jobs
from catalog.core.access import MANAGE, READ_DATA, READ_METADATA, WRITE_DATA
from catalog.core.errors import CatalogError, http_status
from catalog.core.inputs import whole_number
from catalog.core.sql import qualify_table_names, transpile
from catalog.models import CatalogObject, Namespace, SparkJob
from catalog.pages import access as page_access
from catalog.pages import permissions
from catalog.pages.access import catalog_page
from catalog.pages.diff import side_by_side
from catalog.pages.formatting import linker, moment, places, text
from catalog.pages.jobs import job_context
from catalog.pages.tables import Panel
from maintenance import pages as maintenance_pages
from refresh import console, lineage, rights, selectors, services, table_state
from refresh import definitions as refresh_definitions
from refresh import runs as refresh_runs
from refresh.core.freshness import RefreshMode, full_refresh_schedule
from refresh.models import (
    MaterializedTable,
    MaterializedTableVersion,
    MaterializedTableVersionLogEntry,
    RefreshRun,
)
from refresh.pages.forms import AlterQueryForm, ConsoleForm, VersionDiffForm
from refresh.pages.queries import console_context

RUNS_PER_PAGE = 25
#: Verifications the page lists (the API pages through all that are kept).
VERIFICATIONS_SHOWN = 10
ACTIVE = (RefreshRun.State.QUEUED, RefreshRun.State.RUNNING)
#: Sections other apps add to a materialized table's page, after maintenance's
#: (alerts/apps.py adds notifications'); this app knows none of them.
PANELS: list[Panel] = []


def _get(request: HttpRequest, namespace: str, name: str, privilege: str) -> MaterializedTable:
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


def _page_of(mt: MaterializedTable) -> HttpResponse:
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


#: Materialized tables per page of a namespace's list.
LIST_PAGE_SIZE = 50


def _summary(mt: MaterializedTable) -> dict[str, Any]:
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


def _schedule(mt: MaterializedTable) -> dict[str, Any] | None:
    if mt.refresh_mode != RefreshMode.FULL:
        return None
    try:
        schedule = full_refresh_schedule(mt.freshness)
    except CatalogError:
        return None
    task = mt.periodic_task
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


# -- a namespace's materialized tables --------------------------------------------------------


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
        {**_summary(mt), "url": link("refresh:mt-detail", ns.name, mt.table.name)}
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


# -- one materialized table ---------------------------------------------------------------


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def mt_detail(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    mt = _get(request, namespace, name, READ_DATA)
    definitions = _definition_versions(request, mt)
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
        **_summary(mt),
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
    mt = _get(request, namespace, name, READ_DATA)
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


@require_POST
@catalog_page(editors_only=True)
def mt_verify(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    """Verify the newest snapshots (a Spark job: its page shows the verdicts, then the
    table's page lists them)."""
    mt = _get(request, namespace, name, MANAGE)
    try:
        snapshots = int(request.POST.get("snapshots") or 1)
    except ValueError:
        messages.error(request, "Snapshots must be a whole number from 1 to 20.")
        return _page_of(mt)
    try:
        outcome = jobs.attempt(
            "verify_materialized_table",
            {"namespace": namespace, "name": name, "snapshots": snapshots},
            actor=request.user,
            summary=f"Verify {mt} ({snapshots} snapshots)",
        )
    except CatalogError as error:
        messages.error(request, error.message)
        return _page_of(mt)
    if outcome.job is not None:
        return redirect("catalog:job", job_id=outcome.job.pk)
    return _page_of(mt)


@require_POST
@catalog_page(editors_only=True)
def mt_suspend(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    mt = _get(request, namespace, name, MANAGE)
    try:
        table_state.suspend(mt, actor=request.user)
    except CatalogError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"{mt} suspended: its schedule is paused.")
    return _page_of(mt)


@require_POST
@catalog_page(editors_only=True)
def mt_resume(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    mt = _get(request, namespace, name, MANAGE)
    try:
        services.resume(mt, actor=request.user)
    except CatalogError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"{mt} resumed.")
    return _page_of(mt)


@require_POST
@catalog_page(editors_only=True)
def mt_refresh(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    """Refresh now (the whole table), or one partition: the form sends each partition column
    with its value; blank values are left out."""
    mt = _get(request, namespace, name, WRITE_DATA)
    columns = request.POST.getlist("partition_column")
    values = request.POST.getlist("partition_value")
    partition = {c: v for c, v in zip(columns, values, strict=False) if v.strip()}
    if columns and not partition:
        messages.error(request, "Give a value for at least one partition column.")
        return _page_of(mt)
    try:
        run = refresh_runs.request_refresh(
            mt,
            trigger=RefreshRun.Trigger.MANUAL,
            partition=partition,
            force=request.POST.get("force") == "on",
            full=request.POST.get("full") == "on",
            actor=request.user,
        )
    except CatalogError as error:
        messages.error(request, error.message)
    else:
        where = f" of partition {run.partition}" if run.partition else ""
        messages.success(request, f"Refresh{where} queued as job {run.pk}.")
    return _page_of(mt)


@require_POST
@catalog_page(editors_only=True)
def mt_run_cancel(request: HttpRequest, namespace: str, name: str, run_id: int) -> HttpResponse:
    """Stop one of the table's refresh runs (refresh_runs.cancel_run)."""
    mt = _get(request, namespace, name, WRITE_DATA)
    run = get_object_or_404(RefreshRun, pk=run_id, materialized_table=mt)
    try:
        run = refresh_runs.cancel_run(run, actor=request.user)
    except CatalogError as error:
        messages.error(request, error.message)
    else:
        if run.state == RefreshRun.State.CANCELLED:
            messages.success(request, f"Job {run.pk} cancelled before it started.")
        elif run.state == RefreshRun.State.RUNNING:
            messages.success(request, f"Job {run.pk} is being stopped: its Spark jobs end now.")
        else:  # it ended on its own while the request came
            messages.info(request, f"Job {run.pk} had already ended {run.state}.")
    return _page_of(mt)


@require_http_methods(["GET", "HEAD", "POST"])
@catalog_page(editors_only=True)
def mt_drop(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    mt = _get(request, namespace, name, MANAGE)
    error_message = None
    if request.method == "POST":
        try:
            services.drop_materialized_table(mt, actor=request.user)
        except CatalogError as error:
            error_message = error.message
        else:
            messages.success(request, f"Materialized table {mt} dropped with its data.")
            return redirect("refresh:mt-list", namespace=namespace)
    context = {"mt": mt, "namespace": mt.table.namespace, "error": error_message}
    return render(request, "refresh/mt_drop.html", context)


# -- definition versions --------------------------------------------------------------------


def _versions(request: HttpRequest, mt: MaterializedTable) -> list[MaterializedTableVersion]:
    """The table's definitions, newest first, each knowing the one before it and whether
    its query is hidden from the user (refresh.rights: one who may not read every source
    of a version does not see its text)."""
    versions = selectors.definition_versions(mt)
    hidden = rights.hidden_definitions(access.principal_of(request), [v.sources for v in versions])
    for index, version in enumerate(versions):
        version.hidden = hidden[index]
        version.is_current = version.version_id == mt.current_version
        older = versions[index + 1] if index + 1 < len(versions) else None
        version.previous_id = older.version_id if older is not None else None
    return versions


def _version_log(mt: MaterializedTable) -> list[Any]:
    """Each version asked to become current and whether it did, newest first; the newest
    applied entry is in force (a pending or failed one never was)."""
    entries = selectors.version_log(mt)
    applied = [e for e in entries if e.outcome == MaterializedTableVersionLogEntry.Outcome.APPLIED]
    for entry in entries:
        entry.is_current = bool(applied) and entry is applied[0]
        entry.previous_id = None
    for index, entry in enumerate(applied):
        before = applied[index + 1] if index + 1 < len(applied) else None
        if before is not None and before.version_id != entry.version_id:
            entry.previous_id = before.version_id
    return entries


def _diff_initial(
    mt: MaterializedTable, versions: list[MaterializedTableVersion], log: list[Any]
) -> dict[str, int]:
    """Compare the version in force with the one before it (in the log, else by id)."""
    ids = {v.version_id for v in versions}
    right = mt.current_version
    left = next((e.version_id for e in log if e.version_id != right and e.version_id in ids), None)
    if left is None:
        left = next((v.version_id for v in versions if v.version_id != right), right)
    return {"left": left, "right": right}


def _definition_versions(request: HttpRequest, mt: MaterializedTable) -> dict[str, Any]:
    versions = _versions(request, mt)
    log = _version_log(mt)
    return {
        "query_hidden": rights.definition_hidden(access.principal_of(request), mt.sources),
        "hidden_note": rights.DEFINITION_HIDDEN,
        "versions": versions,
        "version_log": log,
        "diff_form": VersionDiffForm(
            initial=_diff_initial(mt, versions, log),
            version_ids=sorted(v.version_id for v in versions),
        ),
    }


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def mt_diff(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    """Two definition versions side by side (?left=1&right=2; by default the one in force
    and the one before it)."""
    mt = _get(request, namespace, name, READ_DATA)
    versions = _versions(request, mt)
    by_id = {v.version_id: v for v in versions}
    initial = _diff_initial(mt, versions, _version_log(mt))
    data = {**initial, **{k: request.GET[k] for k in ("left", "right") if k in request.GET}}
    form = VersionDiffForm(data, initial=initial, version_ids=sorted(by_id))
    context: dict[str, Any] = {
        "mt": mt,
        "namespace": mt.table.namespace,
        "table": mt.table,
        "form": form,
        "rows": None,
    }
    if not form.is_valid():
        return render(request, "refresh/mt_diff.html", context, status=400)
    left, right = by_id[form.cleaned_data["left"]], by_id[form.cleaned_data["right"]]
    if left.hidden or right.hidden:
        context.update(hidden_note=rights.DEFINITION_HIDDEN)
        return render(request, "refresh/mt_diff.html", context)
    context.update(left=left, right=right, rows=side_by_side(left.query, right.query))
    return render(request, "refresh/mt_diff.html", context)


def _error_position(query: str, error: CatalogError) -> dict[str, Any] | None:
    """The line an SQL error points at, with a caret under its column."""
    line, column = getattr(error, "line", None), getattr(error, "column", None)
    lines = query.splitlines()
    if not isinstance(line, int) or not 1 <= line <= len(lines):
        return None
    column = column if isinstance(column, int) and column >= 1 else 1
    return {
        "line": line,
        "column": column,
        "text": lines[line - 1],
        "caret": " " * (column - 1) + "^",
    }


def _say_rebuilding(request: HttpRequest, mt: MaterializedTable) -> None:
    pending = refresh_definitions.pending_change(mt)
    if pending is not None:
        messages.success(
            request,
            f"Version {pending.version_id} of {mt} is being built by job {pending.run_id}; "
            f"readers see version {mt.current_version} until its rows are committed.",
        )


@require_http_methods(["GET", "HEAD", "POST"])
@catalog_page(editors_only=True)
def mt_alter(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    """ALTER MATERIALIZED TABLE ... AS <query>: a new definition version and a rebuild."""
    mt = _get(request, namespace, name, MANAGE)
    position = None
    status = 200
    if request.method == "POST":
        form = AlterQueryForm(request.POST, current=mt.query)
        if form.is_valid():
            query = form.cleaned_data["query"].strip()
            try:
                outcome = jobs.attempt(
                    "alter_query",
                    {"namespace": namespace, "name": name, "query": query},
                    actor=request.user,
                    summary=f"ALTER MATERIALIZED TABLE {mt} AS <query>",
                )
                if outcome.job is not None:
                    # Spark derives the new schema on a worker: the job's page follows it
                    # and goes on to the table when it is done.
                    return redirect("catalog:job", job_id=outcome.job.pk)
            except CatalogError as error:
                form.add_catalog_error(error)
                position = _error_position(query, error)
                status = http_status(error)
            else:
                _say_rebuilding(request, mt)
                return _page_of(mt)
    else:
        hidden = rights.definition_hidden(access.principal_of(request), mt.sources)
        form = AlterQueryForm(initial={"query": "" if hidden else mt.query}, current=mt.query)
    context = {
        "mt": mt,
        "namespace": mt.table.namespace,
        "table": mt.table,
        "form": form,
        "position": position,
    }
    if form.errors and status < 400:
        status = 400
    return render(request, "refresh/mt_alter.html", context, status=status)


@require_http_methods(["GET", "HEAD", "POST"])
@catalog_page(editors_only=True)
def mt_rollback(request: HttpRequest, namespace: str, name: str, version_id: int) -> HttpResponse:
    """Make an earlier definition current again, after a confirmation."""
    mt = _get(request, namespace, name, MANAGE)
    version = mt.versions.select_related("created_by").filter(version_id=version_id).first()
    if version is None:
        raise Http404(f"Materialized table {mt} has no definition version {version_id}")
    error_message = None
    if request.method == "POST":
        try:
            outcome = jobs.attempt(
                "rollback_definition",
                {"namespace": namespace, "name": name, "version_id": version_id},
                actor=request.user,
                summary=f"Roll {mt} back to definition version {version_id}",
            )
            if outcome.job is not None:
                return redirect("catalog:job", job_id=outcome.job.pk)
        except CatalogError as error:
            error_message = error.message
        else:
            _say_rebuilding(request, mt)
            return _page_of(mt)
    current = mt.versions.filter(version_id=mt.current_version).first()
    shown = [version, *([current] if current is not None else [])]
    principal = access.principal_of(request)
    hidden = any(rights.hidden_definitions(principal, [v.sources for v in shown]))
    context = {
        "mt": mt,
        "namespace": mt.table.namespace,
        "table": mt.table,
        "version": version,
        "is_current": version_id == mt.current_version,
        "rows": side_by_side(current.query, version.query)
        if current is not None and not hidden
        else None,
        "query_hidden": hidden,
        "hidden_note": rights.DEFINITION_HIDDEN,
        "current": current,
        "error": error_message,
    }
    return render(
        request, "refresh/mt_rollback.html", context, status=400 if error_message else 200
    )


# -- lineage --------------------------------------------------------------------------------


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def lineage_page(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    """What an object reads and what reads it, drawn as a graph (static/js/lineage.js): of
    the objects the user may see (a hidden one, and its edges, are left out)."""
    missing = f"Table or view does not exist: {namespace}.{name}"
    held = CatalogObject.objects.select_related("namespace")
    found = held.filter(namespace__name=namespace, name=name).first()
    if found is None:
        raise Http404(missing)
    page_access.check(request, found, READ_METADATA, missing=missing)
    try:
        graph = lineage.lineage(
            namespace,
            name,
            depth=request.GET.get("depth") or 10,
            principal=page_access.principal(request),
        )
    except CatalogError as error:
        raise Http404(error.message) from error
    focus = next(n for n in graph["nodes"] if n["focus"])
    for node in graph["nodes"]:
        if node.get("lag_seconds") is not None:
            node["lag_text"] = duration_text(node["lag_seconds"])
    nodes = sorted(graph["nodes"], key=lambda n: (not n["focus"], n["kind"], n["id"]))
    context = {
        "graph": graph,
        "focus": focus,
        "nodes": nodes,
        "namespace_name": namespace,
        "name": name,
        "upstream": [e["source"] for e in graph["edges"] if e["target"] == focus["id"]],
        "downstream": [e["target"] for e in graph["edges"] if e["source"] == focus["id"]],
        "cut": [n for n in nodes if n.get("more_readers") or n.get("more_sources")],
    }
    return render(request, "refresh/lineage.html", context)


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def lineage_readers_page(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    """What reads an object, a page at a time (the lineage draws lineage.FANOUT of them):
    of the objects the user may see."""
    missing = f"Table or view does not exist: {namespace}.{name}"
    held = CatalogObject.objects.select_related("namespace")
    found = held.filter(namespace__name=namespace, name=name).first()
    if found is None:
        raise Http404(missing)
    page_access.check(request, found, READ_METADATA, missing=missing)
    page = whole_number(request.GET.get("page", "").strip(), digits=6) or 1
    try:
        listed = lineage.readers(
            namespace, name, page=page, principal=page_access.principal(request)
        )
    except CatalogError as error:
        raise Http404(error.message) from error
    context = {
        "namespace_name": namespace,
        "name": name,
        "focus_url": lineage.url_of(
            lineage.VIEW if found.kind == CatalogObject.Kind.VIEW else lineage.TABLE,
            namespace,
            name,
        ),
        "listed": listed,
        "first": (listed["page"] - 1) * lineage.READERS_PAGE + 1,
        "per_page": lineage.READERS_PAGE,
    }
    return render(request, "refresh/lineage_readers.html", context)


# -- the SQL console ----------------------------------------------------------------------


def _linked(result: console.StatementResult) -> dict[str, Any]:
    """A result with links to its table's page and its job's row, when the table exists."""
    item: dict[str, Any] = {"result": result, "table_url": None, "job_url": None}
    if result.table:
        namespace, _, name = result.table.rpartition(".")
        if MaterializedTable.objects.filter(
            table__namespace__name=namespace, table__name=name
        ).exists():
            item["table_url"] = reverse(
                "refresh:mt-detail", kwargs={"namespace": namespace, "name": name}
            )
            if result.run_id:
                item["job_url"] = f"{item['table_url']}#run-{result.run_id}"
    if result.run_id and item["job_url"] is None:
        item["job_url"] = reverse("api:run-detail", kwargs={"run_id": result.run_id})
    if result.spark_job:
        item["spark_job"] = job_context(SparkJob.objects.get(pk=result.spark_job))
    return item


@require_http_methods(["GET", "HEAD", "POST"])
def console_page(request: HttpRequest) -> HttpResponse:
    """Viewers may run statements too: the console checks the editor role for every
    statement that changes something."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    if not page_access.principal(request).holds_anything():
        raise PermissionDenied("You have no role in this catalog.")
    listed = Namespace.objects.order_by("name")
    shown = page_access.visible_namespaces(request)
    if shown is not None:
        listed = listed.filter(shown)
    namespaces = list(listed.values_list("name", flat=True))
    results: list[dict[str, Any]] = []
    query_part = console_context(request)  # the history, a query to run again
    # "Plan": what each statement would do, nothing changed (refresh.console.plan).
    planning = request.method == "POST" and request.POST.get("action") == "plan"
    if request.method == "POST":
        form = ConsoleForm(request.POST, namespaces=namespaces)
        if form.is_valid():
            try:
                if planning:
                    ran = console.plan(
                        form.cleaned_data["sql"],
                        namespace=form.cleaned_data["namespace"] or None,
                        actor=request.user,
                    )
                else:
                    ran, _ = console.run(
                        form.cleaned_data["sql"],
                        namespace=form.cleaned_data["namespace"] or None,
                        actor=request.user,
                    )
            except CatalogError as error:
                form.add_catalog_error(error)
            else:
                results = [_linked(result) for result in ran]
    else:
        again = query_part.get("again") or {}
        initial = {"namespace": again.get("namespace") or request.GET.get("namespace", "")}
        form = ConsoleForm(initial={**initial, "sql": again.get("sql", "")}, namespaces=namespaces)
    if planning:
        context = {"form": form, "results": results, "failed": False, "planning": True}
        context.update(query_part)
        return render(request, "refresh/console.html", context, status=400 if form.errors else 200)
    failed = bool(results) and not results[-1]["result"].ok
    status = 400 if failed or (request.method == "POST" and form.errors) else 200
    if not failed and results and results[-1]["result"].spark_job:
        status = 202  # the rest of the script runs as a job; the page fills it in
    return render(
        request,
        "refresh/console.html",
        {"form": form, "results": results, "failed": failed, **query_part},
        status=status,
    )
