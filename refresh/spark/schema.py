"""A query's schema as Spark's analyzer derives it, turned into an Iceberg schema.

Spark gives the exact output types of a query (nested types and nullability included), as
Flink's planner does for a materialized table. The worker sends `StructType.json()`; here
it becomes an Iceberg schema through the two libraries' own conversions (PySpark's Spark ->
Arrow, pyiceberg's Arrow -> Iceberg with fresh field ids), so no type table is kept by hand.
Django-free, and needs no JVM: PySpark's type classes are plain Python."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from catalog.core.errors import InvalidInput


def iceberg_schema(spark_schema_json: str, *, identifier_fields: Sequence[str] = ()) -> dict:
    """The Iceberg schema (REST JSON form) of a Spark `StructType.json()`, with
    `identifier_fields` (a primary key) as its identifier field ids."""
    from pyiceberg.io.pyarrow import _ConvertToIcebergWithoutIDs, visit_pyarrow
    from pyiceberg.schema import assign_fresh_schema_ids
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    struct = StructType.fromJson(json.loads(spark_schema_json))
    try:
        arrow = to_arrow_schema(struct)
    except TypeError as error:  # PySpark names the type it cannot convert
        raise InvalidInput(
            f"The query returns a type Iceberg tables cannot hold: {error}", field="query"
        ) from error
    schema = assign_fresh_schema_ids(visit_pyarrow(arrow, _ConvertToIcebergWithoutIDs()))
    document: dict[str, Any] = json.loads(schema.model_dump_json(by_alias=True))
    by_name = {f["name"]: f["id"] for f in document["fields"]}
    document["identifier-field-ids"] = [by_name[name] for name in identifier_fields]
    return document


def simple_type(field_type: Any) -> str:
    """A field's type as one line of text ("long", "list<string>", "struct<a: int>")."""
    if isinstance(field_type, str):
        return field_type
    kind = field_type.get("type")
    if kind == "list":
        return f"list<{simple_type(field_type['element'])}>"
    if kind == "map":
        return f"map<{simple_type(field_type['key'])}, {simple_type(field_type['value'])}>"
    if kind == "struct":
        inner = ", ".join(f"{f['name']}: {simple_type(f['type'])}" for f in field_type["fields"])
        return f"struct<{inner}>"
    return str(kind)
