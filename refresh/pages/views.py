"""Pages for materialized tables: a namespace's list, a table's page (definition, schedule,
refresh history and charts, the lifecycle buttons) and the SQL console. Reads go through
`refresh.selectors`; every button calls one function of `refresh.services` and shows its
`CatalogError` as a message."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from catalog.core.errors import CatalogError
from catalog.core.sql import qualify_table_names, transpile
from catalog.models import Namespace
from catalog.pages.views import catalog_page
from catalog.roles import can_view
from refresh import console, selectors, services
from refresh.core.freshness import RefreshMode, full_refresh_schedule
from refresh.models import MaterializedTable, RefreshRun
from refresh.pages.forms import ConsoleForm

RUNS_PER_PAGE = 25
ACTIVE = (RefreshRun.State.QUEUED, RefreshRun.State.RUNNING)


def _get(namespace: str, name: str) -> MaterializedTable:
    try:
        return selectors.get_materialized_table(namespace, name)
    except CatalogError as error:
        raise Http404(error.message) from error


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


def _summary(mt: MaterializedTable) -> dict[str, Any]:
    """What the list and the page show about a table's freshness."""
    lag = selectors.lag(mt)
    return {
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


def _trino(query: str, namespace: str) -> tuple[str | None, str | None]:
    """The query in Trino's dialect with its tables qualified (Trino does not know the
    default namespace), or why it cannot be transpiled."""
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
    ns = get_object_or_404(Namespace, name=namespace)
    rows = [_summary(mt) for mt in selectors.materialized_tables(ns.name)]
    return render(request, "refresh/mt_list.html", {"namespace": ns, "rows": rows})


# -- one materialized table ---------------------------------------------------------------


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def mt_detail(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    mt = _get(namespace, name)
    trino, trino_error = _trino(mt.query, mt.default_namespace or mt.table.namespace.name)
    page = Paginator(selectors.runs(mt), RUNS_PER_PAGE).get_page(request.GET.get("page"))
    runs = list(page.object_list)
    active = [run.pk for run in runs if run.state in ACTIVE]
    context = {
        **_summary(mt),
        "namespace": mt.table.namespace,
        "table": mt.table,
        "trino": trino,
        "trino_error": trino_error,
        "fields": list(mt.table.schema_fields()),
        "options": sorted(mt.options.items()),
        "schedule": _schedule(mt),
        "data_timestamp": selectors.data_timestamp(mt),
        "runs": runs,
        "page": page,
        "active_runs": active,
        "partition_columns": list(mt.partitioned_by),
        "chart_data": {
            "durations": selectors.duration_series(mt),
            "lag": selectors.lag_series(mt),
            "freshness_seconds": mt.freshness.seconds,
        },
        "run_url": reverse("api:run-detail", kwargs={"run_id": 0}),
    }
    return render(request, "refresh/mt_detail.html", context)


@require_POST
@catalog_page(editors_only=True)
def mt_suspend(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    mt = _get(namespace, name)
    try:
        services.suspend(mt, actor=request.user)
    except CatalogError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"{mt} suspended: its schedule is paused.")
    return _page_of(mt)


@require_POST
@catalog_page(editors_only=True)
def mt_resume(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    mt = _get(namespace, name)
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
    mt = _get(namespace, name)
    columns = request.POST.getlist("partition_column")
    values = request.POST.getlist("partition_value")
    partition = {c: v for c, v in zip(columns, values, strict=False) if v.strip()}
    if columns and not partition:
        messages.error(request, "Give a value for at least one partition column.")
        return _page_of(mt)
    try:
        run = services.request_refresh(
            mt,
            trigger=RefreshRun.Trigger.MANUAL,
            partition=partition,
            force=request.POST.get("force") == "on",
            actor=request.user,
        )
    except CatalogError as error:
        messages.error(request, error.message)
    else:
        where = f" of partition {run.partition}" if run.partition else ""
        messages.success(request, f"Refresh{where} queued as job {run.pk}.")
    return _page_of(mt)


@require_http_methods(["GET", "HEAD", "POST"])
@catalog_page(editors_only=True)
def mt_drop(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    mt = _get(namespace, name)
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
    return item


@require_http_methods(["GET", "HEAD", "POST"])
def console_page(request: HttpRequest) -> HttpResponse:
    """Viewers may run statements too: the console checks the editor role for every
    statement that changes something."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    if not can_view(request.user):
        raise PermissionDenied("You have no role in this catalog.")
    namespaces = list(Namespace.objects.order_by("name").values_list("name", flat=True))
    results: list[dict[str, Any]] = []
    if request.method == "POST":
        form = ConsoleForm(request.POST, namespaces=namespaces)
        if form.is_valid():
            try:
                ran = console.execute(
                    form.cleaned_data["sql"],
                    namespace=form.cleaned_data["namespace"] or None,
                    actor=request.user,
                )
            except CatalogError as error:
                form.add_catalog_error(error)
            else:
                results = [_linked(result) for result in ran]
    else:
        form = ConsoleForm(
            initial={"namespace": request.GET.get("namespace", "")}, namespaces=namespaces
        )
    failed = bool(results) and not results[-1]["result"].ok
    status = 400 if failed or (request.method == "POST" and form.errors) else 200
    return render(
        request,
        "refresh/console.html",
        {"form": form, "results": results, "failed": failed},
        status=status,
    )
