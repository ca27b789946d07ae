"""The API of table maintenance (mounted at /api/ by webapp/api_urls.py): a table's policy (read and
change), its runs (list, start), one run, and its health over time. Thin: each handler
validates the request's shape and calls one service or selector."""

from __future__ import annotations

import dataclasses
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import selectors as catalog_selectors
from catalog.api.views import _NAMESPACE, _TABLE, CatalogPagination, _errors, _validated
from maintenance import selectors, services
from maintenance.core.policy import POLICY_PROPERTIES, Action, Policy
from maintenance.models import MaintenanceRun


class RunSerializer(serializers.ModelSerializer):
    duration_seconds = serializers.FloatField(read_only=True, allow_null=True)
    requested_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    cancel_requested_by = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = MaintenanceRun
        fields = [
            "id",
            "table_name",
            "action",
            "trigger",
            "state",
            "queued_at",
            "started_at",
            "finished_at",
            "duration_seconds",
            "files_before",
            "files_after",
            "bytes_before",
            "bytes_after",
            "snapshots_before",
            "snapshots_after",
            "snapshots_expired",
            "files_rewritten",
            "files_added",
            "files_deleted",
            "orphans_removed",
            "files_outside",
            "details",
            "error",
            "requested_by",
            "cancel_requested_at",
            "cancel_requested_by",
        ]


#: What `run_data` reads of each run: RunSerializer's fields, from the run's columns.
RUN_DATA_FIELDS = (
    "id",
    "table_name",
    "action",
    "trigger",
    "state",
    "queued_at",
    "started_at",
    "finished_at",
    "files_before",
    "files_after",
    "bytes_before",
    "bytes_after",
    "snapshots_before",
    "snapshots_after",
    "snapshots_expired",
    "files_rewritten",
    "files_added",
    "files_deleted",
    "orphans_removed",
    "files_outside",
    "details",
    "error",
    "requested_by__username",
    "cancel_requested_at",
    "cancel_requested_by__username",
)
_MOMENT = serializers.DateTimeField()


def run_data(row: dict[str, Any]) -> dict[str, Any]:
    """What RunSerializer writes of a run, from its values (RUN_DATA_FIELDS): a page of fifty
    runs through the serializer's twenty-six fields took most of the list's answer."""

    def moment(key: str) -> str | None:
        value = row[key]
        return _MOMENT.to_representation(value) if value else None

    started, finished = row["started_at"], row["finished_at"]
    duration = None if started is None or finished is None else (finished - started)
    data = {key: row[key] for key in RUN_DATA_FIELDS[:5]}
    data.update(
        queued_at=moment("queued_at"),
        started_at=moment("started_at"),
        finished_at=moment("finished_at"),
        duration_seconds=None if duration is None else float(duration.total_seconds()),
    )
    data.update((key, row[key]) for key in RUN_DATA_FIELDS[8:22])
    data.update(
        requested_by=row["requested_by__username"],
        cancel_requested_at=moment("cancel_requested_at"),
        cancel_requested_by=row["cancel_requested_by__username"],
    )
    return data


class PolicyChangeSerializer(serializers.Serializer):
    enabled = serializers.BooleanField(required=False)
    properties = serializers.DictField(
        child=serializers.CharField(allow_null=True, allow_blank=False),
        required=False,
        help_text="Maintenance properties to set (a string) or remove (null): "
        + ", ".join(POLICY_PROPERTIES),
    )


class StartSerializer(serializers.Serializer):
    actions = serializers.ListField(
        child=serializers.ChoiceField(choices=[a.value for a in Action]),
        required=False,
        allow_empty=False,
        help_text="Actions to run, in order; all of them when absent.",
    )


def policy_body(table: Any, policy: Policy) -> dict[str, Any]:
    body = dataclasses.asdict(policy)
    body["problems"] = dict(policy.problems)
    body["properties"] = {
        name: value for name, value in (table.properties or {}).items() if name in POLICY_PROPERTIES
    }
    return body


def _managed_table(namespace: str, name: str) -> Any:
    return catalog_selectors.get_table(namespace, name)


class PolicyView(APIView):
    @extend_schema(
        operation_id="tables_maintenance_policy",
        parameters=[_NAMESPACE, _TABLE],
        description="The table's maintenance policy: whether it is maintained (and whether "
        "the table, its namespace or the default says so), its retention, target file size, "
        "orphan age; the properties it comes from.",
        responses={200: OpenApiTypes.OBJECT, **_errors(404)},
        tags=["maintenance"],
    )
    def get(self, request: Request, namespace: str, name: str) -> Response:
        table = _managed_table(namespace, name)
        return Response(policy_body(table, selectors.policy_of(table)))

    @extend_schema(
        operation_id="tables_maintenance_policy_change",
        parameters=[_NAMESPACE, _TABLE],
        request=PolicyChangeSerializer,
        description="Turn maintenance on or off, or set its properties (one commit of the "
        "table's properties, as an engine's ALTER TABLE would make).",
        responses={200: OpenApiTypes.OBJECT, **_errors(400, 404, 409)},
        tags=["maintenance"],
    )
    def patch(self, request: Request, namespace: str, name: str) -> Response:
        data = _validated(PolicyChangeSerializer, request)
        changes: dict[str, str | None] = dict(data.get("properties") or {})
        if "enabled" in data:
            changes["lakeview.maintenance.enabled"] = "true" if data["enabled"] else "false"
        table = _managed_table(namespace, name)
        policy = services.set_policy(table=table, changes=changes, actor=request.user)
        return Response(policy_body(table, policy))


class RunListView(APIView):
    @extend_schema(
        operation_id="tables_maintenance_runs",
        parameters=[_NAMESPACE, _TABLE],
        description="The table's maintenance runs, newest first.",
        responses={200: RunSerializer(many=True), **_errors(404)},
        tags=["maintenance"],
    )
    def get(self, request: Request, namespace: str, name: str) -> Response:
        table = _managed_table(namespace, name)
        paginator = CatalogPagination()
        page = paginator.paginate_queryset(
            selectors.RunPages(table, RUN_DATA_FIELDS), request, view=self
        )
        return paginator.get_paginated_response([run_data(row) for row in page])

    @extend_schema(
        operation_id="tables_maintenance_start",
        parameters=[_NAMESPACE, _TABLE],
        request=StartSerializer,
        description="Run maintenance now: the actions queued in order on a worker (202); an "
        "action already queued on the table is not queued twice.",
        responses={202: RunSerializer(many=True), **_errors(400, 404)},
        tags=["maintenance"],
    )
    def post(self, request: Request, namespace: str, name: str) -> Response:
        data = _validated(StartSerializer, request)
        table = _managed_table(namespace, name)
        wanted = [Action(a) for a in data.get("actions") or []] or services.ALL_ACTIONS
        runs = services.start(
            table=table,
            actions=[a for a in services.ALL_ACTIONS if a in wanted],
            trigger=MaintenanceRun.Trigger.API,
            actor=request.user,
        )
        return Response(RunSerializer(runs, many=True).data, status=status.HTTP_202_ACCEPTED)


class RunDetailView(APIView):
    @extend_schema(
        operation_id="maintenance_run",
        parameters=[OpenApiParameter("run_id", OpenApiTypes.INT, OpenApiParameter.PATH)],
        responses={200: RunSerializer, **_errors(404)},
        tags=["maintenance"],
    )
    def get(self, request: Request, run_id: int) -> Response:
        return Response(RunSerializer(selectors.get_run(run_id)).data)


class RunCancelView(APIView):
    @extend_schema(
        operation_id="maintenance_run_cancel",
        parameters=[OpenApiParameter("run_id", OpenApiTypes.INT, OpenApiParameter.PATH)],
        request=None,
        responses={200: RunSerializer, **_errors(403, 404, 409)},
        description=(
            "Stop a maintenance run: a QUEUED run is CANCELLED at once; a RUNNING one is "
            "asked to stop, and its worker cancels its Spark jobs within about a second "
            "(the table unchanged). 409 for a finished run."
        ),
        tags=["maintenance"],
    )
    def post(self, request: Request, run_id: int) -> Response:
        run = services.cancel_run(selectors.get_run(run_id), actor=request.user)
        return Response(RunSerializer(selectors.get_run(run.pk)).data)


class HealthView(APIView):
    @extend_schema(
        operation_id="tables_health",
        parameters=[_NAMESPACE, _TABLE],
        description="The table's health now (data files, average file size, delete files, "
        "snapshots, metadata files and the current metadata file's size) and over time (the "
        "samples, each maintenance run's marked).",
        responses={200: OpenApiTypes.OBJECT, **_errors(404)},
        tags=["maintenance"],
    )
    def get(self, request: Request, namespace: str, name: str) -> Response:
        table = _managed_table(namespace, name)
        health = selectors.health_of(table, with_files=True)
        return Response(
            {
                "now": {
                    **dataclasses.asdict(health),
                    "average_file_bytes": health.average_file_bytes,
                },
                "series": selectors.health_series(table),
            }
        )
