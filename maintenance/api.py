"""The API of table maintenance (mounted at /api/ by webapp/api_urls.py): a table's policy (read and
change), its runs (list, start), one run, and its health over time. Thin: each handler
validates the request's shape and calls one service or selector.

Decided by grants on the table, as its page's maintenance section is: reading needs
read_metadata on it (a table one may not see is a missing one), starting, cancelling and
changing the policy need manage; a run of a dropped table, whose table is gone, needs the
privilege on the whole catalog."""

from __future__ import annotations

import dataclasses
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import access, checks
from catalog.api.permissions import HoldsAPrivilege
from catalog.api.shared import NAMESPACE_PARAM as _NAMESPACE
from catalog.api.shared import TABLE_PARAM as _TABLE
from catalog.api.shared import CatalogPagination
from catalog.api.shared import error_responses as _errors
from catalog.api.shared import validated as _validated
from catalog.core.access import MANAGE, READ_METADATA
from catalog.core.errors import NotFound
from catalog.services.kernel import TABLE
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


_MOMENT = serializers.DateTimeField()
_MOMENTS = frozenset({"queued_at", "started_at", "finished_at", "cancel_requested_at"})
_USERS = frozenset({"requested_by", "cancel_requested_by"})

#: What `run_data` reads of each run: RunSerializer's fields, from the run's columns.
RUN_DATA_FIELDS = tuple(
    f"{name}__username" if name in _USERS else name
    for name in RunSerializer.Meta.fields
    if name != "duration_seconds"
)


def run_data(row: dict[str, Any]) -> dict[str, Any]:
    """What RunSerializer writes of a run, from its values (RUN_DATA_FIELDS): a page of fifty
    runs through the serializer's twenty-six fields took most of the list's answer."""
    data: dict[str, Any] = {}
    for name in RunSerializer.Meta.fields:
        if name == "duration_seconds":
            started, finished = row["started_at"], row["finished_at"]
            done = started is not None and finished is not None
            data[name] = float((finished - started).total_seconds()) if done else None
        elif name in _USERS:
            data[name] = row[f"{name}__username"]
        elif name in _MOMENTS:
            data[name] = _MOMENT.to_representation(row[name]) if row[name] else None
        else:
            data[name] = row[name]
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


def _table(request: Request, namespace: str, name: str, privilege: str = READ_METADATA) -> Any:
    """The table, if the principal may see it (else the missing table's 404) and holds
    `privilege` on it (else 403)."""
    return checks.obj(request, TABLE, namespace, name, privilege)


def _run(request: Request, run_id: int, privilege: str = READ_METADATA) -> MaintenanceRun:
    """The run, checked as its table is; one of a dropped table needs `privilege` on the
    catalog, and one the principal may not see is a missing one."""
    run = selectors.get_run(run_id)
    who = checks.principal(request)
    if run.table is not None:
        held = who.privileges(access.of_object(run.table))
        if READ_METADATA not in held:
            raise NotFound(f"Maintenance run does not exist: {run_id}", field="run_id")
        if privilege not in held:
            raise checks.refused(who, privilege, f"table {run.table_name}")
    elif not access.may(who, privilege, access.CATALOG):
        if not access.may(who, READ_METADATA, access.CATALOG):
            raise NotFound(f"Maintenance run does not exist: {run_id}", field="run_id")
        raise checks.refused(who, privilege, "the catalog")
    return run


class _ByGrants:
    """Open to whoever holds a privilege somewhere; each handler checks the table."""

    permission_classes = [HoldsAPrivilege]


class PolicyView(_ByGrants, APIView):
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
        table = _table(request, namespace, name)
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
        table = _table(request, namespace, name, MANAGE)
        policy = services.set_policy(table=table, changes=changes, actor=request.user)
        return Response(policy_body(table, policy))


class RunListView(_ByGrants, APIView):
    @extend_schema(
        operation_id="tables_maintenance_runs",
        parameters=[_NAMESPACE, _TABLE],
        description="The table's maintenance runs, newest first.",
        responses={200: RunSerializer(many=True), **_errors(404)},
        tags=["maintenance"],
    )
    def get(self, request: Request, namespace: str, name: str) -> Response:
        table = _table(request, namespace, name)
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
        table = _table(request, namespace, name, MANAGE)
        wanted = [Action(a) for a in data.get("actions") or []] or services.ALL_ACTIONS
        runs = services.start(
            table=table,
            actions=[a for a in services.ALL_ACTIONS if a in wanted],
            trigger=MaintenanceRun.Trigger.API,
            actor=request.user,
        )
        return Response(RunSerializer(runs, many=True).data, status=status.HTTP_202_ACCEPTED)


class RunDetailView(_ByGrants, APIView):
    @extend_schema(
        operation_id="maintenance_run",
        parameters=[OpenApiParameter("run_id", OpenApiTypes.INT, OpenApiParameter.PATH)],
        responses={200: RunSerializer, **_errors(404)},
        tags=["maintenance"],
    )
    def get(self, request: Request, run_id: int) -> Response:
        return Response(RunSerializer(_run(request, run_id)).data)


class RunCancelView(_ByGrants, APIView):
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
        run = services.cancel_run(_run(request, run_id, MANAGE), actor=request.user)
        return Response(RunSerializer(selectors.get_run(run.pk)).data)


class HealthView(_ByGrants, APIView):
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
        table = _table(request, namespace, name)
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
