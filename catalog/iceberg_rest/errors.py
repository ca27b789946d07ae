"""The protocol's error body, `{"error": {message, type, code}}`, with the status codes and
exception types Iceberg's clients map (404 NoSuchTableException, 409 CommitFailedException,
...)."""

from __future__ import annotations

from django.http import JsonResponse

from catalog.core.errors import CatalogError, http_status


class NotAuthorized(CatalogError):
    iceberg_type = "NotAuthorizedException"
    status = 401


class Forbidden(CatalogError):
    iceberg_type = "ForbiddenException"
    status = 403


class MethodNotAllowed(CatalogError):
    iceberg_type = "BadRequestException"
    status = 405


def error_response(error: CatalogError) -> JsonResponse:
    status = getattr(error, "status", None) or http_status(error)
    body = {"error": {"message": error.message, "type": error.iceberg_type, "code": status}}
    return JsonResponse(body, status=status)
