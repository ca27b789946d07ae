"""Every materialized table across namespaces with its status, failing and late ones first
(as Snowflake's dynamic-table monitoring lists them).

Everything the list needs comes in its own query: `tables()` annotates
`refresh.selectors.materialized_tables(with_freshness=True)` (each table's last finished run
and data time) with a status rank the database computes, so ordering and paging stay one
query however many tables there are, and `table_row` reads only those annotations."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any

from django.db import DEFAULT_DB_ALIAS
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
    Value,
    When,
)
from django.db.models.functions import Coalesce
from django.db.models.lookups import GreaterThanOrEqual, LessThan
from django.utils import timezone

from catalog import access
from catalog.models import Namespace, Table
from catalog.prepared import Prepared
from refresh import selectors
from refresh.core.freshness import Freshness, RefreshMode, TimeUnit
from refresh.models import MaterializedTable, RefreshRun
from refresh.monitoring.filters import FAILING, LATE, STATUSES, TableFilters

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
