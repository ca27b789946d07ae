"""GET /api/lineage/: what reads what, upstream and downstream of an object, as the
principal may see it."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import access
from catalog.api.permissions import HoldsAPrivilege
from catalog.core.errors import InvalidInput
from catalog.core.inputs import whole_number
from refresh import lineage
from refresh.api.common import error_responses
from refresh.api.serializers.lineage import LineageSerializer


class LineageView(APIView):
    # Whoever holds a privilege somewhere: the graph is of what the principal may see.
    permission_classes = [HoldsAPrivilege]

    @extend_schema(
        operation_id="lineage_retrieve",
        parameters=[
            OpenApiParameter(
                "namespace",
                OpenApiTypes.STR,
                OpenApiParameter.QUERY,
                required=True,
                description='The namespace of the object, levels joined by "."',
            ),
            OpenApiParameter(
                "name",
                OpenApiTypes.STR,
                OpenApiParameter.QUERY,
                required=True,
                description="A table, view or materialized table.",
            ),
            OpenApiParameter(
                "depth",
                OpenApiTypes.INT,
                OpenApiParameter.QUERY,
                description=f"Levels to follow each way (1-{lineage.MAX_DEPTH}, default "
                f"{lineage.MAX_DEPTH}).",
            ),
        ],
        responses={200: LineageSerializer, **error_responses(400, 404)},
        description=(
            "What an object reads (upstream, through views' dependencies and materialized "
            "tables' sources) and what reads it (downstream), transitively, as nodes and "
            f"edges (source read by target); at most {lineage.MAX_LIMIT} nodes, and at most "
            f"{lineage.FANOUT} readers and {lineage.FANOUT} sources of each object: a node "
            "whose others were left out counts them (`more_readers`, `more_sources`) and links "
            "the page that lists its readers (`readers_url`). Only what the "
            "user may see (read_metadata): an object hidden from them is missing (404), and "
            "the graph leaves out the nodes hidden from them, with their edges, and counts "
            "only what they may see."
        ),
        tags=["lineage"],
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        missing = [key for key in ("namespace", "name") if not params.get(key, "").strip()]
        if missing:
            raise InvalidInput(
                f"Give the object's {' and '.join(missing)}: ?namespace=<ns>&name=<name>",
                field=missing[0],
            )
        depth_text = params.get("depth", "").strip()
        depth = whole_number(depth_text, digits=3)
        if depth_text and not (depth is not None and 1 <= depth <= lineage.MAX_DEPTH):
            raise InvalidInput(
                f"depth is a whole number from 1 to {lineage.MAX_DEPTH}", field="depth"
            )
        graph = lineage.lineage(
            params["namespace"].strip(),
            params["name"].strip(),
            depth=int(depth_text) if depth_text else lineage.MAX_DEPTH,
            principal=access.principal_of(request),
        )
        return Response(graph)
