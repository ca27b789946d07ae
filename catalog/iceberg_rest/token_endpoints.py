"""Configuration and tokens: GET /v1/config and the OAuth2 token endpoint."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from catalog.iceberg_rest import auth


def config(request: HttpRequest, user: object) -> HttpResponse:
    # Imported here: the route table lists the endpoints, and it imports this module.
    from catalog.iceberg_rest.urls import ENDPOINTS

    return JsonResponse({"defaults": {}, "overrides": {}, "endpoints": ENDPOINTS})


@csrf_exempt
def oauth_tokens(request: HttpRequest) -> HttpResponse:
    """Client credentials, or a token exchange to refresh a token (form-encoded, RFC 6749)."""
    if request.method != "POST":
        response = JsonResponse(
            {"error": "invalid_request", "error_description": "Use POST"}, status=405
        )
        response["Allow"] = "POST"
        return response
    grant = request.POST.get("grant_type", "")
    try:
        if grant == "client_credentials":
            issued = auth.issue_token(
                client_id=request.POST.get("client_id", ""),
                client_secret=request.POST.get("client_secret", ""),
            )
        elif grant == "urn:ietf:params:oauth:grant-type:token-exchange":
            issued = auth.exchange_token(subject_token=request.POST.get("subject_token", ""))
        else:
            return JsonResponse(
                {"error": "unsupported_grant_type", "error_description": f"Unknown: {grant[:100]}"},
                status=400,
            )
    except auth.InvalidCredentials as error:
        return JsonResponse(
            {"error": "invalid_client", "error_description": error.message}, status=401
        )
    return JsonResponse(
        {
            "access_token": issued.access_token,
            "token_type": "bearer",
            "expires_in": issued.expires_in,
            "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
        }
    )
