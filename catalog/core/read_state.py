"""The table state a read sees: the metadata parsed, the snapshot (the current one, or the
one a snapshot id or a timestamp names, by `catalog.core.attached.state_at`, ClickHouse's
rules and words) and that snapshot's own schema, which a read at it checks its columns and
filter against; and `schema_at`, that schema field by field. Django-free."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata, TableMetadataUtil
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.types import IcebergType, NestedField, StructType

from catalog.core.attached import state_at
from catalog.core.errors import InvalidInput, InvalidMetadata


@dataclass(frozen=True)
class SchemaField:
    field_id: int
    #: Dotted path for nested fields ("address.city"; list elements "tags.element").
    name: str
    type: str
    required: bool
    doc: str | None
    #: 0 for top-level columns.
    depth: int


@dataclass(frozen=True)
class SchemaAt:
    schema_id: int
    snapshot_id: int | None
    fields: tuple[SchemaField, ...]
    identifier_field_ids: tuple[int, ...]


def _table_metadata(metadata: TableMetadata | Mapping[str, Any]) -> TableMetadata:
    if isinstance(metadata, Mapping):
        try:
            return TableMetadataUtil.parse_obj(dict(metadata))
        except (ValueError, TypeError, KeyError) as error:
            raise InvalidMetadata(f"Not Iceberg table metadata: {str(error)[:300]}") from error
    return metadata


def _state_document(
    metadata: TableMetadata, original: Mapping[str, Any] | None, time_travel: bool
) -> Mapping[str, Any]:
    """What `state_at` reads, from the JSON when there is one; otherwise rebuilt from the
    model (the snapshot list only for a time-travel read, where it is needed)."""
    if original is not None:
        return original
    document: dict[str, Any] = {
        "current-snapshot-id": metadata.current_snapshot_id,
        "current-schema-id": metadata.current_schema_id,
    }
    if time_travel:
        document["snapshot-log"] = [
            {"snapshot-id": entry.snapshot_id, "timestamp-ms": entry.timestamp_ms}
            for entry in metadata.snapshot_log
        ]
        document["snapshots"] = [
            {"snapshot-id": snapshot.snapshot_id}
            | ({"schema-id": snapshot.schema_id} if snapshot.schema_id is not None else {})
            for snapshot in metadata.snapshots
        ]
    return document


def _schema(metadata: TableMetadata, schema_id: int) -> Schema:
    for schema in metadata.schemas:
        if schema.schema_id == schema_id:
            return schema
    raise InvalidMetadata(f"The metadata has no schema with id {schema_id}")


def resolve(
    metadata: TableMetadata | Mapping[str, Any],
    *,
    table_path: str,
    snapshot_id: int | None,
    timestamp_ms: int | None,
) -> tuple[TableMetadata, Snapshot | None, Schema]:
    """The parsed metadata, the snapshot a read sees and its schema (see `state_at`)."""
    original = metadata if isinstance(metadata, Mapping) else None
    parsed = _table_metadata(metadata)
    for name, value in (("snapshot_id", snapshot_id), ("timestamp_ms", timestamp_ms)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise InvalidInput(f"{name} must be a whole number", field=name)
    time_travel = snapshot_id is not None or timestamp_ms is not None
    state = state_at(
        _state_document(parsed, original, time_travel),
        table_path=table_path,
        snapshot_id=snapshot_id,
        timestamp_ms=timestamp_ms,
    )
    snapshot = parsed.snapshot_by_id(state.snapshot_id) if state.snapshot_id is not None else None
    if state.snapshot_id is not None and snapshot is None:
        raise InvalidMetadata(f"The current snapshot {state.snapshot_id} is not in the metadata")
    return parsed, snapshot, _schema(parsed, state.schema_id)


def schema_at(
    metadata: TableMetadata | Mapping[str, Any],
    *,
    table_path: str,
    snapshot_id: int | None = None,
    timestamp_ms: int | None = None,
) -> SchemaAt:
    """The schema a read at `snapshot_id` or `timestamp_ms` uses (the snapshot's own), or
    the table's current schema; every field, nested ones after their parent. Time-travel
    errors as `state_at` words them."""
    parsed, snapshot, schema = resolve(
        metadata, table_path=table_path, snapshot_id=snapshot_id, timestamp_ms=timestamp_ms
    )
    fields: list[SchemaField] = []

    def walk(struct: Iterable[NestedField], prefix: str, depth: int) -> None:
        for nested in struct:
            name = f"{prefix}{nested.name}"
            fields.append(
                SchemaField(
                    field_id=nested.field_id,
                    name=name,
                    type=str(nested.field_type),
                    required=nested.required,
                    doc=nested.doc,
                    depth=depth,
                )
            )
            kind = nested.field_type
            if isinstance(kind, StructType):
                walk(kind.fields, f"{name}.", depth + 1)
            else:
                walk(_children(kind), f"{name}.", depth + 1)

    walk(schema.fields, "", 0)
    return SchemaAt(
        schema_id=schema.schema_id,
        snapshot_id=snapshot.snapshot_id if snapshot else None,
        fields=tuple(fields),
        identifier_field_ids=tuple(schema.identifier_field_ids),
    )


def _children(kind: IcebergType) -> list[NestedField]:
    from pyiceberg.types import ListType, MapType

    if isinstance(kind, ListType):
        return [kind.element_field]
    if isinstance(kind, MapType):
        return [kind.key_field, kind.value_field]
    return []
