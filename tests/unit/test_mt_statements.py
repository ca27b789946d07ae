"""The materialized-table statements of FLIP-435, parsed from sqlglot's tokens: every form,
case and comments and quoting as Spark reads them, and every refusal with its line and
column."""

from __future__ import annotations

import pytest
import sqlglot

from catalog.core.errors import SqlError
from refresh.core.freshness import Freshness, RefreshMode, TimeUnit
from refresh.core.statements import (
    CreateMaterializedTable,
    DataChange,
    DescribeJob,
    DropMaterializedTable,
    Refresh,
    ResetOptions,
    Resume,
    SetFreshness,
    SetOptions,
    SetRefreshMode,
    ShowMaterializedTables,
    Suspend,
    parse_statement,
    partition_predicate,
    split_statements,
)

SEED_EXAMPLE = """
CREATE MATERIALIZED TABLE dwd_orders
(
   PRIMARY KEY(ds, id) NOT ENFORCED
)
PARTITIONED BY (ds)
FRESHNESS = INTERVAL '3' MINUTE
AS SELECT
  o.ds, o.id, o.order_number, o.user_id
FROM orders as o
LEFT JOIN products FOR SYSTEM_TIME AS OF proctime() AS p
  ON o.product_id = p.product_id
"""


def test_the_seeds_create_statement_is_read_whole():
    statement = parse_statement(
        SEED_EXAMPLE.replace(" FOR SYSTEM_TIME AS OF proctime() AS p", " AS p")
    )
    assert isinstance(statement, CreateMaterializedTable)
    assert statement.name == ("dwd_orders",)
    assert statement.primary_key == ("ds", "id")
    assert statement.partitioned_by == ("ds",)
    assert statement.freshness == Freshness(3, TimeUnit.MINUTE)
    assert statement.refresh_mode is None
    assert statement.query.startswith("SELECT")


def test_every_create_clause_in_any_order_case_and_with_comments():
    statement = parse_statement(
        """create materialized table lv.`sales eu`.daily (
             CONSTRAINT pk PRIMARY KEY (day) NOT ENFORCED)
           -- the clauses, in another order than the seed's
           with ('partition.fields.day.date-formatter' = 'yyyy-MM-dd', 'k' = 'it\\'s; -- x')
           refresh_mode = full
           comment 'Daily; totals'
           freshness = interval '1' day
           partitioned by (day)
           as select day, sum(amount) as total from sales.orders group by day"""
    )
    assert statement.name == ("lv", "sales eu", "daily")
    assert statement.constraint_name == "pk"
    assert statement.refresh_mode is RefreshMode.FULL
    assert statement.comment == "Daily; totals"
    assert statement.options["k"] == "it's; -- x"
    assert statement.freshness == Freshness(1, TimeUnit.DAY)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("ALTER MATERIALIZED TABLE t SUSPEND", Suspend(("t",))),
        ("ALTER MATERIALIZED TABLE ns.t RESUME", Resume(("ns", "t"))),
        (
            "ALTER MATERIALIZED TABLE t RESUME WITH ('sink.parallelism' = '10')",
            Resume(("t",), {"sink.parallelism": "10"}),
        ),
        ("ALTER MATERIALIZED TABLE t REFRESH", Refresh(("t",))),
        (
            "ALTER MATERIALIZED TABLE dwd_orders REFRESH PARTITION(ds='20231023')",
            Refresh(("dwd_orders",), {"ds": "20231023"}),
        ),
        (
            "ALTER MATERIALIZED TABLE t SET FRESHNESS = INTERVAL '1' DAY",
            SetFreshness(("t",), Freshness(1, TimeUnit.DAY)),
        ),
        (
            "ALTER MATERIALIZED TABLE t SET REFRESH_MODE = CONTINUOUS",
            SetRefreshMode(("t",), RefreshMode.CONTINUOUS),
        ),
        ("ALTER MATERIALIZED TABLE t SET ('a' = '1')", SetOptions(("t",), {"a": "1"})),
        ("ALTER MATERIALIZED TABLE t RESET ('a', 'b')", ResetOptions(("t",), ("a", "b"))),
        ("DROP MATERIALIZED TABLE t", DropMaterializedTable(("t",))),
        ("drop materialized table if exists c.n.t", DropMaterializedTable(("c", "n", "t"), True)),
        ("DESCRIBE JOB 42", DescribeJob("42")),
        ("DESC JOB 42", DescribeJob("42")),
        ("SHOW MATERIALIZED TABLES", ShowMaterializedTables()),
        ("SHOW MATERIALIZED TABLES IN sales", ShowMaterializedTables(("sales",))),
    ],
)
def test_each_statement_form_is_read(sql, expected):
    assert parse_statement(sql) == expected


def test_update_and_delete_are_kept_as_spark_sql_with_their_target():
    assert parse_statement("UPDATE ns.t SET a = 1 WHERE b = 2") == DataChange(
        "UPDATE", ("ns", "t"), "UPDATE ns.t SET a = 1 WHERE b = 2"
    )
    assert parse_statement("DELETE FROM t WHERE x").target == ("t",)


@pytest.mark.parametrize(
    ("sql", "message", "line", "column"),
    [
        ("SELECT 1", "Unknown statement", 1, 1),
        ("CREATE TABLE t AS SELECT 1", "Expected MATERIALIZED TABLE after CREATE", 1, 8),
        (
            "CREATE MATERIALIZED TABLE t\nAS SELECT 1",
            "Expected FRESHNESS = INTERVAL '<n>' <unit> before AS",
            2,
            4,
        ),
        (
            "CREATE MATERIALIZED TABLE t\n  FRESHNESS = INTERVAL '0' SECOND AS SELECT 1",
            "The freshness interval currently only supports positive integer type values.",
            2,
            24,
        ),
        (
            "CREATE MATERIALIZED TABLE t FRESHNESS = INTERVAL -'30' SECOND AS SELECT 1",
            "only supports positive integer type values",
            1,
            50,
        ),
        (
            "CREATE MATERIALIZED TABLE t FRESHNESS = INTERVAL '3' WEEK AS SELECT 1",
            "Expected SECOND, MINUTE, HOUR or DAY",
            1,
            54,
        ),
        (
            "CREATE MATERIALIZED TABLE t FRESHNESS = INTERVAL '3' MINUTE\nAS SELECT FROM",
            "",
            2,
            None,
        ),
        (
            "CREATE MATERIALIZED TABLE t (UNIQUE (a)) FRESHNESS = INTERVAL '3' MINUTE AS SELECT 1",
            "Expected PRIMARY KEY",
            1,
            30,
        ),
        (
            "CREATE MATERIALIZED TABLE t WITH ('a'='1', 'a'='2') FRESHNESS = INTERVAL '1' DAY "
            "AS SELECT 1",
            "Duplicate option 'a'",
            1,
            44,
        ),
        (
            "CREATE MATERIALIZED TABLE t FRESHNESS = INTERVAL '1' DAY FRESHNESS = INTERVAL "
            "'2' DAY AS SELECT 1",
            "FRESHNESS is given twice",
            1,
            58,
        ),
        ("ALTER MATERIALIZED TABLE t STOP", "Expected SUSPEND, RESUME", 1, 28),
        ("ALTER MATERIALIZED TABLE t SUSPEND now", "Unexpected 'now'", 1, 36),
        ("ALTER MATERIALIZED TABLE t SET REFRESH_MODE = SOMETIMES", "CONTINUOUS or FULL", 1, 47),
    ],
)
def test_each_refusal_names_the_problem_with_its_line_and_column(sql, message, line, column):
    with pytest.raises(SqlError) as caught:
        parse_statement(sql)
    assert message in caught.value.message
    assert caught.value.line == line
    if column is not None:
        assert caught.value.column == column


def test_a_script_splits_on_semicolons_outside_quotes_and_comments():
    script = """SHOW MATERIALIZED TABLES;
    -- a comment; not a statement
    ALTER MATERIALIZED TABLE t SET ('a' = 'x;y');
    DESCRIBE JOB 7"""
    statements = split_statements(script)
    assert [text.split()[0] for text, _ in statements] == ["SHOW", "--", "DESCRIBE"]
    assert statements[1][1] == 2
    assert parse_statement(statements[1][0]) == SetOptions(("t",), {"a": "x;y"})


@pytest.mark.parametrize("value", ["it's", "x'; DROP TABLE t; --", "a\\\\b", 'q"q', "; --"])
def test_a_partition_value_becomes_a_literal_never_spliced_text(value):
    predicate = partition_predicate({"ds": value})
    parsed = sqlglot.parse_one(predicate, read="spark")
    assert parsed.expression.this == value
    assert parsed.this.name == "ds"
