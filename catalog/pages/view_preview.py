"""The preview section of a view's page: the first rows of the view's query as Spark gives
them (`catalog.previews.preview_view`, read by a refresh worker's Spark), with a column
choice and a row filter. Asked for with `?preview=1` only, since it needs a worker; when no
worker answers, the page says so instead of failing."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from catalog import previews
from catalog.core.errors import CatalogError, Unavailable
from catalog.models import View
from catalog.pages.forms import ViewPreviewForm
from catalog.pages.previewing import shown_preview

PREVIEW_ROWS = 100


def preview_context(request: HttpRequest, view: View) -> tuple[dict, int]:
    """The template context of the section and the page's status (400 for a bad filter or
    column; an unavailable worker is not the user's error)."""
    asked = "preview" in request.GET
    current_schema = view.versions.filter(version_id=view.current_version_id).values("schema_id")
    columns = list(
        view.fields.filter(schema_id__in=current_schema)
        .order_by("position")
        .values_list("name", flat=True)
    )
    form = ViewPreviewForm(request.GET if asked else None, columns=columns)
    context: dict[str, Any] = {"preview_form": form, "preview": None, "preview_rows": PREVIEW_ROWS}
    if not asked:
        return context, 200
    if not form.is_valid():
        return context, 400
    arguments = form.arguments()
    before = previews.metadata_cache().stats()
    try:
        result = previews.preview_view(view, limit=PREVIEW_ROWS, **arguments)
    except Unavailable as error:
        context["preview"] = {"unavailable": error.message}
        return context, 200
    except CatalogError as error:
        form.add_catalog_error(error)
        context["preview"] = {"error": error.message}
        return context, 400
    context["preview"] = shown_preview(result, arguments, before)
    return context, 200
