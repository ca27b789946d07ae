"""GET /api/completions/: the names the SQL console's editor offers as one types
(catalog.completions)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import completions
from catalog.api.serializers import ErrorSerializer
from catalog.api.shared import ByGrants
from catalog.core.errors import InvalidInput
from catalog.core.inputs import whole_number


class CompletionSerializer(serializers.Serializer):
    label = serializers.CharField(help_text="What replaces the last part of the prefix.")
    kind = serializers.ChoiceField(["namespace", "table", "view", "materialized_table", "column"])
    qualified = serializers.CharField(
        help_text="The namespace, the object as namespace.name, or a column's table."
    )
    type = serializers.CharField(help_text="A column's Iceberg type; empty for the others.")


class CompletionsSerializer(serializers.Serializer):
    results = CompletionSerializer(many=True)
    truncated = serializers.BooleanField(
        help_text="More names start with the prefix than the answer holds: type more."
    )


class CompletionsView(ByGrants, APIView):
    # Whoever holds a privilege anywhere uses the console; the selector names only what
    # each user may see (a grant on one namespace or table completes that and no more).
    @extend_schema(
        operation_id="completions",
        parameters=[
            OpenApiParameter(
                "prefix",
                OpenApiTypes.STR,
                description="What is being typed, a dotted path: `ord`, `sales.ord`, "
                "`sales.orders.am` (a leading catalog name is skipped). Empty: the first "
                "names of each kind.",
            ),
            OpenApiParameter(
                "namespace",
                OpenApiTypes.STR,
                description="Where unqualified names resolve (the console's namespace).",
            ),
            OpenApiParameter(
                "table",
                OpenApiTypes.STR,
                many=True,
                description=f"A table or view the statement reads, qualified or not (at most "
                f"{completions.MAX_TABLES}): its columns complete a prefix without a dot.",
            ),
            OpenApiParameter(
                "limit",
                OpenApiTypes.INT,
                description=f"Names in the answer: {completions.LIMIT} by default, at most "
                f"{completions.MAX_LIMIT}.",
            ),
        ],
        description=(
            "The names that may follow what is being typed, as the SQL console's editor "
            "completes them: columns (of the table the prefix names, or of the `table`s), "
            "then tables, views and materialized tables (of the namespace the prefix names, "
            "or of `namespace`), then namespaces; each starting with the prefix's last part "
            "in any case, and only what the user may see. Bounded: at most `limit` names, "
            "read from index ranges in a fixed number of queries whatever the catalog's size."
        ),
        responses={
            200: CompletionsSerializer,
            400: OpenApiResponse(ErrorSerializer, description="A parameter out of bounds."),
            403: OpenApiResponse(
                ErrorSerializer, description="No privilege anywhere in this catalog."
            ),
        },
        tags=["sql"],
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        found = completions.complete(
            request.user,
            prefix=params.get("prefix", ""),
            namespace=params.get("namespace") or None,
            tables=params.getlist("table"),
            limit=_limit(params.get("limit")),
        )
        body: dict[str, Any] = {
            "results": [
                {"label": c.label, "kind": c.kind, "qualified": c.qualified, "type": c.type}
                for c in found.items
            ],
            "truncated": found.truncated,
        }
        return Response(body)


def _limit(value: str | None) -> int:
    if value is None or value == "":
        return completions.LIMIT
    limit = whole_number(value, digits=6)
    if limit is None:
        raise InvalidInput(f"limit must be a whole number, not {value[:40]!r}", field="limit")
    return limit
