"""The monitoring API (mounted at /api/ by webapp/api_urls.py): every materialized table with its
status, failing and late ones first, and the refresh and maintenance history of all
tables together, with the monitoring page's filters. Reads only, through
`refresh.monitoring`; a filter it cannot read is a 400 naming the field. Each lists only the
tables, and the runs of tables, the reader may see (read_metadata, catalog.access): one who
sees every table gets the lists compiled once, others the same query with their filter."""

from __future__ import annotations

import dataclasses
from typing import Any

from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from catalog import access
from catalog.api.permissions import HoldsAPrivilege
from catalog.api.serializers import ErrorSerializer
from catalog.api.shared import CatalogPagination
from refresh.api.serializers.common import FreshnessSerializer
from refresh.models import MaterializedTable
from refresh.monitoring import filters as monitoring_filters
from refresh.monitoring import history as run_history
from refresh.monitoring import tables as table_status

_TAGS = ["monitoring"]
# (Inside the views' bodies `list` is the method.)
_STATUSES = list(monitoring_filters.STATUSES)
_KINDS = list(monitoring_filters.KINDS)
_RUN_STATES = list(monitoring_filters.RUN_STATES)


def _query(name: str, description: str, **kwargs: Any) -> OpenApiParameter:
    return OpenApiParameter(
        name, OpenApiTypes.STR, OpenApiParameter.QUERY, description=description, **kwargs
    )


_NAMESPACE = _query("namespace", 'Only this namespace (exact, levels joined by ".").')
_ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="A filter it cannot read; `field` names it."),
    403: OpenApiResponse(ErrorSerializer, description="The user has no role in the catalog."),
}


def _url(name: str, **kwargs: Any) -> str | None:
    try:
        return reverse(name, kwargs=kwargs)
    except NoReverseMatch:
        return None


# -- every materialized table ---------------------------------------------------------------


class LastRefreshSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    state = serializers.CharField()
    finished_at = serializers.DateTimeField(allow_null=True)
    url = serializers.CharField(help_text="The run in the API.")


class MonitoredTableSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    name = serializers.CharField()
    status = serializers.ChoiceField(
        choices=_STATUSES,
        help_text="failing: a refresh failed since the last success, the last one failed, "
        "or the table suspended itself; late: its lag is longer than its freshness; ok.",
    )
    state = serializers.CharField(help_text=", ".join(MaterializedTable.State.values))
    suspended_reason = serializers.CharField(allow_blank=True)
    refresh_mode = serializers.CharField()
    freshness = FreshnessSerializer()
    freshness_seconds = serializers.IntegerField()
    data_timestamp = serializers.DateTimeField(
        allow_null=True, help_text="What the data is as of (null before the first refresh)."
    )
    lag_seconds = serializers.FloatField(allow_null=True)
    lag_ratio = serializers.FloatField(
        allow_null=True, help_text="Lag divided by freshness: above 1 is late."
    )
    last_refresh = LastRefreshSerializer(allow_null=True, help_text="The last finished run.")
    consecutive_failures = serializers.IntegerField()
    url = serializers.CharField(help_text="The materialized table in the API.")


class MonitoredTablesView(generics.ListAPIView):
    """Every materialized table, failing first, then late, then the rest, by name."""

    serializer_class = MonitoredTableSerializer
    pagination_class = CatalogPagination
    permission_classes = [HoldsAPrivilege]

    def get_queryset(self) -> Any:
        self.now = timezone.now()
        filters = monitoring_filters.table_filters(self.request.query_params)
        who = access.principal_of(self.request)
        condition = access.objects_condition(who, namespace=filters.namespace, prefix="table__")
        if condition is None:
            return table_status.TableList(filters, now=self.now)
        visibility = access.visibility(who)
        if visibility is not None:
            return table_status.TableList(filters, now=self.now, visibility=visibility)
        return table_status.tables(filters, now=self.now).filter(condition)

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        rows = []
        for mt in page:
            row = table_status.table_row(mt, self.now)
            row["url"] = reverse(
                "api:mt-detail", kwargs={"namespace": row["namespace"], "name": row["name"]}
            )
            if row["last_refresh"] is not None:
                run_id = row["last_refresh"]["id"]
                row["last_refresh"]["url"] = reverse("api:run-detail", kwargs={"run_id": run_id})
            rows.append(row)
        return self.get_paginated_response(self.get_serializer(rows, many=True).data)

    @extend_schema(
        operation_id="monitoring_tables_list",
        parameters=[
            _NAMESPACE,
            _query("status", "Only tables with this status.", enum=_STATUSES),
        ],
        responses={200: MonitoredTableSerializer(many=True), **_ERRORS},
        description=(
            "Every materialized table across namespaces with its state, freshness, lag, lag "
            "divided by freshness, last refresh and consecutive failures: failing tables "
            "first, then late ones, then the rest, by name within each."
        ),
        tags=_TAGS,
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)


# -- the history of every table -------------------------------------------------------------


class HistoryEntrySerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=_KINDS)
    id = serializers.IntegerField(help_text="The run's id among runs of its kind.")
    table_name = serializers.CharField(help_text="The table's name at the time.")
    namespace = serializers.CharField(
        allow_null=True, help_text="The table's namespace now (null once dropped)."
    )
    name = serializers.CharField(allow_null=True, help_text="The table's name now.")
    action = serializers.CharField(allow_blank=True)
    trigger = serializers.CharField()
    state = serializers.CharField(help_text=", ".join(monitoring_filters.RUN_STATES))
    queued_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    duration_seconds = serializers.FloatField(allow_null=True)
    error = serializers.CharField(allow_blank=True)
    count = serializers.IntegerField(
        help_text="Runs this row stands for (micro-batches and NO_DATA ticks older than an "
        "hour are folded per table and hour); 1 otherwise."
    )
    url = serializers.CharField(allow_null=True, help_text="The run in the API.")


class MonitoringHistoryView(generics.ListAPIView):
    """Refresh and maintenance runs of every table, newest first."""

    serializer_class = HistoryEntrySerializer
    pagination_class = CatalogPagination
    permission_classes = [HoldsAPrivilege]

    def get_queryset(self) -> Any:
        filters = monitoring_filters.history_filters(self.request.query_params)
        who = access.principal_of(self.request)
        refreshes = access.objects_condition(who, prefix="materialized_table__table__")
        visibility = access.visibility(who) if refreshes is not None else None
        if visibility is not None:
            filters = dataclasses.replace(filters, visibility=visibility)
        elif refreshes is not None:
            maintenance = access.objects_condition(who, prefix="table__")
            filters = dataclasses.replace(filters, refreshes=refreshes, maintenance=maintenance)
        return run_history.HistoryList(filters)

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        page = self.paginate_queryset(self.get_queryset())
        rows = []
        for entry in map(run_history.history_row, page):
            if entry["kind"] == monitoring_filters.REFRESH:
                entry["url"] = _url("api:run-detail", run_id=entry["id"])
            else:
                entry["url"] = _url("api:maintenance-run", run_id=entry["id"])
            rows.append(entry)
        return self.get_paginated_response(self.get_serializer(rows, many=True).data)

    @extend_schema(
        operation_id="monitoring_history_list",
        parameters=[
            _query("kind", "Only runs of this kind.", enum=_KINDS),
            _query("state", "Only runs in this state.", enum=_RUN_STATES),
            _query("namespace", "Only runs of tables in this namespace (at the time)."),
            _query("table", "Only runs of tables whose name contains this text."),
            _query("since", monitoring_filters.SINCE_HELP),
        ],
        responses={200: HistoryEntrySerializer(many=True), **_ERRORS},
        description=(
            "The refresh runs of materialized tables and the maintenance runs of tables, "
            "together, newest (queued) first."
        ),
        tags=_TAGS,
    )
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)
