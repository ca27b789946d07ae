"""Checks that new metadata is metadata engines can read, as Iceberg's Java builders check it.

pyiceberg parses schemas, partition specs and sort orders, but accepts some that Java's
`TableMetadata.Builder`, `Schema`, `PartitionSpec.Builder` and `SortOrder.Builder` refuse
(Spark then fails on the object with "Multiple entries with same key"): duplicate field ids,
a schema id used twice, unknown transforms, partition or sort fields over missing or unfit
columns, numbers past Java's int and long. Every refusal is a `ValidationFailed` (HTTP 400,
Iceberg's ValidationException) that names the problem."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pyiceberg.exceptions import ValidationError as IcebergValidationError
from pyiceberg.partitioning import PARTITION_FIELD_ID_START, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.sorting import SortOrder
from pyiceberg.transforms import (
    BucketTransform,
    Transform,
    TruncateTransform,
    UnknownTransform,
    VoidTransform,
)
from pyiceberg.types import IcebergType, ListType, MapType, NestedField, StructType

from catalog.core.errors import InvalidInput, ValidationFailed

JAVA_INT_MIN = -(2**31)
JAVA_INT_MAX = 2**31 - 1
JAVA_LONG_MIN = -(2**63)
JAVA_LONG_MAX = 2**63 - 1

#: Keys whose numbers the specs type as int (Java's 32 bits); every other number in table
#: and view metadata (snapshot ids, sequence numbers, timestamps, sizes) is a long.
_INT_KEYS = frozenset(
    {
        "format-version",
        "last-column-id",
        "schema-id",
        "current-schema-id",
        "identifier-field-ids",
        "id",
        "element-id",
        "key-id",
        "value-id",
        "spec-id",
        "default-spec-id",
        "field-id",
        "source-id",
        "source-ids",
        "last-partition-id",
        "order-id",
        "default-sort-order-id",
        "min-snapshots-to-keep",
        "version-id",
        "current-version-id",
        # ... and in the REST protocol's updates and requirements:
        "sort-order-id",
        "view-version-id",
        "last-assigned-field-id",
        "last-assigned-partition-id",
        "schema-ids",
        "spec-ids",
    }
)
#: Keys whose numbers are longs, where a request names them.
_LONG_KEYS = frozenset(
    {
        "snapshot-id",
        "parent-snapshot-id",
        "snapshot-ids",
        "sequence-number",
        "last-sequence-number",
        "timestamp-ms",
        "last-updated-ms",
        "current-snapshot-id",
        "max-ref-age-ms",
        "max-snapshot-age-ms",
        "file-size-in-bytes",
        "file-footer-size-in-bytes",
        "first-row-id",
        "added-rows",
        "next-row-id",
    }
)
#: Keys whose values map strings to strings (a set-properties update's are "updates"), or
#: hold column values (defaults): no numbers of the spec inside.
_STRING_MAPS = frozenset({"properties", "summary", "updates"})
_DATA_KEYS = frozenset({"initial-default", "write-default"})
#: Longest part of a user's value echoed in a message.
ECHO_LIMIT = 200

#: What pyiceberg's parsers and update code raise for malformed input besides pydantic's
#: ValidationError: a TypeError for a default on a nested type, a KeyError for a list without
#: an element, decimal's InvalidOperation for a bad decimal default, a RecursionError for
#: absurd nesting, pyiceberg's own ValidationError for a bad decimal precision,
#: NotImplementedError for a default value pyiceberg cannot read (a geography's), ... Each is
#: the client's mistake, or input this catalog cannot take: refused, never a crash.
MALFORMED_INPUT_ERRORS: tuple[type[Exception], ...] = (
    NotImplementedError,
    TypeError,
    LookupError,
    ValueError,
    AttributeError,
    ArithmeticError,
    RecursionError,
    IcebergValidationError,
)


def short(value: object, limit: int = ECHO_LIMIT) -> str:
    """`value` as text for a message, cut to `limit` characters: messages never carry a
    whole document back to the client."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else f"{text[:limit]}..."


# -- numbers -------------------------------------------------------------------------------


def check_int(value: int, what: str) -> None:
    """Refuse a number Java's int cannot hold (field, schema, spec, order and version ids)."""
    if not JAVA_INT_MIN <= value <= JAVA_INT_MAX:
        raise ValidationFailed(f"Invalid metadata: {what} {short(value)} is out of range (an int)")


def check_long(value: int, what: str) -> None:
    """Refuse a number Java's long cannot hold (snapshot ids, sequence numbers, timestamps)."""
    if not JAVA_LONG_MIN <= value <= JAVA_LONG_MAX:
        raise ValidationFailed(f"Invalid metadata: {what} {short(value)} is out of range (a long)")


def _is_number(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_json_numbers(document: Any, what: str, where: str = "") -> None:
    """Refuse a request whose ids, sequence numbers or timestamps are not whole JSON
    numbers within Java's int or long, as Java's parsers refuse them: pydantic, even in strict
    mode, lets pyiceberg's schema, spec and order models (custom `__init__`s) turn "1" or
    true into 1."""
    if isinstance(document, Mapping):
        for key, value in document.items():
            if key in _STRING_MAPS or key in _DATA_KEYS:
                continue
            path = f"{where}.{key}" if where else str(key)
            if key in _INT_KEYS or key in _LONG_KEYS:
                limit = (JAVA_INT_MIN, JAVA_INT_MAX) if key in _INT_KEYS else None
                for index, item in enumerate(value if isinstance(value, list) else [value]):
                    _check_json_number(
                        item, f"{path}.{index}" if isinstance(value, list) else path, limit, what
                    )
            else:
                check_json_numbers(value, what, path)
    elif isinstance(document, list | tuple):
        for index, item in enumerate(document):
            check_json_numbers(item, what, f"{where}.{index}" if where else str(index))


def _check_json_number(value: object, where: str, limit: tuple[int, int] | None, what: str) -> None:
    if value is None:
        return  # an optional id left out; pydantic knows which may be
    low, high = limit or (JAVA_LONG_MIN, JAVA_LONG_MAX)
    if not _is_number(value) or not low <= value <= high:
        kind = "int" if limit else "long"
        raise InvalidInput(
            f"Invalid {what}: {where} must be a whole number that fits Java's {kind}, "
            f"not {short(repr(value), 100)}"
        )


def validate_number_ranges(document: Any, where: str = "", *, ints: bool = False) -> None:
    """Every number of a metadata document (as JSON) within the Java type the spec gives
    it: an int under the keys in `_INT_KEYS` (and in the list of field ids of a statistics
    blob), a long everywhere else. Java's parsers refuse the file otherwise."""
    if _is_number(document):
        (check_int if ints else check_long)(document, where or "number")
    elif isinstance(document, Mapping):
        for key, value in document.items():
            if key in _STRING_MAPS:
                continue
            path = f"{where}.{key}" if where else str(key)
            # A blob's "fields" are ids (ints); a schema's "fields" are objects, walked below.
            validate_number_ranges(value, path, ints=key in _INT_KEYS or key == "fields")
    elif isinstance(document, list | tuple):
        for index, item in enumerate(document):
            validate_number_ranges(item, f"{where}.{index}", ints=ints)


# -- schemas -------------------------------------------------------------------------------


def _fields(struct: StructType) -> Iterator[tuple[NestedField, bool]]:
    """Every field of a struct, nested ones included (list elements and map keys and values
    are fields with ids of their own), and whether it lies inside a list or a map."""
    yield from _walk(struct, inside_collection=False)


def _walk(
    field_type: IcebergType, *, inside_collection: bool
) -> Iterator[tuple[NestedField, bool]]:
    if isinstance(field_type, StructType):
        for field in field_type.fields:
            yield field, inside_collection
            yield from _walk(field.field_type, inside_collection=inside_collection)
    elif isinstance(field_type, ListType):
        yield field_type.element_field, True
        yield from _walk(field_type.element_type, inside_collection=True)
    elif isinstance(field_type, MapType):
        yield field_type.key_field, True
        yield field_type.value_field, True
        yield from _walk(field_type.key_type, inside_collection=True)
        yield from _walk(field_type.value_type, inside_collection=True)


def _column(schema: Schema, field_id: int) -> NestedField | None:
    try:
        return schema.find_field(field_id)
    except ValueError:
        return None


def validate_schema(
    schema: Schema,
    *,
    last_column_id: int | None,
    format_version: int | None = None,
    what: str = "schema",
) -> None:
    """Java's `Schema` and `TableMetadata.Builder.addSchema` checks: ids in range, each
    field id used once (nested fields included), none above `last-column-id`, types and
    defaults the table's format version supports, identifier fields that can be keys."""
    label = f"Invalid {what} {short(schema.schema_id)}"
    if not 0 <= schema.schema_id <= JAVA_INT_MAX:
        raise ValidationFailed(f"{label}: the schema id is out of range")
    seen: dict[int, str] = {}
    for field, _inside_collection in _fields(schema.as_struct()):
        if not 0 <= field.field_id <= JAVA_INT_MAX:
            raise ValidationFailed(f"{label}: field id {short(field.field_id)} is out of range")
        if field.field_id in seen:
            raise ValidationFailed(
                f"{label}: duplicate field id {field.field_id} "
                f"({short(seen[field.field_id], 100)}, {short(field.name, 100)})"
            )
        seen[field.field_id] = field.name
        if format_version is not None:
            _check_format_version(field, format_version, label)
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
                f"{label}: identifier field {short(field.name, 100)} must be a required primitive"
            )


def _check_format_version(field: NestedField, format_version: int, label: str) -> None:
    """Java's `Schema.checkCompatibility`: v3 types and initial defaults need format v3."""
    needed = field.field_type.minimum_format_version()
    if format_version < needed:
        raise ValidationFailed(
            f"{label}: {short(field.name, 100)} has type {field.field_type}, "
            f"which needs format version {needed} (the table is v{format_version})"
        )
    if field.initial_default is not None and format_version < 3:
        raise ValidationFailed(
            f"{label}: {short(field.name, 100)} has an initial-default, "
            f"which needs format version 3 (the table is v{format_version})"
        )


def _check_unique(ids: list[int], what: str) -> None:
    """Ids of one kind (schemas, specs, sort orders) are unique in a metadata document."""
    duplicate = next((i for i in ids if ids.count(i) > 1), None)
    if duplicate is not None:
        raise ValidationFailed(f"Invalid metadata: {what} {short(duplicate)} is used twice")


def validate_schemas(schemas: Iterable[Schema], *, last_column_id: int | None) -> None:
    schemas = list(schemas)
    _check_unique([s.schema_id for s in schemas], "schema id")
    for schema in schemas:
        validate_schema(schema, last_column_id=last_column_id)


# -- transforms, partition specs, sort orders ----------------------------------------------


def _check_transform(transform: Transform[Any, Any], where: str) -> None:
    """A transform Java knows, with a parameter Java's `Transforms` accepts."""
    if isinstance(transform, UnknownTransform):
        # pyiceberg keeps the name it did not know privately, and would write "unknown".
        name = getattr(transform, "_transform", None) or str(transform)
        raise ValidationFailed(f"{where}: unknown transform {short(name, 100)}")
    if isinstance(transform, BucketTransform) and not 0 < transform.num_buckets <= JAVA_INT_MAX:
        raise ValidationFailed(
            f"{where}: invalid number of buckets {short(transform.num_buckets)} (must be > 0)"
        )
    if isinstance(transform, TruncateTransform) and not 0 < transform.width <= JAVA_INT_MAX:
        raise ValidationFailed(
            f"{where}: invalid truncate width {short(transform.width)} (must be > 0)"
        )


def _check_source(
    transform: Transform[Any, Any], source: NestedField | None, source_id: int, where: str
) -> None:
    """Java's `checkCompatibility` of specs and orders: the source column exists, is a
    primitive, and the transform accepts its type."""
    if source is None:
        raise ValidationFailed(f"{where}: cannot find source column {short(source_id)}")
    if not source.field_type.is_primitive:
        raise ValidationFailed(
            f"{where}: source column {short(source.name, 100)} is not a primitive "
            f"({short(str(source.field_type), 100)})"
        )
    if not transform.can_transform(source.field_type):
        raise ValidationFailed(
            f"{where}: {transform} cannot transform {short(source.name, 100)} ({source.field_type})"
        )


def check_partition_fields(spec: PartitionSpec, *, format_version: int | None = None) -> None:
    """What a spec must satisfy whatever the schema: an id in range, known transforms, field
    ids and names used once, non-empty names; sequential field ids in a v1 table."""
    label = f"Invalid partition spec {short(spec.spec_id)}"
    if not 0 <= spec.spec_id <= JAVA_INT_MAX:
        raise ValidationFailed(f"{label}: the spec id is out of range")
    seen_ids: set[int] = set()
    seen_names: set[str] = set()
    for position, field in enumerate(spec.fields):
        where = f"{label}: field {short(field.name, 100)}"
        if not 0 <= field.field_id <= JAVA_INT_MAX:
            raise ValidationFailed(f"{where}: field id {short(field.field_id)} is out of range")
        if not 0 <= field.source_id <= JAVA_INT_MAX:
            raise ValidationFailed(f"{where}: source id {short(field.source_id)} is out of range")
        _check_transform(field.transform, where)
        if not field.name:
            raise ValidationFailed(f"{label}: a partition field has an empty name")
        if field.field_id in seen_ids:
            raise ValidationFailed(f"{label}: duplicate partition field id {field.field_id}")
        if field.name in seen_names:
            raise ValidationFailed(
                f"{label}: duplicate partition field name {short(field.name, 100)}"
            )
        if format_version == 1 and field.field_id != PARTITION_FIELD_ID_START + position:
            raise ValidationFailed(
                f"{label}: a v1 table needs sequential partition field ids from "
                f"{PARTITION_FIELD_ID_START}, not {field.field_id} at position {position}"
            )
        seen_ids.add(field.field_id)
        seen_names.add(field.name)


def validate_partition_spec(
    spec: PartitionSpec, schema: Schema, *, format_version: int | None = None
) -> None:
    """Java's `PartitionSpec.Builder` and `checkCompatibility` over `schema`."""
    check_partition_fields(spec, format_version=format_version)
    label = f"Invalid partition spec {spec.spec_id}"
    in_collection = {field.field_id for field, inside in _fields(schema.as_struct()) if inside}
    for field in spec.fields:
        where = f"{label}: field {short(field.name, 100)}"
        source = _column(schema, field.source_id)
        if source is not None:
            # Java's checkAndAddPartitionName: a partition may not take the name of another
            # column (its own column's name is fine, as Spark's identity partitions use it).
            namesake = _column_named(schema, field.name)
            if namesake is not None and namesake.field_id != field.source_id:
                raise ValidationFailed(
                    f"{where}: the name is that of another column ({namesake.field_id})"
                )
        if isinstance(field.transform, VoidTransform):
            # A v1 table's removed partition field: it reads nothing, so any source is fine.
            continue
        _check_source(field.transform, source, field.source_id, where)
        if field.source_id in in_collection:
            # Java: "Invalid partition field parent": a row has one value per partition field.
            raise ValidationFailed(
                f"{where}: source column {short(source.name, 100)} is inside a list or a map"
            )


def _column_named(schema: Schema, name: str) -> NestedField | None:
    try:
        return schema.find_field(name)
    except ValueError:
        return None


def check_sort_fields(order: SortOrder) -> None:
    """What an order must satisfy whatever the schema: an id in range, 0 for the unsorted
    order and only for it, known transforms."""
    label = f"Invalid sort order {short(order.order_id)}"
    if not 0 <= order.order_id <= JAVA_INT_MAX:
        raise ValidationFailed(f"{label}: the order id is out of range")
    if not order.fields and order.order_id != 0:
        raise ValidationFailed(f"{label}: the unsorted order's id must be 0")
    if order.fields and order.order_id == 0:
        raise ValidationFailed(f"{label}: order id 0 is reserved for the unsorted order")
    for field in order.fields:
        if not 0 <= field.source_id <= JAVA_INT_MAX:
            raise ValidationFailed(f"{label}: source id {short(field.source_id)} is out of range")
        _check_transform(field.transform, label)


def validate_sort_order(order: SortOrder, schema: Schema) -> None:
    """Java's `SortOrder.Builder` and `checkCompatibility` over `schema`."""
    check_sort_fields(order)
    label = f"Invalid sort order {order.order_id}"
    for field in order.fields:
        _check_source(field.transform, _column(schema, field.source_id), field.source_id, label)


# -- whole table metadata ------------------------------------------------------------------


def validate_table_metadata(metadata: TableMetadata, base: TableMetadata | None) -> None:
    """Check what a change adds to `base` (everything, for a new table) as Java's builder
    checks it when it is added: new schemas, specs and sort orders, the new ones bound to the
    current schema. What was already there stays as it was written (Java rebinds old specs
    to a new schema without checking them, so that old data stays readable)."""
    old_schemas = {s.schema_id for s in base.schemas} if base is not None else set()
    old_specs = {s.spec_id for s in base.partition_specs} if base is not None else set()
    old_orders = {o.order_id for o in base.sort_orders} if base is not None else set()
    validate_number_ranges(metadata.model_dump(by_alias=True, exclude_none=True))
    validate_schemas(metadata.schemas, last_column_id=None)
    for schema in metadata.schemas:
        if schema.schema_id not in old_schemas:
            validate_schema(
                schema,
                last_column_id=metadata.last_column_id,
                format_version=metadata.format_version,
            )
    # pyiceberg checks these only when it validates a whole document, not on a commit.
    current = metadata.schema_by_id(metadata.current_schema_id)
    if current is None:
        raise ValidationFailed(
            f"Invalid metadata: current schema {metadata.current_schema_id} does not exist"
        )
    if metadata.default_spec_id not in {s.spec_id for s in metadata.partition_specs}:
        raise ValidationFailed(
            f"Invalid metadata: default partition spec {metadata.default_spec_id} does not exist"
        )
    if metadata.default_sort_order_id not in {o.order_id for o in metadata.sort_orders}:
        raise ValidationFailed(
            f"Invalid metadata: default sort order {metadata.default_sort_order_id} does not exist"
        )
    _check_unique([s.spec_id for s in metadata.partition_specs], "partition spec id")
    for spec in metadata.partition_specs:
        if spec.spec_id not in old_specs:
            validate_partition_spec(spec, current, format_version=metadata.format_version)
    if metadata.last_partition_id is not None:
        highest = max((f.field_id for s in metadata.partition_specs for f in s.fields), default=0)
        if highest > metadata.last_partition_id:
            raise ValidationFailed(
                f"Invalid metadata: partition field id {highest} is greater than "
                f"last-partition-id {metadata.last_partition_id}"
            )
    _check_unique([o.order_id for o in metadata.sort_orders], "sort order id")
    for order in metadata.sort_orders:
        if order.order_id not in old_orders:
            validate_sort_order(order, current)
