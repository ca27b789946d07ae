"""Configuration and tokens: GET /v1/config and the OAuth2 token endpoint."""

from __future__ import annotations

import base64
import binascii
from urllib.parse import unquote_plus

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from catalog import throttle
from catalog.iceberg_rest import auth


def config(request: HttpRequest, user: object) -> HttpResponse:
    # Imported here: the route table lists the endpoints, and it imports this module.
    from catalog.iceberg_rest.urls import ENDPOINTS

    return JsonResponse({"defaults": {}, "overrides": {}, "endpoints": ENDPOINTS})


def _client_credentials(request: HttpRequest) -> tuple[str, str]:
    """The client's id and secret: from HTTP Basic (RFC 6749 section 2.3.1, the only way
    DuckDB sends them: each part form-urlencoded, then base64), else from the form."""
    scheme, _, encoded = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            raise auth.InvalidCredentials("Malformed HTTP Basic credentials") from None
        client_id, colon, secret = decoded.partition(":")
        if not colon:
            raise auth.InvalidCredentials("Malformed HTTP Basic credentials")
        return unquote_plus(client_id), unquote_plus(secret)
    return request.POST.get("client_id", ""), request.POST.get("client_secret", "")


def _oauth_error(error: str, description: str, status: int) -> JsonResponse:
    return JsonResponse({"error": error, "error_description": description}, status=status)


@csrf_exempt
def oauth_tokens(request: HttpRequest) -> HttpResponse:
    """Client credentials, or a token exchange to refresh a token (form-encoded, RFC 6749)."""
    if request.method != "POST":
        response = _oauth_error("invalid_request", "Use POST", 405)
        response["Allow"] = "POST"
        return response
    grant = request.POST.get("grant_type", "")
    try:
        if grant == "client_credentials":
            client_id, secret = _client_credentials(request)
            if "\x00" in client_id + secret:
                raise auth.InvalidCredentials("Credentials must not contain NUL characters")
            wait = throttle.retry_after(request, scope="oauth", account=client_id)
            if wait:
                response = _oauth_error("slow_down", throttle.message(wait), 429)
                response["Retry-After"] = str(wait)
                return response
            try:
                issued = auth.issue_token(client_id=client_id, client_secret=secret)
            except auth.InvalidCredentials:
                throttle.record_failure(request, scope="oauth", account=client_id)
                raise
        elif grant == "urn:ietf:params:oauth:grant-type:token-exchange":
            subject = request.POST.get("subject_token", "")
            if "\x00" in subject:
                raise auth.InvalidCredentials("A token must not contain NUL characters")
            issued = auth.exchange_token(subject_token=subject)
        else:
            return _oauth_error("unsupported_grant_type", f"Unknown: {grant[:100]!r}", 400)
    except auth.InvalidCredentials as error:
        return _oauth_error("invalid_client", error.message, 401)
    return JsonResponse(
        {
            "access_token": issued.access_token,
            "token_type": "bearer",
            "expires_in": issued.expires_in,
            "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
        }
    )
