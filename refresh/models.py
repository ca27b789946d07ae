"""Materialized tables (FLIP-435) and their refresh runs.

A materialized table's data is an ordinary Iceberg table of the catalog (`catalog.Table`, at
the materialized table's own name), so every engine reads it through /iceberg and every
write to it goes through the catalog's one commit path. This row keeps what Flink keeps for
it: the definition (query, freshness, mode, options), the state, and the schedule."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from infra.runs import Run
from refresh.core.freshness import Freshness, RefreshMode, TimeUnit


class MaterializedTable(models.Model):
    class State(models.TextChoices):
        INITIALIZING = "INITIALIZING"
        ACTIVATED = "ACTIVATED"
        SUSPENDED = "SUSPENDED"

    table = models.OneToOneField(
        "catalog.Table", on_delete=models.CASCADE, related_name="materialized"
    )
    #: The query after AS, in Spark's dialect, as the user wrote it.
    query = models.TextField()
    #: Names in the query resolve against this namespace (the statement's qualifier, or the
    #: console's), in the catalog's own Spark session: the query means what it meant at
    #: CREATE even if the table is later renamed.
    default_namespace = models.TextField(default="")
    #: ["ns.name", ...]: the tables, views and materialized tables the query names, to find
    #: what reads a table before it is dropped.
    sources = models.JSONField(default=list, blank=True)
    freshness_value = models.PositiveIntegerField()
    freshness_unit = models.CharField(max_length=8, choices=[(u, u) for u in TimeUnit])
    refresh_mode = models.CharField(max_length=16, choices=[(m, m) for m in RefreshMode])
    #: REFRESH_MODE was given: a new freshness does not change the mode then (Flink).
    mode_is_explicit = models.BooleanField(default=False)
    state = models.CharField(max_length=16, choices=State.choices, default=State.INITIALIZING)
    options = models.JSONField(default=dict, blank=True)
    primary_key = models.JSONField(default=list, blank=True)
    constraint_name = models.TextField(blank=True, default="")
    partitioned_by = models.JSONField(default=list, blank=True)
    comment = models.TextField(blank=True, default="")
    #: [{"name", "condition", "on_violation"}]: the current definition's expectations
    #: (refresh.core.expectations), in the order written.
    expectations = models.JSONField(default=list, blank=True)
    #: Why the table suspended itself (failed refreshes), shown on its page.
    suspended_reason = models.TextField(blank=True, default="")
    consecutive_failures = models.PositiveIntegerField(default=0)
    #: The full-refresh schedule (refresh/schedules.py is the only writer).
    periodic_task = models.OneToOneField(
        PeriodicTask, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    #: The definition version in force (MaterializedTableVersion.version_id).
    current_version = models.PositiveIntegerField(default=1)
    #: CONTINUOUS tables: what the streaming process last said of the table's query
    #: (refresh.streams is the only writer), and when.
    stream_status = models.CharField(max_length=16, blank=True, default="")
    stream_error = models.TextField(blank=True, default="")
    stream_heartbeat_at = models.DateTimeField(null=True, blank=True)
    #: The checkpoint the table's streaming query resumes from; empty means the streaming
    #: process loads the table first (CREATE, a recompute, a new definition, FULL to
    #: CONTINUOUS) and starts a new one.
    stream_checkpoint = models.TextField(blank=True, default="")
    #: {"ns.name": [snapshot id, timestamp ms]}: the source snapshots the last load read;
    #: a new stream starts strictly after them.
    stream_start = models.JSONField(default=dict, blank=True)
    #: RESUME WITH's options for the streaming query (until the next SUSPEND).
    stream_options = models.JSONField(default=dict, blank=True)
    #: CONTINUOUS tables: the streaming host that holds the table's lease (only it runs the
    #: table's query), since when it holds it, and until when the lease is valid unless
    #: renewed (refresh.stream_hosts: claims are conditional updates on these three).
    stream_host = models.ForeignKey(
        "StreamHost", null=True, blank=True, on_delete=models.SET_NULL, related_name="tables"
    )
    stream_host_since = models.DateTimeField(null=True, blank=True)
    stream_lease_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["table__namespace__name", "table__name"]

    def __str__(self) -> str:
        return str(self.table)

    @property
    def freshness(self) -> Freshness:
        return Freshness(self.freshness_value, TimeUnit(self.freshness_unit))


class StreamHost(models.Model):
    """One streaming process (`manage.py run_streams`) while it lives: it beats every
    `STREAM_LEASE_SECONDS / 3` and is live while its last beat is younger than
    `STREAM_LEASE_SECONDS`. A process that stops cleanly deletes its row (its tables' leases
    go free with it); a dead one's row is deleted by the live hosts later."""

    #: Unique per process: a restarted process on the same host and pid is another host.
    token = models.UUIDField(unique=True, default=uuid.uuid4, editable=False)
    #: "hostname:pid", shown on the tables' pages.
    name = models.TextField()
    started_at = models.DateTimeField(default=timezone.now)
    heartbeat_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["started_at", "id"]

    def __str__(self) -> str:
        return self.name


class MaterializedTableVersion(models.Model):
    """One definition of a materialized table (its query), as a view keeps versions: made by
    CREATE and by ALTER ... AS; a rollback makes an older one current again."""

    materialized_table = models.ForeignKey(
        MaterializedTable, on_delete=models.CASCADE, related_name="versions"
    )
    version_id = models.PositiveIntegerField()
    query = models.TextField()
    default_namespace = models.TextField()
    sources = models.JSONField(default=list, blank=True)
    #: The Iceberg schema id the table had with this definition.
    schema_id = models.IntegerField(null=True, blank=True)
    #: {column: {"comment": str or None, "not_null": bool}} a CREATE OR ALTER's schema part
    #: declared with this query: set on the rebuilt schema, whose REPLACE TABLE drops docs
    #: and NOT NULL (columns not declared keep the comments they had).
    declared_columns = models.JSONField(default=dict, blank=True)
    #: The expectations of this definition (as MaterializedTable.expectations).
    expectations = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["materialized_table", "version_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["materialized_table", "version_id"], name="one_definition_per_version_id"
            )
        ]

    def __str__(self) -> str:
        return f"version {self.version_id} of {self.materialized_table}"


class MaterializedTableVersionLogEntry(models.Model):
    """A definition version asked to become current (CREATE, ALTER ... AS, a rollback) and
    whether it did: an ALTER or a rollback is PENDING until its rebuild commits the new
    schema and rows in one Iceberg commit (APPLIED), or FAILED with the rebuild's error,
    the table left as it was."""

    class Outcome(models.TextChoices):
        PENDING = "PENDING"
        APPLIED = "APPLIED"
        FAILED = "FAILED"

    materialized_table = models.ForeignKey(
        MaterializedTable, on_delete=models.CASCADE, related_name="version_log"
    )
    version_id = models.PositiveIntegerField()
    timestamp = models.DateTimeField(default=timezone.now)
    #: "create", "alter" or "rollback".
    operation = models.CharField(max_length=16)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    outcome = models.CharField(max_length=8, choices=Outcome.choices, default=Outcome.APPLIED)
    #: The rebuild that applies it (ALTER ... AS, a rollback).
    run = models.ForeignKey(
        "RefreshRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    error = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["materialized_table", "timestamp", "id"]

    def __str__(self) -> str:
        return f"{self.operation}: version {self.version_id} at {self.timestamp:%Y-%m-%d %H:%M:%S}"


class RefreshRun(Run):
    """One refresh: a run (infra.runs: queued, claimed by one worker with a conditional
    update, finished). The history of a materialized table, as Snowflake's refresh history
    shows it."""

    class Trigger(models.TextChoices):
        CREATE = "CREATE"
        SCHEDULED = "SCHEDULED"
        MANUAL = "MANUAL"
        API = "API"
        #: A micro-batch of the streaming query (part 2).
        CONTINUOUS = "CONTINUOUS"
        #: ALTER ... AS or a rollback: builds `definition_version` and swaps it in, schema
        #: and rows in one commit.
        REBUILD = "REBUILD"

    class Action(models.TextChoices):
        FULL = "FULL"
        PARTITION = "PARTITION"
        NO_DATA = "NO_DATA"
        #: A micro-batch: the rows the sources' new snapshots bring.
        INCREMENTAL = "INCREMENTAL"

    class State(models.TextChoices):
        QUEUED = "QUEUED"
        RUNNING = "RUNNING"
        SUCCEEDED = "SUCCEEDED"
        FAILED = "FAILED"
        #: A scheduled tick with nothing to do (NO_DATA), or whose predecessor still ran.
        SKIPPED = "SKIPPED"
        CANCELLED = "CANCELLED"

    FINISHED = (State.SUCCEEDED, State.FAILED, State.SKIPPED, State.CANCELLED)

    materialized_table = models.ForeignKey(
        MaterializedTable, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    #: The table's name at the time: runs outlive a dropped table, as history does.
    table_name = models.TextField()
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    action = models.CharField(max_length=16, choices=Action.choices, blank=True, default="")
    #: Its own states: the run's, and SKIPPED.
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    #: The scheduler's planned tick (not the start): it decides the partition refreshed.
    schedule_time = models.DateTimeField(null=True, blank=True)
    partition = models.JSONField(default=dict, blank=True)
    #: Options for this run only (RESUME WITH, the API's dynamic options); never persisted
    #: on the table.
    options = models.JSONField(default=dict, blank=True)
    #: A manual refresh may run although no source changed.
    force = models.BooleanField(default=False)
    #: Recompute the whole query even when the sources only appended (the API's `full`).
    full = models.BooleanField(default=False)
    #: Why the run refreshed as it did (refresh.core.incremental): "incremental: 3 source
    #: snapshots appended 12,000 rows ...", "full: source s.orders had a delete ...".
    reason = models.TextField(blank=True, default="")
    rows_written = models.BigIntegerField(null=True, blank=True)
    bytes_written = models.BigIntegerField(null=True, blank=True)
    snapshot_id = models.BigIntegerField(null=True, blank=True)
    #: {source table: snapshot id} the run read, to decide the next run's NO_DATA skip.
    source_snapshots = models.JSONField(default=dict, blank=True)
    #: {expectation name: rows that violated it} for the rows the run computed (a FAIL
    #: UPDATE run that aborted has them too); {} when the table has none.
    expectations = models.JSONField(default=dict, blank=True)
    #: A micro-batch's id in its streaming query, and the source offsets it read up to.
    batch_id = models.BigIntegerField(null=True, blank=True)
    source_offsets = models.JSONField(default=dict, blank=True)
    #: Runs this row stands for: micro-batches (refresh.streams.batches.compact_history) and
    #: scheduled NO_DATA skips (runs.fold_skipped_runs) older than an hour are folded
    #: per table and hour, the first's start and the last's finish kept.
    batches = models.PositiveIntegerField(default=1)
    #: The definition version the run refreshed.
    definition_version = models.PositiveIntegerField(null=True, blank=True)
    #: The moment the data is as of: when the run read its sources (a skip confirms that the
    #: data is still current then). Lag is measured from it.
    data_timestamp = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-queued_at", "-id"]
        indexes = [
            models.Index(fields=["materialized_table", "state"]),
            # A table's runs newest first (its page, its last finished run in every list),
            # its data time, its finished runs for the charts: a walk of the table's newest
            # entries, however long its history.
            models.Index(
                fields=["materialized_table", "-queued_at", "-id"], name="refresh_run_newest"
            ),
            models.Index(
                fields=["materialized_table", "-data_timestamp"], name="refresh_run_data_time"
            ),
            models.Index(
                fields=["materialized_table", "-finished_at"], name="refresh_run_finished"
            ),
        ]
        constraints = [
            # One run per planned tick: a tick beat sent twice (a redelivery, two beats) is
            # one run.
            models.UniqueConstraint(
                fields=["materialized_table", "schedule_time"],
                condition=models.Q(trigger="SCHEDULED"),
                name="one_run_per_tick",
            )
        ]

    def __str__(self) -> str:
        return f"run {self.pk} of {self.table_name}: {self.state}"


class Verification(models.Model):
    """One snapshot of a materialized table checked against its query, recomputed by Spark
    over the source snapshots the snapshot's refresh state records (refresh.spark.verify):
    EXACT, DIFFERS (how many rows either way, and a sample), or UNVERIFIABLE with why (no
    refresh state, a source whose snapshot is gone). Kept with the table's history."""

    class Verdict(models.TextChoices):
        EXACT = "EXACT"
        DIFFERS = "DIFFERS"
        UNVERIFIABLE = "UNVERIFIABLE"

    materialized_table = models.ForeignKey(
        MaterializedTable, on_delete=models.CASCADE, related_name="verifications"
    )
    snapshot_id = models.BigIntegerField()
    #: The definition version and source snapshots the snapshot says it answers.
    definition_version = models.PositiveIntegerField(null=True, blank=True)
    source_snapshots = models.JSONField(default=dict, blank=True)
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    #: Rows the query gives that the table lacks, and rows the table holds that it does not.
    missing_rows = models.BigIntegerField(null=True, blank=True)
    extra_rows = models.BigIntegerField(null=True, blank=True)
    #: {"columns": [...], "missing": [[...]], "extra": [[...]]}: at most 20 rows of each.
    sample = models.JSONField(default=dict, blank=True)
    reason = models.TextField(blank=True, default="")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    verified_at = models.DateTimeField(default=timezone.now, db_index=True)
    seconds = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["-verified_at", "-id"]
        indexes = [models.Index(fields=["materialized_table", "-verified_at"])]

    def __str__(self) -> str:
        return f"snapshot {self.snapshot_id}: {self.verdict}"


class Query(models.Model):
    """One query a user ran from the console or POST /api/statements/ (a SELECT, DESCRIBE,
    SHOW COLUMNS or EXPLAIN): their history, and the pointer to its kept result (Parquet
    parts in `result_folder` under QUERY_RESULTS_DIR, refresh.core.results) until it expires.
    It runs inside a Spark job (`job`): the one a web request made when it met the query, or
    the one running the script the query is part of."""

    State = Run.State  # a run's states, though a query is not a Run row
    ACTIVE = (State.QUEUED, State.RUNNING)

    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+"
    )
    job = models.ForeignKey(
        "catalog.SparkJob",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="queries",
    )
    #: The statement's place in its script (0-based): a job's queries in order.
    statement_index = models.PositiveIntegerField(default=0)
    #: SELECT (any query), DESCRIBE, SHOW COLUMNS or EXPLAIN.
    kind = models.CharField(max_length=16, default="SELECT")
    sql = models.TextField()
    #: The console's namespace, where unqualified names resolved ("" for none).
    namespace = models.TextField(blank=True, default="")
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    #: [{"name", "type"}]: Spark's names and SQL types.
    columns = models.JSONField(default=list, blank=True)
    #: Row counts of the parts stored so far, in order (readable as soon as listed).
    parts = models.JSONField(default=list, blank=True)
    row_count = models.BigIntegerField(default=0)
    #: Bytes of the kept rows as Arrow holds them (what QUERY_RESULT_MAX_BYTES bounds).
    result_bytes = models.BigIntegerField(default=0)
    #: "" (all rows kept), "rows" or "bytes": which bound cut the result.
    cut = models.CharField(max_length=8, blank=True, default="")
    #: The folder of the kept result (random, under QUERY_RESULTS_DIR); "" once pruned.
    result_folder = models.CharField(max_length=64, blank=True, default="")
    expires_at = models.DateTimeField(null=True, blank=True)
    #: {"message", "type", "line", "column", "status"} when it failed.
    error = models.JSONField(null=True, blank=True)
    #: What its analyzed plan read, [[namespace levels..., name]], as `may_read` asked it:
    #: its kept result is read only by those who may still read all of it. None for a row
    #: whose reads were not recorded.
    reads = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["requested_by", "-created_at"]),
            models.Index(fields=["state", "expires_at"]),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["job", "statement_index"], name="one_query_per_statement_of_a_job"
            )
        ]

    def __str__(self) -> str:
        return f"query {self.pk} ({self.kind}): {self.state}"

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()
