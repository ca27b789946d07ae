"""The buttons of a materialized table's page: verify, suspend, resume, refresh, cancel a
run and drop; each calls one function of `refresh.services` and goes back to the page."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from catalog import jobs
from catalog.core.access import MANAGE, WRITE_DATA
from catalog.core.errors import CatalogError
from catalog.pages.access import catalog_page
from refresh import runs as refresh_runs
from refresh import services, table_state
from refresh.models import (
    RefreshRun,
)
from refresh.pages.common import back_to_table, table_for


@require_POST
@catalog_page(editors_only=True)
def mt_verify(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    """Verify the newest snapshots (a Spark job: its page shows the verdicts, then the
    table's page lists them)."""
    mt = table_for(request, namespace, name, MANAGE)
    try:
        snapshots = int(request.POST.get("snapshots") or 1)
    except ValueError:
        messages.error(request, "Snapshots must be a whole number from 1 to 20.")
        return back_to_table(mt)
    try:
        outcome = jobs.attempt(
            "verify_materialized_table",
            {"namespace": namespace, "name": name, "snapshots": snapshots},
            actor=request.user,
            summary=f"Verify {mt} ({snapshots} snapshots)",
        )
    except CatalogError as error:
        messages.error(request, error.message)
        return back_to_table(mt)
    if outcome.job is not None:
        return redirect("catalog:job", job_id=outcome.job.pk)
    return back_to_table(mt)


@require_POST
@catalog_page(editors_only=True)
def mt_suspend(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    mt = table_for(request, namespace, name, MANAGE)
    try:
        table_state.suspend(mt, actor=request.user)
    except CatalogError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"{mt} suspended: its schedule is paused.")
    return back_to_table(mt)


@require_POST
@catalog_page(editors_only=True)
def mt_resume(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    mt = table_for(request, namespace, name, MANAGE)
    try:
        services.resume(mt, actor=request.user)
    except CatalogError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"{mt} resumed.")
    return back_to_table(mt)


@require_POST
@catalog_page(editors_only=True)
def mt_refresh(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    """Refresh now (the whole table), or one partition: the form sends each partition column
    with its value; blank values are left out."""
    mt = table_for(request, namespace, name, WRITE_DATA)
    columns = request.POST.getlist("partition_column")
    values = request.POST.getlist("partition_value")
    partition = {c: v for c, v in zip(columns, values, strict=False) if v.strip()}
    if columns and not partition:
        messages.error(request, "Give a value for at least one partition column.")
        return back_to_table(mt)
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
    return back_to_table(mt)


@require_POST
@catalog_page(editors_only=True)
def mt_run_cancel(request: HttpRequest, namespace: str, name: str, run_id: int) -> HttpResponse:
    """Stop one of the table's refresh runs (refresh_runs.cancel_run)."""
    mt = table_for(request, namespace, name, WRITE_DATA)
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
    return back_to_table(mt)


@require_http_methods(["GET", "HEAD", "POST"])
@catalog_page(editors_only=True)
def mt_drop(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    mt = table_for(request, namespace, name, MANAGE)
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
