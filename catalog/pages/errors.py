"""The "not found" page people see, in every environment.

With DEBUG off, Django renders templates/404.html itself. With DEBUG on (`make run`), it
would answer with its technical page, which lists every URL pattern of the project; this
middleware puts the same styled page in its place. Machines' paths (/api, /iceberg) keep
their JSON answers."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string

MACHINE_PREFIXES = ("/api/", "/iceberg/")


class NotFoundPageMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if (
            settings.DEBUG
            and response.status_code == 404
            and response.get("Content-Type", "").startswith("text/html")
            and not request.path.startswith(MACHINE_PREFIXES)
        ):
            return HttpResponse(render_to_string("404.html", request=request), status=404)
        return response
