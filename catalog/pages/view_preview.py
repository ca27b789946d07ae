"""The preview section of a view's page: the first rows of the view's query as Spark gives
them (`catalog.previews.preview_view`, read by a refresh worker's Spark as a job), with a
column choice and a row filter. Asked for with `?preview=1` only. The page never waits for
the worker: it shows the job, and static/js/jobs.js fills in the rows when they come
(the page asked again finds the same job, finished). With no worker alive, or too many jobs
waiting, the page says so."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from catalog import access_events
from catalog.core.errors import CatalogError, TooManyJobs, Unavailable
from catalog.models import View, ViewSchemaField, ViewVersion
from catalog.pages.forms import ViewPreviewForm
from catalog.pages.previewing import job_preview, shown_body
from catalog.prepared import Prepared

PREVIEW_ROWS = 100


#: The current version's columns, in order (compiled once, catalog.prepared).
_COLUMNS = Prepared(
    lambda view_id, version_id: ViewSchemaField.objects.filter(
        view_id=view_id,
        schema_id__in=ViewVersion.objects.filter(view_id=view_id, version_id=version_id).values(
            "schema_id"
        ),
    )
    .order_by("position")
    .values_list("name"),
    view_id=7_654_321,
    version_id=7_654_322,
)


def preview_context(request: HttpRequest, view: View) -> tuple[dict, int]:
    from catalog import jobs

    """The template context of the section and the page's status (400 for a bad filter or
    column; an unavailable worker is not the user's error)."""
    asked = "preview" in request.GET
    columns = [
        name for (name,) in _COLUMNS.rows(view_id=view.pk, version_id=view.current_version_id)
    ]
    form = ViewPreviewForm(request.GET if asked else None, columns=columns)
    context: dict[str, Any] = {"preview_form": form, "preview": None, "preview_rows": PREVIEW_ROWS}
    if not asked:
        return context, 200
    if not form.is_valid():
        return context, 400
    arguments = form.arguments()
    access_events.read(request, "preview", "page", view)
    try:
        outcome = jobs.attempt(
            "preview_view",
            {
                "namespace": view.namespace.name,
                "name": view.name,
                "limit": PREVIEW_ROWS,
                "columns": arguments.get("columns") or None,
                "row_filter": arguments.get("row_filter") or None,
                "version": view.metadata_location,
            },
            actor=request.user,
            summary=f"Preview of view {view}",
            reuse=True,
        )
    except (Unavailable, TooManyJobs) as error:
        # No worker, or too many jobs waiting: said in words, not the user's error.
        context["preview"] = {"unavailable": error.message}
        return context, 200
    except CatalogError as error:
        form.add_catalog_error(error)
        context["preview"] = {"error": error.message}
        return context, 400
    if outcome.job is None:
        context["preview"] = shown_body(outcome.body or {}, arguments)
        return context, 200
    context["preview"] = job_preview(outcome.job, arguments)
    if "error" in context["preview"]:
        form.add_error(None, context["preview"]["error"])
        return context, 400
    return context, 200
