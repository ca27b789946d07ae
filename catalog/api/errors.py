"""Maps domain errors to HTTP responses: a clear 4xx with the message and the field."""

from __future__ import annotations

from typing import Any

from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from catalog import access_events
from catalog.core.errors import CatalogError, TooManyJobs, http_status


def error_body(error: CatalogError) -> dict[str, Any]:
    body: dict[str, Any] = {"error": error.message, "type": type(error).__name__}
    if error.field:
        body["field"] = error.field
    line = getattr(error, "line", None)
    if line is not None:
        body["line"] = line
        body["column"] = getattr(error, "column", None)
    row = getattr(error, "row", None)
    if row is not None:
        body["row"] = row
    column_name = getattr(error, "column_name", None)
    if column_name is not None:
        body["column_name"] = column_name
    return body


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    response = _answer(exc, context)
    if response is not None:
        access_events.refused(context["request"], exc, response.status_code, "api")
    return response


def _answer(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, CatalogError):
        response = Response(error_body(exc), status=http_status(exc))
        if isinstance(exc, TooManyJobs):
            response["Retry-After"] = str(exc.retry_after)
        return response
    return drf_exception_handler(exc, context)
