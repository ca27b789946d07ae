"""The one writer of the database mirror: what a metadata file says, as rows.

`sync` runs inside the transaction that moves an object's pointer (catalog.services.kernel),
and `rebuild` re-derives every mirror row of an object from its metadata file alone (the
`rebuild_catalog_mirror` command). Nothing else writes these rows, so the mirror always says
what the file the pointer names says."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from django.db.models import Manager
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.view.metadata import ViewMetadata

from catalog.core.errors import CatalogError
from catalog.core.sql import check_parses, dependencies, parse_query
from catalog.core.view_metadata import ORIGINAL_DIALECT, current_version, sql_representations
from catalog.models import (
    CatalogObject,
    Table,
    TableSchemaField,
    TableSnapshot,
    View,
    ViewRead,
    ViewRepresentation,
    ViewSchemaField,
    ViewVersion,
)


def sync(obj: CatalogObject, metadata: Any) -> None:
    """Make the mirror rows of `obj` say what `metadata` says."""
    if isinstance(obj, View):
        _sync_view(obj, metadata)
    elif isinstance(obj, Table):
        _sync_table(obj, metadata)
    else:  # pragma: no cover - a new kind must teach the mirror first
        raise TypeError(f"No mirror for {type(obj).__name__}")


def rebuild(obj: CatalogObject, metadata: Any) -> None:
    """Forget every mirror row of `obj`, then derive them again from `metadata`."""
    if isinstance(obj, View):
        obj.versions.all().delete()
        obj.fields.all().delete()
        obj.log_entries.all().delete()
        obj.reads.all().delete()
    elif isinstance(obj, Table):
        obj.fields.all().delete()
        obj.snapshots.all().delete()
        obj.metadata_log.all().delete()
    sync(obj, metadata)


def _save(obj: CatalogObject, **values: Any) -> None:
    # Only mirror columns: the pointer (metadata_location) moves by the kernel's swap alone.
    for name, value in values.items():
        setattr(obj, name, value)
    obj.save(update_fields=list(values))


def dependencies_of_current(metadata: ViewMetadata) -> list[list[str]]:
    """What the current version's SQL reads, as [catalog, *namespace, name] lists: read from
    the SQL the user wrote (the original dialect), else the first representation."""
    version = current_version(metadata)
    representations = sql_representations(version)
    if not representations:
        return []
    original = version.summary.get(ORIGINAL_DIALECT, "").lower()
    chosen = next((r for r in representations if r.dialect.lower() == original), representations[0])
    try:
        query = parse_query(chosen.sql, chosen.dialect.lower())
    except CatalogError:
        return []
    default = (version.default_catalog or "", *version.default_namespace)
    return [list(parts) for parts in dependencies(query, default)]


def _sync_view(view: View, metadata: ViewMetadata) -> None:
    """Versions and schemas are immutable once written, so only new ones are inserted and
    expired ones deleted; the version log is small and rewritten whole."""
    _save(
        view,
        uuid=UUID(str(metadata.view_uuid)),
        location=metadata.location,
        properties=dict(metadata.properties),
        current_version_id=metadata.current_version_id,
        dependencies=dependencies_of_current(metadata),
    )
    _sync_reads(view)
    version_ids = {v.version_id for v in metadata.versions}
    view.versions.exclude(version_id__in=version_ids).delete()
    existing = set(view.versions.values_list("version_id", flat=True))
    for version in metadata.versions:
        if version.version_id in existing:
            continue
        representations = sql_representations(version)
        original = version.summary.get(ORIGINAL_DIALECT)
        if original is None and representations:
            original = representations[0].dialect
        row = ViewVersion.objects.create(
            view=view,
            version_id=version.version_id,
            schema_id=version.schema_id,
            timestamp_ms=version.timestamp_ms,
            summary=version.summary,
            default_catalog=version.default_catalog,
            default_namespace=list(version.default_namespace),
            sql_error=_sql_error(representations, original),
        )
        ViewRepresentation.objects.bulk_create(
            ViewRepresentation(
                version=row, dialect=r.dialect, sql=r.sql, is_original=r.dialect == original
            )
            for r in representations
        )
    _sync_schema_fields(view.fields, ViewSchemaField, {"view": view}, metadata.schemas)
    _rewrite_log(view.log_entries, metadata.version_log, version_id="version_id")


def _sql_error(representations: list, original: str | None) -> str:
    """Why sqlglot cannot read the original SQL, or "" (also for a dialect it does not know,
    which is taken on trust)."""
    chosen = next((r for r in representations if r.dialect == original), None)
    if chosen is None:
        return ""
    try:
        check_parses(chosen.sql, chosen.dialect)
    except CatalogError as error:
        return error.message[:1000]
    return ""


def _sync_reads(view: View) -> None:
    """`ViewRead` rows saying what `view.dependencies` says: rewritten when they differ."""
    wanted = {
        (str(catalog), ".".join(str(level) for level in levels), str(name))
        for catalog, *levels, name in view.dependencies
    }
    if set(view.reads.values_list("catalog", "namespace", "name")) == wanted:
        return
    view.reads.all().delete()
    ViewRead.objects.bulk_create(
        ViewRead(view=view, catalog=catalog, namespace=namespace, name=name)
        for catalog, namespace, name in sorted(wanted)
    )


def _sync_table(table: Table, metadata: TableMetadata) -> None:
    _save(
        table,
        uuid=UUID(str(metadata.table_uuid)),
        location=metadata.location,
        properties=dict(metadata.properties),
        format_version=metadata.format_version,
        current_schema_id=metadata.current_schema_id,
        current_snapshot_id=metadata.current_snapshot_id,
        default_spec_id=metadata.default_spec_id,
        last_updated_ms=metadata.last_updated_ms,
        partition_specs=[
            s.model_dump(by_alias=True, mode="json") for s in metadata.partition_specs
        ],
        sort_orders=[o.model_dump(by_alias=True, mode="json") for o in metadata.sort_orders],
        refs={
            name: ref.model_dump(by_alias=True, mode="json", exclude_none=True)
            for name, ref in metadata.refs.items()
        },
    )
    _sync_schema_fields(table.fields, TableSchemaField, {"table": table}, metadata.schemas)
    snapshot_ids = {s.snapshot_id for s in metadata.snapshots}
    table.snapshots.exclude(snapshot_id__in=snapshot_ids).delete()
    known = set(table.snapshots.values_list("snapshot_id", flat=True))
    TableSnapshot.objects.bulk_create(
        TableSnapshot(
            table=table,
            snapshot_id=s.snapshot_id,
            parent_snapshot_id=s.parent_snapshot_id,
            sequence_number=s.sequence_number,
            timestamp_ms=s.timestamp_ms,
            operation=s.summary.operation.value if s.summary else "",
            summary=s.summary.model_dump(mode="json") if s.summary else {},
            manifest_list=s.manifest_list or "",
            schema_id=s.schema_id,
        )
        for s in metadata.snapshots
        if s.snapshot_id not in known
    )
    _rewrite_log(table.metadata_log, metadata.metadata_log, metadata_file="metadata_file")


def _rewrite_log(rows: Manager, entries: list, **columns: str) -> None:
    """A log (a view's version log, a table's metadata log) is small and rewritten whole:
    one row per entry, its position, its time, and `columns` (row column -> entry field)."""
    rows.all().delete()
    rows.model.objects.bulk_create(
        rows.model(
            **{rows.field.name: rows.instance},
            position=position,
            timestamp_ms=entry.timestamp_ms,
            **{column: getattr(entry, attribute) for column, attribute in columns.items()},
        )
        for position, entry in enumerate(entries)
    )


def _sync_schema_fields(
    existing: Manager, model: type[ViewSchemaField | TableSchemaField], owner: dict, schemas
) -> None:
    """Mirror every schema's fields. Schemas are immutable once added, so only new ones are
    inserted and removed ones deleted: a commit that adds no schema touches no field row."""
    schema_ids = {schema.schema_id for schema in schemas}
    existing.exclude(schema_id__in=schema_ids).delete()
    known = set(existing.values_list("schema_id", flat=True).distinct())
    model.objects.bulk_create(
        model(
            **owner,
            schema_id=schema.schema_id,
            position=position,
            field_id=field.field_id,
            name=field.name,
            type=str(field.field_type),
            required=field.required,
            doc=field.doc,
        )
        for schema in schemas
        if schema.schema_id not in known
        for position, field in enumerate(schema.fields)
    )
