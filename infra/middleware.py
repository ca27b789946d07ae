"""Machine endpoints answer in JSON, whatever goes wrong.

Programs call /iceberg (engines) and /api (clients); for them an HTML error page is
unreadable. This middleware refuses what no view should see (NUL characters in the path or
the query string, which databases reject), and turns any error that escapes a view there
(a body over the size limit, a bug) into a JSON error in each surface's shape."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from infra.proxies import client_address

logger = logging.getLogger(__name__)

ICEBERG = "/iceberg/"
API = "/api/"


def json_error(request: HttpRequest, status: int, message: str, kind: str) -> JsonResponse:
    """An error in the shape of the surface the request reached."""
    if request.path.startswith(ICEBERG):
        return JsonResponse(
            {"error": {"message": message, "type": kind, "code": status}}, status=status
        )
    return JsonResponse({"error": message, "type": kind}, status=status)


# Exempt from CSRF: it changes nothing, and otherwise a POST, PUT, PATCH or DELETE with a
# session cookie but no CSRF token got the CSRF middleware's HTML 403 instead of this 404.
# Real endpoints keep their own checks (DRF's SessionAuthentication enforces CSRF).
@csrf_exempt
def not_found(request: HttpRequest, *args: object, **kwargs: object) -> JsonResponse:
    """The last route of /iceberg and /api: an unknown path is a JSON 404, for every method."""
    return json_error(request, 404, f"No such endpoint: {request.path[:200]}", "NotFoundException")


def has_nul(request: HttpRequest) -> bool:
    """Whether the request's path (decoded: `%00` there is a NUL) or a query parameter holds
    a NUL, which no name or value here can hold and PostgreSQL refuses in any text."""
    if "\x00" in request.path:
        return True
    query = request.META.get("QUERY_STRING", "")
    # Percent-decoding is the only way a parameter gets a NUL the raw string does not
    # show, so the parameters are parsed only then: engines' loads carry none, and
    # parsing them cost a few microseconds of the catalog's hottest request.
    if "%00" not in query:
        return "\x00" in query
    return any("\x00" in k or "\x00" in v for k, vs in request.GET.lists() for v in vs)


class MachineErrorsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    @staticmethod
    def _machine(request: HttpRequest) -> bool:
        return request.path.startswith((ICEBERG, API))

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if self._machine(request) and has_nul(request):
            return json_error(
                request, 400, "NUL characters are not allowed in paths or parameters",
                "BadRequestException",
            )  # fmt: skip
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not self._machine(request):
            return None
        if isinstance(exception, RequestDataTooBig):
            return json_error(request, 413, "The request body is too large", "BadRequestException")
        logger.exception(
            "Unexpected error on %s %s from %s",
            request.method,
            request.path[:200],
            client_address(request),
        )
        return json_error(
            request, 500, "Internal error; the change was not applied", "ServiceFailureException"
        )
