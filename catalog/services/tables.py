"""Writes to Iceberg tables: create (also staged), commit, multi-table commit, register,
rename, drop (with purge), metrics reports.

A table change is a `kernel.Change` whose `apply` checks the REST requirements and applies
the REST updates with pyiceberg (`catalog.core.tables`); a multi-table transaction is one
kernel commit of several changes, so all pointers move or none does."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from pyiceberg.table.metadata import TableMetadata

from catalog import history
from catalog.core import purge as purge_core
from catalog.core import tables
from catalog.core.errors import InvalidInput
from catalog.models import Table, TableMetricsReport
from catalog.services import kernel
from catalog.services.kernel import TABLE, Change, Committed, Mode

logger = logging.getLogger(__name__)

#: A table as the REST protocol returns it: the row (None for a staged create), its
#: metadata and the file holding it (None for a staged create).
LoadedTable = Committed


@dataclass(frozen=True)
class TableChange:
    """One table's part of a commit, as the REST protocol sends it."""

    namespace: str
    name: str
    requirements: Sequence[Mapping[str, Any]]
    updates: Sequence[Mapping[str, Any]]


def create_table(
    *,
    namespace: str,
    name: str,
    schema: Mapping[str, Any],
    location: str | None = None,
    partition_spec: Mapping[str, Any] | None = None,
    write_order: Mapping[str, Any] | None = None,
    properties: Mapping[str, str] | None = None,
    stage_create: bool = False,
    actor: Any = None,
) -> LoadedTable:
    """Create a table, or with `stage_create` only return the metadata it would have; the
    client then creates it with a commit that asserts it does not exist yet."""

    def build(target: str) -> TableMetadata:
        return tables.new_table(
            schema=schema,
            location=target,
            partition_spec=partition_spec,
            write_order=write_order,
            properties=properties,
        )

    change = kernel.creation(TABLE, namespace=namespace, name=name, location=location, build=build)
    if stage_create:
        return kernel.stage(change)
    return kernel.commit_one(change, actor=actor, action="create_table")


def _table_change(change: TableChange) -> Change:
    def apply(base: TableMetadata | None, table: Table | None) -> TableMetadata:
        requirements, updates = tables.parse_changes(change.requirements, change.updates)
        base_location = table.metadata_location if table is not None else None
        return tables.apply_changes(base, base_location, requirements, updates)

    # A staged create arrives as a commit that asserts the table does not exist yet.
    creates = any(r.get("type") == "assert-create" for r in change.requirements)
    return Change(
        TABLE, change.namespace, change.name, apply, mode=Mode.UPSERT if creates else Mode.UPDATE
    )


def commit_table(
    *,
    namespace: str,
    name: str,
    requirements: Sequence[Mapping[str, Any]],
    updates: Sequence[Mapping[str, Any]],
    actor: Any = None,
    action: str = "commit_table",
) -> LoadedTable:
    """`action` names the commit in the history (an upload's is "upload_table")."""
    [loaded] = commit_tables(
        changes=[TableChange(namespace, name, requirements, updates)], actor=actor, action=action
    )
    return loaded


def commit_tables(
    *, changes: Sequence[TableChange], actor: Any = None, action: str = "commit_table"
) -> list[LoadedTable]:
    """Commit changes to one or more tables atomically: all pointers move, or none."""
    return kernel.commit([_table_change(c) for c in changes], actor=actor, action=action)


def register_table(
    *, namespace: str, name: str, metadata_location: str, overwrite: bool = False, actor: Any = None
) -> LoadedTable:
    """Adopt an existing table metadata file; with `overwrite`, point an existing table of
    that name at it."""
    path = kernel.check_metadata_file(metadata_location)

    def apply(base: TableMetadata | None, table: Table | None) -> TableMetadata:
        return kernel.read_adoptable(TABLE, path)

    change = Change(
        TABLE,
        namespace,
        (name or "").strip(),
        apply,
        mode=Mode.UPSERT if overwrite else Mode.CREATE,
        adopt_metadata_location=path,
    )
    return kernel.commit_one(change, actor=actor, action="register_table")


def rename_table(
    *, namespace: str, name: str, new_namespace: str, new_name: str, actor: Any = None
) -> Table:
    return kernel.move(
        TABLE,
        namespace=namespace,
        name=name,
        new_namespace=new_namespace,
        new_name=new_name,
        fields=("destination", "destination"),
        actor=actor,
    )


def drop_table(*, namespace: str, name: str, purge: bool = False, actor: Any = None) -> None:
    """Forget the table; with `purge`, also delete the files its metadata names, once the
    drop has committed (catalog.core.purge: nothing outside the table's own files)."""
    if not purge:
        kernel.drop(TABLE, namespace=namespace, name=name, actor=actor, action="drop_table")
        return
    table = TABLE.get(namespace, name)
    kernel.refuse_if_attached(table, "purge")
    # Read before the drop: a purge needs the list of the table's files, and a table whose
    # metadata cannot be read is refused rather than dropped with its files left unknown.
    metadata = tables.read_table_metadata(table.metadata_location)
    location = purge_core.check_purgeable(metadata.location, settings.WAREHOUSE)
    dropped = kernel.drop(TABLE, namespace=namespace, name=name, actor=actor, action="purge_table")
    transaction.on_commit(
        lambda: _purge(dropped, metadata, dropped.metadata_location, location, actor)
    )


def _purge(
    table: Table, metadata: TableMetadata, metadata_location: str, location: str, actor: Any
) -> None:
    result = purge_core.purge_table_files(metadata, metadata_location, table_location=location)
    history.record_change(table, actor=actor, action="purge_table_files", message=result.summary())
    if result.outside:
        logger.warning("Purge of %s kept %d files outside its location", table, len(result.outside))


#: A scan or commit report an engine sends is a few KiB (a scan's projected column names
#: are the largest part); a larger body is not a report to keep.
METRICS_REPORT_MAX_BYTES = 64 * 1024
#: Reports kept per table, newest first: every scan of every engine sends one (a stream's
#: every micro-batch), and viewers' engines may send them too, so without a bound any
#: reader could grow the database without end.
METRICS_REPORTS_PER_TABLE = 100


def record_metrics(*, namespace: str, name: str, report: Mapping[str, Any]) -> bool:
    """Keep an engine's scan or commit report for the table; whether it was kept.

    A report for a table with no row is accepted and dropped, as Iceberg's reference
    server accepts any report: Spark reports the commit of a staged create (every CTAS)
    before the create commits, and a scan's report may arrive after a drop. Keeping
    nothing for names without a table bounds what any reader can send."""
    table = Table.objects.filter(namespace__name=namespace, name=name).first()
    if table is None:
        return False
    size = len(json.dumps(report, separators=(",", ":"), ensure_ascii=False).encode())
    limit = int(getattr(settings, "METRICS_REPORT_MAX_BYTES", METRICS_REPORT_MAX_BYTES))
    if size > limit:
        raise InvalidInput(
            f"The metrics report is too large to keep: {size} bytes, at most {limit}",
            field="report",
        )
    with transaction.atomic():
        created = TableMetricsReport.objects.create(
            table=table,
            table_name=f"{namespace}.{name}",
            report_type=str(report.get("report-type", "")),
            report=dict(report),
        )
        kept = int(getattr(settings, "METRICS_REPORTS_PER_TABLE", METRICS_REPORTS_PER_TABLE))
        oldest_kept = (
            TableMetricsReport.objects.filter(table=table, id__lte=created.pk)
            .order_by("-id")
            .values_list("id", flat=True)[max(kept, 1) - 1 : max(kept, 1)]
        )
        TableMetricsReport.objects.filter(table=table, id__lt=oldest_kept).delete()
    return True
