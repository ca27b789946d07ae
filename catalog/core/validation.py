"""Checks that new metadata is metadata engines can read, as Iceberg's Java builders check it.

pyiceberg parses schemas, partition specs and sort orders, but accepts some that Java's
`TableMetadata.Builder`, `Schema` and `PartitionSpec.Builder` refuse (Spark then fails on
the object with "Multiple entries with same key"): duplicate field ids, a schema id used
twice, unknown transforms, partition or sort fields over missing columns. Every refusal is a
`ValidationFailed` (HTTP 400, Iceberg's ValidationException) that names the problem."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.sorting import SortOrder
from pyiceberg.transforms import UnknownTransform
from pyiceberg.types import IcebergType, ListType, MapType, NestedField, StructType

from catalog.core.errors import ValidationFailed

JAVA_INT_MAX = 2**31 - 1
JAVA_LONG_MAX = 2**63 - 1


def _fields(struct: StructType) -> Iterator[NestedField]:
    """Every field of a struct, nested ones included (list elements and map keys/values are
    fields with ids of their own)."""
    for field in struct.fields:
        yield field
        yield from _nested(field.field_type)


def _nested(field_type: IcebergType) -> Iterator[NestedField]:
    if isinstance(field_type, StructType):
        yield from _fields(field_type)
    elif isinstance(field_type, ListType):
        yield field_type.element_field
        yield from _nested(field_type.element_type)
    elif isinstance(field_type, MapType):
        yield field_type.key_field
        yield field_type.value_field
        yield from _nested(field_type.key_type)
        yield from _nested(field_type.value_type)


def _column(schema: Schema, field_id: int) -> NestedField | None:
    try:
        return schema.find_field(field_id)
    except ValueError:
        return None


def validate_schema(schema: Schema, *, last_column_id: int | None, what: str = "schema") -> None:
    label = f"Invalid {what} {schema.schema_id}"
    if not 0 <= schema.schema_id <= JAVA_INT_MAX:
        raise ValidationFailed(f"{label}: the schema id is out of range")
    seen: dict[int, str] = {}
    for field in _fields(schema.as_struct()):
        if not 0 <= field.field_id <= JAVA_INT_MAX:
            raise ValidationFailed(f"{label}: field id {field.field_id} is out of range")
        if field.field_id in seen:
            raise ValidationFailed(
                f"{label}: duplicate field id {field.field_id} "
                f"({seen[field.field_id]}, {field.name})"
            )
        seen[field.field_id] = field.name
    if last_column_id is not None and seen and max(seen) > last_column_id:
        raise ValidationFailed(
            f"{label}: field id {max(seen)} is greater than last-column-id {last_column_id}"
        )
    for identifier in schema.identifier_field_ids:
        field = schema.find_field(identifier) if identifier in seen else None
        if field is None:
            raise ValidationFailed(f"{label}: identifier field {identifier} does not exist")
        if not field.required or not field.field_type.is_primitive:
            raise ValidationFailed(
                f"{label}: identifier field {field.name} must be a required primitive"
            )


def validate_schemas(schemas: Iterable[Schema], *, last_column_id: int | None) -> None:
    schemas = list(schemas)
    ids = [s.schema_id for s in schemas]
    duplicate = next((i for i in ids if ids.count(i) > 1), None)
    if duplicate is not None:
        raise ValidationFailed(f"Invalid metadata: schema id {duplicate} is used twice")
    for schema in schemas:
        validate_schema(schema, last_column_id=last_column_id)


def validate_partition_spec(spec: PartitionSpec, schema: Schema) -> None:
    label = f"Invalid partition spec {spec.spec_id}"
    seen_ids: set[int] = set()
    seen_names: set[str] = set()
    for field in spec.fields:
        if isinstance(field.transform, UnknownTransform):
            raise ValidationFailed(f"{label}: unknown transform {field.transform} on {field.name}")
        if field.field_id in seen_ids:
            raise ValidationFailed(f"{label}: duplicate partition field id {field.field_id}")
        if field.name in seen_names:
            raise ValidationFailed(f"{label}: duplicate partition field name {field.name}")
        seen_ids.add(field.field_id)
        seen_names.add(field.name)
        source = _column(schema, field.source_id)
        if source is None:
            raise ValidationFailed(
                f"{label}: field {field.name} has unknown source column {field.source_id}"
            )
        if not field.transform.can_transform(source.field_type):
            raise ValidationFailed(
                f"{label}: {field.transform} cannot transform {source.name} ({source.field_type})"
            )


def validate_sort_order(order: SortOrder, schema: Schema) -> None:
    label = f"Invalid sort order {order.order_id}"
    for field in order.fields:
        if isinstance(field.transform, UnknownTransform):
            raise ValidationFailed(f"{label}: unknown transform {field.transform}")
        source = _column(schema, field.source_id)
        if source is None:
            raise ValidationFailed(f"{label}: unknown source column {field.source_id}")
        if not field.transform.can_transform(source.field_type):
            raise ValidationFailed(
                f"{label}: {field.transform} cannot transform {source.name} ({source.field_type})"
            )


def _check_long(value: int | None, what: str) -> None:
    if value is not None and not -JAVA_LONG_MAX - 1 <= value <= JAVA_LONG_MAX:
        raise ValidationFailed(f"Invalid metadata: {what} {value} is out of range (a long)")


def validate_longs(metadata: TableMetadata) -> None:
    """Ids, sequence numbers and timestamps the spec types as long (Java's 64 bits)."""
    _check_long(metadata.last_updated_ms, "last-updated-ms")
    _check_long(metadata.current_snapshot_id, "current-snapshot-id")
    _check_long(getattr(metadata, "last_sequence_number", None), "last-sequence-number")
    for snapshot in metadata.snapshots:
        _check_long(snapshot.snapshot_id, "snapshot-id")
        _check_long(snapshot.parent_snapshot_id, "parent-snapshot-id")
        _check_long(snapshot.sequence_number, "sequence-number")
        _check_long(snapshot.timestamp_ms, "timestamp-ms")
    for entry in [*metadata.snapshot_log, *metadata.metadata_log]:
        _check_long(entry.timestamp_ms, "timestamp-ms")
    for name, ref in metadata.refs.items():
        _check_long(ref.snapshot_id, f"snapshot-id of ref {name[:100]}")


def validate_table_metadata(metadata: TableMetadata, base: TableMetadata | None) -> None:
    """Check what a change adds to `base` (everything, for a new table): new schemas, specs
    and sort orders are bound to the current schema, as Java's builder binds them when they
    are added; what was already there stays as it was written."""
    old_schemas = {s.schema_id for s in base.schemas} if base is not None else set()
    old_specs = {s.spec_id for s in base.partition_specs} if base is not None else set()
    old_orders = {o.order_id for o in base.sort_orders} if base is not None else set()
    validate_longs(metadata)
    validate_schemas(metadata.schemas, last_column_id=None)
    for schema in metadata.schemas:
        if schema.schema_id not in old_schemas:
            validate_schema(schema, last_column_id=metadata.last_column_id)
    current = metadata.schema()
    spec_ids = [s.spec_id for s in metadata.partition_specs]
    if len(set(spec_ids)) != len(spec_ids):
        raise ValidationFailed("Invalid metadata: a partition spec id is used twice")
    for spec in metadata.partition_specs:
        if spec.spec_id not in old_specs or spec.spec_id == metadata.default_spec_id:
            validate_partition_spec(spec, current)
    if metadata.last_partition_id is not None:
        highest = max((f.field_id for s in metadata.partition_specs for f in s.fields), default=0)
        if highest > metadata.last_partition_id:
            raise ValidationFailed(
                f"Invalid metadata: partition field id {highest} is greater than "
                f"last-partition-id {metadata.last_partition_id}"
            )
    for order in metadata.sort_orders:
        if order.order_id not in old_orders or order.order_id == metadata.default_sort_order_id:
            validate_sort_order(order, current)
