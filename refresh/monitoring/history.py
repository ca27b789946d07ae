"""The refresh and maintenance history of every table together, newest first: one query
over both kinds of runs (a UNION), filtered and paged in the database, each reader seeing
the runs of the tables they may see."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import connection
from django.db.models import (
    F,
    IntegerField,
    Model,
    Q,
    QuerySet,
    TextField,
    Value,
)
from django.db.models.functions import Cast

from catalog import access
from catalog.models import CatalogObject
from catalog.prepared import Prepared
from maintenance.models import MaintenanceRun
from refresh.models import MaterializedTable, RefreshRun
from refresh.monitoring.filters import MAINTENANCE, REFRESH, HistoryFilters

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
