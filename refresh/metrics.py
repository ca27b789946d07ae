"""What GET /metrics reads from the database at each scrape (infra/metrics.py's
COLLECTORS; refresh/apps.py registers `collect`): each materialized table's lag and
freshness, the refresh runs, Spark jobs and maintenance runs queued or running, and the
live streaming hosts.

Two queries whatever the number of tables, each built and compiled once (catalog.prepared):
one row per materialized table (its data time and its queued and running runs, from the
runs' per-table indexes), and one UNION ALL of the other counts."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from functools import cache

from django.db.models import Count, IntegerField, OuterRef, Subquery, TextField, Value
from django.db.models.functions import Coalesce
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric

from catalog.models import SparkJob
from catalog.prepared import Prepared
from maintenance.core.policy import Action
from maintenance.models import MaintenanceRun
from refresh import stream_hosts
from refresh.core.freshness import Freshness, RefreshMode, TimeUnit
from refresh.models import MaterializedTable, RefreshRun, StreamHost


def _active(state: str) -> Coalesce:
    counted = (
        RefreshRun.objects.filter(materialized_table=OuterRef("pk"), state=state)
        .order_by()
        .values("materialized_table")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


def _tables() -> object:
    data_as_of = RefreshRun.objects.filter(
        materialized_table=OuterRef("pk"),
        state__in=[RefreshRun.State.SUCCEEDED, RefreshRun.State.SKIPPED],
        data_timestamp__isnull=False,
    ).order_by("-data_timestamp")
    return (
        MaterializedTable.objects.annotate(
            runs_data_as_of=Subquery(data_as_of.values("data_timestamp")[:1]),
            queued=_active(RefreshRun.State.QUEUED),
            running=_active(RefreshRun.State.RUNNING),
        )
        .order_by()
        .values_list(
            "table__namespace__name",
            "table__name",
            "freshness_value",
            "freshness_unit",
            "refresh_mode",
            "state",
            "stream_status",
            "stream_heartbeat_at",
            "runs_data_as_of",
            "queued",
            "running",
        )
    )


#: A sample marking where each scrape's cutoff goes (catalog.prepared).
_CUTOFF = datetime(1970, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def _counts(live_after: datetime) -> object:
    """(what, label, state, count): Spark jobs by kind, maintenance runs by action, both
    queued or running; streaming hosts that beat after `live_after`."""

    def text(value: str) -> Value:
        return Value(value, output_field=TextField())

    jobs = (
        SparkJob.objects.filter(state__in=SparkJob.ACTIVE)
        .order_by()
        .annotate(what=text("job"), label=text(""))
        .values_list("what", "label", "state")
        .annotate(n=Count("pk"))
    )
    maintenance = (
        MaintenanceRun.objects.filter(state__in=MaintenanceRun.ACTIVE)
        .order_by()
        .annotate(what=text("maintenance"))
        .values_list("what", "action", "state")
        .annotate(n=Count("pk"))
    )
    hosts = (
        StreamHost.objects.filter(heartbeat_at__gt=live_after)
        .order_by()
        .annotate(what=text("host"), label=text(""), alive=text("LIVE"))
        .values_list("what", "label", "alive")
        .annotate(n=Count("pk"))
    )
    return jobs.union(maintenance, hosts, all=True)


_TABLES = Prepared(_tables)
_COUNTS = Prepared(_counts, live_after=_CUTOFF)


@cache
def _freshness_seconds(value: int, unit: str) -> float | None:
    try:
        return Freshness(value, TimeUnit(unit)).to_timedelta().total_seconds()
    except (ValueError, OverflowError):
        return None


def collect(now: datetime | None = None) -> Iterable[Metric]:
    now = now or timezone.now()
    lag = GaugeMetricFamily(
        "lakeview_materialized_table_lag_seconds",
        "Now minus the time the materialized table's data is as of (tables with data).",
        labels=["table"],
    )
    freshness = GaugeMetricFamily(
        "lakeview_materialized_table_freshness_seconds",
        "The materialized table's FRESHNESS: the lag it should stay under.",
        labels=["table"],
    )
    tables: dict[tuple[str, str], int] = {}
    runs = {RefreshRun.State.QUEUED: 0, RefreshRun.State.RUNNING: 0}
    for row in _TABLES.rows():
        namespace, name, value, unit, mode, state, stream, beat_at, as_of, queued, running = row
        label = f"{namespace}.{name}"
        seconds = _freshness_seconds(value, unit)
        if seconds is not None:
            freshness.add_metric([label], seconds)
        caught_up = beat_at if mode == RefreshMode.CONTINUOUS and stream == "RUNNING" else None
        moments = [m for m in (as_of, caught_up) if m is not None]
        if moments:
            lag.add_metric([label], max((now - max(moments)).total_seconds(), 0.0))
        tables[(state, mode)] = tables.get((state, mode), 0) + 1
        runs[RefreshRun.State.QUEUED] += queued
        runs[RefreshRun.State.RUNNING] += running
    yield lag
    yield freshness

    counted = GaugeMetricFamily(
        "lakeview_materialized_tables",
        "Materialized tables by state and refresh mode.",
        labels=["state", "mode"],
    )
    for (state, mode), n in sorted(tables.items()):
        counted.add_metric([state, mode], n)
    yield counted

    active = GaugeMetricFamily(
        "lakeview_refresh_runs_in_progress",
        "Refresh runs queued or running.",
        labels=["state"],
    )
    for state, n in runs.items():
        active.add_metric([state], n)
    yield active

    live_after = now - timedelta(seconds=stream_hosts.lease_seconds())
    jobs = {str(state): 0 for state in SparkJob.ACTIVE}
    maintenance = {(str(a), s): 0 for a in Action for s in MaintenanceRun.ACTIVE}
    hosts = 0
    for what, label, state, n in _COUNTS.rows(live_after=live_after):
        if what == "job":
            jobs[state] = jobs.get(state, 0) + n
        elif what == "maintenance":
            maintenance[(label, state)] = maintenance.get((label, state), 0) + n
        else:
            hosts += n
    spark = GaugeMetricFamily(
        "lakeview_spark_jobs_in_progress",
        "Spark jobs (previews, console queries and statements...) queued or running.",
        labels=["state"],
    )
    for state, n in sorted(jobs.items()):
        spark.add_metric([state], n)
    yield spark
    runs_of_maintenance = GaugeMetricFamily(
        "lakeview_maintenance_runs_in_progress",
        "Table maintenance runs queued or running, by action.",
        labels=["action", "state"],
    )
    for (action, state), n in sorted(maintenance.items()):
        runs_of_maintenance.add_metric([action, state], n)
    yield runs_of_maintenance
    yield GaugeMetricFamily(
        "lakeview_streaming_hosts_alive",
        "Streaming hosts (manage.py run_streams) whose heartbeat is within their lease.",
        value=hosts,
    )
