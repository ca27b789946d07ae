"""Previews that Spark reads: tables with equality deletes (pyiceberg refuses them, and a
preview must never show deleted rows) and views (whose rows must be exactly Spark's).

The row filter arrives as the text a user typed, already checked against the schema by the
web side (`catalog.core.row_filters`); it is parsed again here with pyiceberg's parser and
turned into a Spark Column expression, never into SQL text, so that no value a user typed
is ever spliced into a statement. Django-free."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from runtime.spark import sandbox
from runtime.spark.session import quote

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


def column_of(name: str, available: Sequence[str]) -> Column:
    """A column by name: a top-level name as a whole (names may hold dots), else a path
    into structs, each part quoted."""
    from pyspark.sql import functions as F

    if name in available:
        return F.col(_backquoted(name))
    return F.col(".".join(_backquoted(part) for part in name.split(".")))


def _backquoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def spark_filter(expression: Any, available: Sequence[str]) -> Column:
    """A pyiceberg (unbound) boolean expression as a Spark Column."""
    from pyiceberg import expressions as E
    from pyspark.sql import functions as F

    def value(literal: Any) -> Any:
        return literal.value

    def convert(node: Any) -> Column:
        if isinstance(node, E.AlwaysTrue):
            return F.lit(True)
        if isinstance(node, E.AlwaysFalse):
            return F.lit(False)
        if isinstance(node, E.And):
            return convert(node.left) & convert(node.right)
        if isinstance(node, E.Or):
            return convert(node.left) | convert(node.right)
        if isinstance(node, E.Not):
            return ~convert(node.child)
        column = column_of(node.term.name, available)
        if isinstance(node, E.IsNull):
            return column.isNull()
        if isinstance(node, E.NotNull):
            return column.isNotNull()
        if isinstance(node, E.IsNaN):
            return F.isnan(column)
        if isinstance(node, E.NotNaN):
            return ~F.isnan(column)
        if isinstance(node, E.In):
            return column.isin([value(item) for item in node.literals])
        if isinstance(node, E.NotIn):
            return ~column.isin([value(item) for item in node.literals])
        literal = F.lit(value(node.literal))
        if isinstance(node, E.EqualTo):
            return column == literal
        if isinstance(node, E.NotEqualTo):
            return column != literal
        if isinstance(node, E.LessThan):
            return column < literal
        if isinstance(node, E.LessThanOrEqual):
            return column <= literal
        if isinstance(node, E.GreaterThan):
            return column > literal
        if isinstance(node, E.GreaterThanOrEqual):
            return column >= literal
        if isinstance(node, E.StartsWith):
            return column.startswith(value(node.literal))
        if isinstance(node, E.NotStartsWith):
            return ~column.startswith(value(node.literal))
        raise ValueError(f"Unsupported filter term: {type(node).__name__}")

    return convert(expression)


def read(
    session: SparkSession,
    *,
    identifier: Sequence[str],
    snapshot_id: int | None = None,
    timestamp_ms: int | None = None,
    columns: Sequence[str] | None = None,
    row_filter: str | None = None,
    limit: int = 100,
) -> DataFrame:
    """The preview's DataFrame: the table or view at the snapshot (or timestamp), filtered,
    the columns chosen, `limit` rows."""
    from pyiceberg.expressions.parser import parse

    # SQL's VERSION AS OF reads with the snapshot's own schema (the reader's snapshot-id
    # option keeps the current one). Only whole numbers go into the text, never user text.
    if snapshot_id is not None:
        frame = session.sql(f"SELECT * FROM {quote(identifier)} VERSION AS OF {int(snapshot_id)}")
    elif timestamp_ms is not None:
        frame = session.sql(
            f"SELECT * FROM {quote(identifier)} "
            f"TIMESTAMP AS OF timestamp_millis({int(timestamp_ms)})"
        )
    else:
        frame = session.table(quote(identifier))
    if row_filter:
        frame = frame.filter(spark_filter(parse(row_filter), frame.columns))
    if columns:
        frame = frame.select(*(column_of(name, frame.columns) for name in columns))
    # A view's SQL is the user's: its plan (the view expanded, the filter) must pass the
    # sandbox before a row is read.
    return sandbox.check_frame(frame.limit(limit), catalog=identifier[0])


def arrow_rows(frame: DataFrame) -> Any:
    """The DataFrame's rows as a pyarrow Table (Spark's own Arrow conversion), so that Spark's
    rows are turned into JSON by the same code as pyiceberg's."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    batches = frame._collect_as_arrow()  # noqa: SLF001 - Spark 3.5's only Arrow collect
    schema = to_arrow_schema(frame.schema)
    return pa.Table.from_batches(batches, schema=schema) if batches else schema.empty_table()


def answer(frame: DataFrame, *, limit: int) -> dict:
    """The preview `read` gives as a value a Celery result carries: {"columns": [[name,
    Iceberg type]], "rows": [[JSON-safe values]]}, at most `limit` rows, the values
    converted as pyiceberg's reads are (`catalog.core.row_values.json_value`)."""
    from catalog.core.row_values import json_value, typed_rows
    from refresh.spark.schema import iceberg_schema, simple_type

    table = arrow_rows(frame)
    fields = iceberg_schema(frame.schema.json())["fields"]
    return {
        "columns": [[field["name"], simple_type(field["type"])] for field in fields],
        "rows": [[json_value(value) for value in row] for row in typed_rows(table, limit)],
    }
