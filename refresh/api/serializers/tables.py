"""Materialized tables' shapes: the create and update requests, a resume, and a table's
summary (also `summary_data` from a list page's values) and detail (schema, schedule,
stream host, the change pending; the query hidden from a user who may not read every
source)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from catalog import access
from refresh import rights, schedules, selectors
from refresh.api.serializers.common import (
    FRESHNESS_HELP,
    FreshnessField,
    FreshnessSerializer,
    StrictSerializer,
    names,
    text_map,
)
from refresh.api.serializers.expectations import (
    ExpectationInputSerializer,
    ExpectationSerializer,
    checked_expectations,
)
from refresh.api.serializers.runs import MOMENT, RefreshRunSerializer, run_data
from refresh.api.serializers.versions import VersionLogEntrySerializer
from refresh.core.freshness import RefreshMode
from refresh.models import (
    MaterializedTable,
)


class MaterializedTableCreateSerializer(StrictSerializer):
    name = serializers.CharField()
    query = serializers.CharField(trim_whitespace=False, help_text="A Spark SQL query.")
    freshness = FreshnessField(help_text=FRESHNESS_HELP)
    refresh_mode = serializers.ChoiceField(
        choices=[m.value for m in RefreshMode],
        required=False,
        allow_null=True,
        default=None,
        help_text="Omitted: derived from the freshness, as Flink derives it.",
    )
    primary_key = names(required=False, default=list)
    constraint_name = serializers.CharField(required=False, allow_null=True, default=None)
    partitioned_by = names(required=False, default=list)
    options = text_map(required=False, default=dict)
    comment = serializers.CharField(required=False, allow_null=True, allow_blank=True, default=None)
    expectations = ExpectationInputSerializer(
        many=True, required=False, default=list, help_text="Checked on every refreshed row."
    )

    def validate_expectations(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return checked_expectations(value)


class MaterializedTableUpdateSerializer(StrictSerializer):
    freshness = FreshnessField(required=False, help_text=FRESHNESS_HELP)
    refresh_mode = serializers.ChoiceField(choices=[m.value for m in RefreshMode], required=False)
    options = text_map(required=False, help_text="Options to set (SET).")
    reset_options = names(required=False, help_text="Option keys to remove (RESET).")


class ResumeSerializer(StrictSerializer):
    options = text_map(
        required=False,
        default=dict,
        help_text="Spark SQL settings for the resumed runs only (RESUME WITH).",
    )


class SchemaColumnSerializer(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.CharField()
    required = serializers.BooleanField()
    doc = serializers.CharField(allow_null=True)


class ScheduleSerializer(serializers.Serializer):
    schedule = serializers.CharField(help_text="A crontab, or 'every <n> seconds'.")
    flink_cron = serializers.CharField(help_text="The Quartz expression Flink derives.")
    periodic_task = serializers.CharField(allow_null=True)
    enabled = serializers.BooleanField()


def freshness_data(mt: MaterializedTable) -> dict[str, Any]:
    return {"value": mt.freshness_value, "unit": mt.freshness_unit, "text": str(mt.freshness)}


def schedule_data(mt: MaterializedTable) -> dict[str, Any] | None:
    found = schedules.shown(mt)
    if found is None:
        return None
    schedule, task = found
    return {
        "schedule": str(schedule),
        "flink_cron": schedule.flink_cron,
        "periodic_task": task.name if task is not None else None,
        "enabled": bool(task and task.enabled),
    }


class MaterializedTableSummarySerializer(serializers.ModelSerializer):
    namespace = serializers.CharField(source="table.namespace.name")
    name = serializers.CharField(source="table.name")
    state = serializers.CharField(help_text=", ".join(MaterializedTable.State.values))
    freshness = serializers.SerializerMethodField()
    last_refresh = serializers.SerializerMethodField()
    lag_seconds = serializers.SerializerMethodField()
    next_run = serializers.SerializerMethodField()

    class Meta:
        model = MaterializedTable
        fields = [
            "namespace",
            "name",
            "state",
            "refresh_mode",
            "freshness",
            "mode_is_explicit",
            "last_refresh",
            "lag_seconds",
            "next_run",
            "comment",
            "updated_at",
        ]
        read_only_fields = fields

    @extend_schema_field(FreshnessSerializer)
    def get_freshness(self, mt: MaterializedTable) -> dict[str, Any]:
        return freshness_data(mt)

    @extend_schema_field(RefreshRunSerializer(allow_null=True))
    def get_last_refresh(self, mt: MaterializedTable) -> dict[str, Any] | None:
        run = selectors.last_refresh(mt)
        if run is None:
            return None
        # One run serializer for a whole list: building a ModelSerializer's fields cost
        # more than writing a run.
        if not hasattr(self, "_runs"):
            self._runs = RefreshRunSerializer()
        return self._runs.to_representation(run)

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_lag_seconds(self, mt: MaterializedTable) -> float | None:
        lag = selectors.lag(mt)
        return lag.total_seconds() if lag is not None else None

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_next_run(self, mt: MaterializedTable) -> str | None:
        moment = selectors.next_run(mt)
        return serializers.DateTimeField().to_representation(moment) if moment else None


def summary_data(mt: MaterializedTable) -> dict[str, Any]:
    """What MaterializedTableSummarySerializer writes of a table of `selectors.TablePages`
    (its last run's values as `run_data` writes them)."""
    lag = selectors.lag(mt)
    upcoming = selectors.next_run(mt)
    last = mt.last_run
    return {
        "namespace": mt.namespace_name,
        "name": mt.name,
        "state": mt.state,
        "refresh_mode": mt.refresh_mode,
        "freshness": freshness_data(mt),
        "mode_is_explicit": mt.mode_is_explicit,
        "last_refresh": run_data(last, namespace=mt.namespace_name, name=mt.name)
        if last is not None
        else None,
        "lag_seconds": lag.total_seconds() if lag is not None else None,
        "next_run": MOMENT.to_representation(upcoming) if upcoming else None,
        "comment": mt.comment,
        "updated_at": MOMENT.to_representation(mt.updated_at) if mt.updated_at else None,
    }


class StreamHostSerializer(serializers.Serializer):
    """The streaming host that holds a continuous table's lease (refresh.stream_hosts)."""

    name = serializers.CharField(help_text='"hostname:pid" of the run_streams process')
    since = serializers.DateTimeField(help_text="when it took the table")
    lease_until = serializers.DateTimeField(help_text="when its lease ends unless renewed")


class MaterializedTableDetailSerializer(MaterializedTableSummarySerializer):
    """A table's detail. With the request in its context, the query is null for a user
    who may not read every source (refresh.rights), and `query_hidden` says so."""

    query = serializers.SerializerMethodField()
    query_hidden = serializers.SerializerMethodField()
    expectations = serializers.SerializerMethodField()
    schedule = serializers.SerializerMethodField()
    stream_host = serializers.SerializerMethodField()
    schema = serializers.SerializerMethodField()
    data_timestamp = serializers.SerializerMethodField()

    class Meta(MaterializedTableSummarySerializer.Meta):
        fields = [
            *MaterializedTableSummarySerializer.Meta.fields,
            "schedule",
            "options",
            "schema",
            "primary_key",
            "constraint_name",
            "partitioned_by",
            "expectations",
            "query",
            "query_hidden",
            "default_namespace",
            "sources",
            "current_version",
            "suspended_reason",
            "consecutive_failures",
            "data_timestamp",
            "stream_status",
            "stream_error",
            "stream_heartbeat_at",
            "stream_checkpoint",
            "stream_host",
            "pending_change",
            "created_at",
        ]
        read_only_fields = fields

    pending_change = serializers.SerializerMethodField()

    def _hidden(self, mt: MaterializedTable) -> bool:
        request = self.context.get("request")
        if request is None:
            return False  # a job's result, answered to who wrote the query
        known = self.context.setdefault("hidden", {})
        if mt.pk not in known:
            known[mt.pk] = rights.definition_hidden(access.principal_of(request), mt.sources)
        return known[mt.pk]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_query(self, mt: MaterializedTable) -> str | None:
        """The query (Spark SQL); null when hidden from the user (see query_hidden)."""
        return None if self._hidden(mt) else mt.query

    @extend_schema_field(ExpectationSerializer(many=True))
    def get_expectations(self, mt: MaterializedTable) -> list[dict[str, Any]]:
        """CONSTRAINT name EXPECT (condition) [ON VIOLATION ...], in the order written;
        each condition null when the query is hidden from the user."""
        hidden = self._hidden(mt)
        return [
            {**row, "condition": None if hidden else row["condition"]} for row in mt.expectations
        ]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_query_hidden(self, mt: MaterializedTable) -> str | None:
        """Why the query is null: the user may read the table but not every source."""
        return rights.DEFINITION_HIDDEN if self._hidden(mt) else None

    @extend_schema_field(StreamHostSerializer(allow_null=True))
    def get_stream_host(self, mt: MaterializedTable) -> dict[str, Any] | None:
        """Which streaming host runs the table's query, since when (null: none holds it)."""
        if mt.stream_host is None:
            return None
        return StreamHostSerializer(
            {
                "name": mt.stream_host.name,
                "since": mt.stream_host_since,
                "lease_until": mt.stream_lease_until,
            }
        ).data

    @extend_schema_field(VersionLogEntrySerializer(allow_null=True))
    def get_pending_change(self, mt: MaterializedTable) -> dict[str, Any] | None:
        """The ALTER ... AS or rollback being applied (its rebuild's run), if any."""
        from refresh.definitions import pending_change

        entry = pending_change(mt)
        return VersionLogEntrySerializer(entry).data if entry is not None else None

    @extend_schema_field(ScheduleSerializer(allow_null=True))
    def get_schedule(self, mt: MaterializedTable) -> dict[str, Any] | None:
        return schedule_data(mt)

    @extend_schema_field(SchemaColumnSerializer(many=True))
    def get_schema(self, mt: MaterializedTable) -> list[dict[str, Any]]:
        return [
            {"name": f.name, "type": f.type, "required": f.required, "doc": f.doc}
            for f in mt.table.schema_fields()
        ]

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_data_timestamp(self, mt: MaterializedTable) -> str | None:
        moment = selectors.data_timestamp(mt)
        return serializers.DateTimeField().to_representation(moment) if moment else None
