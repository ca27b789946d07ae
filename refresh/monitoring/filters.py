"""What the monitoring lists may be filtered by, read from a query string: every table's
list by namespace and status (failing, late, ok), the history by kind (refresh,
maintenance), state, namespace, table and since when (a moment or a window back from now);
an InvalidInput names the field it cannot read."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any

from django.db.models import (
    Q,
)
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from catalog import access
from catalog.core.errors import InvalidInput
from maintenance.models import MaintenanceRun
from refresh.models import RefreshRun

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


@dataclass(frozen=True)
class TableFilters:
    namespace: str | None = None
    status: str | None = None


def table_filters(params: Mapping[str, Any]) -> TableFilters:
    """`?namespace=` (exact) and `?status=` (failing, late, ok) from a query string;
    InvalidInput naming the field for a status it does not know."""
    status = param_text(params, "status").lower() or None
    if status is not None and status not in STATUSES:
        raise InvalidInput(
            f"Unknown status {status[:40]!r}: one of {', '.join(STATUSES)}", field="status"
        )
    return TableFilters(namespace=param_text(params, "namespace") or None, status=status)


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
    kind = param_text(params, "kind").lower() or None
    if kind is not None and kind not in KINDS:
        raise InvalidInput(f"Unknown kind {kind[:40]!r}: one of {', '.join(KINDS)}", field="kind")
    state = param_text(params, "state").upper() or None
    if state is not None and state not in RUN_STATES:
        raise InvalidInput(
            f"Unknown state {state[:40]!r}: one of {', '.join(RUN_STATES)}", field="state"
        )
    since_text = param_text(params, "since")
    return HistoryFilters(
        kind=kind,
        state=state,
        namespace=param_text(params, "namespace") or None,
        table=param_text(params, "table") or None,
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


def param_text(params: Mapping[str, Any], name: str) -> str:
    value = params.get(name)
    return value.strip() if isinstance(value, str) else ""
