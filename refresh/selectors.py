"""Reads of materialized tables and their runs, for pages, the API and the console."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any

from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from catalog.core.errors import NotFound
from catalog.prepared import Prepared, PreparedCount
from refresh.core.freshness import RefreshMode, next_schedule_times
from refresh.models import (
    MaterializedTable,
    MaterializedTableVersion,
    MaterializedTableVersionLogEntry,
    RefreshRun,
    Verification,
)


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


# Reads of one table's page and its lists, built and compiled once per backend
# (catalog.prepared): building and compiling took longer than running them. Sample values
# mark where each call's values go.
_NAMESPACE = "lakeview sample namespace"
_NAME = "lakeview sample name"
_ID = 7_654_321

_WITH_FRESHNESS = Prepared(
    lambda namespace: materialized_tables(namespace, with_freshness=True), namespace=_NAMESPACE
)


class ListedTables(Sequence):
    """`materialized_tables(namespace, with_freshness=True)` for a paginator: its length and
    each page read through queries compiled once (building the list's query, with its four
    subqueries, took longer than running it)."""

    def __init__(self, namespace: str, visible: Q | None = None) -> None:
        self.namespace = namespace
        #: Only the tables this condition holds (catalog.access.objects_condition on
        #: "table__"), read through queries built for it.
        self.visible = visible

    def _filtered(self) -> QuerySet[MaterializedTable]:
        listed = materialized_tables(self.namespace, with_freshness=True)
        return listed.filter(self.visible)

    @cached_property
    def _length(self) -> int:
        if self.visible is not None:
            return self._filtered().count()
        return _LISTED_COUNT.number(namespace=self.namespace)

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: Any) -> Any:
        if not isinstance(index, slice):
            return self[index : index + 1][0]
        start = index.start or 0
        stop = len(self) if index.stop is None else index.stop
        if stop <= start:
            return []
        if self.visible is not None:
            return list(self._filtered()[start:stop])
        return _WITH_FRESHNESS.objects(namespace=self.namespace, limit=stop - start, offset=start)


_BY_NAME = Prepared(
    lambda namespace, name: materialized_tables(namespace).filter(table__name=name)[:1],
    namespace=_NAMESPACE,
    name=_NAME,
)


def get_materialized_table(namespace: str, name: str) -> MaterializedTable:
    if namespace:
        found = _BY_NAME.objects(namespace=namespace, name=name)
        mt = found[0] if found else None
    else:
        mt = materialized_tables(namespace).filter(table__name=name).first()
    if mt is None:
        raise NoSuchMaterializedTable(
            f"Materialized table does not exist: {namespace}.{name}", field="name"
        )
    return mt


#: What a list of tables reads of each (`TablePages`).
_LISTED = (
    "pk",
    "table__namespace__name",
    "table__name",
    "state",
    "refresh_mode",
    "freshness_value",
    "freshness_unit",
    "mode_is_explicit",
    "comment",
    "updated_at",
    "stream_status",
    "stream_heartbeat_at",
    "last_run_id",
    "runs_data_as_of",
)
_LISTED_PAGE = Prepared(
    lambda namespace: materialized_tables(namespace, with_freshness=True).values_list(*_LISTED),
    namespace=_NAMESPACE,
)
_LISTED_COUNT = PreparedCount(
    lambda namespace: MaterializedTable.objects.filter(table__namespace__name=namespace),
    by="table__namespace_id",
    namespace=_NAMESPACE,
)


class TablePages:
    """A namespace's materialized tables as a paginator reads them (a count and a slice, as
    `materialized_tables(namespace, with_freshness=True)` orders them): unsaved instances
    holding what a list shows (`namespace_name`, `name`, the freshness annotations) and
    `last_run`, the values of their newest finished run's `fields` (or None), read in one
    more query."""

    ordered = True

    def __init__(self, namespace: str, fields: tuple[str, ...]) -> None:
        self.namespace = namespace
        self.fields = fields

    def count(self) -> int:
        return _LISTED_COUNT.number(namespace=self.namespace)

    def __getitem__(self, page: slice) -> list[MaterializedTable]:
        start = page.start or 0
        rows = _LISTED_PAGE.rows(namespace=self.namespace, limit=page.stop - start, offset=start)
        tables = []
        for row in rows:
            values = dict(zip(_LISTED, row, strict=True))
            mt = MaterializedTable(
                pk=values["pk"],
                **{key: values[key] for key in _LISTED[3:12]},
            )
            mt.namespace_name = values["table__namespace__name"]
            mt.name = values["table__name"]
            mt.last_run_id = values["last_run_id"]
            mt.runs_data_as_of = values["runs_data_as_of"]
            tables.append(mt)
        ids = [mt.last_run_id for mt in tables if mt.last_run_id is not None]
        runs = {}
        if ids:
            for row in RefreshRun.objects.filter(pk__in=ids).values_list(*self.fields):
                run = dict(zip(self.fields, row, strict=True))
                runs[run["pk"]] = run
        for mt in tables:
            mt.last_run = runs.get(mt.last_run_id)
        return tables


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


_RUN_COUNT = PreparedCount(
    lambda mt_id: RefreshRun.objects.filter(materialized_table_id=mt_id),
    by="materialized_table_id",
    mt_id=_ID,
)


def run_count(mt: MaterializedTable) -> int:
    """How many runs the table keeps (what `runs(mt).count()` answers)."""
    return _RUN_COUNT.number(mt_id=mt.pk)


#: What a table's page shows of each run (its history rows).
RUN_ROW_FIELDS = (
    "pk",
    "trigger",
    "definition_version",
    "requested_by__username",
    "action",
    "batches",
    "reason",
    "state",
    "error",
    "cancel_requested_at",
    "cancel_requested_by__username",
    "schedule_time",
    "partition",
    "queued_at",
    "started_at",
    "finished_at",
    "rows_written",
    "bytes_written",
    "snapshot_id",
    "expectations",
)
_RUN_ROWS: dict[tuple[str, ...], Prepared] = {}


def run_rows(
    mt: MaterializedTable, *, limit: int, offset: int = 0, fields: tuple[str, ...] = RUN_ROW_FIELDS
) -> list[dict[str, Any]]:
    """A page of the table's runs, newest first (as `runs`), as plain values of `fields`
    (who asked as usernames)."""
    prepared = _RUN_ROWS.get(fields)
    if prepared is None:
        prepared = _RUN_ROWS[fields] = Prepared(
            lambda mt_id: RefreshRun.objects.filter(materialized_table_id=mt_id)
            .order_by("-queued_at", "-id")
            .values_list(*fields),
            mt_id=_ID,
        )
    return [
        dict(zip(fields, row, strict=True))
        for row in prepared.rows(mt_id=mt.pk, limit=limit, offset=offset)
    ]


class RunPages:
    """A table's runs as a paginator reads them: a count and a slice of plain values of
    `fields`, each one compiled query (`run_count`, `run_rows`)."""

    ordered = True

    def __init__(self, mt: MaterializedTable, fields: tuple[str, ...] = RUN_ROW_FIELDS) -> None:
        self.mt = mt
        self.fields = fields

    def count(self) -> int:
        return run_count(self.mt)

    def __getitem__(self, page: slice) -> list[dict[str, Any]]:
        start = page.start or 0
        return run_rows(self.mt, limit=page.stop - start, offset=start, fields=self.fields)


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
    found = _LAST_FINISHED.objects(mt_id=mt.pk)
    return found[0] if found else None


_LAST_FINISHED = Prepared(
    lambda mt_id: RefreshRun.objects.filter(
        materialized_table_id=mt_id, state__in=RefreshRun.FINISHED
    )
    .select_related("requested_by", "cancel_requested_by")
    .order_by("-queued_at", "-id")[:1],
    mt_id=_ID,
)
_DATA_AS_OF = Prepared(
    lambda mt_id: RefreshRun.objects.filter(
        materialized_table_id=mt_id,
        state__in=[RefreshRun.State.SUCCEEDED, RefreshRun.State.SKIPPED],
        data_timestamp__isnull=False,
    )
    .order_by("-data_timestamp")
    .values_list("data_timestamp")[:1],
    mt_id=_ID,
)


def data_timestamp(mt: MaterializedTable) -> datetime | None:
    """What the table's data is as of: the newest successful or skipped (confirmed
    current) run's data timestamp; for a continuous table also the last moment its stream
    was caught up with its sources."""
    if hasattr(mt, "runs_data_as_of"):
        moments = [m for m in (mt.runs_data_as_of, _caught_up(mt)) if m is not None]
        return max(moments) if moments else None
    found = _DATA_AS_OF.rows(mt_id=mt.pk)
    from_runs = found[0][0] if found else None
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
    finished = _LAG_ROWS.rows(mt_id=mt.pk, limit=limit)
    finished.reverse()
    points: list[dict] = []
    previous = None
    for at, as_of in finished:
        t = at.isoformat()
        if previous is not None:
            points.append({"t": t, "lag": (at - previous).total_seconds()})
        points.append({"t": t, "lag": (at - as_of).total_seconds()})
        previous = as_of
    return points


_LAG_ROWS = Prepared(
    lambda mt_id: RefreshRun.objects.filter(
        materialized_table_id=mt_id,
        state__in=[RefreshRun.State.SUCCEEDED, RefreshRun.State.SKIPPED],
        data_timestamp__isnull=False,
        finished_at__isnull=False,
    )
    .order_by("-finished_at")
    .values_list("finished_at", "data_timestamp"),
    mt_id=_ID,
)
_DURATION_ROWS = Prepared(
    lambda mt_id: RefreshRun.objects.filter(
        materialized_table_id=mt_id, started_at__isnull=False, finished_at__isnull=False
    )
    .order_by("-finished_at")
    .values_list("id", "state", "action", "started_at", "finished_at"),
    mt_id=_ID,
)


def expectation_series(mt: MaterializedTable, limit: int = 200) -> dict[str, list]:
    """Each expectation's violating rows per finished run that counted them, oldest first:
    {"names": the current expectations' names then any others counted, "points": [{"t",
    "counts": {name: rows}}]}."""
    rows = list(
        RefreshRun.objects.filter(materialized_table_id=mt.pk, finished_at__isnull=False)
        .order_by("-finished_at")
        .values_list("finished_at", "expectations")[:limit]
    )
    rows.reverse()
    points = [{"t": at.isoformat(), "counts": counts} for at, counts in rows if counts]
    names = [row["name"] for row in mt.expectations]
    for point in points:
        names += [name for name in point["counts"] if name not in names]
    return {"names": names, "points": points}


def has_chart_points(mt: MaterializedTable) -> bool:
    """Whether `duration_series` or `lag_series` has a point: whether a run has finished."""
    return bool(_DURATION_ROWS.rows(mt_id=mt.pk, limit=1) or _LAG_ROWS.rows(mt_id=mt.pk, limit=1))


def duration_series(mt: MaterializedTable, limit: int = 200) -> list[dict]:
    """Each finished run's duration in seconds, oldest first."""
    rows = _DURATION_ROWS.rows(mt_id=mt.pk, limit=limit)
    rows.reverse()
    return [
        {
            "id": pk,
            "t": finished.isoformat(),
            "seconds": (finished - started).total_seconds(),
            "state": state,
            "action": action,
        }
        for pk, state, action, started, finished in rows
    ]


def current_snapshot(table_id: int) -> tuple[int | None, dict]:
    """A table's current snapshot id and its summary, from the catalog's mirror (a commit
    that came through the REST catalog was mirrored before the commit answered): what a
    refresh or a micro-batch records of the commit it made, without asking Spark."""

    [(snapshot_id, summary)] = _CURRENT_SNAPSHOT.rows(table_id=table_id)
    if snapshot_id is None:
        return None, {}
    return snapshot_id, summary or {}


def _current_snapshot(table_id: int) -> QuerySet:
    from catalog.models import Table, TableSnapshot

    summary = TableSnapshot.objects.filter(
        table_id=OuterRef("pk"), snapshot_id=OuterRef("current_snapshot_id")
    ).values("summary")[:1]
    return (
        Table.objects.filter(pk=table_id)
        .annotate(current_summary=Subquery(summary))
        .values_list("current_snapshot_id", "current_summary")
    )


_CURRENT_SNAPSHOT = Prepared(_current_snapshot, table_id=_ID)


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


_VERIFICATIONS = Prepared(
    lambda mt_id: Verification.objects.filter(materialized_table_id=mt_id)
    .select_related("requested_by")
    .order_by("-verified_at", "-id"),
    mt_id=_ID,
)


def latest_verifications(mt: MaterializedTable, limit: int) -> list[Verification]:
    """The table's newest `limit` verifications (as `verifications`)."""
    return _VERIFICATIONS.objects(mt_id=mt.pk, limit=limit)


_VERSIONS = Prepared(
    lambda mt_id: MaterializedTableVersion.objects.filter(materialized_table_id=mt_id)
    .select_related("created_by")
    .order_by("-version_id"),
    mt_id=_ID,
)
_VERSION_LOG = Prepared(
    lambda mt_id: MaterializedTableVersionLogEntry.objects.filter(materialized_table_id=mt_id)
    .select_related("actor")
    .order_by("-timestamp", "-id"),
    mt_id=_ID,
)


def definition_versions(mt: MaterializedTable) -> list[MaterializedTableVersion]:
    """The table's definitions, newest first, with who made each."""
    return _VERSIONS.objects(mt_id=mt.pk)


def version_log(mt: MaterializedTable) -> list[MaterializedTableVersionLogEntry]:
    """The table's version log, newest first, with who asked for each change."""
    return _VERSION_LOG.objects(mt_id=mt.pk)


def _schema_fields(table_id: int, schema_id: int) -> QuerySet:
    from catalog.models import TableSchemaField

    return TableSchemaField.objects.filter(table_id=table_id, schema_id=schema_id).order_by(
        "position"
    )


_SCHEMA_FIELDS = Prepared(_schema_fields, table_id=_ID, schema_id=7_654_322)


def schema_fields(table: Any) -> list[Any]:
    """The fields of a table's current schema, in order (as `Table.schema_fields()`)."""
    if table.current_schema_id is None:
        return list(table.schema_fields())
    return _SCHEMA_FIELDS.objects(table_id=table.pk, schema_id=table.current_schema_id)


def _source_table(namespace: str, name: str) -> QuerySet:
    from catalog.models import Table

    return Table.objects.filter(namespace__name=namespace, name=name).values_list(
        "pk", "current_snapshot_id"
    )[:1]


def _snapshot_time(table_id: int, snapshot_id: int) -> QuerySet:
    from catalog.models import TableSnapshot

    return TableSnapshot.objects.filter(table_id=table_id, snapshot_id=snapshot_id).values_list(
        "timestamp_ms"
    )[:1]


_SOURCE_TABLE = Prepared(_source_table, namespace=_NAMESPACE, name=_NAME)
_SNAPSHOT_TIME = Prepared(_snapshot_time, table_id=_ID, snapshot_id=7_654_323)


def current_answer(mt: MaterializedTable, now: datetime | None = None) -> dict[str, Any] | None:
    """What the table's current snapshot says it answers (its refresh state), for its page:
    the definition version, the partition a partition refresh wrote, and each source's
    snapshot with when it was committed, how old it was at `now` and whether the source
    has moved on since; or a person's change; None without a current snapshot."""
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
    for source in state.tables:
        found = _SOURCE_TABLE.rows(namespace=".".join(source.namespace), name=source.name)
        table = {"pk": found[0][0], "current_snapshot_id": found[0][1]} if found else None
        committed = None
        if table is not None and source.snapshot_id is not None:
            stamps = _SNAPSHOT_TIME.rows(table_id=table["pk"], snapshot_id=source.snapshot_id)
            if stamps:
                committed = datetime.fromtimestamp(stamps[0][0] / 1000, tz=UTC)
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
