"""Iceberg table metadata for the REST catalog, on pyiceberg's own machinery.

pyiceberg builds new table metadata (`new_table_metadata`), parses the REST protocol's
requirements and updates (its discriminated `TableRequirement` / `TableUpdate` unions),
checks requirements (`TableRequirement.validate`) and applies updates
(`update_table_metadata`). This module wires those together, reads the JSON as strictly as
Java's parsers do, has `core.validation` refuse what Java's builders refuse (pyiceberg
accepts it), and turns every error into the catalog's domain errors: malformed input is
never a crash."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.exceptions import ValidationError as IcebergValidationError
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import (
    TableMetadata,
    TableMetadataUtil,
    TableMetadataV1,
    new_table_metadata,
)
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER, SortOrder
from pyiceberg.table.update import (
    AddPartitionSpecUpdate,
    AddSchemaUpdate,
    AddSortOrderUpdate,
    AssertCreate,
    RemovePropertiesUpdate,
    SetPropertiesUpdate,
    TableRequirement,
    TableUpdate,
    update_table_metadata,
)

from catalog.core import metadata_io
from catalog.core.errors import (
    CommitConflict,
    InvalidInput,
    InvalidMetadata,
    ValidationFailed,
    describe_validation_error,
)
from catalog.core.validation import (
    MALFORMED_INPUT_ERRORS,
    check_json_numbers,
    check_partition_fields,
    check_sort_fields,
    short,
    validate_partition_spec,
    validate_schema,
    validate_sort_order,
    validate_table_metadata,
)

ModelT = TypeVar("ModelT", bound=BaseModel)

_REQUIREMENTS = TypeAdapter(list[TableRequirement])
_UPDATES = TypeAdapter(list[TableUpdate])

#: Malformed input as pyiceberg fails on it, plus StopIteration: pyiceberg looks up a
#: table's current schema, spec and order with next().
_MALFORMED = (*MALFORMED_INPUT_ERRORS, StopIteration)


def _invalid(what: str, error: ValidationError) -> InvalidInput:
    # pydantic's message may quote the value, which may be most of the request.
    return InvalidInput(f"Invalid {what}: {short(describe_validation_error(error))}")


def parse_table_metadata(document: Mapping[str, Any], *, source: str) -> TableMetadata:
    """A metadata document as pyiceberg's model; InvalidMetadata, briefly, if it is not one."""
    if not isinstance(document, Mapping):
        raise InvalidMetadata(f"{source}: not Iceberg table metadata", field="metadata_location")
    try:
        return TableMetadataUtil.parse_obj(dict(document))
    except ValidationError as error:
        raise InvalidMetadata(
            f"{source}: {short(describe_validation_error(error))}", field="metadata_location"
        ) from None
    except _MALFORMED as error:
        # Short: the message of a parser may quote the whole document.
        raise InvalidMetadata(
            f"{source}: not Iceberg table metadata ({short(str(error) or type(error).__name__)})",
            field="metadata_location",
        ) from None


def read_table_metadata(path: str) -> TableMetadata:
    return parse_table_metadata(metadata_io.read_json(path), source=path)


def table_metadata_json(metadata: TableMetadata) -> str:
    return metadata.model_dump_json(by_alias=True, exclude_none=True)


def write_table_metadata(metadata: TableMetadata, previous_metadata_location: str | None) -> str:
    path = metadata_io.new_metadata_location(metadata.location, previous_metadata_location)
    metadata_io.write_json(path, table_metadata_json(metadata))
    return path


PARQUET_COMPRESSION = "write.parquet.compression-codec"
PARQUET_COMPRESSION_DEFAULT = "zstd"


def new_table(
    *,
    schema: Mapping[str, Any],
    location: str,
    partition_spec: Mapping[str, Any] | None = None,
    write_order: Mapping[str, Any] | None = None,
    properties: Mapping[str, str] | None = None,
) -> TableMetadata:
    """Metadata for a new table, with fresh field ids as Iceberg's catalogs assign them."""
    properties = _string_map(properties or {}, "properties", "table definition")
    # Iceberg's Java catalogs give every new table zstd Parquet (TableMetadata's persisted
    # default since 1.4); a table without the property is written with gzip, several times
    # slower, by Spark.
    properties.setdefault(PARQUET_COMPRESSION, PARQUET_COMPRESSION_DEFAULT)
    with _refusing("table definition"):
        check_json_numbers([schema, partition_spec, write_order], "table definition")
        parsed_schema = _strictly(Schema, schema)
        spec = (
            _strictly(PartitionSpec, partition_spec)
            if partition_spec
            else UNPARTITIONED_PARTITION_SPEC
        )
        order = _strictly(SortOrder, write_order) if write_order else UNSORTED_SORT_ORDER
    # The client's own ids are checked before they are reassigned: a spec or an order names
    # columns by the ids the client gave them.
    validate_schema(parsed_schema, last_column_id=None)
    validate_partition_spec(spec, parsed_schema)
    validate_sort_order(order, parsed_schema)
    with _refusing("table definition"):
        metadata = new_table_metadata(
            parsed_schema,
            spec,
            order,
            location,
            properties,
        )
    _check_writable(metadata)
    validate_table_metadata(metadata, None)
    return metadata


#: The newest table format version pyiceberg can write (it refuses to write v3 metadata).
WRITABLE_FORMAT_VERSION = 2


def _check_writable(metadata: TableMetadata) -> None:
    """Refuse, as a bad request, a table this catalog could not write the metadata of."""
    if metadata.format_version > WRITABLE_FORMAT_VERSION:
        raise InvalidInput(
            f"Unsupported format version: v{metadata.format_version} "
            f"(this catalog writes v1 to v{WRITABLE_FORMAT_VERSION})"
        )


def _string_map(value: object, name: str, what: str) -> dict[str, str]:
    """`value` if it maps strings to strings, as Iceberg's properties must; pyiceberg would
    turn a number, a list or an object into its Python text."""
    if not isinstance(value, Mapping):
        raise InvalidInput(f"Invalid {what}: {name} must be an object", field=name)
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise InvalidInput(
                f"Invalid {what}: {name} must map strings to strings "
                f"({short(key, 100)} is {type(item).__name__})",
                field=name,
            )
    return dict(value)


def _json(document: Any) -> str:
    # JSON again, as the client sent it (callers in Python may pass enums or UUIDs).
    return json.dumps(document, default=to_jsonable_python)


def _strictly(model: type[ModelT], document: Any) -> ModelT:
    """A pyiceberg model read as Java's parsers read JSON: a number where a number belongs,
    a string where a string does ("1" or true is no field id, as it is in pydantic's lax
    mode)."""
    return model.model_validate_json(_json(document), strict=True)


def _parse_strictly(adapter: TypeAdapter[Any], items: Sequence[Any], what: str) -> list[Any]:
    """A list of requirements or updates, read strictly (see `_strictly`)."""
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        raise InvalidInput(f"Invalid {what}: expected a list")
    with _refusing(what):
        check_json_numbers(list(items), what)
        return adapter.validate_json(_json(list(items)), strict=True)


def parse_changes(
    requirements: Sequence[Mapping[str, Any]], updates: Sequence[Mapping[str, Any]]
) -> tuple[tuple[TableRequirement, ...], tuple[TableUpdate, ...]]:
    """The REST protocol's requirements and updates as pyiceberg's models; InvalidInput (or
    ValidationFailed) naming the first one that is malformed."""
    parsed_requirements = _parse_strictly(_REQUIREMENTS, requirements, "table requirement")
    for update in updates if isinstance(updates, Sequence) else ():
        if isinstance(update, Mapping) and update.get("action") == "set-properties":
            _string_map(update.get("updates"), "updates", "table update set-properties")
    parsed_updates = _parse_strictly(_UPDATES, updates, "table update")
    for update in parsed_updates:
        _check_update(update)
    return tuple(parsed_requirements), tuple(parsed_updates)


def _check_update(update: TableUpdate) -> None:
    """What can be refused in an added schema, spec or order before it is applied; their
    columns are checked once the commit's current schema is known."""
    if isinstance(update, AddSchemaUpdate):
        validate_schema(update.schema_, last_column_id=None)
    elif isinstance(update, AddPartitionSpecUpdate):
        check_partition_fields(update.spec)
    elif isinstance(update, AddSortOrderUpdate):
        check_sort_fields(update.sort_order)


def _detail(error: BaseException) -> str:
    """A parser's error in a few words: a KeyError's text is only the missing key."""
    if isinstance(error, KeyError) and error.args:
        return f"required field {short(error.args[0], 100)} is missing"
    return short(str(error) or type(error).__name__)


@contextmanager
def _refusing(what: str) -> Iterator[None]:
    """Malformed input refused as the client's mistake, never with the whole document
    echoed (pyiceberg's parsers raise more than pydantic's ValidationError, see
    `_MALFORMED`)."""
    try:
        yield
    except ValidationError as error:
        raise _invalid(what, error) from None
    except _MALFORMED as error:
        raise InvalidInput(f"Invalid {what}: {_detail(error)}") from None


def is_create(requirements: Sequence[TableRequirement]) -> bool:
    return any(isinstance(r, AssertCreate) for r in requirements)


def _drop_missing_removals(
    base: TableMetadata | None, updates: Sequence[TableUpdate]
) -> list[TableUpdate]:
    """Removing a property that is not set is no error in Iceberg's Java catalogs (Spark's
    UNSET TBLPROPERTIES IF EXISTS relies on it); pyiceberg would fail on the missing key."""
    present = set(base.properties) if base is not None else set()
    result: list[TableUpdate] = []
    for update in updates:
        if isinstance(update, RemovePropertiesUpdate):
            present_now = [key for key in update.removals if key in present]
            update = update.model_copy(update={"removals": present_now})
        elif isinstance(update, SetPropertiesUpdate):
            present |= set(update.updates)
        result.append(update)
    return result


def _drop_repeated_additions(
    base: TableMetadata | None, updates: Sequence[TableUpdate]
) -> list[TableUpdate]:
    """Adding a schema, spec or order equal to one the table has, id included, changes
    nothing in Java's builder (it reuses the existing one); pyiceberg would append a second
    copy under the same id, which engines cannot read."""

    def same_schema(left: Schema, right: Schema) -> bool:
        # Schema's own equality ignores the id; compared in lists, as pyiceberg's list
        # types do not hash consistently with their equality.
        return left.schema_id == right.schema_id and left == right

    schemas = list(base.schemas) if base is not None else []
    specs = list(base.partition_specs) if base is not None else []
    orders = list(base.sort_orders) if base is not None else []
    result: list[TableUpdate] = []
    for update in updates:
        if isinstance(update, AddSchemaUpdate):
            if any(same_schema(update.schema_, existing) for existing in schemas):
                continue
            schemas.append(update.schema_)
        elif isinstance(update, AddPartitionSpecUpdate):
            if update.spec in specs:
                continue
            specs.append(update.spec)
        elif isinstance(update, AddSortOrderUpdate):
            if update.sort_order in orders:
                continue
            orders.append(update.sort_order)
        result.append(update)
    return result


def apply_changes(
    base: TableMetadata | None,
    base_location: str | None,
    requirements: Sequence[TableRequirement],
    updates: Sequence[TableUpdate],
) -> TableMetadata:
    """Check every requirement against `base`, then apply every update.

    `base` is None for a table being created by this commit (a staged create)."""
    for requirement in requirements:
        try:
            requirement.validate(base)
        except CommitFailedException as error:
            raise CommitConflict(short(str(error))) from None
    start = (
        base
        if base is not None
        else TableMetadataV1.model_construct(last_column_id=-1, schema=Schema())
    )
    updates = _drop_repeated_additions(base, _drop_missing_removals(base, updates))
    try:
        metadata = update_table_metadata(
            base_metadata=start,
            updates=tuple(updates),
            enforce_validation=base is None,
            metadata_location=base_location,
        )
    except CommitFailedException as error:
        raise CommitConflict(short(str(error))) from None
    except ValidationError as error:
        raise _invalid("table update", error) from None
    except IcebergValidationError as error:
        # pyiceberg's check of the default spec and order against the current schema: what
        # Java's builder refuses with a ValidationException too.
        raise ValidationFailed(f"Invalid table update: {short(str(error))}") from None
    except StopIteration:
        # pyiceberg looks up the current schema, spec and order with next().
        raise InvalidInput(
            "Cannot apply the table update: the table would have no current schema, "
            "partition spec or sort order"
        ) from None
    except _MALFORMED as error:
        raise InvalidInput(f"Cannot apply the table update: {_detail(error)}") from None
    _check_writable(metadata)
    validate_table_metadata(metadata, base)
    return metadata
