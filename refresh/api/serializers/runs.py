"""Refresh runs' shapes: a refresh request (Flink's fields), a run (a row or, for long lists,
`run_data` from a row's values), and the answer to an accepted request."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from refresh.api.serializers.common import StrictSerializer, text_map
from refresh.models import (
    RefreshRun,
)


class RefreshRequestSerializer(StrictSerializer):
    """Flink's SQL Gateway refresh request (what an external scheduler such as Airflow
    sends), with `force` and `full` added."""

    isPeriodic = serializers.BooleanField(  # noqa: N815 - Flink's field name
        required=False,
        default=False,
        help_text="A scheduler's periodic run: the partition follows from scheduleTime.",
    )
    scheduleTime = serializers.CharField(  # noqa: N815
        required=False, allow_null=True, default=None
    )
    scheduleTimeFormat = serializers.CharField(  # noqa: N815
        required=False, default="yyyy-MM-dd HH:mm:ss", help_text="A Java date pattern."
    )
    config = serializers.DictField(
        required=False,
        default=dict,
        help_text="Spark SQL settings for this run only.",
    )
    partition = text_map(
        required=False, allow_null=True, default=None, help_text="Static partition values."
    )
    force = serializers.BooleanField(
        required=False, default=False, help_text="Refresh even if no source changed."
    )
    full = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Recompute the whole query (or partition), even when no source changed "
        "or the sources only appended and an incremental refresh would do.",
    )


#: A run's own columns as its answer gives them, in order; the computed durations come
#: after the first _TIMES_END (its times).
RUN_COLUMNS = (
    "trigger",
    "action",
    "state",
    "schedule_time",
    "partition",
    "options",
    "force",
    "full",
    "reason",
    "queued_at",
    "started_at",
    "finished_at",
    "worker",
    "heartbeat_at",
    "rows_written",
    "bytes_written",
    "snapshot_id",
    "source_snapshots",
    "expectations",
    "data_timestamp",
    "definition_version",
    "batches",
    "error",
)
_TIMES_END = 12


class RefreshRunSerializer(serializers.ModelSerializer):
    requested_by = serializers.CharField(
        source="requested_by.username", read_only=True, allow_null=True, default=None
    )
    cancel_requested_by = serializers.CharField(
        source="cancel_requested_by.username", read_only=True, allow_null=True, default=None
    )
    duration_seconds = serializers.FloatField(read_only=True, allow_null=True)
    start_delay_seconds = serializers.SerializerMethodField(
        help_text="A scheduled run: how long after its planned tick (schedule_time) it started"
    )
    # Plain text, not an enum: two models have a "state" (drf-spectacular's enum names).
    state = serializers.CharField(help_text=", ".join(RefreshRun.State.values))
    namespace = serializers.SerializerMethodField()
    name = serializers.SerializerMethodField()
    batches = serializers.IntegerField(
        read_only=True,
        help_text="Runs this row stands for: micro-batches and scheduled NO_DATA skips older "
        "than an hour are folded per table and hour (queued and started: the first's; "
        "finished and the rest: the newest's).",
    )

    class Meta:
        model = RefreshRun
        fields = [
            "id",
            "table_name",
            "namespace",
            "name",
            *RUN_COLUMNS[:_TIMES_END],
            "duration_seconds",
            "start_delay_seconds",
            *RUN_COLUMNS[_TIMES_END:],
            "requested_by",
            "cancel_requested_at",
            "cancel_requested_by",
        ]
        read_only_fields = fields

    def _table(self, run: RefreshRun) -> Any:
        mt = run.materialized_table
        return mt.table if mt is not None else None

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_start_delay_seconds(self, run: RefreshRun) -> float | None:
        """Started minus the planned tick: a tick that waited for a worker says how long
        (a tick never waits unseen: webapp.celery stamps when beat sent it)."""
        if run.schedule_time is None or run.started_at is None:
            return None
        return round((run.started_at - run.schedule_time).total_seconds(), 3)

    def get_namespace(self, run: RefreshRun) -> str | None:
        table = self._table(run)
        return table.namespace.name if table is not None else None

    def get_name(self, run: RefreshRun) -> str | None:
        table = self._table(run)
        return table.name if table is not None else None


#: What `run_data` reads of each run (RefreshRunSerializer's fields from the run's columns).
RUN_DATA_FIELDS = (
    "pk",
    "table_name",
    *RUN_COLUMNS,
    "requested_by__username",
    "cancel_requested_at",
    "cancel_requested_by__username",
)


MOMENT = serializers.DateTimeField()


def run_data(row: dict[str, Any], *, namespace: str | None, name: str | None) -> dict[str, Any]:
    """What RefreshRunSerializer writes of a run, from its values (RUN_DATA_FIELDS) and its
    table's namespace and name: a list of fifty runs through the serializer's thirty fields
    took most of its answer."""

    def moment(key: str) -> str | None:
        value = row[key]
        return MOMENT.to_representation(value) if value else None

    started, finished, scheduled = row["started_at"], row["finished_at"], row["schedule_time"]
    return {
        "id": row["pk"],
        "table_name": row["table_name"],
        "namespace": namespace,
        "name": name,
        "trigger": row["trigger"],
        "action": row["action"],
        "state": row["state"],
        "schedule_time": moment("schedule_time"),
        "partition": row["partition"],
        "options": row["options"],
        "force": row["force"],
        "full": row["full"],
        "reason": row["reason"],
        "queued_at": moment("queued_at"),
        "started_at": moment("started_at"),
        "finished_at": moment("finished_at"),
        "duration_seconds": (finished - started).total_seconds()
        if started is not None and finished is not None
        else None,
        "start_delay_seconds": round((started - scheduled).total_seconds(), 3)
        if started is not None and scheduled is not None
        else None,
        "worker": row["worker"],
        "heartbeat_at": moment("heartbeat_at"),
        "rows_written": row["rows_written"],
        "bytes_written": row["bytes_written"],
        "snapshot_id": row["snapshot_id"],
        "source_snapshots": row["source_snapshots"],
        "expectations": row["expectations"],
        "data_timestamp": moment("data_timestamp"),
        "definition_version": row["definition_version"],
        "batches": row["batches"],
        "error": row["error"],
        "requested_by": row["requested_by__username"],
        "cancel_requested_at": moment("cancel_requested_at"),
        "cancel_requested_by": row["cancel_requested_by__username"],
    }


class RefreshAcceptedSerializer(serializers.Serializer):
    jobId = serializers.IntegerField()  # noqa: N815 - Flink's field name
    run = RefreshRunSerializer()
