"""The maintenance section of the table and materialized-table pages (one template,
templates/maintenance/_section.html), and its two forms: the policy switch and "Run
maintenance now". Thin: they call maintenance.services and go back to the page.

A page shows the section once it has loaded (`later`: static/js/later.js asks
`section_page` for it), so that the page does not wait for the section's reads (the
policy, the health now, the last runs) and its rendering."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from catalog.core.errors import CatalogError
from catalog.models import Table
from catalog.pages.views import catalog_page
from catalog.roles import can_edit
from maintenance import selectors, services
from maintenance.models import MaintenanceRun

RUNS_LISTED = 20


def duration(ms: int) -> str:
    """A policy's age in the largest whole unit that reads well: "5 days", "10 minutes"."""
    seconds = ms / 1000
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        if seconds >= size and (seconds % size == 0 or seconds >= 10 * size or unit == "second"):
            count = round(seconds / size, 1 if seconds % size else None)
            return f"{count:g} {unit}{'' if count == 1 else 's'}"
    return f"{ms} ms"


def section(request: HttpRequest, table: Table) -> dict[str, Any]:
    """What the section shows: the policy, the health now, the last runs. The health over
    time (hundreds of samples) is drawn after the page from the API's answer
    (static/js/health_charts.js), so that the page does not wait for it."""
    managed = not hasattr(table, "attachment")
    if not managed:
        return {"managed": False}
    policy = selectors.policy_of(table)
    # The section shows the metadata file's size but not the manifests: no manifest list read.
    health = selectors.health_of(table, with_files=True, with_manifests=False)
    return {
        "managed": managed,
        "policy": policy,
        "retention": duration(policy.max_snapshot_age_ms),
        "orphan_age": duration(policy.orphan_age_ms),
        "health": health,
        "runs": list(selectors.runs(table)[:RUNS_LISTED]),
        "running": selectors.active(table).exists(),
        "has_samples": selectors.has_samples(table),
        "health_url": reverse("api:table-health", args=[table.namespace.name, table.name]),
        "can_edit": can_edit(request.user) and managed,
    }


def later(request: HttpRequest, table: Table) -> dict[str, Any]:
    """The section's place on a page: where static/js/later.js fetches it from."""
    url = reverse("maintenance:table-maintenance-section", args=[table.namespace.name, table.name])
    return {"later": True, "url": url}


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def section_page(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    """The section alone (HTML), for the page it belongs to."""
    table = get_object_or_404(
        Table.objects.select_related("namespace", "attachment", "materialized"),
        namespace__name=namespace,
        name=name,
    )
    context = {"table": table, "maintenance": section(request, table)}
    return render(request, "maintenance/_section.html", context)


def _table(namespace: str, name: str) -> Table:
    return get_object_or_404(
        Table.objects.select_related("namespace"), namespace__name=namespace, name=name
    )


def _back(table: Table) -> HttpResponse:
    """The materialized table's page for a materialized table, else the table's."""
    if selectors.materialized_of(table) is not None:
        url = reverse("refresh:mt-detail", args=[table.namespace.name, table.name])
    else:
        url = reverse("catalog:table-detail", args=[table.namespace.name, table.name])
    return redirect(f"{url}#maintenance")


@require_POST
@catalog_page(editors_only=True)
def set_enabled(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    table = _table(namespace, name)
    enabled = request.POST.get("enabled") == "on"
    try:
        services.set_policy(
            table=table,
            changes={"lakeview.maintenance.enabled": "true" if enabled else "false"},
            actor=request.user,
        )
    except CatalogError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Maintenance turned {'on' if enabled else 'off'}.")
    return _back(table)


@require_POST
@catalog_page(editors_only=True)
def run_now(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    table = _table(namespace, name)
    try:
        runs = services.start(
            table=table, trigger=MaintenanceRun.Trigger.MANUAL, actor=request.user
        )
    except CatalogError as error:
        messages.error(request, error.message)
    else:
        messages.success(
            request, f"Maintenance queued: {', '.join(r.action.lower() for r in runs)}."
        )
    return _back(table)


@require_POST
@catalog_page(editors_only=True)
def cancel_run(request: HttpRequest, namespace: str, name: str, run_id: int) -> HttpResponse:
    """Stop one of the table's maintenance runs (services.cancel_run)."""
    table = _table(namespace, name)
    run = get_object_or_404(MaintenanceRun, pk=run_id, table=table)
    try:
        run = services.cancel_run(run, actor=request.user)
    except CatalogError as error:
        messages.error(request, error.message)
    else:
        if run.state == MaintenanceRun.State.CANCELLED:
            messages.success(request, f"Maintenance run {run.pk} cancelled before it started.")
        else:
            messages.success(request, f"Maintenance run {run.pk} is being stopped.")
    return _back(table)
