"""The audit page (/audit/): every change to the catalog, read and refusal, newest first,
filterable by actor, object, time, kind, action and outcome, a page at a time by keyset
(catalog.audit), and its CSV export (/audit/export.csv, streamed a chunk at a time). For
superusers and those who manage the whole catalog; a filter that cannot be read is a 400
page naming it."""

from __future__ import annotations

from urllib.parse import urlencode

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from catalog import audit
from catalog.core.errors import InvalidInput
from catalog.pages import access as page_access
from catalog.pages.access import catalog_page

REFUSED = "The audit is for administrators and those who manage the whole catalog."


def _check(request: HttpRequest) -> None:
    if not audit.may_see(page_access.principal(request)):
        raise PermissionDenied(REFUSED)


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def audit_page(request: HttpRequest) -> HttpResponse:
    _check(request)
    errors: dict[str, str] = {}
    entries: list[audit.Entry] = []
    next_url = None
    filters = audit.Filters()
    try:
        filters = audit.parse_filters(request.GET)
        after = request.GET.get("cursor") or ""
        key = audit.decode_cursor(after) if after else None
        entries, cursor = audit.entries(filters, after=key, limit=audit.PAGE_SIZE)
    except InvalidInput as error:
        errors[error.field or "filters"] = error.message
    else:
        if cursor is not None:
            next_url = "?" + urlencode({**filters.query(), "cursor": cursor})
    asked = {
        key: request.GET.get(key, "")
        for key in ("actor", "object", "from", "to", "kind", "action", "outcome")
    }
    context = {
        "entries": entries,
        "errors": errors,
        "asked": asked,
        "kinds": audit.FILTER_KINDS,
        "outcomes": audit.OUTCOMES,
        "paged": bool(request.GET.get("cursor")),
        "first_url": "?" + urlencode(filters.query()),
        "next_url": next_url,
        "export_url": reverse("catalog:audit-export") + "?" + urlencode(filters.query()),
        "keep_days": audit.retention_days(),
    }
    return render(request, "catalog/audit.html", context, status=400 if errors else 200)


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def audit_export(request: HttpRequest) -> HttpResponse:
    """Every entry the filters keep, as CSV, written as it is read."""
    _check(request)
    try:
        filters = audit.parse_filters(request.GET)
    except InvalidInput as error:
        return render(request, "400.html", {"message": error.message}, status=400)
    response = StreamingHttpResponse(audit.csv_lines(filters), content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="{audit.export_name()}"'
    return response
