"""What a materialized table is, checked against the schema Spark derives for its query,
and written into its Iceberg table's properties so that every engine can see it.

The checks are Flink's (`SqlCreateMaterializedTableConverter`, in its words): partition keys
and primary-key columns must be columns of the query's result, primary-key columns must be
non-null, and a `partition.fields.<col>.date-formatter` column must be a string column.
Django-free."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from catalog.core.errors import InvalidInput
from refresh.core.freshness import Freshness, RefreshMode
from refresh.core.partitions import formatter_columns

#: Iceberg's row-level write modes for materialized tables (a user's options may differ).
MERGE_ON_READ = {
    "write.merge.mode": "merge-on-read",
    "write.update.mode": "merge-on-read",
    "write.delete.mode": "merge-on-read",
}

#: A materialized table commits every few seconds when it is continuous: the catalog keeps
#: its last 10 metadata files and deletes older ones at each commit (snapshots are the time
#: travel, not metadata files). A user's WITH or SET options override these.
METADATA_HOUSEKEEPING = {
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "10",
}

#: The prefix of the table properties that describe the materialized table.
PROPERTY_PREFIX = "lakeview.materialized-table."
VERSION_PROPERTY = f"{PROPERTY_PREFIX}version"
#: The definition's query: shown only to those who may read every source (refresh.rights).
QUERY_PROPERTY = f"{PROPERTY_PREFIX}query"
#: DISTRIBUTED BY as JSON ({"columns": [...], "buckets": n}): engines see it, and a rebuild's
#: REPLACE TABLE reads it back to keep the bucket partition fields (spark/batch.py).
DISTRIBUTION_PROPERTY = f"{PROPERTY_PREFIX}distribution"


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
    #: DISTRIBUTED BY [HASH] (columns) INTO n BUCKETS: (columns, n), one Iceberg bucket[n]
    #: partition field per column.
    distribution: tuple[tuple[str, ...], int] | None = None


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
    for key in definition.distribution[0] if definition.distribution else ():
        if key not in fields:
            raise InvalidInput(
                f"Distribution column '{key}' not defined in the query schema. Available "
                f"columns: [{_available(names)}].",
                field="distribution",
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


def table_properties(
    definition: Definition, *, state: str, version: int | None = None
) -> dict[str, str]:
    """The Iceberg table properties that say what the table is (read by any engine), the
    user's options (Iceberg write properties and date formatters) and the comment. The
    definition version, when given, is how a rebuild's commit says which version it built
    (refresh.runs.fail_abandoned reads it back after a worker died)."""
    properties = {
        QUERY_PROPERTY: definition.query,
        f"{PROPERTY_PREFIX}default-namespace": definition.default_namespace,
        f"{PROPERTY_PREFIX}freshness": str(definition.freshness),
        f"{PROPERTY_PREFIX}refresh-mode": definition.refresh_mode.value,
        f"{PROPERTY_PREFIX}refresh-mode-explicit": str(definition.mode_is_explicit).lower(),
        f"{PROPERTY_PREFIX}state": state,
    }
    if version is not None:
        properties[VERSION_PROPERTY] = str(version)
    if definition.primary_key:
        properties[f"{PROPERTY_PREFIX}primary-key"] = ",".join(definition.primary_key)
    if definition.distribution:
        columns, buckets = definition.distribution
        properties[DISTRIBUTION_PROPERTY] = json.dumps(
            {"columns": list(columns), "buckets": buckets}
        )
    # Row-level changes (a continuous table's MERGE INTO, the console's UPDATE and DELETE)
    # write delete files instead of rewriting data files: a micro-batch stays small.
    properties.update(MERGE_ON_READ)
    properties.update(METADATA_HOUSEKEEPING)
    properties.update(definition.options)
    if definition.comment:
        properties["comment"] = definition.comment
    return properties


def partition_spec(
    schema: Mapping,
    partitioned_by: Sequence[str],
    distribution: tuple[Sequence[str], int] | None = None,
) -> dict:
    """An identity partition field per partition key, then a `bucket[n]` field per
    distribution column (named `<col>_bucket`, as Spark names them) (REST JSON)."""
    ids = {f["name"]: f["id"] for f in schema["fields"]}
    fields = [(name, name, "identity") for name in partitioned_by]
    if distribution:
        columns, buckets = distribution
        fields += [(name, f"{name}_bucket", f"bucket[{buckets}]") for name in columns]
    return {
        "spec-id": 0,
        "fields": [
            {
                "source-id": ids[source],
                "field-id": 1000 + index,
                "name": name,
                "transform": transform,
            }
            for index, (source, name, transform) in enumerate(fields)
        ],
    }


_BUCKET = re.compile(r"^bucket\[(\d+)\]$")


def distribution_of(
    spec: Mapping, schema_fields: Mapping[int, str]
) -> tuple[tuple[str, ...], int] | None:
    """DISTRIBUTED BY from a partition spec's bucket fields (all with one bucket count; a
    spec an engine wrote with several counts has no DISTRIBUTED BY form and gives None)."""
    columns, counts = [], set()
    for spec_field in spec.get("fields", []):
        match = _BUCKET.match(str(spec_field.get("transform", "")))
        if match and spec_field.get("source-id") in schema_fields:
            columns.append(schema_fields[spec_field["source-id"]])
            counts.add(int(match[1]))
    if not columns or len(counts) != 1:
        return None
    return tuple(columns), counts.pop()


# -- a new definition's schema ------------------------------------------------------------

#: Type changes Iceberg's schema evolution allows in place (the column keeps its field id).
_PROMOTIONS = {("int", "long"), ("float", "double")}


def _promotable(old: object, new: object) -> bool:
    if not isinstance(old, str) or not isinstance(new, str):
        return False
    if old == new or (old, new) in _PROMOTIONS:
        return True
    if old.startswith("decimal("):
        if not new.startswith("decimal("):
            return False
        (p1, s1), (p2, s2) = (
            tuple(int(x) for x in t[len("decimal(") : -1].split(",")) for t in (old, new)
        )
        return s1 == s2 and p2 >= p1
    return False


def _without_ids(field_type: object) -> object:
    """A type with its nested field ids left out, to compare two nested types."""
    if not isinstance(field_type, dict):
        return field_type
    kind = field_type["type"]
    if kind == "struct":
        return {
            "type": "struct",
            "fields": [
                (f["name"], _without_ids(f["type"]), f.get("required", False))
                for f in field_type["fields"]
            ],
        }
    if kind == "list":
        return ("list", _without_ids(field_type["element"]), field_type.get("element-required"))
    return (
        "map",
        _without_ids(field_type["key"]),
        _without_ids(field_type["value"]),
        field_type.get("value-required"),
    )


def _renumber(field_type: object, next_id: list[int]) -> object:
    """`field_type` with fresh ids for every nested field (next_id is a counter)."""
    if not isinstance(field_type, dict):
        return field_type

    def take() -> int:
        next_id[0] += 1
        return next_id[0]

    kind = field_type["type"]
    if kind == "struct":
        return {
            **field_type,
            "fields": [
                {**f, "id": take(), "type": _renumber(f["type"], next_id)}
                for f in field_type["fields"]
            ],
        }
    if kind == "list":
        return {
            **field_type,
            "element-id": take(),
            "element": _renumber(field_type["element"], next_id),
        }
    return {
        **field_type,
        "key-id": take(),
        "key": _renumber(field_type["key"], next_id),
        "value-id": take(),
        "value": _renumber(field_type["value"], next_id),
    }


@dataclass(frozen=True)
class EvolvedSchema:
    """A new definition's schema with the field ids of the columns it keeps."""

    schema: dict
    last_column_id: int
    #: Columns whose type could not evolve in place: they are new columns (new ids), and
    #: the table is rebuilt (its rows are all rewritten by the refresh that follows).
    replaced: tuple[str, ...]
    added: tuple[str, ...]
    dropped: tuple[str, ...]


def evolve_schema(
    current: Mapping, new: Mapping, *, last_column_id: int, schema_id: int
) -> EvolvedSchema:
    """The schema a new definition gives the table, as Iceberg's schema evolution would
    write it: a column of the same name whose type is equal or may be promoted (int to
    long, float to double, a wider decimal) and that does not become required keeps its
    field id; any other column gets new ids above `last_column_id`."""
    old_fields = {f["name"]: f for f in current["fields"]}
    counter = [last_column_id]
    fields, replaced, added = [], [], []
    for column in new["fields"]:
        old = old_fields.get(column["name"])
        same = old is not None and (
            _promotable(old["type"], column["type"])
            or (
                isinstance(old["type"], dict)
                and _without_ids(old["type"]) == _without_ids(column["type"])
            )
        )
        if same and not (column.get("required") and not old.get("required")):
            kept_type = old["type"] if isinstance(old["type"], dict) else column["type"]
            fields.append({**column, "id": old["id"], "type": kept_type})
            continue
        (replaced if old is not None else added).append(column["name"])
        counter[0] += 1
        field_id = counter[0]
        fields.append({**column, "id": field_id, "type": _renumber(column["type"], counter)})
    by_name = {f["name"]: f["id"] for f in fields}
    identifiers = [by_name[name] for name in _identifier_names(new)]
    dropped = tuple(name for name in old_fields if name not in by_name)
    schema = {
        "type": "struct",
        "schema-id": schema_id,
        "fields": fields,
        "identifier-field-ids": identifiers,
    }
    return EvolvedSchema(schema, counter[0], tuple(replaced), tuple(added), dropped)


def _identifier_names(schema: Mapping) -> list[str]:
    ids = set(schema.get("identifier-field-ids") or [])
    return [f["name"] for f in schema["fields"] if f["id"] in ids]
