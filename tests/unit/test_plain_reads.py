"""Plain reads (refresh.core.plain_reads): a query is one only when it is exactly a read of
one table's columns with a simple filter and a limit, and its filter becomes the previews'
row filter only where pyiceberg compares as Spark does; everything else is left to Spark."""

from __future__ import annotations

from decimal import Decimal

import pytest
from pyiceberg.expressions.parser import parse

from refresh.core.plain_reads import Among, Both, Comparison, NullCheck, recognize, row_filter

TYPES = {"id": "long", "n": "int", "price": "decimal(10, 2)", "name": "string", "ok": "boolean",
         "v": "double", "day": "date", "at": "timestamptz"}  # fmt: skip


@pytest.mark.parametrize(
    ("sql", "table", "columns", "condition", "limit"),
    [
        ("SELECT * FROM big WHERE id = 123457", ("big",), None,
         Comparison("id", "=", 123457), None),
        ("select id, name from sales.orders where name is not null limit 100",
         ("sales", "orders"), ("id", "name"), NullCheck("name", False), 100),
        ("SELECT orders.id FROM lakeview.sales.orders WHERE 7 < id",
         ("lakeview", "sales", "orders"), ("id",), Comparison("id", ">", 7), None),
        ("SELECT * FROM t WHERE (id IN (1, -2) OR price >= 2.50) AND ok = TRUE", ("t",), None,
         Both(Both(Among("id", (1, -2)), Comparison("price", ">=", Decimal("2.50")), "or"),
              Comparison("ok", "=", True), "and"), None),
        ("SELECT * FROM t LIMIT 0", ("t",), None, None, 0),
    ],
)  # fmt: skip
def test_plain_reads_are_recognized_with_their_parts(sql, table, columns, condition, limit):
    read = recognize(sql)
    assert read is not None
    assert (read.table, read.columns, read.condition, read.limit) == (
        table, columns, condition, limit
    )  # fmt: skip


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM t FOR VERSION AS OF 3",
        "SELECT * FROM t TIMESTAMP AS OF '2024-01-01'",
        "SELECT id AS i FROM t",
        "SELECT id + 1 FROM t",
        "SELECT upper(name) FROM t",
        "SELECT id, id FROM t",
        "SELECT * FROM t x",
        "SELECT x.id FROM t",
        "SELECT * FROM a JOIN b ON a.id = b.id",
        "SELECT * FROM a, b",
        "SELECT * FROM (SELECT * FROM t)",
        "WITH c AS (SELECT 1) SELECT * FROM c",
        "SELECT * FROM t ORDER BY id",
        "SELECT DISTINCT id FROM t",
        "SELECT id, count(*) FROM t GROUP BY id",
        "SELECT * FROM t WHERE NOT id = 1",
        "SELECT * FROM t WHERE id NOT IN (1, 2)",
        "SELECT * FROM t WHERE id <=> 1",
        "SELECT * FROM t WHERE name LIKE 'a%'",
        "SELECT * FROM t WHERE id = 1e3",
        "SELECT * FROM t WHERE id = 1L",
        "SELECT * FROM t WHERE id = 99999999999999999999",
        "SELECT * FROM t WHERE name = 'a\\\\nb'",
        "SELECT * FROM t WHERE name = 'it' 's'",
        "SELECT * FROM t WHERE id = (SELECT max(id) FROM t)",
        "SELECT * FROM t WHERE id BETWEEN 1 AND 2",
        "SELECT * FROM t LIMIT 5 OFFSET 2",
        "SELECT * FROM t TABLESAMPLE (10 PERCENT)",
        "SELECT /*+ REPARTITION(2) */ * FROM t",
        "SELECT * FROM t UNION ALL SELECT * FROM t",
        "VALUES (1)",
        "SELECT 1",
        "SELECT `and` FROM t",
        "SELECT * FROM t; SELECT 2",
        "SELECT * FROM t WHERE",
    ],
)
def test_anything_else_is_left_to_spark(sql):
    assert recognize(sql) is None


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("id = 7", "id = 7"),
        ("n < -3 AND name = 'o-hara'", "(n < -3) and (name = 'o-hara')"),
        ("price > 2.5 OR price IN (1, 2.25)", "(price > 2.50) or (price in (1.00, 2.25))"),
        ("ok = FALSE", "ok = false"),
        ("name IS NULL", "name is null"),
    ],
)
def test_filters_become_pyicebergs_where_it_compares_as_spark_does(where, expected):
    read = recognize(f"SELECT * FROM t WHERE {where}")
    rendered = row_filter(read.condition, TYPES)
    assert rendered == expected
    parse(rendered)  # pyiceberg reads it


@pytest.mark.parametrize(
    "where",
    [
        "id = 'x'",  # text against a number: Spark casts
        "id = 1.5",  # a fraction against a whole number
        "n = 3000000000",  # out of an int's range: Spark widens
        "price = 2.555",  # more scale than the column
        "price = 123456789.5",  # more digits than the column
        "name = 5",
        "v > 0.5",  # floating point: NaN orders differently
        "day = '2024-01-01'",  # dates and timestamps: Spark's casts
        "at > '2024-01-01'",
        "ok > TRUE",
        "missing = 1",
    ],
)
def test_a_filter_pyiceberg_would_read_otherwise_is_left_to_spark(where):
    read = recognize(f"SELECT * FROM t WHERE {where}")
    assert read is not None
    assert row_filter(read.condition, TYPES) is None


def test_a_quote_in_text_stays_text_in_the_row_filter():
    rendered = row_filter(Comparison("name", "=", "o'hara"), TYPES)
    assert rendered == "name = 'o''hara'"
    assert parse(rendered).literal.value == "o'hara"
