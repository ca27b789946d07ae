"""A materialized table's refresh runs in the API: a refresh asked for (Flink's request), the
list of runs, one run, and a run's cancel."""

from __future__ import annotations

from typing import Any

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog import access
from catalog.core.access import MANAGE
from catalog.core.errors import Forbidden
from refresh import checks, selectors
from refresh import runs as refresh_runs
from refresh.api.common import (
    MT_PARAMS,
    RUN_PARAM,
    TAGS,
    Pagination,
    SeesByGrants,
    error_responses,
    managed_table,
    validated,
    visible_table,
)
from refresh.api.serializers.runs import (
    RUN_DATA_FIELDS,
    RefreshAcceptedSerializer,
    RefreshRequestSerializer,
    RefreshRunSerializer,
    run_data,
)
from refresh.core.options import check_run_options
from refresh.core.partitions import parse_schedule_time, scheduled_partition
from refresh.models import RefreshRun


class RefreshView(APIView):
    permission_classes = [SeesByGrants]

    @extend_schema(
        operation_id="materialized_tables_refresh",
        parameters=MT_PARAMS,
        request=RefreshRequestSerializer,
        responses={202: RefreshAcceptedSerializer, **error_responses(400, 403, 404, 409, 503)},
        description=(
            "Flink's SQL Gateway refresh, for external schedulers: a periodic run refreshes "
            "the partition its scheduleTime implies (scheduleTime - freshness, formatted by "
            "the table's partition.fields.<column>.date-formatter options); otherwise the "
            "given partition, or the whole table. Answers the queued run; jobId is its id."
        ),
        tags=TAGS,
    )
    def post(self, request: Request, namespace: str, name: str) -> Response:
        data = validated(RefreshRequestSerializer, request)
        mt = managed_table(request, namespace, name)
        # Checked here too so that the error names this request's field (the service's
        # own check, shared with RESUME WITH, says "options").
        config = check_run_options(data["config"], field="config")
        text = data["scheduleTime"]
        moment = parse_schedule_time(text, data["scheduleTimeFormat"]) if text else None
        partition = data["partition"]
        if data["isPeriodic"] and not partition:
            partition = scheduled_partition(moment, mt.freshness, mt.options, table=str(mt))
        if moment is not None and timezone.is_naive(moment):
            moment = timezone.make_aware(moment, timezone.get_default_timezone())
        run = refresh_runs.request_refresh(
            mt,
            trigger=RefreshRun.Trigger.API,
            partition=partition or {},
            schedule_time=moment,
            options=config,
            force=data["force"],
            full=data["full"],
            actor=request.user,
        )
        run = selectors.get_run(run.pk)
        return Response(
            {"jobId": run.pk, "run": RefreshRunSerializer(run).data},
            status=status.HTTP_202_ACCEPTED,
        )


class RunListView(generics.ListAPIView):
    serializer_class = RefreshRunSerializer
    pagination_class = Pagination
    permission_classes = [SeesByGrants]

    def get_queryset(self) -> Any:
        mt = visible_table(self.request, self.kwargs["namespace"], self.kwargs["name"])
        return selectors.RunPages(mt, RUN_DATA_FIELDS)

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """A page of plain values (run_data: what RefreshRunSerializer writes)."""
        runs = self.get_queryset()
        page = self.paginate_queryset(runs)
        table = runs.mt.table
        return self.get_paginated_response(
            [run_data(row, namespace=table.namespace.name, name=table.name) for row in page]
        )

    @extend_schema(
        operation_id="materialized_tables_runs_list",
        parameters=MT_PARAMS,
        responses={200: RefreshRunSerializer(many=True), **error_responses(404)},
        tags=TAGS,
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


class RunDetailView(APIView):
    permission_classes = [SeesByGrants]

    @extend_schema(
        operation_id="refresh_runs_retrieve",
        parameters=[RUN_PARAM],
        responses={200: RefreshRunSerializer, **error_responses(404)},
        tags=TAGS,
    )
    def get(self, request: Request, run_id: int) -> Response:
        return Response(RefreshRunSerializer(checks.run(request.user, run_id)).data)


class RunCancelView(APIView):
    permission_classes = [SeesByGrants]

    @extend_schema(
        operation_id="refresh_runs_cancel",
        parameters=[RUN_PARAM],
        request=None,
        responses={200: RefreshRunSerializer, **error_responses(403, 404, 409)},
        description=(
            "Stop a refresh run: a QUEUED run is CANCELLED at once; a RUNNING one is asked "
            "to stop (cancel_requested_at), and its worker cancels its Spark jobs within "
            "about a second and ends it CANCELLED with the table unchanged, unless its "
            "commit had already landed (then it SUCCEEDED). 409 for a finished run and for "
            "a continuous table's runs (SUSPEND stops its stream)."
        ),
        tags=TAGS,
    )
    def post(self, request: Request, run_id: int) -> Response:
        run = checks.run(request.user, run_id)
        # One's own run, or one of a table one manages (its table dropped: the catalog).
        if run.requested_by_id != request.user.pk:
            if run.materialized_table is not None:
                checks.table(request.user, run.materialized_table, MANAGE)
            elif not access.may(checks.principal(request.user), MANAGE, access.CATALOG):
                raise Forbidden(
                    f"Forbidden: {request.user.username} lacks the {MANAGE} privilege on "
                    "the catalog (the run's table was dropped)"
                )
        run = refresh_runs.cancel_run(run, actor=request.user)
        return Response(RefreshRunSerializer(selectors.get_run(run.pk)).data)
