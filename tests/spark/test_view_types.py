"""A view's stored column types against Spark's own: every type the catalog derives with
sqlglot (catalog.core.sql.analyze_view_query) is the one Spark's analyzer gives the same
query, or it is left to the engine (type_guessed: a worker's Spark types it, and with no
worker it is stored as string, which Spark can always read). A type stored narrower than
Spark's makes Spark refuse the view ("Cannot up cast"); only a long for Spark's int is
allowed wider (Spark up-casts it, and readers all see a long)."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from catalog.core.sql import analyze_view_query
from refresh.spark.schema import iceberg_schema

COLUMNS = [
    ("i", "INT", "CAST(1 AS INT)"),
    ("l", "BIGINT", "CAST(2 AS BIGINT)"),
    ("s", "SMALLINT", "CAST(1 AS SMALLINT)"),
    ("f", "FLOAT", "CAST(1.5 AS FLOAT)"),
    ("d", "DOUBLE", "CAST(1.5 AS DOUBLE)"),
    ("m", "DECIMAL(10, 2)", "CAST(1.5 AS DECIMAL(10, 2))"),
    ("str", "STRING", "'2024-01-01'"),
    ("dt", "DATE", "DATE'2024-01-01'"),
    ("ts", "TIMESTAMPTZ", "TIMESTAMP'2024-01-01 00:00:00'"),
    ("b", "BOOLEAN", "true"),
]

#: What analysts write in views, and the cases where sqlglot's types were found not Spark's.
EXPRESSIONS = [
    "i", "m", "ts", "sum(i)", "sum(s)", "sum(l)", "sum(f)", "avg(i)", "avg(l)", "avg(d)",
    "sum(m)", "avg(m)", "min(m)", "m * 2", "m + m", "count(m)", "CAST(sum(m) AS DOUBLE)",
    "CAST(m AS DECIMAL(12, 4))", "CAST(i AS DECIMAL)", "i + 1", "i + l", "i * 2", "i / 2",
    "i div 2", "i % 2", "s + s", "abs(i)", "max(i)", "min(s)", "count(*)", "count(i)",
    "f * 2", "f + d", "i + d", "l * 1.5", "i + 1.5", "1.5", "1e3", "100000000000",
    "i * 1000000000000", "sum(i * 1.0)", "round(d, 1)", "round(d)", "round(i)", "round(m, 1)",
    "floor(d)", "ceil(d)", "sign(d)", "signum(i)", "length(str)", "year(dt)", "month(ts)",
    "datediff(dt, dt)", "CAST(i AS STRING)", "concat(str, str)", "coalesce(i, l)",
    "if(b, i, l)", "CASE WHEN b THEN i ELSE 0 END", "sum(i) OVER ()", "count(DISTINCT i)",
    "stddev(d)", "variance(i)", "pow(i, 2)", "sqrt(i)", "ln(d)", "i & 1", "to_date(str)",
    "to_timestamp(str)", "CAST(str AS TIMESTAMP)", "current_timestamp()", "current_date()",
    "date_trunc('DAY', ts)", "max(ts)", "nvl(i, 0)", "greatest(i, l)", "mod(i, 2)",
    "trunc(dt, 'MM')", "f / f", "l / l", "d % 2", "i * d", "char_length(str)", "upper(str)",
    "substr(str, 1, 2)", "regexp_extract(str, 'a', 0)", "instr(str, 'a')", "md5(str)",
    "hash(str)", "date_format(dt, 'yyyy')", "add_months(dt, 1)", "date_sub(dt, 1)",
    "last_day(dt)", "to_date(ts)", "CAST(ts AS DATE)", "extract(year FROM dt)",
    "sum(if(b, 1, 0))", "avg(CASE WHEN b THEN 1.0 ELSE 0 END)", "count_if(b)", "bool_and(b)",
    "lag(i) OVER (ORDER BY i)", "ntile(4) OVER (ORDER BY i)", "dense_rank() OVER (ORDER BY i)",
    "sum(l) OVER (PARTITION BY str)", "i | 1", "-i", "i BETWEEN 1 AND 2", "i IN (1, 2)",
    "nullif(i, 0)", "corr(d, d)", "log10(d)", "CAST(i AS TINYINT)", "CAST(i AS FLOAT)",
]  # fmt: skip


@pytest.fixture(scope="module")
def typed_view_source(spark: SparkSession) -> None:
    select = ", ".join(f"{value} AS {name}" for name, _, value in COLUMNS)
    spark.sql(f"CREATE OR REPLACE TEMP VIEW t AS SELECT {select}")


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_a_stored_view_column_type_is_sparks_or_left_to_spark(
    spark: SparkSession, typed_view_source: None, expression: str
):
    query = f"SELECT {expression} AS x FROM t"
    [column] = analyze_view_query(
        query,
        dialect="spark",
        catalog=None,
        namespace=["default"],
        lookup={("", "default", "t"): [(n, t) for n, t, _ in COLUMNS]}.get,
    ).columns
    sparks = iceberg_schema(spark.sql(query).schema.json())["fields"][0]["type"]
    if column.type_guessed:
        assert column.iceberg_type == "string"
        return
    stored, given = column.iceberg_type.replace(" ", ""), str(sparks).replace(" ", "")
    # sqlglot types an integer literal beside an int as a long (nvl(i, 0), CASE ... ELSE 0)
    # and LENGTH as a long: Spark's int is up-cast to the stored long, and every engine
    # reads a long.
    assert stored == given or (stored, given) == ("long", "int"), (
        f"{expression}: stored {column.iceberg_type}, Spark gives {sparks}"
    )
