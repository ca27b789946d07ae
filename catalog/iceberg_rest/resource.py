"""One protocol resource (a path) as a Django view: authenticate the bearer token, check
the caller's role for the method (GET and HEAD need viewer, the rest editor), call the
handler for the method, and answer every `CatalogError` in the protocol's error body."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from catalog.core.errors import CatalogError
from catalog.iceberg_rest import auth
from catalog.iceberg_rest.errors import Forbidden, MethodNotAllowed, NotAuthorized, error_response
from catalog.roles import can_edit, can_view

READ_METHODS = {"GET", "HEAD"}
Handler = Callable[..., HttpResponse]


def _bearer(request: HttpRequest) -> str:
    # From META, not request.headers: building the headers mapping costs every request
    # ~20 us, a tenth of a load-table.
    scheme, _, token = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise NotAuthorized("Not authorized: a bearer token is required")
    return token.strip()


# Where `authorize` leaves the digest of the token it checked, for handlers that check it
# again (load-table), so that it is hashed once per request.
_DIGEST_ATTRIBUTE = "_iceberg_token_digest"


def bearer_digest(request: HttpRequest) -> str:
    """The digest of the request's bearer token (for handlers that check it again)."""
    digest = getattr(request, _DIGEST_ATTRIBUTE, None)
    if digest is None:
        digest = auth.digest_of(_bearer(request))
    return digest


def authorize(request: HttpRequest, *, viewer_methods: frozenset[str] = frozenset()) -> Any:
    """The user the token's client acts for, if their role allows the method."""
    token = _bearer(request)
    digest = auth.digest_of(token)
    user = auth.authenticate(token, digest=digest).client.user
    setattr(request, _DIGEST_ATTRIBUTE, digest)
    reads = READ_METHODS.union(viewer_methods) if viewer_methods else READ_METHODS
    allowed = can_view(user) if request.method in reads else can_edit(user)
    if not allowed:
        raise Forbidden(f"Forbidden: {user.username} may not {request.method} here")
    return user


class Resource:
    """`Resource(GET=load, POST=commit, ...)`: handlers take (request, user, **path).
    `viewer_methods` lets readers use a write method here (engines that only read still
    send scan reports)."""

    def __init__(self, *, viewer_methods: frozenset[str] = frozenset(), **handlers: Handler):
        self.handlers = handlers
        self.viewer_methods = viewer_methods

    @property
    def methods(self) -> list[str]:
        return list(self.handlers)

    def as_view(self) -> Callable[..., HttpResponse]:
        @csrf_exempt
        def view(request: HttpRequest, **path: str) -> HttpResponse:
            try:
                handler = self.handlers.get(request.method or "")
                if handler is None:
                    raise MethodNotAllowed(
                        f"Method {request.method} is not allowed here; "
                        f"allowed: {', '.join(self.methods)}"
                    )
                user = authorize(request, viewer_methods=self.viewer_methods)
                return handler(request, user, **path)
            except CatalogError as error:
                response = error_response(error)
                if request.method == "HEAD":
                    return HttpResponse(status=response.status_code)
                if isinstance(error, MethodNotAllowed):
                    response["Allow"] = ", ".join(self.methods)
                return response

        return view
