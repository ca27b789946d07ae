"""Iceberg table metadata for the REST catalog, on pyiceberg's own machinery.

pyiceberg builds new table metadata (`new_table_metadata`), parses the REST protocol's
requirements and updates (its discriminated `TableRequirement` / `TableUpdate` unions),
checks requirements (`TableRequirement.validate`) and applies updates
(`update_table_metadata`). This module only wires those together and turns their errors
into the catalog's domain errors."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from pydantic import TypeAdapter, ValidationError
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
    describe_validation_error,
)
from catalog.core.validation import (
    validate_partition_spec,
    validate_schema,
    validate_sort_order,
    validate_table_metadata,
)

_REQUIREMENTS = TypeAdapter(list[TableRequirement])
_UPDATES = TypeAdapter(list[TableUpdate])


def _invalid(what: str, error: ValidationError) -> InvalidInput:
    return InvalidInput(f"Invalid {what}: {describe_validation_error(error)}")


def parse_table_metadata(document: Mapping[str, Any], *, source: str) -> TableMetadata:
    try:
        return TableMetadataUtil.parse_obj(dict(document))
    except ValidationError as error:
        raise InvalidMetadata(
            f"{source}: {describe_validation_error(error)}", field="metadata_location"
        ) from error
    except (ValueError, TypeError, KeyError, AttributeError, IcebergValidationError) as error:
        # Short: the message of a parser may quote the whole document.
        raise InvalidMetadata(
            f"{source}: not Iceberg table metadata ({str(error)[:200]})", field="metadata_location"
        ) from None


def read_table_metadata(path: str) -> TableMetadata:
    return parse_table_metadata(metadata_io.read_json(path), source=path)


def table_metadata_json(metadata: TableMetadata) -> str:
    return metadata.model_dump_json(by_alias=True, exclude_none=True)


def write_table_metadata(metadata: TableMetadata, previous_metadata_location: str | None) -> str:
    path = metadata_io.new_metadata_location(metadata.location, previous_metadata_location)
    metadata_io.write_json(path, table_metadata_json(metadata))
    return path


def new_table(
    *,
    schema: Mapping[str, Any],
    location: str,
    partition_spec: Mapping[str, Any] | None = None,
    write_order: Mapping[str, Any] | None = None,
    properties: Mapping[str, str] | None = None,
) -> TableMetadata:
    """Metadata for a new table, with fresh field ids as Iceberg's catalogs assign them."""
    with _refusing("table definition"):
        parsed_schema = Schema.model_validate(schema)
        spec = (
            PartitionSpec.model_validate(partition_spec)
            if partition_spec
            else UNPARTITIONED_PARTITION_SPEC
        )
        order = SortOrder.model_validate(write_order) if write_order else UNSORTED_SORT_ORDER
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
            {str(k): str(v) for k, v in (properties or {}).items()},
        )
    validate_table_metadata(metadata, None)
    return metadata


def parse_changes(
    requirements: Sequence[Mapping[str, Any]], updates: Sequence[Mapping[str, Any]]
) -> tuple[tuple[TableRequirement, ...], tuple[TableUpdate, ...]]:
    with _refusing("table requirement"):
        parsed_requirements = tuple(_REQUIREMENTS.validate_python(list(requirements)))
    with _refusing("table update"):
        parsed_updates = tuple(_UPDATES.validate_python(list(updates)))
    return parsed_requirements, parsed_updates


@contextmanager
def _refusing(what: str) -> Iterator[None]:
    """pyiceberg's parsers raise more than ValidationError for malformed input (a TypeError
    for a default on a nested type, a KeyError for a list without an element, ...): each is
    the client's mistake, refused as such, and never with the whole document echoed."""
    try:
        yield
    except ValidationError as error:
        raise _invalid(what, error) from None
    except (
        TypeError,
        KeyError,
        ValueError,
        AttributeError,
        IndexError,
        RecursionError,
        IcebergValidationError,
    ) as error:
        detail = str(error)[:200] or type(error).__name__
        raise InvalidInput(f"Invalid {what}: {detail}") from None


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
            raise CommitConflict(str(error)) from error
    start = (
        base
        if base is not None
        else TableMetadataV1.model_construct(last_column_id=-1, schema=Schema())
    )
    try:
        metadata = update_table_metadata(
            base_metadata=start,
            updates=tuple(_drop_missing_removals(base, updates)),
            enforce_validation=base is None,
            metadata_location=base_location,
        )
    except CommitFailedException as error:
        raise CommitConflict(str(error)) from error
    except ValidationError as error:
        raise _invalid("table update", error) from error
    except (ValueError, KeyError, TypeError, AttributeError, IcebergValidationError) as error:
        raise InvalidInput(f"Cannot apply the table update: {str(error)[:200]}") from error
    validate_table_metadata(metadata, base)
    return metadata
