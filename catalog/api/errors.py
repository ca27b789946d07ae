"""Maps domain errors to HTTP responses: a clear 4xx with the message and the field."""

from __future__ import annotations

from typing import Any

from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from catalog.core.errors import (
    AlreadyExists,
    CatalogError,
    CommitConflict,
    NamespaceNotEmpty,
    NotFound,
)


def status_for(error: CatalogError) -> int:
    if isinstance(error, NotFound):
        return status.HTTP_404_NOT_FOUND
    if isinstance(error, AlreadyExists | CommitConflict | NamespaceNotEmpty):
        return status.HTTP_409_CONFLICT
    return status.HTTP_400_BAD_REQUEST


def error_body(error: CatalogError) -> dict[str, Any]:
    body: dict[str, Any] = {"error": error.message, "type": type(error).__name__}
    if error.field:
        body["field"] = error.field
    line = getattr(error, "line", None)
    if line is not None:
        body["line"] = line
        body["column"] = getattr(error, "column", None)
    return body


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, CatalogError):
        return Response(error_body(exc), status=status_for(exc))
    return drf_exception_handler(exc, context)
