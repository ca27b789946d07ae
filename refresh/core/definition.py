"""What a materialized table is, checked against the schema Spark derives for its query,
and written into its Iceberg table's properties so that every engine can see it.

The checks are Flink's (`SqlCreateMaterializedTableConverter`, in its words): partition keys
and primary-key columns must be columns of the query's result, primary-key columns must be
non-null, and a `partition.fields.<col>.date-formatter` column must be a string column.
Django-free."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from catalog.core.errors import InvalidInput
from refresh.core.freshness import Freshness, RefreshMode
from refresh.core.partitions import formatter_columns

#: The prefix of the table properties that describe the materialized table.
PROPERTY_PREFIX = "lakeview.materialized-table."

CONTINUOUS_NOT_YET = (
    "CONTINUOUS refresh mode is not supported yet: it needs the streaming refresh, which is "
    "not part of this release. Use REFRESH_MODE = FULL, or a FRESHNESS at or above the "
    "freshness threshold ({threshold})."
)


@dataclass(frozen=True)
class Definition:
    """A materialized table's definition, as the app keeps it."""

    query: str
    #: Names in the query resolve against this namespace ("sales" or "sales.eu").
    default_namespace: str
    freshness: Freshness
    refresh_mode: RefreshMode
    mode_is_explicit: bool = False
    primary_key: tuple[str, ...] = ()
    constraint_name: str | None = None
    partitioned_by: tuple[str, ...] = ()
    options: Mapping[str, str] = field(default_factory=dict, hash=False)
    comment: str | None = None


def _available(columns: Sequence[str]) -> str:
    return "'" + "', '".join(columns) + "'"


def check_against_schema(definition: Definition, schema: Mapping) -> None:
    """Refuse partition keys, primary keys and date-formatter columns the query's result
    cannot carry. `schema` is the Iceberg schema (REST JSON) Spark's analysis gave."""
    fields = {f["name"]: f for f in schema["fields"]}
    names = list(fields)
    for key in definition.partitioned_by:
        if key not in fields:
            raise InvalidInput(
                f"Partition column '{key}' not defined in the query schema. Available "
                f"columns: [{_available(names)}].",
                field="partitioned_by",
            )
    for key in definition.primary_key:
        if key not in fields:
            raise InvalidInput(
                f"Primary key column '{key}' not defined in the query schema. Available "
                f"columns: [{_available(names)}].",
                field="primary_key",
            )
        if not fields[key].get("required"):
            raise InvalidInput(
                f"Could not create a PRIMARY KEY with nullable column '{key}'.\n"
                "A PRIMARY KEY column must be declared on non-nullable physical columns.",
                field="primary_key",
            )
    for column in formatter_columns(definition.options):
        column_type = fields[column]["type"] if column in fields else None
        if column_type != "string":
            shown = column_type.upper() if isinstance(column_type, str) else "a nested type"
            raise InvalidInput(
                f"Materialized table option 'partition.fields.{column}.date-formatter' only "
                "supports referring to char, varchar and string type partition column. "
                f"Column `{column}` type is {shown}.",
                field="options",
            )


def check_mode_supported(mode: RefreshMode, threshold: str) -> None:
    if mode is RefreshMode.CONTINUOUS:
        raise InvalidInput(CONTINUOUS_NOT_YET.format(threshold=threshold), field="refresh_mode")


def table_properties(definition: Definition, *, state: str) -> dict[str, str]:
    """The Iceberg table properties that say what the table is (read by any engine), the
    user's options (Iceberg write properties and date formatters) and the comment."""
    properties = {
        f"{PROPERTY_PREFIX}query": definition.query,
        f"{PROPERTY_PREFIX}default-namespace": definition.default_namespace,
        f"{PROPERTY_PREFIX}freshness": str(definition.freshness),
        f"{PROPERTY_PREFIX}refresh-mode": definition.refresh_mode.value,
        f"{PROPERTY_PREFIX}refresh-mode-explicit": str(definition.mode_is_explicit).lower(),
        f"{PROPERTY_PREFIX}state": state,
    }
    if definition.primary_key:
        properties[f"{PROPERTY_PREFIX}primary-key"] = ",".join(definition.primary_key)
    properties.update(definition.options)
    if definition.comment:
        properties["comment"] = definition.comment
    return properties


def partition_spec(schema: Mapping, partitioned_by: Sequence[str]) -> dict:
    """An identity partition spec over the partition keys (REST JSON)."""
    ids = {f["name"]: f["id"] for f in schema["fields"]}
    return {
        "spec-id": 0,
        "fields": [
            {
                "source-id": ids[name],
                "field-id": 1000 + index,
                "name": name,
                "transform": "identity",
            }
            for index, name in enumerate(partitioned_by)
        ],
    }
