"""Shapes of the materialized-table API's requests and responses.

Request serializers check types and required fields only; FLIP-435's rules (freshness,
modes, options, lifecycle) are checked by `refresh.services`, which raises `CatalogError`.

A freshness is written either as an object `{"value": 10, "unit": "SECOND"}` (the value an
integer or its text, the unit SECOND, MINUTE, HOUR or DAY) or as the text of FLIP-435's
clause, `"INTERVAL '10' SECOND"`."""

from __future__ import annotations

import re
from typing import Any

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from catalog import access
from catalog.core.errors import CatalogError, InvalidInput
from refresh import queries, rights, selectors
from refresh.core import expectations as ex
from refresh.core.freshness import Freshness, RefreshMode, full_refresh_schedule
from refresh.models import (
    MaterializedTable,
    MaterializedTableVersion,
    MaterializedTableVersionLogEntry,
    Query,
    RefreshRun,
    Verification,
)

# -- freshness ----------------------------------------------------------------------------

_INTERVAL = re.compile(r"\s*INTERVAL\s+'([^']*)'\s+([A-Za-z]+)\s*", re.IGNORECASE)
FRESHNESS_HELP = (
    'An object {"value": 10, "unit": "SECOND"} (unit SECOND, MINUTE, HOUR or DAY), or the '
    "text \"INTERVAL '10' SECOND\"."
)


def parse_freshness(data: Any) -> Freshness:
    """A freshness from the API's two spellings; InvalidInput (field "freshness") else."""
    if isinstance(data, str):
        match = _INTERVAL.fullmatch(data)
        if match is None:
            raise InvalidInput(
                f"A freshness is written INTERVAL '<n>' <unit>, not {data[:100]!r}",
                field="freshness",
            )
        return Freshness.parse(match.group(1), match.group(2))
    if isinstance(data, dict) and set(data) == {"value", "unit"}:
        value, unit = data["value"], data["unit"]
        if isinstance(value, bool) or not isinstance(value, int | str) or not isinstance(unit, str):
            raise InvalidInput(
                "A freshness's value is an integer (or its text) and its unit a text",
                field="freshness",
            )
        return Freshness.parse(value, unit)
    raise InvalidInput(
        'A freshness is {"value": <n>, "unit": "SECOND|MINUTE|HOUR|DAY"} or '
        "\"INTERVAL '<n>' <unit>\"",
        field="freshness",
    )


class FreshnessSerializer(serializers.Serializer):
    value = serializers.IntegerField()
    unit = serializers.ChoiceField(choices=["SECOND", "MINUTE", "HOUR", "DAY"])
    text = serializers.CharField(read_only=True, help_text="INTERVAL '<value>' <unit>")


@extend_schema_field(
    {
        "oneOf": [
            {
                "type": "object",
                "properties": {
                    "value": {"oneOf": [{"type": "integer"}, {"type": "string"}]},
                    "unit": {"type": "string", "enum": ["SECOND", "MINUTE", "HOUR", "DAY"]},
                },
                "required": ["value", "unit"],
            },
            {"type": "string", "example": "INTERVAL '10' SECOND"},
        ],
        "description": FRESHNESS_HELP,
    }
)
class FreshnessField(serializers.Field):
    """Kept as written; `parse_freshness` reads it, so that its errors are the catalog's."""

    def to_internal_value(self, data: Any) -> Any:
        return data

    def to_representation(self, value: Any) -> Any:
        return value


def _text_map(**kwargs: Any) -> serializers.DictField:
    return serializers.DictField(child=serializers.CharField(allow_blank=True), **kwargs)


def _names(**kwargs: Any) -> serializers.ListField:
    return serializers.ListField(child=serializers.CharField(), **kwargs)


# -- requests -----------------------------------------------------------------------------


class StrictSerializer(serializers.Serializer):
    """Refuses fields it does not know, naming them (a typo must not be ignored)."""

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        data = self.initial_data
        if hasattr(data, "keys"):
            unknown = sorted(set(data.keys()) - set(self.fields))
            if unknown:
                raise InvalidInput(
                    f"Unknown fields: {', '.join(unknown)} (known: {', '.join(self.fields)})",
                    field=unknown[0],
                )
        return attrs


class StatementRequestSerializer(StrictSerializer):
    sql = serializers.CharField(
        trim_whitespace=False,
        help_text="One or more statements (materialized-table statements, UPDATE / DELETE / "
        "MERGE, queries), separated by semicolons.",
    )
    namespace = serializers.CharField(
        required=False,
        allow_null=True,
        allow_blank=True,
        default=None,
        help_text="The namespace unqualified names resolve in.",
    )
    dry_run = serializers.BooleanField(
        required=False,
        default=False,
        help_text=(
            "Plan only: say per statement what it would do (create, alter with the changes, "
            "nothing, refused...), changing nothing and starting no Spark job."
        ),
    )


class ExpectationInputSerializer(serializers.Serializer):
    """CONSTRAINT name EXPECT (condition) [ON VIOLATION ...] as JSON."""

    name = serializers.CharField()
    condition = serializers.CharField(help_text="A Spark SQL expression over the query's columns.")
    on_violation = serializers.ChoiceField(
        choices=list(ex.ACTIONS),
        required=False,
        allow_null=True,
        default=None,
        help_text="Omitted: violating rows are kept and counted.",
    )

    def to_internal_value(self, data: Any) -> Any:
        if hasattr(data, "keys"):  # a typo must not be ignored, as StrictSerializer says
            unknown = sorted(set(data.keys()) - set(self.fields))
            if unknown:
                raise serializers.ValidationError(
                    f"Unknown fields: {', '.join(unknown)} (known: {', '.join(self.fields)})"
                )
        return super().to_internal_value(data)

    def validate_condition(self, value: str) -> str:
        try:
            ex.parse_condition(value)
        except InvalidInput as error:
            raise serializers.ValidationError(error.message) from None
        return value


def _expectations(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[str] = set()
    for row in rows:
        if row["name"].lower() in seen:
            raise InvalidInput(f"Duplicate expectation name {row['name']!r}", field="expectations")
        seen.add(row["name"].lower())
    return rows


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
    primary_key = _names(required=False, default=list)
    constraint_name = serializers.CharField(required=False, allow_null=True, default=None)
    partitioned_by = _names(required=False, default=list)
    options = _text_map(required=False, default=dict)
    comment = serializers.CharField(required=False, allow_null=True, allow_blank=True, default=None)
    expectations = ExpectationInputSerializer(
        many=True, required=False, default=list, help_text="Checked on every refreshed row."
    )

    def validate_expectations(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return _expectations(value)


class MaterializedTableUpdateSerializer(StrictSerializer):
    freshness = FreshnessField(required=False, help_text=FRESHNESS_HELP)
    refresh_mode = serializers.ChoiceField(choices=[m.value for m in RefreshMode], required=False)
    options = _text_map(required=False, help_text="Options to set (SET).")
    reset_options = _names(required=False, help_text="Option keys to remove (RESET).")


class ResumeSerializer(StrictSerializer):
    options = _text_map(
        required=False,
        default=dict,
        help_text="Spark SQL settings for the resumed runs only (RESUME WITH).",
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
    partition = _text_map(
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


# -- responses ----------------------------------------------------------------------------


class StatementPlanSerializer(serializers.Serializer):
    action = serializers.CharField(
        help_text="create, alter, nothing, refused, or the statement's own verb (drop, "
        "suspend, resume, refresh, change data, read)"
    )
    table = serializers.CharField(allow_null=True)
    changes = _names()
    error = serializers.DictField(allow_null=True)


class StatementResultSerializer(serializers.Serializer):
    statement = serializers.CharField()
    line = serializers.IntegerField()
    column = serializers.IntegerField()
    kind = serializers.CharField()
    ok = serializers.BooleanField()
    message = serializers.CharField()
    table = serializers.CharField(allow_null=True)
    run_id = serializers.IntegerField(allow_null=True)
    columns = _names()
    rows = serializers.ListField(child=serializers.ListField())
    error = serializers.DictField(allow_null=True)
    plan = StatementPlanSerializer(
        allow_null=True,
        help_text="What the statement does or would do (a dry run; CREATE [OR ALTER]).",
    )
    query = serializers.DictField(
        allow_null=True,
        required=False,
        help_text="A query's result (id, kind, columns, row_count, cut, and the URLs of its "
        "rows, `rows_url`, and downloads, `csv_url` and `parquet_url`).",
    )


class StatementsResponseSerializer(serializers.Serializer):
    results = StatementResultSerializer(many=True)
    error = serializers.DictField(
        required=False, help_text="The failing statement's error (message, type, line, column)."
    )
    dry_run = serializers.BooleanField(
        required=False, help_text="True: a plan; nothing was changed."
    )
    refused = serializers.IntegerField(
        required=False, help_text="A plan: how many statements would be refused."
    )


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
            "duration_seconds",
            "start_delay_seconds",
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
    "requested_by__username",
    "cancel_requested_at",
    "cancel_requested_by__username",
)
_MOMENT = serializers.DateTimeField()


def run_data(row: dict[str, Any], *, namespace: str | None, name: str | None) -> dict[str, Any]:
    """What RefreshRunSerializer writes of a run, from its values (RUN_DATA_FIELDS) and its
    table's namespace and name: a list of fifty runs through the serializer's thirty fields
    took most of its answer."""

    def moment(key: str) -> str | None:
        value = row[key]
        return _MOMENT.to_representation(value) if value else None

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
    if mt.refresh_mode != RefreshMode.FULL:
        return None
    try:
        schedule = full_refresh_schedule(mt.freshness)
    except CatalogError:
        return None
    task = mt.periodic_task
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
        "next_run": _MOMENT.to_representation(upcoming) if upcoming else None,
        "comment": mt.comment,
        "updated_at": _MOMENT.to_representation(mt.updated_at) if mt.updated_at else None,
    }


class VersionLogEntrySerializer(serializers.ModelSerializer):
    actor = serializers.CharField(
        source="actor.username", read_only=True, allow_null=True, default=None
    )
    operation = serializers.CharField(help_text="create, alter or rollback")

    outcome = serializers.CharField(
        help_text="PENDING while the rebuild runs, then APPLIED (the version is current) or "
        "FAILED (nothing changed; see error)"
    )
    run_id = serializers.IntegerField(
        allow_null=True, help_text="The rebuild run that applies an ALTER or a rollback."
    )

    class Meta:
        model = MaterializedTableVersionLogEntry
        fields = ["version_id", "timestamp", "operation", "actor", "outcome", "run_id", "error"]
        read_only_fields = fields


class StreamHostSerializer(serializers.Serializer):
    """The streaming host that holds a continuous table's lease (refresh.stream_hosts)."""

    name = serializers.CharField(help_text='"hostname:pid" of the run_streams process')
    since = serializers.DateTimeField(help_text="when it took the table")
    lease_until = serializers.DateTimeField(help_text="when its lease ends unless renewed")


class ExpectationSerializer(serializers.Serializer):
    name = serializers.CharField()
    condition = serializers.CharField(allow_null=True)
    on_violation = serializers.ChoiceField(choices=["DROP ROW", "FAIL UPDATE"], allow_null=True)


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


# -- definition versions ------------------------------------------------------------------

JAVA_INT_MAX = 2**31 - 1


class DefinitionRequestSerializer(StrictSerializer):
    query = serializers.CharField(
        trim_whitespace=False,
        help_text="The new query (Spark SQL): ALTER MATERIALIZED TABLE ... AS <query>.",
    )


class DefinitionRollbackSerializer(StrictSerializer):
    version_id = serializers.IntegerField(
        min_value=1,
        max_value=JAVA_INT_MAX,
        help_text="The definition version to make current again.",
    )


class VerifyRequestSerializer(StrictSerializer):
    snapshots = serializers.IntegerField(
        required=False,
        default=1,
        min_value=1,
        max_value=20,
        help_text="How many of the newest snapshots with a refresh state to verify.",
    )


class VerificationSerializer(serializers.ModelSerializer):
    """A snapshot checked against its query over the source snapshots it records."""

    requested_by = serializers.CharField(
        source="requested_by.username", read_only=True, allow_null=True, default=None
    )

    class Meta:
        model = Verification
        fields = [
            "id",
            "snapshot_id",
            "verdict",
            "definition_version",
            "source_snapshots",
            "missing_rows",
            "extra_rows",
            "sample",
            "reason",
            "requested_by",
            "verified_at",
            "seconds",
        ]
        read_only_fields = fields


class VerificationsSerializer(serializers.Serializer):
    """What a verification request answers: one verdict per snapshot, newest first."""

    verifications = VerificationSerializer(many=True)


class MaterializedTableVersionSerializer(serializers.ModelSerializer):
    """A definition version; its query is null for a user who may not read every one of
    its sources (the context's `hidden`: version ids)."""

    created_by = serializers.CharField(
        source="created_by.username", read_only=True, allow_null=True, default=None
    )
    is_current = serializers.SerializerMethodField()
    query = serializers.SerializerMethodField()
    expectations = serializers.SerializerMethodField()

    class Meta:
        model = MaterializedTableVersion
        fields = [
            "version_id",
            "query",
            "expectations",
            "default_namespace",
            "sources",
            "schema_id",
            "created_at",
            "created_by",
            "is_current",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_query(self, version: MaterializedTableVersion) -> str | None:
        """The version's query; null when hidden from the user."""
        return None if version.version_id in self.context.get("hidden", ()) else version.query

    @extend_schema_field(ExpectationSerializer(many=True))
    def get_expectations(self, version: MaterializedTableVersion) -> list[dict[str, Any]]:
        """The version's expectations; each condition null when its query is hidden."""
        hidden = version.version_id in self.context.get("hidden", ())
        return [
            {**row, "condition": None if hidden else row["condition"]}
            for row in version.expectations
        ]

    def get_is_current(self, version: MaterializedTableVersion) -> bool:
        current = self.context.get("current_version")
        return version.version_id == current


class MaterializedTableVersionsSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    name = serializers.CharField()
    current_version = serializers.IntegerField()
    versions = MaterializedTableVersionSerializer(many=True, help_text="Newest first.")
    log = VersionLogEntrySerializer(
        many=True,
        help_text="Each version asked to become current and whether it did, newest first.",
    )


# -- lineage ------------------------------------------------------------------------------


class LineageNodeSerializer(serializers.Serializer):
    id = serializers.CharField(help_text='"namespace.name"')
    namespace = serializers.CharField()
    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=["table", "view", "materialized table", "unknown"])
    url = serializers.CharField(allow_null=True, help_text="Its page; null when unknown.")
    focus = serializers.BooleanField(help_text="The object asked about.")
    state = serializers.CharField(required=False, help_text="Materialized tables only.")
    refresh_mode = serializers.CharField(required=False)
    freshness = serializers.CharField(required=False)
    freshness_seconds = serializers.IntegerField(required=False)
    lag_seconds = serializers.FloatField(required=False, allow_null=True)
    late = serializers.BooleanField(required=False, help_text="Lag beyond the freshness.")
    more_readers = serializers.IntegerField(
        required=False,
        help_text="Readers the user may see that the graph does not draw (it draws at most "
        "`fanout` of an object's readers); only on a node whose readers were cut.",
    )
    more_readers_at_least = serializers.BooleanField(
        required=False,
        help_text="The count of the readers stopped there: there are at least that many more.",
    )
    readers_url = serializers.CharField(
        required=False, help_text="The page listing every reader, a page at a time."
    )
    more_sources = serializers.IntegerField(
        required=False,
        help_text="Sources the user may see that the graph does not draw (at most `fanout`).",
    )


class LineageEdgeSerializer(serializers.Serializer):
    source = serializers.CharField(help_text="The object read.")
    target = serializers.CharField(help_text="The object reading it.")


class LineageSerializer(serializers.Serializer):
    focus = serializers.CharField()
    nodes = LineageNodeSerializer(many=True)
    edges = LineageEdgeSerializer(many=True)
    truncated = serializers.BooleanField(
        help_text="The walk stopped at its depth or node limit before the end, or left out "
        "readers or sources of an object beyond `fanout` (counted on its node)."
    )
    fanout = serializers.IntegerField(
        help_text="The most readers, and sources, of one object the graph draws."
    )


class QueryColumnSerializer(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.CharField(help_text="Spark SQL's type name.")


class QuerySerializer(serializers.ModelSerializer):
    """One query of a user's history, with its kept result's links while it is kept."""

    requested_by = serializers.CharField(source="requested_by.username", read_only=True)
    state = serializers.SerializerMethodField(help_text=", ".join(Query.State.values))
    error = serializers.SerializerMethodField()
    columns = QueryColumnSerializer(many=True, read_only=True)
    duration_seconds = serializers.FloatField(read_only=True, allow_null=True)
    cut_message = serializers.SerializerMethodField()
    kept = serializers.SerializerMethodField(help_text="Whether its rows can still be read.")
    job = serializers.IntegerField(source="job_id", read_only=True, allow_null=True)
    url = serializers.SerializerMethodField()
    rows_url = serializers.SerializerMethodField()
    csv_url = serializers.SerializerMethodField()
    parquet_url = serializers.SerializerMethodField()
    run_url = serializers.SerializerMethodField()
    job_cancel_url = serializers.SerializerMethodField()

    class Meta:
        model = Query
        fields = [
            "id",
            "kind",
            "sql",
            "namespace",
            "state",
            "requested_by",
            "created_at",
            "started_at",
            "finished_at",
            "duration_seconds",
            "columns",
            "row_count",
            "cut",
            "cut_message",
            "error",
            "kept",
            "expires_at",
            "job",
            "url",
            "rows_url",
            "csv_url",
            "parquet_url",
            "run_url",
            "job_cancel_url",
        ]
        read_only_fields = fields

    def get_state(self, query: Query) -> str:
        return queries.state_of(query)[0]

    def get_error(self, query: Query) -> dict | None:
        return queries.state_of(query)[1]

    def get_cut_message(self, query: Query) -> str | None:
        return queries.cut_message(query)

    def get_kept(self, query: Query) -> bool:
        return queries.kept(query)

    def get_url(self, query: Query) -> str:
        return queries.summary(query)["url"]

    def get_rows_url(self, query: Query) -> str | None:
        return queries.summary(query)["rows_url"]

    def get_csv_url(self, query: Query) -> str | None:
        return queries.summary(query)["csv_url"] if queries.kept(query) else None

    def get_parquet_url(self, query: Query) -> str | None:
        return queries.summary(query)["parquet_url"] if queries.kept(query) else None

    def get_run_url(self, query: Query) -> str:
        return reverse("api:query-run", kwargs={"query_id": query.pk})

    def get_job_cancel_url(self, query: Query) -> str | None:
        if query.job_id is None:
            return None
        return reverse("api:job-cancel", kwargs={"job_id": query.job_id})


class QueryRowsSerializer(serializers.Serializer):
    query = serializers.IntegerField(allow_null=True)
    state = serializers.CharField()
    kind = serializers.CharField(allow_null=True)
    columns = QueryColumnSerializer(many=True)
    offset = serializers.IntegerField()
    limit = serializers.IntegerField()
    rows = serializers.ListField(child=serializers.ListField())
    row_count = serializers.IntegerField(help_text="Rows kept so far (all, once complete).")
    complete = serializers.BooleanField(help_text="False while the query waits or runs.")
    cut = serializers.CharField(allow_null=True, help_text='"rows" or "bytes": which bound cut it')
    cut_message = serializers.CharField(allow_null=True)
    duration_seconds = serializers.FloatField(allow_null=True)
    error = serializers.DictField(allow_null=True)
