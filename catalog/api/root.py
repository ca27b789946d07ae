"""The API's front door: what /api/ offers (`ApiRootView`, for a newcomer who starts there)
and the API token of a user, for a username and password (`TokenView`, throttled as every
sign-in is)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.authtoken.serializers import AuthTokenSerializer
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import throttle
from catalog.api import serializers as s


class ApiRootView(APIView):
    """What /api/ offers, for a newcomer who starts there."""

    permission_classes = [AllowAny]

    @extend_schema(operation_id="api_root", responses={200: s.ApiRootSerializer}, tags=["root"])
    def get(self, request: Request) -> Response:
        def url(name: str) -> str:
            return request.build_absolute_uri(reverse(f"api:{name}"))

        ns = url("namespace-list") + "{namespace}/"
        endpoints = {
            "namespaces": url("namespace-list"),
            "namespace": ns,
            "views": ns + "views/",
            "view": ns + "views/{name}/",
            "tables": ns + "tables/",
            "table": ns + "tables/{name}/",
            "table_maintenance": ns + "tables/{name}/maintenance",
            "attach_table": ns + "tables/attach",
            "upload_table": ns + "tables/upload",
            "materialized_tables": ns + "materialized-tables/",
            "statements": url("statements"),
            "jobs": url("job-list"),
            "lineage": url("lineage"),
            "monitoring_tables": url("monitoring-tables"),
            "monitoring_history": url("monitoring-history"),
            "history": url("history"),
            "grants": url("grant-list"),
            "completions": url("completions"),
            "token": url("token"),
        }
        return Response(
            {
                "name": "Lakeview API",
                "docs": url("docs"),
                "schema": url("schema"),
                "endpoints": endpoints,
            }
        )


class TokenView(ObtainAuthToken):
    """Exchange a username and password for the API token of that user."""

    @staticmethod
    def _account(request: Request) -> str:
        # The body may be any JSON (a list, a string): only an object names an account, and
        # anything else is left to the serializer to refuse with a 400.
        data = request.data
        return str(data.get("username", ""))[:255] if isinstance(data, Mapping) else ""

    @extend_schema(
        operation_id="token_obtain",
        request=AuthTokenSerializer,
        responses={200: s.TokenSerializer, 400: OpenApiTypes.OBJECT, 429: OpenApiTypes.OBJECT},
        tags=["auth"],
    )
    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        # Decided before the serializer runs: it is what checks the password.
        tried = throttle.attempt(request, door="api", account=self._account(request))
        if tried.refused:
            return Response(
                {"error": throttle.message(tried.refused), "type": "Throttled"},
                status=status.HTTP_429_TOO_MANY_REQUESTS,
                headers={"Retry-After": str(tried.refused)},
            )
        try:
            response = super().post(request, *args, **kwargs)
        except serializers.ValidationError:
            # A refused password (or a missing field) is the serializer's ValidationError.
            throttle.failed(tried)
            raise
        throttle.succeeded(tried)
        return response
