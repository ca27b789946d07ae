"""What the views of the materialized-table API share: the path parameters and error
responses of the schema, a request's validation, a table's detail as an answer, the two
checks of who may see or change a table, and the pagination. Each view validates the
request's shape, calls one function of `refresh.services` (or the console), and serializes
the result; `CatalogError`s become JSON 4xx/5xx through catalog/api/errors.py."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers, status
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.response import Response

from catalog.api.permissions import HoldsAPrivilege
from catalog.api.serializers import ErrorSerializer
from catalog.api.shared import NAMESPACE_PARAM
from catalog.core.access import MANAGE, READ_METADATA
from refresh import checks, selectors
from refresh.api.serializers.tables import (
    MaterializedTableDetailSerializer,
)
from refresh.models import MaterializedTable

NAME_PARAM = OpenApiParameter(
    "name", OpenApiTypes.STR, OpenApiParameter.PATH, description="Materialized table name."
)


RUN_PARAM = OpenApiParameter(
    "run_id", OpenApiTypes.INT, OpenApiParameter.PATH, description="Refresh run (job) id."
)


MT_PARAMS = [NAMESPACE_PARAM, NAME_PARAM]


TAGS = ["materialized tables"]


def error_responses(*codes: int) -> dict[int, OpenApiResponse]:
    descriptions = {
        400: "Invalid input: a field of the wrong type, or a value FLIP-435's rules refuse.",
        403: "The user's role does not allow this.",
        404: "The namespace, materialized table or run does not exist.",
        409: "The name is taken, or the table's state forbids the operation.",
        429: "Too many Spark jobs are waiting (yours, or everyone's): see Retry-After.",
        503: "No refresh worker is running, or the task queue does not answer.",
    }
    return {
        code: OpenApiResponse(ErrorSerializer, description=descriptions[code]) for code in codes
    }


def validated(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def detail_response(
    request: Request, mt: MaterializedTable, *, status_code: int = status.HTTP_200_OK
) -> Response:
    mt = selectors.get_materialized_table(mt.table.namespace.name, mt.table.name)
    serializer = MaterializedTableDetailSerializer(mt, context={"request": request})
    return Response(serializer.data, status=status_code)


class SeesByGrants(HoldsAPrivilege):
    """Whoever holds a privilege somewhere; each view then asks catalog.access about the
    table it reads or changes (refresh.checks): read_metadata to read it, manage to change
    it, create in the namespace to make one."""


def visible_table(request: Request, namespace: str, name: str) -> MaterializedTable:
    """The table, when the user may see it (read_metadata on it); else answered exactly as
    a missing one."""
    return checks.materialized_table(request.user, namespace, name, READ_METADATA)


def managed_table(request: Request, namespace: str, name: str) -> MaterializedTable:
    """The table, when the user may change it (manage); one it may not see is missing."""
    return checks.materialized_table(request.user, namespace, name, MANAGE)


class Pagination(PageNumberPagination):
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500
