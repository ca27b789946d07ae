"""Configuration and tokens: GET /v1/config and the OAuth2 token endpoint."""

from __future__ import annotations

import base64
from urllib.parse import unquote_plus

from django.conf import settings
from django.core.exceptions import BadRequest, RequestDataTooBig, SuspiciousOperation
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.http.multipartparser import MultiPartParserError
from django.views.decorators.csrf import csrf_exempt

from catalog import throttle
from catalog.iceberg_rest import idempotency
from catalog.iceberg_rest.routes import ENDPOINTS
from catalog.services import credentials as auth

#: The spec's (and pyiceberg's, and Java's) name of the scan planning mode property.
SCAN_PLANNING_MODE = "scan-planning-mode"


def config(request: HttpRequest, user: object) -> HttpResponse:
    # "client" says nothing: the answer stays what it was before server-side planning, and
    # clients default to planning themselves (pyiceberg and Java alike), while one may
    # still ask the catalog to plan (pyiceberg: scan-planning-mode=server). "server" is an
    # override: the spec says clients then MUST plan through the catalog.
    overrides = {}
    if settings.ICEBERG_SCAN_PLANNING_MODE == "server":
        overrides[SCAN_PLANNING_MODE] = "server"
    # `idempotency-key-lifetime` tells clients that mutations honour an Idempotency-Key
    # (Java's RESTSessionCatalog sends one on every mutation only when it is present).
    return JsonResponse(
        {
            "defaults": {},
            "overrides": overrides,
            "endpoints": ENDPOINTS,
            "idempotency-key-lifetime": idempotency.advertised_lifetime(),
        }
    )


class _UnreadableForm(Exception):
    """The body is not a form Django can read: too large, a broken multipart body, too many
    fields."""

    def __init__(self, description: str, status: int = 400) -> None:
        super().__init__(description)
        self.description = description
        self.status = status


def _form(request: HttpRequest) -> QueryDict:
    # Django raises these while parsing the body; left alone they would escape the view and
    # become the middleware's 500 (or its 413 in the catalog's error shape, not OAuth's).
    try:
        return request.POST
    except RequestDataTooBig:
        raise _UnreadableForm("The request body is too large", 413) from None
    except (MultiPartParserError, SuspiciousOperation, BadRequest) as error:
        raise _UnreadableForm(f"The form cannot be read: {str(error)[:200]}") from None


def _used_basic(request: HttpRequest) -> bool:
    return request.headers.get("Authorization", "").partition(" ")[0].lower() == "basic"


def _client_credentials(request: HttpRequest, form: QueryDict) -> tuple[str, str]:
    """The client's id and secret: from HTTP Basic (RFC 6749 section 2.3.1, the only way
    DuckDB sends them: each part form-urlencoded, then base64), else from the form."""
    encoded = request.headers.get("Authorization", "").partition(" ")[2]
    if _used_basic(request):
        try:
            # ValueError covers bad base64 (binascii.Error), non-ASCII characters in the
            # header (b64decode refuses them) and bytes that are not UTF-8.
            decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
        except ValueError:
            raise auth.InvalidCredentials("Malformed HTTP Basic credentials") from None
        client_id, colon, secret = decoded.partition(":")
        if not colon:
            raise auth.InvalidCredentials("Malformed HTTP Basic credentials")
        return unquote_plus(client_id), unquote_plus(secret)
    return form.get("client_id", ""), form.get("client_secret", "")


def _has_nul(form: QueryDict) -> bool:
    return any("\x00" in key or "\x00" in value for key, values in form.lists() for value in values)


def _oauth_error(error: str, description: str, status: int) -> JsonResponse:
    return JsonResponse({"error": error, "error_description": description}, status=status)


@csrf_exempt
def oauth_tokens(request: HttpRequest) -> HttpResponse:
    """Client credentials, or a token exchange to refresh a token (form-encoded, RFC 6749)."""
    if request.method != "POST":
        response = _oauth_error("invalid_request", "Use POST", 405)
        response["Allow"] = "POST"
        return response
    try:
        form = _form(request)
    except _UnreadableForm as error:
        return _oauth_error("invalid_request", error.description, error.status)
    # The middleware checks only the query string; PostgreSQL refuses NUL in a query, and no
    # field of a token request may hold one.
    if _has_nul(form):
        return _oauth_error("invalid_request", "The form must not contain NUL characters", 400)
    grant = form.get("grant_type", "")
    try:
        if grant == "client_credentials":
            client_id, secret = _client_credentials(request, form)
            if "\x00" in client_id + secret:
                raise auth.InvalidCredentials("Credentials must not contain NUL characters")
            # Never refused unchecked: a right secret gets its token even while the client
            # id waits (catalog/throttle.py says why); a wrong one then gets 429.
            tried = throttle.attempt(request, door="oauth", account=client_id)
            try:
                issued = auth.issue_token(client_id=client_id, client_secret=secret)
            except auth.InvalidCredentials:
                wait = throttle.failed(tried)
                if not wait:
                    raise
                response = _oauth_error("slow_down", throttle.message(wait), 429)
                response["Retry-After"] = str(wait)
                return response
            throttle.succeeded(tried)
        elif grant == "urn:ietf:params:oauth:grant-type:token-exchange":
            subject = form.get("subject_token", "")
            issued = auth.exchange_token(subject_token=subject)
        else:
            return _oauth_error("unsupported_grant_type", f"Unknown: {grant[:100]!r}", 400)
    except auth.InvalidCredentials as error:
        response = _oauth_error("invalid_client", error.message, 401)
        if _used_basic(request):
            # RFC 6749 section 5.2: a 401 names the scheme the client authenticated with.
            response["WWW-Authenticate"] = 'Basic realm="lakeview"'
        return response
    return JsonResponse(
        {
            "access_token": issued.access_token,
            "token_type": "bearer",
            "expires_in": issued.expires_in,
            "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
        }
    )
