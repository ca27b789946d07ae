"""Materialized tables in the API: a namespace's list and a create, a table's detail, its
update (ALTER) and drop, and its suspend and resume."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import jobs
from catalog import selectors as catalog_selectors
from catalog.api.jobs import ACCEPTED, respond
from catalog.api.serializers import JobAcceptedSerializer
from catalog.core.access import CREATE, READ_METADATA
from refresh import checks, selectors, services, table_state
from refresh.api.common import (
    MT_PARAMS,
    NAMESPACE_PARAM,
    TAGS,
    Pagination,
    SeesByGrants,
    detail_response,
    error_responses,
    managed_table,
    validated,
    visible_table,
)
from refresh.api.serializers.common import parse_freshness
from refresh.api.serializers.runs import (
    RUN_DATA_FIELDS,
)
from refresh.api.serializers.tables import (
    MaterializedTableCreateSerializer,
    MaterializedTableDetailSerializer,
    MaterializedTableSummarySerializer,
    MaterializedTableUpdateSerializer,
    ResumeSerializer,
    summary_data,
)
from refresh.core.freshness import RefreshMode


class MaterializedTableListView(generics.ListAPIView):
    serializer_class = MaterializedTableSummarySerializer
    pagination_class = Pagination
    permission_classes = [SeesByGrants]

    def get_queryset(self) -> Any:
        # Every table of the namespace: read_metadata on the namespace (its own or above).
        checks.namespace(self.request.user, self.kwargs["namespace"], READ_METADATA)
        namespace = catalog_selectors.get_namespace(self.kwargs["namespace"])
        # Each table's last run and data time in the list's query, its last run's values in
        # one more: a page of tables is two queries, not two a table.
        return selectors.TablePages(namespace.name, RUN_DATA_FIELDS)

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """A page of plain values (summary_data: what the summary serializer writes)."""
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response([summary_data(mt) for mt in page])

    @extend_schema(
        operation_id="materialized_tables_list",
        parameters=[NAMESPACE_PARAM],
        responses={200: MaterializedTableSummarySerializer(many=True), **error_responses(404)},
        tags=TAGS,
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(
        operation_id="materialized_tables_create",
        parameters=[NAMESPACE_PARAM],
        request=MaterializedTableCreateSerializer,
        responses={
            201: MaterializedTableDetailSerializer,
            202: JobAcceptedSerializer,
            **error_responses(400, 403, 404, 409, 429, 503),
        },
        description=(
            "CREATE MATERIALIZED TABLE: Spark derives the schema (on a refresh worker), the "
            f"table is created, scheduled and its first refresh queued. {ACCEPTED}"
        ),
        tags=TAGS,
    )
    def post(self, request: Request, namespace: str) -> Response:
        checks.namespace(request.user, namespace, CREATE)
        data = validated(MaterializedTableCreateSerializer, request)
        freshness = parse_freshness(data["freshness"])
        arguments = {
            "namespace": namespace,
            "name": data["name"],
            "query": data["query"],
            "freshness_value": freshness.value,
            "freshness_unit": freshness.unit.value,
            "refresh_mode": data["refresh_mode"] or None,
            "primary_key": list(data["primary_key"]),
            "constraint_name": data["constraint_name"],
            "partitioned_by": list(data["partitioned_by"]),
            "options": dict(data["options"]),
            "comment": data["comment"],
            "expectations": [dict(row) for row in data["expectations"]],
        }
        return respond(
            jobs.attempt(
                "create_materialized_table",
                arguments,
                actor=request.user,
                summary=f"Create materialized table {namespace}.{data['name']}",
            )
        )


class MaterializedTableDetailView(APIView):
    permission_classes = [SeesByGrants]

    @extend_schema(
        operation_id="materialized_tables_retrieve",
        parameters=MT_PARAMS,
        responses={200: MaterializedTableDetailSerializer, **error_responses(404)},
        tags=TAGS,
    )
    def get(self, request: Request, namespace: str, name: str) -> Response:
        return detail_response(request, visible_table(request, namespace, name))

    @extend_schema(
        operation_id="materialized_tables_update",
        parameters=MT_PARAMS,
        request=MaterializedTableUpdateSerializer,
        responses={200: MaterializedTableDetailSerializer, **error_responses(400, 403, 404, 409)},
        description=(
            "ALTER ... SET REFRESH_MODE, SET FRESHNESS, SET (options), RESET (keys): any of "
            "them, applied in that order, all or none."
        ),
        tags=TAGS,
    )
    def patch(self, request: Request, namespace: str, name: str) -> Response:
        data = validated(MaterializedTableUpdateSerializer, request)
        mt = managed_table(request, namespace, name)
        freshness = parse_freshness(data["freshness"]) if "freshness" in data else None
        with transaction.atomic():
            if "refresh_mode" in data:
                mt = services.set_refresh_mode(
                    mt, refresh_mode=RefreshMode(data["refresh_mode"]), actor=request.user
                )
            if freshness is not None:
                mt = services.set_freshness(mt, freshness=freshness, actor=request.user)
            if data.get("options"):
                mt = services.set_options(mt, options=data["options"], actor=request.user)
            if data.get("reset_options"):
                mt = services.reset_options(mt, keys=data["reset_options"], actor=request.user)
        return detail_response(request, mt)

    @extend_schema(
        operation_id="materialized_tables_destroy",
        parameters=MT_PARAMS,
        responses={204: None, **error_responses(403, 404, 409)},
        description="DROP MATERIALIZED TABLE: its schedule, queued runs and data go.",
        tags=TAGS,
    )
    def delete(self, request: Request, namespace: str, name: str) -> Response:
        mt = managed_table(request, namespace, name)
        services.drop_materialized_table(mt, actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class SuspendView(APIView):
    permission_classes = [SeesByGrants]

    @extend_schema(
        operation_id="materialized_tables_suspend",
        parameters=MT_PARAMS,
        request=None,
        responses={200: MaterializedTableDetailSerializer, **error_responses(403, 404, 409)},
        tags=TAGS,
    )
    def post(self, request: Request, namespace: str, name: str) -> Response:
        mt = managed_table(request, namespace, name)
        return detail_response(request, table_state.suspend(mt, actor=request.user))


class ResumeView(APIView):
    permission_classes = [SeesByGrants]

    @extend_schema(
        operation_id="materialized_tables_resume",
        parameters=MT_PARAMS,
        request=ResumeSerializer,
        responses={200: MaterializedTableDetailSerializer, **error_responses(400, 403, 404, 409)},
        tags=TAGS,
    )
    def post(self, request: Request, namespace: str, name: str) -> Response:
        data = validated(ResumeSerializer, request)
        mt = managed_table(request, namespace, name)
        return detail_response(
            request, services.resume(mt, options=data["options"], actor=request.user)
        )
