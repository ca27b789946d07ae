"""Reads of maintenance: a table's policy and health (from the catalog's mirror), its runs
and health series, and which tables the sweep looks at."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from django.db.models import Max, QuerySet

from catalog.core import metadata_io
from catalog.core.errors import NotFound
from catalog.models import Table, TableMetadataLogEntry, TableSnapshot
from catalog.prepared import Prepared, PreparedCount
from maintenance.core import policy as policies
from maintenance.core.policy import Action, Health, Policy
from maintenance.models import HealthSample, MaintenanceRun


def managed_tables() -> QuerySet[Table]:
    """Tables the app writes the metadata of (attached tables are their writers' to keep)."""
    return Table.objects.filter(attachment__isnull=True).select_related("namespace", "materialized")


def materialized_of(table: Table) -> Any:
    """The table's materialized table (refresh.models.MaterializedTable, reached through
    its reverse relation: maintenance imports nothing of refresh), or None."""
    try:
        return table.materialized  # type: ignore[attr-defined]
    except ObjectDoesNotExist:
        return None


def policy_of(table: Table, mt: Any = None) -> Policy:
    mt = mt if mt is not None else materialized_of(table)
    return policies.policy(
        table_properties=table.properties or {},
        namespace_properties=table.namespace.properties or {},
        materialized=mt is not None,
        freshness_seconds=mt.freshness.seconds if mt is not None and mt.freshness else None,
    )


def _number(summary: dict, key: str) -> int:
    try:
        return int(summary.get(key) or 0)
    except (TypeError, ValueError):
        return 0


def health_of(table: Table, *, with_files: bool = False, with_manifests: bool = True) -> Health:
    """The table's figures from its mirror (the current snapshot's summary); with
    `with_files`, also its current metadata file's size and (unless not `with_manifests`)
    its manifests (file reads: the manifest list is read whole)."""
    current = None
    if table.current_snapshot_id is not None:
        found = _CURRENT.rows(table_id=table.pk, snapshot_id=table.current_snapshot_id, limit=1)
        current = found[0] if found else None
    summary, manifest_list = current if current else ({}, "")
    referenced = {ref.get("snapshot-id") for ref in (table.refs or {}).values()}
    # The oldest snapshot no branch or tag holds is among the first len(referenced) + 1.
    oldest = next(
        (
            timestamp_ms
            for snapshot_id, timestamp_ms in _OLDEST.rows(
                table_id=table.pk, limit=len(referenced) + 1
            )
            if snapshot_id not in referenced
        ),
        None,
    )
    snapshot_count = _SNAPSHOT_COUNT.number(table_id=table.pk)
    log_count = _LOG_COUNT.number(table_id=table.pk)
    deletes = _number(summary, "total-delete-files")
    manifests = metadata_bytes = None
    if with_files:
        manifests = _manifests(manifest_list) if with_manifests else None
        metadata_bytes = _size(table.metadata_location)
    return Health(
        data_files=_number(summary, "total-data-files"),
        data_bytes=_number(summary, "total-files-size"),
        delete_files=deletes,
        # The summary counts delete files of both kinds together: all are position deletes
        # when no equality delete rows are counted.
        position_delete_files=deletes if _number(summary, "total-equality-deletes") == 0 else 0,
        snapshots=snapshot_count,
        oldest_snapshot_ms=oldest,
        manifests=manifests,
        metadata_bytes=metadata_bytes,
        metadata_files=log_count + 1,
    )


# health_of's reads, compiled once (catalog.prepared): building them took longer than
# running them, on the maintenance section and the health chart's answer alike.
_ID = 7_654_321
_CURRENT = Prepared(
    lambda table_id, snapshot_id: TableSnapshot.objects.filter(
        table_id=table_id, snapshot_id=snapshot_id
    )
    .order_by()
    .values_list("summary", "manifest_list"),
    table_id=_ID,
    snapshot_id=7_654_322,
)
_OLDEST = Prepared(
    lambda table_id: TableSnapshot.objects.filter(table_id=table_id)
    .order_by("timestamp_ms", "snapshot_id")
    .values_list("snapshot_id", "timestamp_ms"),
    table_id=_ID,
)
_SNAPSHOT_COUNT = PreparedCount(
    lambda table_id: TableSnapshot.objects.filter(table_id=table_id), by="table_id", table_id=_ID
)
_LOG_COUNT = PreparedCount(
    lambda table_id: TableMetadataLogEntry.objects.filter(table_id=table_id),
    by="table_id",
    table_id=_ID,
)


def _size(path: str | None) -> int | None:
    if not path:
        return None
    try:
        return len(metadata_io.file_io(path).new_input(path))
    except OSError:
        return None


def _manifests(manifest_list: str) -> int | None:
    """How many manifests the current snapshot lists (reads its manifest list)."""
    if not manifest_list:
        return 0
    from pyiceberg.manifest import read_manifest_list

    try:
        metadata_io.check_regular_file(manifest_list)
        io = metadata_io.file_io(manifest_list)
        return sum(1 for _ in read_manifest_list(io.new_input(manifest_list)))
    except metadata_io.UNREADABLE_METADATA:  # an engine may commit any file as a manifest list
        return None


def last_started(table: Table) -> dict[Action, int]:
    """When each action last ran (or was queued) on the table, in epoch milliseconds."""
    rows = (
        MaintenanceRun.objects.filter(table=table)
        .values("action")
        .annotate(last=Max("queued_at"))
        .values_list("action", "last")
    )
    return {Action(action): int(last.timestamp() * 1000) for action, last in rows}


def runs(table: Table | None = None) -> QuerySet[MaintenanceRun]:
    queryset = MaintenanceRun.objects.all()
    if table is not None:
        queryset = queryset.filter(table=table)
    return queryset.select_related("requested_by", "cancel_requested_by")


_RUN_ROWS: dict[tuple[str, ...], Prepared] = {}
_RUN_COUNT = PreparedCount(
    lambda table_id: MaintenanceRun.objects.filter(table_id=table_id), by="table_id", table_id=_ID
)


class RunPages:
    """A table's runs (`runs`, newest first) as a paginator reads them: a count and a slice
    of plain values of `fields` (who asked as usernames), each one query compiled once."""

    ordered = True

    def __init__(self, table: Table, fields: tuple[str, ...]) -> None:
        self.table = table
        self.fields = fields

    def count(self) -> int:
        return _RUN_COUNT.number(table_id=self.table.pk)

    def __getitem__(self, page: slice) -> list[dict[str, Any]]:
        prepared = _RUN_ROWS.get(self.fields)
        if prepared is None:
            fields = self.fields
            prepared = _RUN_ROWS[fields] = Prepared(
                lambda table_id: MaintenanceRun.objects.filter(table_id=table_id)
                .order_by("-queued_at", "-id")
                .values_list(*fields),
                table_id=_ID,
            )
        start = page.start or 0
        rows = prepared.rows(table_id=self.table.pk, limit=page.stop - start, offset=start)
        return [dict(zip(self.fields, row, strict=True)) for row in rows]


def get_run(run_id: int | str) -> MaintenanceRun:
    try:
        pk = int(run_id)
        if not 0 < pk < 2**63:  # beyond a database integer: no such run (not an overflow)
            raise ValueError(pk)
        return MaintenanceRun.objects.select_related(
            "table__namespace", "requested_by", "cancel_requested_by"
        ).get(pk=pk)
    except (MaintenanceRun.DoesNotExist, ValueError):
        raise NotFound(f"Maintenance run {str(run_id)[:40]} does not exist") from None


def active(table: Table) -> QuerySet[MaintenanceRun]:
    return MaintenanceRun.objects.filter(table=table, state__in=MaintenanceRun.ACTIVE)


def has_samples(table: Table) -> bool:
    return HealthSample.objects.filter(table=table).exists()


def _series(table_id: int) -> QuerySet:
    return (
        HealthSample.objects.filter(table_id=table_id)
        .order_by("-taken_at")
        .values_list(
            "taken_at",
            "data_files",
            "data_bytes",
            "delete_files",
            "snapshots",
            "manifests",
            "metadata_bytes",
            "run_id",
            "run__action",
            "run__state",
        )
    )


_SERIES = Prepared(_series, table_id=_ID)


def health_series(table: Table, *, since: datetime | None = None, limit: int = 500) -> list[dict]:
    """The table's health samples, oldest first (the last `limit`), with the runs they were
    taken for marked. Plain values, not model instances: a chart reads hundreds."""
    if since is None:
        rows = _SERIES.rows(table_id=table.pk, limit=limit)
    else:
        rows = list(_series(table.pk).filter(taken_at__gte=since)[:limit])
    return [
        {
            "at": taken_at.isoformat(),
            "data_files": data_files,
            "average_file_bytes": data_bytes // data_files if data_files else None,
            "delete_files": delete_files,
            "snapshots": snapshots,
            "manifests": manifests,
            "metadata_bytes": metadata_bytes,
            "run": (
                {"id": run_id, "action": run_action, "state": run_state}
                if run_id is not None
                else None
            ),
        }
        for (
            taken_at,
            data_files,
            data_bytes,
            delete_files,
            snapshots,
            manifests,
            metadata_bytes,
            run_id,
            run_action,
            run_state,
        ) in reversed(rows)
    ]
