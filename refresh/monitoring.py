"""One place to watch every materialized table (as Snowflake's dynamic-table monitoring
does): every table across namespaces with its status, failing and late ones first, and the
refresh and maintenance history of all tables together. Reads only; the page
(refresh/pages/views.py) and the API (refresh/api/monitoring.py) share these.

Everything a list needs comes in the list's own query: `tables()` annotates
`refresh.selectors.materialized_tables(with_freshness=True)` (each table's last finished run
and data time) with a status rank the database computes, so ordering and paging stay one
query however many tables there are, and `table_row` reads only those annotations."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from functools import cached_property
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection
from django.db.models import (
    Case,
    Count,
    DateTimeField,
    DurationField,
    ExpressionWrapper,
    F,
    IntegerField,
    Model,
    Q,
    QuerySet,
    TextField,
    Value,
    When,
)
from django.db.models.functions import Cast, Coalesce
from django.db.models.lookups import GreaterThanOrEqual, LessThan
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from catalog import access
from catalog.core.errors import InvalidInput
from catalog.models import CatalogObject, Namespace, Table
from catalog.prepared import Prepared
from maintenance.models import MaintenanceRun
from refresh import selectors
from refresh.core.freshness import Freshness, RefreshMode, TimeUnit
from refresh.models import MaterializedTable, RefreshRun, StreamHost

#: Rows per page of both lists.
PAGE_SIZE = 50

#: A table's status, in the order the list shows them (the database's rank is the index).
FAILING, LATE, OK = "failing", "late", "ok"
STATUSES = (FAILING, LATE, OK)

#: What a history row is a run of.
REFRESH, MAINTENANCE = "refresh", "maintenance"
KINDS = (REFRESH, MAINTENANCE)

#: Every state a refresh or a maintenance run can be in.
RUN_STATES = tuple(dict.fromkeys([*RefreshRun.State.values, *MaintenanceRun.State.values]))


# -- every materialized table ---------------------------------------------------------------


@dataclass(frozen=True)
class TableFilters:
    namespace: str | None = None
    status: str | None = None


def table_filters(params: Mapping[str, Any]) -> TableFilters:
    """`?namespace=` (exact) and `?status=` (failing, late, ok) from a query string;
    InvalidInput naming the field for a status it does not know."""
    status = _text(params, "status").lower() or None
    if status is not None and status not in STATUSES:
        raise InvalidInput(
            f"Unknown status {status[:40]!r}: one of {', '.join(STATUSES)}", field="status"
        )
    return TableFilters(namespace=_text(params, "namespace") or None, status=status)


#: A freshness longer than this counts as this long (its deadline stays a date the
#: databases can add and compare).
_LONGEST = timedelta(days=36500)


def _freshness() -> Case:
    """The table's freshness as an SQL interval (at most `_LONGEST`)."""
    whens = []
    for unit in TimeUnit:
        step = Freshness(1, unit).to_timedelta()
        # SQLite multiplies a duration by an IntegerField only (not a PositiveIntegerField).
        value = ExpressionWrapper(F("freshness_value"), output_field=IntegerField())
        interval = ExpressionWrapper(
            value * Value(step, output_field=DurationField()),
            output_field=DurationField(),
        )
        whens.append(
            When(freshness_unit=unit.value, freshness_value__lte=_LONGEST // step, then=interval)
        )
    return Case(
        *whens, default=Value(_LONGEST, output_field=DurationField()), output_field=DurationField()
    )


def _fresh_until(moment: str | Coalesce) -> ExpressionWrapper:
    """`moment` (an annotation, a field or an expression) plus the table's freshness: the
    table is late once that is past."""
    start = F(moment) if isinstance(moment, str) else moment
    return ExpressionWrapper(start + _freshness(), output_field=DateTimeField())


def tables(
    filters: TableFilters | None = None, *, now: datetime | None = None
) -> QuerySet[MaterializedTable]:
    """Every materialized table with its last finished run and data time (the annotations
    of `selectors.materialized_tables(with_freshness=True)`), `status_rank` (0 failing, 1
    late, 2 ok: `STATUSES[rank]`) and `caught_up_at`; failing first, then late, then the
    rest, by name within each. One query, however many tables.

    Failing: a run failed since the last success (`consecutive_failures`), the last finished
    run failed, or the table suspended itself (a suspension with a reason). Late: its data
    is older than its freshness (what `selectors.lag` says, the same moment `now`). A table
    with no data yet is neither."""
    filters = filters or TableFilters()
    rank = STATUSES.index(filters.status) if filters.status is not None else None
    return _tables(filters.namespace, rank, now or timezone.now())


def _tables(namespace: str | None, rank: int | None, now: datetime) -> QuerySet[MaterializedTable]:
    queryset = selectors.materialized_tables(namespace, with_freshness=True)
    failing = (
        Q(consecutive_failures__gt=0)
        | Q(last_run_state=RefreshRun.State.FAILED)
        | (Q(state=MaterializedTable.State.SUSPENDED) & ~Q(suspended_reason=""))
    )
    now_value = Value(now, output_field=DateTimeField())
    queryset = queryset.annotate(
        # A running stream of a continuous table is caught up with its sources as of its
        # last heartbeat (selectors.data_timestamp).
        caught_up_at=Case(
            When(
                refresh_mode=RefreshMode.CONTINUOUS.value,
                stream_status="RUNNING",
                then=F("stream_heartbeat_at"),
            ),
            default=None,
            output_field=DateTimeField(),
        ),
    ).annotate(
        # Each subquery appears once (the database runs it once a row): the stream's time
        # (a column) first, then the runs' data time, or the stream's when there is none.
        status_rank=Case(
            When(failing, then=Value(0)),
            When(GreaterThanOrEqual(_fresh_until("caught_up_at"), now_value), then=Value(2)),
            When(
                LessThan(_fresh_until(Coalesce("runs_data_as_of", "caught_up_at")), now_value),
                then=Value(1),
            ),
            default=Value(2),
            output_field=IntegerField(),
        )
    )
    if rank is not None:
        queryset = queryset.filter(status_rank=rank)
    return queryset.order_by("status_rank", "table__namespace__name", "table__name")


# The status queries are built and compiled once per backend (catalog.prepared): building
# and compiling them took about 20 ms a page, and running them well under one. Sample
# values mark where each call's values go.
_NOW = datetime(1970, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
_NAMESPACE = "lakeview sample namespace"
_RANK = 7_654_321


def _seen(
    queryset: QuerySet, prefix: str, seen: dict[str, Any] | None, condition: Q | None = None
) -> QuerySet:
    """`queryset` of what the reader may see: `seen` the values of an
    `access.Visibility` (a query compiled once), `condition` catalog.access's filter."""
    if seen is not None:
        queryset = queryset.filter(access.visible_where(prefix, **seen))
    return queryset if condition is None else queryset.filter(condition)


def _by_status(
    now: datetime, namespace: str | None = None, condition: Q | None = None, **seen: Any
) -> QuerySet:
    return (
        _seen(_tables(namespace, None, now), "table__", seen or None, condition)
        .order_by()
        .values("status_rank")
        .annotate(tables=Count("pk"))
        .values_list("status_rank", "tables")
    )


_BY_STATUS = {
    (has_namespace, visible): Prepared(
        _by_status,
        now=_NOW,
        **({"namespace": _NAMESPACE} if has_namespace else {}),
        **(access.SAMPLE.values() if visible else {}),
    )
    for has_namespace in (False, True)
    for visible in (False, True)
}

#: What a page of `tables()` reads of each table besides its row (table_row's annotations).
_ANNOTATIONS = (
    "status_rank",
    "last_run_id",
    "last_run_state",
    "last_run_finished_at",
    "runs_data_as_of",
    "caught_up_at",
)


#: What `table_row` reads of a table's own columns (a page's tables are made from these, in
#: the status query: no second read, no model building for each).
_COLUMNS_READ = (
    "table_id",
    "state",
    "refresh_mode",
    "freshness_value",
    "freshness_unit",
    "stream_status",
    "stream_heartbeat_at",
    "consecutive_failures",
    "suspended_reason",
)


def _ranked(
    now: datetime, namespace: str | None = None, rank: int | None = None, **seen: Any
) -> QuerySet:
    return _seen(_tables(namespace, rank, now), "table__", seen or None).values_list(
        "pk", *_ANNOTATIONS, *_COLUMNS_READ, "table__name", "table__namespace__name"
    )


_RANKED = {
    (has_namespace, has_rank, visible): Prepared(
        _ranked,
        now=_NOW,
        **({"namespace": _NAMESPACE} if has_namespace else {}),
        **({"rank": _RANK} if has_rank else {}),
        **(access.SAMPLE.values() if visible else {}),
    )
    for has_namespace in (False, True)
    for has_rank in (False, True)
    for visible in (False, True)
}


def counts_by_status(
    *,
    namespace: str | None = None,
    now: datetime | None = None,
    condition: Q | None = None,
    visibility: access.Visibility | None = None,
) -> dict:
    """How many tables (of `namespace`; that the reader may see, given their `visibility`
    or catalog.access's `condition`) have each status (one query, grouped by status)."""
    now = now or timezone.now()
    if condition is not None:
        ranks = dict(_by_status(now, namespace, condition))
        return {status: ranks.get(rank, 0) for rank, status in enumerate(STATUSES)}
    values: dict[str, Any] = {"namespace": namespace} if namespace is not None else {}
    if visibility is not None:
        values.update(visibility.values())
    key = (namespace is not None, visibility is not None)
    ranks = dict(_BY_STATUS[key].rows(now=now, **values))
    return {status: ranks.get(rank, 0) for rank, status in enumerate(STATUSES)}


class TableList(Sequence):
    """`tables(filters, now=now)` for a paginator, in the same order with the same
    annotations: its length from `counts_by_status`, a page from the status query compiled
    once, its tables made from the columns it reads (`table_row` reads no more). Given a
    reader's `visibility` (catalog.access), of the tables they may see."""

    def __init__(
        self,
        filters: TableFilters | None = None,
        *,
        now: datetime,
        visibility: access.Visibility | None = None,
    ) -> None:
        self.filters = filters or TableFilters()
        self.now = now
        self.visibility = visibility

    @cached_property
    def by_status(self) -> dict[str, int]:
        """How many tables (of the filters' namespace) have each status."""
        return counts_by_status(
            namespace=self.filters.namespace, now=self.now, visibility=self.visibility
        )

    def count(self) -> int:
        wanted = [self.filters.status] if self.filters.status else STATUSES
        return sum(self.by_status[status] for status in wanted)

    def __len__(self) -> int:
        return self.count()

    def __getitem__(self, index: Any) -> Any:
        if not isinstance(index, slice):
            return self[index : index + 1][0]
        start = index.start or 0
        stop = self.count() if index.stop is None else index.stop
        if stop <= start:
            return []
        values: dict[str, Any] = {"now": self.now}
        if self.filters.namespace is not None:
            values["namespace"] = self.filters.namespace
        if self.filters.status is not None:
            values["rank"] = STATUSES.index(self.filters.status)
        if self.visibility is not None:
            values.update(self.visibility.values())
        key = (
            self.filters.namespace is not None,
            self.filters.status is not None,
            self.visibility is not None,
        )
        page = []
        for pk, *read, name, namespace in _RANKED[key].rows(
            limit=stop - start, offset=start, **values
        ):
            columns = dict(zip(_COLUMNS_READ, read[len(_ANNOTATIONS) :], strict=True))
            mt = _made(MaterializedTable, id=pk, **columns)
            table_id = columns["table_id"]
            mt.table = _made(Table, id=table_id, catalogobject_ptr_id=table_id, name=name)
            mt.table.namespace = _made(Namespace, id=None, name=namespace)
            for annotation, value in zip(_ANNOTATIONS, read[: len(_ANNOTATIONS)], strict=True):
                setattr(mt, annotation, value)
            page.append(mt)
        return page


def _made(model: type[Model], **values: Any) -> Any:
    """An instance of `model` with these values, as the ORM makes one of the columns it read
    (`from_db`: the others deferred), where building one with every default (`model(...)`)
    took a millisecond for a page of tables."""
    names = [f.attname for f in model._meta.concrete_fields if f.attname in values]
    return model.from_db(DEFAULT_DB_ALIAS, names, [values[name] for name in names])


def counts(*, now: datetime | None = None) -> dict[str, int]:
    """How many tables are late and how many failing (one query, grouped by status)."""
    by_status = counts_by_status(now=now)
    return {LATE: by_status[LATE], FAILING: by_status[FAILING]}


def table_row(mt: MaterializedTable, now: datetime) -> dict[str, Any]:
    """What the page and the API show of one table of `tables(now=now)`, from its
    annotations only (no query)."""
    lag = selectors.lag(mt, now)
    freshness = mt.freshness
    lag_seconds = lag.total_seconds() if lag is not None else None
    if hasattr(mt, "last_run_id") and not hasattr(mt, "last_finished_run"):
        # The status query's annotations, read as they are (no run instance built).
        last = None
        if mt.last_run_id is not None:
            last = {
                "id": mt.last_run_id,
                "state": mt.last_run_state,
                "finished_at": mt.last_run_finished_at,
            }
    else:
        run = selectors.last_refresh(mt)
        last = (
            {"id": run.pk, "state": run.state, "finished_at": run.finished_at}
            if run is not None
            else None
        )
    return {
        "mt": mt,
        "namespace": mt.table.namespace.name,
        "name": mt.table.name,
        "state": mt.state,
        "refresh_mode": mt.refresh_mode,
        "freshness": {
            "value": mt.freshness_value,
            "unit": mt.freshness_unit,
            "text": str(freshness),
        },
        "freshness_seconds": freshness.seconds,
        "data_timestamp": selectors.data_timestamp(mt),
        "lag_seconds": lag_seconds,
        "lag_ratio": round(lag_seconds / freshness.seconds, 3) if lag_seconds is not None else None,
        "last_refresh": last,
        "consecutive_failures": mt.consecutive_failures,
        "suspended_reason": mt.suspended_reason,
        "status": STATUSES[mt.status_rank],
    }


# -- the history of every table -------------------------------------------------------------


@dataclass(frozen=True)
class HistoryFilters:
    kind: str | None = None
    state: str | None = None
    namespace: str | None = None
    table: str | None = None
    since: datetime | None = None
    #: Conditions on refresh runs and maintenance runs: those of tables the reader may see
    #: (catalog.access), None for one who sees every table.
    refreshes: Q | None = None
    maintenance: Q | None = None
    #: The same, as the values of a query compiled once (catalog.access.visibility).
    visibility: access.Visibility | None = None

    def conditions(self) -> tuple[Q | None, Q | None]:
        """The conditions on refresh runs and on maintenance runs."""
        if self.visibility is None:
            return self.refreshes, self.maintenance
        seen = self.visibility.values()
        return (
            access.visible_where("materialized_table__table__", **seen),
            access.visible_where("table__", **seen),
        )


_WINDOW = re.compile(r"(\d{1,9})\s*([smhdw])")
_WINDOW_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
SINCE_HELP = (
    "Runs queued at or after this moment: an ISO 8601 time or date (2024-05-01T12:00:00Z, "
    "2024-05-01), or a window back from now (30m, 24h, 7d, 2w)."
)


def history_filters(params: Mapping[str, Any], *, now: datetime | None = None) -> HistoryFilters:
    """`?kind=` (refresh, maintenance), `?state=`, `?namespace=` (exact), `?table=` (a part
    of the name), `?since=` from a query string; InvalidInput naming the field for a value
    it cannot read."""
    kind = _text(params, "kind").lower() or None
    if kind is not None and kind not in KINDS:
        raise InvalidInput(f"Unknown kind {kind[:40]!r}: one of {', '.join(KINDS)}", field="kind")
    state = _text(params, "state").upper() or None
    if state is not None and state not in RUN_STATES:
        raise InvalidInput(
            f"Unknown state {state[:40]!r}: one of {', '.join(RUN_STATES)}", field="state"
        )
    since_text = _text(params, "since")
    return HistoryFilters(
        kind=kind,
        state=state,
        namespace=_text(params, "namespace") or None,
        table=_text(params, "table") or None,
        since=parse_since(since_text, now=now) if since_text else None,
    )


def parse_since(text: str, *, now: datetime | None = None) -> datetime:
    """An aware moment from an ISO 8601 time or date (a time without an offset is in the
    default time zone) or from a window back from `now` ("24h")."""
    error = InvalidInput(f"Cannot read since={text[:60]!r}. {SINCE_HELP}", field="since")
    window = _WINDOW.fullmatch(text.strip().lower())
    try:
        if window is not None:
            seconds = int(window.group(1)) * _WINDOW_SECONDS[window.group(2)]
            moment = (now or timezone.now()) - timedelta(seconds=seconds)
        else:
            moment = parse_datetime(text.strip())
            if moment is None:
                day = parse_date(text.strip())
                if day is None:
                    raise error
                moment = datetime.combine(day, time.min)
            if timezone.is_naive(moment):
                moment = timezone.make_aware(moment, timezone.get_default_timezone())
        # The database keeps UTC: a moment that cannot be written in it is refused here.
        return moment.astimezone(UTC)
    except (ValueError, OverflowError):
        raise error from None


#: The columns of a history row, the same for both kinds (a UNION ALL needs one shape).
_COLUMNS = (
    "h_kind",
    "h_id",
    "h_table_name",
    "h_namespace",
    "h_name",
    "h_action",
    "h_trigger",
    "h_state",
    "h_queued_at",
    "h_started_at",
    "h_finished_at",
    "h_error",
    "h_count",
)


def _history_of(
    queryset: QuerySet, kind: str, table_path: str, filters: HistoryFilters, count: Any
) -> QuerySet:
    return (
        _filtered(queryset, filters)
        .order_by()
        .annotate(
            h_kind=Cast(Value(kind), output_field=TextField()),
            h_id=F("id"),
            h_table_name=F("table_name"),
            h_namespace=F(f"{table_path}__namespace__name"),
            h_name=F(f"{table_path}__name"),
            h_action=F("action"),
            h_trigger=F("trigger"),
            h_state=F("state"),
            h_queued_at=F("queued_at"),
            h_started_at=F("started_at"),
            h_finished_at=F("finished_at"),
            h_error=F("error"),
            h_count=count,
        )
        .values(*_COLUMNS)
    )


def _history_parts(filters: HistoryFilters) -> list[QuerySet]:
    """The runs of each kind `filters` asks for (before the history's columns)."""
    parts = []
    refreshes, maintenance = filters.conditions()
    if filters.kind in (None, REFRESH):
        parts.append(_filtered(_runs(RefreshRun, refreshes), filters))
    if filters.kind in (None, MAINTENANCE):
        parts.append(_filtered(_runs(MaintenanceRun, maintenance), filters))
    return parts


def _runs(model: type[Model], condition: Q | None) -> QuerySet:
    runs = model.objects.all()
    return runs if condition is None else runs.filter(condition)


def _filtered(queryset: QuerySet, filters: HistoryFilters) -> QuerySet:
    if filters.state is not None:
        queryset = queryset.filter(state=filters.state)
    if filters.since is not None:
        queryset = queryset.filter(queued_at__gte=filters.since)
    if filters.table is not None:
        queryset = queryset.filter(table_name__icontains=filters.table)
    if filters.namespace is not None:
        # The namespace of the name at the time (names have no "."): runs of dropped and
        # renamed tables are found as they were listed then.
        queryset = queryset.filter(
            table_name__startswith=f"{filters.namespace}.",
            table_name__regex=rf"^{re.escape(filters.namespace)}\.[^.]+$",
        )
    return queryset


#: The monitoring page counts history rows up to this many (or up to the page asked for,
#: when that is further): beyond, it says that more exist. Refresh runs are kept for good,
#: so a full count would grow with every hour of every table.
HISTORY_COUNTED = 10_000


class HistoryList(Sequence):
    """`history(filters)` for a paginator: each page one query (the UNION ALL), its length
    from a count of each kind's runs alone, without the joins the page's columns need. With
    `upto`, the count stops past that many rows (`more`: more exist)."""

    def __init__(self, filters: HistoryFilters | None = None, *, upto: int | None = None):
        self.filters = filters or HistoryFilters()
        self.upto = upto
        self.more = False
        self._count: int | None = None

    def count(self) -> int:
        if self._count is None:
            total = 0
            seen = self._seen()
            if seen is not None:
                # Only what the reader may see: each kind's runs counted by a query compiled
                # once, with their grants' values.
                for prepared in _VISIBLE_RUNS:
                    limit = None if self.upto is None else self.upto + 1 - total
                    total += prepared.count(limit=limit, **seen)
            elif self.filters == HistoryFilters():
                # Unfiltered (the page as it opens): every run of both kinds, counted in SQL
                # written once (the ORM built each count's query on every page).
                for model in (RefreshRun, MaintenanceRun):
                    limit = None if self.upto is None else self.upto + 1 - total
                    total += _count_rows(model, limit)
            else:
                for part in _history_parts(self.filters):
                    runs = part.order_by().values("pk")
                    if self.upto is not None:
                        runs = runs[: self.upto + 1 - total]
                    total += runs.count()
            if self.upto is not None and total > self.upto:
                self.more, total = True, self.upto
            self._count = total
        return self._count

    def __len__(self) -> int:
        return self.count()

    def __getitem__(self, index: Any) -> Any:
        if not isinstance(index, slice):
            return self[index : index + 1][0]
        seen = self._seen()
        if (seen is None and self.filters != HistoryFilters()) or index.step is not None:
            return list(history(self.filters)[index])
        # Unfiltered (the page as it opens), or filtered by what the reader may see alone:
        # the UNION ALL compiled once.
        start = index.start or 0
        stop = self.count() if index.stop is None else index.stop
        if stop <= start:
            return []
        if seen is None:
            rows = _ALL_HISTORY.rows(limit=stop - start, offset=start)
        else:
            rows = _VISIBLE_HISTORY.rows(limit=stop - start, offset=start, **seen)
        return [dict(zip(_COLUMNS, row, strict=True)) for row in rows]

    def _seen(self) -> dict[str, Any] | None:
        """The values of the reader's visibility, when the filters hold nothing else."""
        visibility = self.filters.visibility
        if visibility is None or self.filters != HistoryFilters(visibility=visibility):
            return None
        return visibility.values()


_ALL_HISTORY = Prepared(lambda: history())


def _visible(kind: str | None = None, **seen: Any) -> HistoryFilters:
    visibility = access.Visibility(seen["objects"], seen["namespaces"], seen["owner"])
    return HistoryFilters(kind=kind, visibility=visibility)


def _visible_runs(kind: str, **seen: Any) -> QuerySet:
    """The runs of `kind` of the tables the reader may see, for their count. Refresh runs
    are counted from the materialized tables the reader may see (few), each one's runs over
    its index, rather than every run tested through its table."""
    if kind == REFRESH:
        tables = MaterializedTable.objects.filter(access.visible_where("table__", **seen))
        runs = RefreshRun.objects.filter(materialized_table_id__in=tables.values("pk"))
    else:
        # The tables with maintenance runs, read from the runs' index, each one tested once.
        maintained = MaintenanceRun.objects.order_by().values("table_id").distinct()
        tables = CatalogObject.objects.filter(access.visible_where(**seen), pk__in=maintained)
        runs = MaintenanceRun.objects.filter(table_id__in=tables.values("pk"))
    return runs.order_by().values("pk")


_VISIBLE_HISTORY = Prepared(lambda **seen: history(_visible(**seen)), **access.SAMPLE.values())
_VISIBLE_RUNS = [
    Prepared(functools.partial(_visible_runs, kind), **access.SAMPLE.values())
    for kind in (REFRESH, MAINTENANCE)
]


def _count_rows(model: type[Model], limit: int | None) -> int:
    """How many rows `model`'s table holds, counting at most `limit` of them."""
    table = connection.ops.quote_name(model._meta.db_table)
    with connection.cursor() as cursor:
        if limit is None:
            cursor.execute(f"SELECT COUNT(*) FROM {table}")  # noqa: S608 - a model's table
        else:
            cursor.execute(
                f"SELECT COUNT(*) FROM (SELECT 1 FROM {table} LIMIT %s) AS counted",  # noqa: S608
                [max(limit, 0)],
            )
        return cursor.fetchone()[0]


def history(filters: HistoryFilters | None = None) -> QuerySet:
    """Refresh runs and maintenance runs of every table together, newest (queued) first:
    dicts of `_COLUMNS`, one query (a UNION ALL) per page; `history_row` reads one."""
    filters = filters or HistoryFilters()
    parts = []
    refresh_condition, maintenance_condition = filters.conditions()
    if filters.kind in (None, REFRESH):
        refreshes = _runs(RefreshRun, refresh_condition)
        # A folded row stands for several runs of an hour (micro-batches, NO_DATA ticks).
        parts.append(
            _history_of(
                refreshes, REFRESH, "materialized_table__table", filters, count=F("batches")
            )
        )
    if filters.kind in (None, MAINTENANCE):
        maintenance = _runs(MaintenanceRun, maintenance_condition)
        one = Cast(Value(1), output_field=IntegerField())
        parts.append(_history_of(maintenance, MAINTENANCE, "table", filters, count=one))
    combined = parts[0].union(*parts[1:], all=True) if len(parts) > 1 else parts[0]
    return combined.order_by("-h_queued_at", "-h_id", "h_kind")


def history_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row of `history()` as the page and the API show it."""
    started, finished = row["h_started_at"], row["h_finished_at"]
    return {
        "kind": row["h_kind"],
        "id": row["h_id"],
        "table_name": row["h_table_name"],
        "namespace": row["h_namespace"],
        "name": row["h_name"],
        "action": row["h_action"],
        "trigger": row["h_trigger"],
        "state": row["h_state"],
        "queued_at": row["h_queued_at"],
        "started_at": started,
        "finished_at": finished,
        "duration_seconds": (
            (finished - started).total_seconds() if started is not None and finished else None
        ),
        "error": row["h_error"],
        "count": row["h_count"],
    }


def _text(params: Mapping[str, Any], name: str) -> str:
    value = params.get(name)
    return value.strip() if isinstance(value, str) else ""


# -- streaming hosts -------------------------------------------------------------------------


def streaming_hosts(*, now: datetime | None = None) -> list[dict[str, Any]]:
    """Every registered streaming host (manage.py run_streams), oldest first: its name,
    start, last beat, whether it is live (a beat within STREAM_LEASE_SECONDS) and how many
    continuous tables it holds. One query."""
    now = now or timezone.now()
    lease = timedelta(seconds=float(settings.STREAM_LEASE_SECONDS))
    hosts = StreamHost.objects.annotate(held=Count("tables")).order_by("started_at", "id")
    return [
        {
            "name": host.name,
            "started_at": host.started_at,
            "heartbeat_at": host.heartbeat_at,
            "live": now - host.heartbeat_at < lease,
            "tables": host.held,
        }
        for host in hosts
    ]
