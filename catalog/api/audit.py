"""GET /api/audit/: every change to the catalog, and every read and refusal, newest first,
filtered and paged by keyset (catalog.audit); GET /api/audit/export: the same as CSV,
streamed; GET /api/history/: the catalog events alone, paged. For superusers and those who
manage the whole catalog. A filter that cannot be read is a 400 naming it."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import audit
from catalog.api import serializers as s
from catalog.api.permissions import SeesTheAudit
from catalog.api.shared import CatalogPagination, error_responses
from catalog.core.errors import InvalidInput
from catalog.core.inputs import whole_number
from catalog.models import CatalogEvent

FILTERS = [
    OpenApiParameter("actor", OpenApiTypes.STR, description="Who made the change (username)."),
    OpenApiParameter(
        "object",
        OpenApiTypes.STR,
        description=(
            "A namespace or object name: the name and what is under it ('sales' finds "
            "sales.orders); ending in '*', a prefix ('sales.ord*')."
        ),
    ),
    OpenApiParameter(
        "from", OpenApiTypes.STR, description="From this date or ISO date and time (UTC)."
    ),
    OpenApiParameter(
        "to", OpenApiTypes.STR, description="Before this ISO time; a date includes its day."
    ),
    OpenApiParameter(
        "kind",
        OpenApiTypes.STR,
        enum=list(audit.FILTER_KINDS),
        description="changes (all of them), reads, refusals, or one kind of change.",
    ),
    OpenApiParameter(
        "action", OpenApiTypes.STR, description="drop_table, grant, revoke, load-table..."
    ),
    OpenApiParameter(
        "outcome",
        OpenApiTypes.STR,
        enum=list(audit.OUTCOMES),
        description="Reads and refusals only (an access event's outcome).",
    ),
]


def _page_size(text: str) -> int:
    if not text:
        return audit.PAGE_SIZE
    size = whole_number(text, digits=6)
    if size is None or not 1 <= size <= audit.PAGE_MAX:
        raise InvalidInput(
            f"page_size must be a whole number from 1 to {audit.PAGE_MAX}", field="page_size"
        )
    return size


class AuditEntrySerializer(serializers.Serializer):
    occurred_at = serializers.DateTimeField()
    first_occurred_at = serializers.DateTimeField(allow_null=True)
    actor = serializers.CharField()
    action = serializers.CharField()
    kind = serializers.ChoiceField(choices=audit.KINDS)
    object_type = serializers.CharField()
    object = serializers.CharField()
    result = serializers.CharField()
    details = serializers.CharField()
    count = serializers.IntegerField()
    outcome = serializers.CharField(help_text='"allowed" or "refused"; "" for a change.')
    status = serializers.IntegerField(
        allow_null=True, help_text="A read's or refusal's HTTP status."
    )
    reason = serializers.CharField(help_text='Why refused ("hidden: ..." for a hiding 404).')
    channel = serializers.CharField(help_text="rest, api, page, console or worker.")
    credential = serializers.CharField(
        help_text='An engine client\'s id, "session", "token" or "console".'
    )
    tables = serializers.ListField(
        child=serializers.CharField(),
        allow_null=True,
        help_text="The tables and views a console query's plan read.",
    )


class AuditPageSerializer(serializers.Serializer):
    next = serializers.CharField(allow_null=True)
    results = AuditEntrySerializer(many=True)


class AuditView(APIView):
    """Every change to the catalog: namespaces, objects and their definitions (catalog
    events), grants, revokes and changes of owner, engine credentials; and every access
    event: loads through the REST catalog, console queries, previews, downloads, and
    refused requests (403s, and 404s that hide an object)."""

    permission_classes = [SeesTheAudit]

    @extend_schema(
        operation_id="audit_list",
        tags=["history"],
        parameters=[
            *FILTERS,
            OpenApiParameter("cursor", OpenApiTypes.STR, description="From a page's `next`."),
            OpenApiParameter("page_size", OpenApiTypes.INT, description="Up to 500."),
        ],
        responses={200: AuditPageSerializer, **error_responses(400, 403)},
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        filters = audit.parse_filters(params)
        cursor = params.get("cursor") or ""
        key = audit.decode_cursor(cursor) if cursor else None
        size = _page_size(params.get("page_size") or "")
        entries, after = audit.entries(filters, after=key, limit=size)
        next_url = None
        if after is not None:
            query = {**filters.query(), "cursor": after}
            if params.get("page_size"):
                query["page_size"] = str(size)
            next_url = request.build_absolute_uri(request.path + "?" + urlencode(query))
        body = {"next": next_url, "results": [entry.as_dict() for entry in entries]}
        return Response(AuditPageSerializer(body).data)


class AuditExportView(APIView):
    """The entries the filters keep, every one, as CSV (streamed as they are read)."""

    permission_classes = [SeesTheAudit]

    @extend_schema(
        operation_id="audit_export",
        tags=["history"],
        parameters=FILTERS,
        responses={
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="CSV"),
            **error_responses(400, 403),
        },
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        filters = audit.parse_filters(request.query_params)
        response = StreamingHttpResponse(audit.csv_lines(filters), content_type="text/csv")
        response["Content-Disposition"] = f'attachment; filename="{audit.export_name()}"'
        return response


class HistoryView(generics.ListAPIView):
    """What was done to the catalog, newest first: the catalog events of the audit, so for
    those who see the audit (superusers and those who manage the whole catalog)."""

    permission_classes = [SeesTheAudit]
    serializer_class = s.CatalogEventSerializer
    pagination_class = CatalogPagination
    queryset = CatalogEvent.objects.select_related("actor")

    @extend_schema(operation_id="history_list", tags=["history"])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)
