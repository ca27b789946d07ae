"""Reads of materialized tables and their runs, for pages, the API and the console."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import OuterRef, QuerySet, Subquery
from django.utils import timezone

from catalog.core.errors import NotFound
from refresh.core.freshness import RefreshMode, next_schedule_times
from refresh.models import MaterializedTable, RefreshRun


class NoSuchMaterializedTable(NotFound):
    iceberg_type = "NoSuchTableException"


class NoSuchJob(NotFound):
    pass


def materialized_tables(
    namespace: str | None = None, *, with_freshness: bool = False
) -> QuerySet[MaterializedTable]:
    """Materialized tables by name; `with_freshness` annotates each with its last finished
    run and the time its data is as of, in the same query (lists show them for every row)."""
    queryset = MaterializedTable.objects.select_related("table__namespace", "periodic_task")
    if namespace:
        queryset = queryset.filter(table__namespace__name=namespace)
    if with_freshness:
        finished = RefreshRun.objects.filter(
            materialized_table=OuterRef("pk"), state__in=RefreshRun.FINISHED
        ).order_by("-queued_at", "-id")
        current = RefreshRun.objects.filter(
            materialized_table=OuterRef("pk"),
            state__in=[RefreshRun.State.SUCCEEDED, RefreshRun.State.SKIPPED],
            data_timestamp__isnull=False,
        ).order_by("-data_timestamp")
        queryset = queryset.annotate(
            last_run_id=Subquery(finished.values("pk")[:1]),
            last_run_state=Subquery(finished.values("state")[:1]),
            last_run_finished_at=Subquery(finished.values("finished_at")[:1]),
            runs_data_as_of=Subquery(current.values("data_timestamp")[:1]),
        )
    return queryset.order_by("table__namespace__name", "table__name")


def get_materialized_table(namespace: str, name: str) -> MaterializedTable:
    mt = materialized_tables(namespace).filter(table__name=name).first()
    if mt is None:
        raise NoSuchMaterializedTable(
            f"Materialized table does not exist: {namespace}.{name}", field="name"
        )
    return mt


def get_run(run_id: int | str) -> RefreshRun:
    try:
        pk = int(str(run_id).strip("'\""))
    except ValueError:
        raise NoSuchJob(f"Job does not exist: {run_id}", field="job_id") from None
    run = RefreshRun.objects.select_related(
        "materialized_table__table__namespace", "requested_by", "cancel_requested_by"
    ).filter(pk=pk)
    found = run.first() if 0 < pk < 2**63 else None
    if found is None:
        raise NoSuchJob(f"Job does not exist: {run_id}", field="job_id")
    return found


def runs(mt: MaterializedTable) -> QuerySet[RefreshRun]:
    return mt.runs.select_related("requested_by", "cancel_requested_by").order_by(
        "-queued_at", "-id"
    )


def with_last_runs(tables: list[MaterializedTable]) -> list[MaterializedTable]:
    """Tables of `materialized_tables(with_freshness=True)`, each given its newest finished
    run whole (which `last_refresh` then answers with), read in one query for all of them."""
    ids = [mt.last_run_id for mt in tables if mt.last_run_id is not None]
    found = RefreshRun.objects.select_related("requested_by", "cancel_requested_by").in_bulk(ids)
    for mt in tables:
        run = found.get(mt.last_run_id)
        if run is not None:
            run.materialized_table = mt
        mt.last_finished_run = run
    return tables


def last_refresh(mt: MaterializedTable) -> RefreshRun | None:
    """The newest finished run (of any outcome); from `with_last_runs` or the annotations of
    `materialized_tables(with_freshness=True)` when present (id, state, finish only)."""
    if hasattr(mt, "last_finished_run"):
        return mt.last_finished_run
    if hasattr(mt, "last_run_id"):
        if mt.last_run_id is None:
            return None
        return RefreshRun(
            pk=mt.last_run_id, state=mt.last_run_state, finished_at=mt.last_run_finished_at
        )
    return runs(mt).filter(state__in=RefreshRun.FINISHED).first()


def data_timestamp(mt: MaterializedTable) -> datetime | None:
    """What the table's data is as of: the newest successful or skipped (confirmed
    current) run's data timestamp; for a continuous table also the last moment its stream
    was caught up with its sources."""
    if hasattr(mt, "runs_data_as_of"):
        moments = [m for m in (mt.runs_data_as_of, _caught_up(mt)) if m is not None]
        return max(moments) if moments else None
    from_runs = (
        mt.runs.filter(
            state__in=[RefreshRun.State.SUCCEEDED, RefreshRun.State.SKIPPED],
            data_timestamp__isnull=False,
        )
        .order_by("-data_timestamp")
        .values_list("data_timestamp", flat=True)
        .first()
    )
    moments = [m for m in (from_runs, _caught_up(mt)) if m is not None]
    return max(moments) if moments else None


def _caught_up(mt: MaterializedTable) -> datetime | None:
    if mt.refresh_mode != RefreshMode.CONTINUOUS or mt.stream_status != "RUNNING":
        return None
    return mt.stream_heartbeat_at


def lag(
    mt: MaterializedTable, now: datetime | None = None, *, as_of: Any = ...
) -> timedelta | None:
    """Now minus the time of the data of the last successful refresh (None before one);
    `as_of`: the table's data timestamp when the caller has read it already."""
    if as_of is ...:
        as_of = data_timestamp(mt)
    if as_of is None:
        return None
    return max((now or timezone.now()) - as_of, timedelta(0))


def next_run(mt: MaterializedTable, now: datetime | None = None) -> datetime | None:
    """The next planned tick of an active FULL table."""
    if mt.state != MaterializedTable.State.ACTIVATED or mt.refresh_mode != RefreshMode.FULL:
        return None
    return next_schedule_times(now or timezone.now(), mt.freshness)[0]


def lag_series(mt: MaterializedTable, limit: int = 200) -> list[dict]:
    """Lag over time, as a sawtooth: at each run's end, the lag just before it (from the
    previous data timestamp) and just after it (from its own), in seconds."""
    finished = list(
        mt.runs.filter(
            state__in=[RefreshRun.State.SUCCEEDED, RefreshRun.State.SKIPPED],
            data_timestamp__isnull=False,
            finished_at__isnull=False,
        )
        .order_by("-finished_at")
        .values("finished_at", "data_timestamp")[:limit]
    )
    finished.reverse()
    points: list[dict] = []
    previous = None
    for row in finished:
        at = row["finished_at"]
        if previous is not None:
            points.append({"t": at.isoformat(), "lag": (at - previous).total_seconds()})
        points.append({"t": at.isoformat(), "lag": (at - row["data_timestamp"]).total_seconds()})
        previous = row["data_timestamp"]
    return points


def duration_series(mt: MaterializedTable, limit: int = 200) -> list[dict]:
    """Each finished run's duration in seconds, oldest first."""
    rows = list(
        mt.runs.filter(started_at__isnull=False, finished_at__isnull=False)
        .order_by("-finished_at")
        .values("id", "state", "action", "started_at", "finished_at")[:limit]
    )
    rows.reverse()
    return [
        {
            "id": row["id"],
            "t": row["finished_at"].isoformat(),
            "seconds": (row["finished_at"] - row["started_at"]).total_seconds(),
            "state": row["state"],
            "action": row["action"],
        }
        for row in rows
    ]


def current_snapshot(table_id: int) -> tuple[int | None, dict]:
    """A table's current snapshot id and its summary, from the catalog's mirror (a commit
    that came through the REST catalog was mirrored before the commit answered): what a
    refresh or a micro-batch records of the commit it made, without asking Spark."""
    from catalog.models import Table, TableSnapshot

    snapshot_id = Table.objects.filter(pk=table_id).values_list("current_snapshot_id", flat=True)[0]
    if snapshot_id is None:
        return None, {}
    summary = (
        TableSnapshot.objects.filter(table_id=table_id, snapshot_id=snapshot_id)
        .values_list("summary", flat=True)
        .first()
    )
    return snapshot_id, summary or {}


def written(summary: dict) -> dict[str, int | None]:
    """The rows and bytes a commit added, from its snapshot summary, as RefreshRun fields."""

    def number(key: str) -> int | None:
        value = summary.get(key)
        return int(value) if value is not None else None

    return {
        "rows_written": number("added-records"),
        "bytes_written": number("added-files-size"),
    }


def snapshots_with_refresh_state(
    mt: MaterializedTable, *, limit: int
) -> list[tuple[int, dict[str, str]]]:
    """(snapshot id, summary) of the table's newest `limit` snapshots whose summary records
    a refresh state that reads (refresh.core.refresh_state), newest first, from the mirror."""
    from catalog.models import TableSnapshot
    from refresh.core.refresh_state import REFRESH_STATE, read

    found: list[tuple[int, dict[str, str]]] = []
    rows = (
        TableSnapshot.objects.filter(table_id=mt.table_id, summary__has_key=REFRESH_STATE)
        .order_by("-timestamp_ms", "-sequence_number", "-snapshot_id")
        .values_list("snapshot_id", "summary")
    )
    for snapshot_id, summary in rows.iterator():
        if read(summary) is not None:
            found.append((snapshot_id, summary))
            if len(found) == limit:
                break
    return found


def verifications(mt: MaterializedTable) -> QuerySet:
    """The table's verifications, newest first."""
    return mt.verifications.select_related("requested_by").order_by("-verified_at", "-id")


def current_answer(mt: MaterializedTable, now: datetime | None = None) -> dict[str, Any] | None:
    """What the table's current snapshot says it answers (its refresh state), for its page:
    the definition version, the partition a partition refresh wrote, and each source's
    snapshot with when it was committed, how old it was at `now` and whether the source
    has moved on since; or a person's change; None without a current snapshot."""
    from catalog.models import Table, TableSnapshot
    from refresh.core.refresh_state import CHANGE, CHANGED_BY, read, read_partition

    snapshot_id, summary = current_snapshot(mt.table_id)
    if snapshot_id is None:
        return None
    now = now or timezone.now()
    answer: dict[str, Any] = {"snapshot_id": snapshot_id, "state": None, "sources": []}
    if summary.get(CHANGE) == "user":
        answer["changed_by"] = summary.get(CHANGED_BY, "?")
    state = read(summary)
    if state is None:
        return answer
    answer["state"] = state
    answer["partition"] = read_partition(summary)
    for source in state.source_states:
        table = (
            Table.objects.filter(namespace__name=".".join(source.namespace), name=source.name)
            .values("pk", "current_snapshot_id")
            .first()
        )
        committed = None
        if table is not None and source.snapshot_id is not None:
            stamp = (
                TableSnapshot.objects.filter(table_id=table["pk"], snapshot_id=source.snapshot_id)
                .values_list("timestamp_ms", flat=True)
                .first()
            )
            if stamp is not None:
                committed = datetime.fromtimestamp(stamp / 1000, tz=UTC)
        answer["sources"].append(
            {
                "name": source.qualified,
                "snapshot_id": source.snapshot_id,
                "committed_at": committed,
                "age_seconds": (now - committed).total_seconds() if committed else None,
                "moved_on": table is not None
                and table["current_snapshot_id"] != source.snapshot_id,
            }
        )
    return answer
