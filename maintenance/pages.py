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
from django.middleware.csrf import get_token
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import filesizeformat, floatformat
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_http_methods, require_POST

from catalog.core.access import MANAGE, READ_METADATA
from catalog.core.errors import CatalogError
from catalog.models import Table
from catalog.pages import access as page_access
from catalog.pages.access import catalog_page
from catalog.pages.formatting import moment, text
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
    runs = list(selectors.runs(table)[:RUNS_LISTED])
    can_cancel = page_access.holds(request, table, MANAGE) and managed
    return {
        "managed": managed,
        "policy": policy,
        "retention": duration(policy.max_snapshot_age_ms),
        "orphan_age": duration(policy.orphan_age_ms),
        "health": health,
        "runs": runs,
        "runs_html": run_rows_html(request, table, runs, can_cancel=can_cancel),
        "running": selectors.active(table).exists(),
        "has_samples": selectors.has_samples(table),
        "health_url": reverse("api:table-health", args=[table.namespace.name, table.name]),
        "can_edit": can_cancel,
    }


def run_rows_html(
    request: HttpRequest, table: Table, runs: list[MaintenanceRun], *, can_cancel: bool
) -> SafeString:
    """The rows of the section's runs (#maintenance-runs), written here with the markup
    the template wrote (every value escaped): twenty rows of fourteen cells through the
    template engine took most of the section."""
    out = []
    for run in runs:
        pk, state = text(run.pk), text(run.state)
        duration_seconds = run.duration_seconds
        seconds = "" if duration_seconds is None else f"{floatformat(duration_seconds, 1)} s"
        files = ""
        if run.files_before is not None:
            files = f"{text(run.files_before)} → {text(run.files_after)}"
        sizes = ""
        if run.bytes_before is not None:
            sizes = f"{filesizeformat(run.bytes_before)} → {filesizeformat(run.bytes_after)}"
        deleted = "" if run.files_deleted is None else text(run.files_deleted)
        if run.files_outside:
            deleted += (
                ' <span class="error small" title="outside the table\'s folder: kept">'
                f"({len(run.files_outside)} outside, kept)</span>"
            )
        error = ""
        if run.error:
            error = (
                "<details><summary>error</summary>"
                f'<pre class="error-text">{text(run.error)}</pre></details>'
            )
        by = text(run.requested_by.get_username()) if run.requested_by else ""
        cancel = ""
        if run.state in ("QUEUED", "RUNNING"):
            if run.cancel_requested_at:
                cancel = '<span class="small muted">stopping</span>'
            elif can_cancel:
                url = reverse(
                    "maintenance:table-maintenance-run-cancel",
                    kwargs={
                        "namespace": table.namespace.name,
                        "name": table.name,
                        "run_id": run.pk,
                    },
                )
                token = text(get_token(request))
                cancel = (
                    f'<form method="post" action="{text(url)}" class="inline">'
                    f'<input type="hidden" name="csrfmiddlewaretoken" value="{token}">'
                    '<button type="submit" class="small run-cancel-button" title="Stop this run: '
                    'its Spark jobs end and the table stays as it was">Cancel</button></form>'
                )
        out.append(
            f'<tr id="maintenance-run-{pk}" data-state="{state}"><td>{pk}</td>'
            f'<td class="maintenance-action">{text(run.action)}</td><td>{text(run.trigger)}</td>'
            f'<td class="run-state run-state-{text(run.state.lower())}">{state}</td>'
            f"<td>{moment(run.started_at)}</td><td>{seconds}</td><td>{files}</td>"
            f"<td>{sizes}</td><td>{_or_blank(run.snapshots_expired)}</td><td>{deleted}</td>"
            f"<td>{_or_blank(run.orphans_removed)}</td><td>{error}</td><td>{by}</td>"
            f'<td class="run-cancel">{cancel}</td></tr>'
        )
    return mark_safe("\n".join(out))  # noqa: S308 - every value above is escaped


def _or_blank(value: Any) -> str:
    return "" if value is None else text(value)


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
    page_access.check(request, table, READ_METADATA, missing=_MISSING)
    context = {"table": table, "maintenance": section(request, table)}
    return render(request, "maintenance/_section.html", context)


#: What Django's get_object_or_404 says of a missing table: a hidden one says the same.
_MISSING = "No Table matches the given query."


def _table(request: HttpRequest, namespace: str, name: str) -> Table:
    """The table, when the user may see it (else the missing table's 404) and manage it."""
    table = get_object_or_404(
        Table.objects.select_related("namespace"), namespace__name=namespace, name=name
    )
    page_access.check(request, table, MANAGE, missing=_MISSING)
    return table


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
    table = _table(request, namespace, name)
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
    table = _table(request, namespace, name)
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
    table = _table(request, namespace, name)
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
