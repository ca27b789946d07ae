"""Writes to Iceberg tables: create (also staged), commit, multi-table commit, register,
rename, drop (with purge), metrics reports.

Tables follow the same protocol as views (see services.py): build the new metadata with
pyiceberg, write it to a new file, then swap the pointer with a conditional UPDATE in one
transaction with the mirror. A multi-table commit swaps every pointer in one transaction:
all of them move, or none does."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from pyarrow import fs as pafs
from pyiceberg.table.metadata import TableMetadata

from catalog import mirror
from catalog.core import metadata_io, tables
from catalog.core.errors import CommitConflict, InvalidInput, NoSuchTable
from catalog.models import CatalogEvent, Table, TableMetricsReport
from catalog.services import (
    check_name,
    check_namespace_name,
    ensure_name_free,
    get_namespace,
    move,
    record_event,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableChange:
    """One table's part of a commit, as the REST protocol sends it."""

    namespace: str
    name: str
    requirements: Sequence[Mapping[str, Any]]
    updates: Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class LoadedTable:
    table: Table | None
    metadata: TableMetadata
    metadata_location: str | None


def get_table(namespace: str, name: str) -> Table:
    try:
        return Table.objects.select_related("namespace").get(namespace__name=namespace, name=name)
    except Table.DoesNotExist:
        raise NoSuchTable(f"Table does not exist: {namespace}.{name}", field="name") from None


def _default_location(namespace: str, name: str) -> str:
    return metadata_io.join(settings.WAREHOUSE, *namespace.split("."), name)


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
    name = check_name(name)
    ns = get_namespace(check_namespace_name(namespace))
    ensure_name_free(ns, name, creating="table")
    location = metadata_io.ensure_within(
        location or _default_location(ns.name, name), settings.WAREHOUSE
    )
    metadata = tables.new_table(
        schema=schema,
        location=location,
        partition_spec=partition_spec,
        write_order=write_order,
        properties=properties,
    )
    if stage_create:
        return LoadedTable(None, metadata, None)
    metadata_location = tables.write_table_metadata(metadata, None)
    try:
        table = _insert_table(
            ns=ns, name=name, metadata=metadata, metadata_location=metadata_location, actor=actor
        )
    except Exception:
        metadata_io.delete_file(metadata_location)
        raise
    return LoadedTable(table, metadata, metadata_location)


@transaction.atomic
def _insert_table(
    *,
    ns,
    name: str,
    metadata: TableMetadata,
    metadata_location: str,
    actor: Any,
    action="create_table",
) -> Table:
    ensure_name_free(ns, name, creating="table")
    table = Table.objects.create(
        namespace=ns,
        name=name,
        table_uuid=metadata.table_uuid,
        location=metadata.location,
        metadata_location=metadata_location,
    )
    mirror.sync_table(table, metadata)
    record_event(
        actor=actor,
        action=action,
        object_type="table",
        object_name=str(table),
        metadata_location=metadata_location,
    )
    return table


@dataclass
class _Prepared:
    change: TableChange
    table: Table | None
    base_location: str | None
    metadata: TableMetadata
    new_location: str


def _prepare(change: TableChange) -> _Prepared:
    requirements, updates = tables.parse_changes(change.requirements, change.updates)
    table = Table.objects.filter(namespace__name=change.namespace, name=change.name).first()
    if table is None:
        if not tables.is_create(requirements):
            raise NoSuchTable(f"Table does not exist: {change.namespace}.{change.name}")
        ns = get_namespace(change.namespace)
        ensure_name_free(ns, check_name(change.name), creating="table")
        metadata = tables.apply_changes(None, None, requirements, updates)
        metadata_io.ensure_within(metadata.location, settings.WAREHOUSE)
        base_location = None
    else:
        base_location = table.metadata_location
        base = tables.read_table_metadata(base_location)
        if str(base.table_uuid) != str(table.table_uuid):
            raise CommitConflict(f"Table UUID changed for {table}")
        metadata = tables.apply_changes(base, base_location, requirements, updates)
        if metadata.location != base.location:
            metadata_io.ensure_within(metadata.location, settings.WAREHOUSE)
    new_location = tables.write_table_metadata(metadata, base_location)
    return _Prepared(change, table, base_location, metadata, new_location)


def commit_table(
    *,
    namespace: str,
    name: str,
    requirements: Sequence[Mapping[str, Any]],
    updates: Sequence[Mapping[str, Any]],
    actor: Any = None,
) -> LoadedTable:
    [loaded] = commit_tables(
        changes=[TableChange(namespace, name, requirements, updates)], actor=actor
    )
    return loaded


def commit_tables(*, changes: Sequence[TableChange], actor: Any = None) -> list[LoadedTable]:
    """Commit changes to one or more tables atomically: all pointers move, or none."""
    names = [(c.namespace, c.name) for c in changes]
    if len(set(names)) != len(names):
        raise InvalidInput("A transaction names the same table twice")
    prepared: list[_Prepared] = []
    try:
        for change in changes:
            prepared.append(_prepare(change))
        with transaction.atomic():
            results = [_swap(p, actor=actor) for p in prepared]
    except Exception as error:
        for p in prepared:
            metadata_io.delete_file(p.new_location)
        if isinstance(error, CommitConflict):
            for change in changes:
                record_event(
                    actor=actor,
                    action="commit_table",
                    object_type="table",
                    object_name=f"{change.namespace}.{change.name}",
                    result=CatalogEvent.Result.CONFLICT,
                    message=error.message,
                )
        raise
    return results


def _swap(p: _Prepared, *, actor: Any) -> LoadedTable:
    if p.table is None:
        ns = get_namespace(p.change.namespace)
        table = _insert_table(
            ns=ns,
            name=p.change.name,
            metadata=p.metadata,
            metadata_location=p.new_location,
            actor=actor,
        )
        return LoadedTable(table, p.metadata, p.new_location)
    swapped = Table.objects.filter(pk=p.table.pk, metadata_location=p.base_location).update(
        metadata_location=p.new_location, location=p.metadata.location
    )
    if swapped != 1:
        raise CommitConflict(
            f"Commit failed: table {p.table} was changed by another writer; refresh and retry"
        )
    mirror.sync_table(p.table, p.metadata)
    record_event(
        actor=actor,
        action="commit_table",
        object_type="table",
        object_name=str(p.table),
        metadata_location=p.new_location,
    )
    return LoadedTable(p.table, p.metadata, p.new_location)


def register_table(
    *, namespace: str, name: str, metadata_location: str, overwrite: bool = False, actor: Any = None
) -> LoadedTable:
    name = check_name(name)
    ns = get_namespace(check_namespace_name(namespace))
    try:
        path = metadata_io.ensure_within(metadata_location, settings.WAREHOUSE)
    except InvalidInput as error:
        raise InvalidInput(error.message, field="metadata_location") from error
    metadata = tables.read_table_metadata(path)
    metadata_io.ensure_within(metadata.location, settings.WAREHOUSE)
    existing = Table.objects.filter(namespace=ns, name=name).first()
    if existing is not None and overwrite:
        with transaction.atomic():
            Table.objects.filter(pk=existing.pk).update(
                metadata_location=path, location=metadata.location, table_uuid=metadata.table_uuid
            )
            mirror.sync_table(existing, metadata)
            record_event(
                actor=actor,
                action="register_table",
                object_type="table",
                object_name=str(existing),
                metadata_location=path,
            )
        return LoadedTable(existing, metadata, path)
    table = _insert_table(
        ns=ns,
        name=name,
        metadata=metadata,
        metadata_location=path,
        actor=actor,
        action="register_table",
    )
    return LoadedTable(table, metadata, path)


@transaction.atomic
def rename_table(
    *, namespace: str, name: str, new_namespace: str, new_name: str, actor: Any = None
) -> Table:
    return move(
        get_table(namespace, name),
        kind="table",
        new_namespace=new_namespace,
        new_name=new_name,
        fields=("destination", "destination"),
        actor=actor,
    )


def drop_table(*, namespace: str, name: str, purge: bool = False, actor: Any = None) -> None:
    """Forget the table; with `purge`, also delete its files once the drop has committed."""
    with transaction.atomic():
        table = get_table(namespace, name)
        location = table.location
        record_event(
            actor=actor,
            action="purge_table" if purge else "drop_table",
            object_type="table",
            object_name=str(table),
            metadata_location=table.metadata_location or "",
        )
        table.delete()
        if purge:
            transaction.on_commit(lambda: _purge(location))


def _purge(location: str) -> None:
    # Only ever inside the warehouse: a location that is not is left alone.
    try:
        path = metadata_io.ensure_within(location, settings.WAREHOUSE)
    except InvalidInput:
        logger.warning("Not purging %s: outside the warehouse", location)
        return
    if path.rstrip("/") == metadata_io.normalize_location(settings.WAREHOUSE):
        return
    filesystem, root = pafs.FileSystem.from_uri(path if "://" in path else f"file://{path}")
    with contextlib.suppress(FileNotFoundError):
        filesystem.delete_dir(root)


def record_metrics(*, namespace: str, name: str, report: Mapping[str, Any]) -> None:
    table = Table.objects.filter(namespace__name=namespace, name=name).first()
    if table is None:
        raise NoSuchTable(f"Table does not exist: {namespace}.{name}")
    TableMetricsReport.objects.create(
        table=table,
        table_name=f"{namespace}.{name}",
        report_type=str(report.get("report-type", "")),
        report=dict(report),
    )
