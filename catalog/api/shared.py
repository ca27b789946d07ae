"""What the catalog's API views share (and refresh's, maintenance's and alerts' API views
use too): the path parameters of namespaces and tables, the pagination of every list, the
documented error answers, a request body validated by a serializer, a preview's and a time
travel's query parameters, and `ByGrants`, the permission of the views of namespaces, views
and tables.

Each API view validates the request's shape, calls one service function (which raises
`CatalogError` for the catalog's rules; see catalog/api/errors.py), and serializes the
result. Namespaces, views and tables are shown and changed by grants (catalog.access,
through catalog.checks): lists hold what the principal may see, an object it may not see
answers as a missing one, and a change it may not make is a 403 naming the privilege."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request

from catalog.api import serializers as s
from catalog.api.permissions import HoldsAPrivilege
from catalog.core.errors import InvalidInput

NAMESPACE_PARAM = OpenApiParameter(
    "namespace",
    OpenApiTypes.STR,
    OpenApiParameter.PATH,
    description='The namespace, levels joined by "." (e.g. "sales.eu").',
)
TABLE_PARAM = OpenApiParameter(
    "name", OpenApiTypes.STR, OpenApiParameter.PATH, description="Table name."
)


class CatalogPagination(PageNumberPagination):
    """Every list: `?page=` (from 1), `?page_size=` up to 500; the body is
    `{count, next, previous, results}`."""

    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 500


def error_responses(*codes: int) -> dict[int, OpenApiResponse]:
    """The documented answers of these HTTP error codes, for `extend_schema(responses=)`."""
    descriptions = {
        400: "Invalid input: a field of the wrong type, or a value the catalog refuses.",
        403: "Your role does not allow this (changes need the editor role).",
        404: "The namespace, view or version does not exist.",
        409: "The name is taken, the namespace is not empty, or another writer won.",
        429: "Too many Spark jobs are waiting (yours, or everyone's): see Retry-After.",
        503: "No refresh worker is running to do what needs Spark.",
    }
    return {
        code: OpenApiResponse(
            s.ErrorSerializer if code != 400 else OpenApiTypes.OBJECT,
            description=descriptions[code],
        )
        for code in codes
    }


def validated(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    """The request's body as `serializer_class` validates it (else a 400 naming the fields)."""
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


PREVIEW_PARAMS = [
    OpenApiParameter(
        "columns",
        OpenApiTypes.STR,
        many=True,
        description="A column to show; repeat for several (all columns when absent).",
    ),
    OpenApiParameter(
        "filter",
        OpenApiTypes.STR,
        description="A row filter in pyiceberg's expression language, e.g. "
        "`region = 'eu' and amount > 10` (never run as SQL text).",
    ),
    OpenApiParameter("limit", OpenApiTypes.INT, description="Rows to return: 100 by default."),
]
TIME_TRAVEL_PARAMS = [
    OpenApiParameter("snapshot_id", OpenApiTypes.INT, description="Read at this snapshot."),
    OpenApiParameter(
        "timestamp_ms",
        OpenApiTypes.INT,
        description="Read at the newest snapshot at or before this time (ms since the epoch); "
        "not together with snapshot_id.",
    ),
]


def row_limit(request: Request) -> int:
    """`?limit=`: how many rows to answer, 100 by default, from 1 to 1000."""
    value = request.query_params.get("limit", "100")
    try:
        limit = int(value)
    except ValueError:
        raise InvalidInput(
            f"limit must be a whole number, not {value[:40]!r}", field="limit"
        ) from None
    if not 1 <= limit <= 1000:
        raise InvalidInput("limit must be between 1 and 1000", field="limit")
    return limit


class ByGrants:
    """The views of namespaces, views and tables: open to whoever holds a privilege
    somewhere; each handler checks the objects it touches."""

    permission_classes = [HoldsAPrivilege]
