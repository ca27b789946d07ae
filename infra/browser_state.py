"""Django's middleware of a browser's state (the session, the CSRF cookie, the signed-in
user, messages), passed by an engine's request to the Iceberg REST catalog that carries no
cookie: for such a request each of them provably does nothing.

Every path under /iceberg/ resolves to the catalog's views (webapp/urls.py mounts the
table's route and the include there, whose last route answers any other path), which are
exempt from CSRF and read none of that state: the principal is the bearer token's
(catalog.iceberg_rest.resource). Without a Cookie header:

- SessionMiddleware would make an empty, unloaded session that nothing reads, and at the
  response neither save it (not modified) nor delete a cookie (none was sent);
- CsrfViewMiddleware's process_request would find no CSRF cookie, and its
  process_response sets one only when a view asked for a token (none does here); its
  process_view still runs (the handler calls it) and lets the exempt view through;
- AuthenticationMiddleware would attach a lazy user that nothing evaluates;
- MessageMiddleware would attach a storage nothing adds to or reads, whose update at the
  response then does nothing.

An engine sends no cookie (an empty Cookie header is none); a request that does (a
browser's, or a client replaying one) goes through all four as before. Together they were
about a sixth of a load-table's instructions in the app (bench/README.md, rest_load)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.sessions.middleware import SessionMiddleware
from django.middleware.csrf import CsrfViewMiddleware

#: The catalog's mount (webapp/urls.py), as request.path_info starts.
ENGINE_PREFIX = "/iceberg/"


def engine_request(request: Any) -> bool:
    """An engine's request: to the catalog, with no cookie."""
    return request.path_info.startswith(ENGINE_PREFIX) and not request.META.get("HTTP_COOKIE")


class _SkippedByEngines:
    get_response: Any

    def __call__(self, request: Any) -> Any:
        if engine_request(request):
            return self.get_response(request)
        return super().__call__(request)  # type: ignore[misc]


class BrowserSessionMiddleware(_SkippedByEngines, SessionMiddleware):
    pass


class BrowserCsrfViewMiddleware(_SkippedByEngines, CsrfViewMiddleware):
    pass


class BrowserAuthenticationMiddleware(_SkippedByEngines, AuthenticationMiddleware):
    pass


class BrowserMessageMiddleware(_SkippedByEngines, MessageMiddleware):
    pass
