"""One protocol resource (a path) as a Django view: authenticate the bearer token, make the
request's principal (the token's user, through its credential), call the handler for the
method, and answer every `CatalogError` in the protocol's error body. Each handler asks
`catalog.access` about the objects it touches (`checks`); a principal who holds no
privilege anywhere is refused here, whatever the path."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from catalog import access, access_events
from catalog.core.errors import CatalogError
from catalog.iceberg_rest import idempotency
from catalog.iceberg_rest.errors import Forbidden, MethodNotAllowed, NotAuthorized, error_response
from catalog.services import credentials

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
        digest = credentials.digest_of(_bearer(request))
    return digest


def authorize(request: HttpRequest, *, gate: bool = True) -> Any:
    """The user the token's client acts for, bound to the request as its principal.
    `gate=False` for a handler that refuses a principal holding nothing itself (load-table,
    whose grant check rides on its one query)."""
    token = _bearer(request)
    digest = credentials.digest_of(token)
    client = credentials.authenticate(token, digest=digest).client
    setattr(request, _DIGEST_ATTRIBUTE, digest)
    principal = access.bind(request, access.Principal(client.user, client))
    if gate:
        refuse_if_holding_nothing(principal)
    return client.user


def refuse_if_holding_nothing(principal: access.Principal) -> None:
    if not principal.holds_anything():
        name = principal.user.username
        raise Forbidden(f"Forbidden: {name} holds no privilege in this catalog")


def idempotent(handler: Handler) -> Handler:
    """Mark a handler as one of the mutations the spec lets an Idempotency-Key guard."""
    handler.idempotent = True  # type: ignore[attr-defined]
    return handler


class Resource:
    """`Resource(GET=load, POST=commit, ...)`: handlers take (request, user, **path)."""

    def __init__(self, **handlers: Handler):
        self.handlers = handlers

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
                user = authorize(request, gate=not getattr(handler, "gates_itself", False))
                if idempotency.META_KEY in request.META and getattr(handler, "idempotent", False):
                    # The handler's errors are answers too (a 409 is stored and replayed).
                    return idempotency.respond(
                        request, lambda: self._answer(handler, request, user, path)
                    )
                return handler(request, user, **path)
            except CatalogError as error:
                return self._error(request, error)

        return view

    def _answer(
        self, handler: Handler, request: HttpRequest, user: Any, path: dict[str, str]
    ) -> HttpResponse:
        try:
            return handler(request, user, **path)
        except CatalogError as error:
            return self._error(request, error)

    def _error(self, request: HttpRequest, error: CatalogError) -> HttpResponse:
        response = error_response(error)
        access_events.refused(request, error, response.status_code, "rest")
        if request.method == "HEAD":
            return HttpResponse(status=response.status_code)
        if isinstance(error, MethodNotAllowed):
            response["Allow"] = ", ".join(self.methods)
        if retry_after := getattr(error, "retry_after", None):
            response["Retry-After"] = str(retry_after)
        return response
