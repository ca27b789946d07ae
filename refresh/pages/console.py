"""The SQL console: a script run by `refresh.console` in the request (or handed to a worker
as a job), its results with the objects they name linked."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from catalog.core.errors import CatalogError
from catalog.models import Namespace, SparkJob
from catalog.pages import access as page_access
from catalog.pages.jobs import job_context
from refresh import console, console_plan
from refresh.models import (
    MaterializedTable,
)
from refresh.pages.forms import ConsoleForm
from refresh.pages.queries import console_context


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
    # "Plan": what each statement would do, nothing changed (refresh.console_plan.plan).
    planning = request.method == "POST" and request.POST.get("action") == "plan"
    if request.method == "POST":
        form = ConsoleForm(request.POST, namespaces=namespaces)
        if form.is_valid():
            try:
                if planning:
                    ran = console_plan.plan(
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
