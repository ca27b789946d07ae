"""FLIP-435's materialized-table statements, read from sqlglot's Spark tokens: every form,
keywords in any case, comments and backticks as Spark reads them, and every refusal in
Flink's words where Flink has words for it, with its line and column."""

from __future__ import annotations

from datetime import timedelta

import pytest
import sqlglot
from sqlglot.dialects.spark import Spark
from sqlglot.tokens import TokenType

from catalog.core.errors import SqlError
from refresh.core.freshness import Freshness, RefreshMode, TimeUnit
from refresh.core.statements import (
    AlterQuery,
    CreateMaterializedTable,
    DataChange,
    DescribeJob,
    DropMaterializedTable,
    Query,
    Refresh,
    ResetOptions,
    Resume,
    ScriptStatement,
    SetFreshness,
    SetOptions,
    SetRefreshMode,
    ShowMaterializedTables,
    Suspend,
    leading_words,
    parse_script,
    parse_statement,
    partition_condition,
    partition_predicate,
    split_statements,
)

# The seed's first example (FLIP-435, "Create Data Pipeline"), with the comma it lacks after
# o.ds restored and Flink's lookup join (FOR SYSTEM_TIME AS OF proctime()) left out.
SEED_EXAMPLE = """CREATE MATERIALIZED TABLE dwd_orders
(
   PRIMARY KEY(ds, id) NOT ENFORCED
)
PARTITIONED BY (ds)
FRESHNESS = INTERVAL '3' MINUTE
AS SELECT
  o.ds,
  o.id,
  o.order_number,
  o.user_id
FROM
  orders as o
  LEFT JOIN products AS prod
    ON o.product_id = prod.id
  LEFT JOIN order_pay AS pay
    ON o.id = pay.order_id and o.ds = pay.ds"""


def refusal(sql: str) -> SqlError:
    with pytest.raises(SqlError) as caught:
        parse_statement(sql)
    return caught.value


# -- CREATE ------------------------------------------------------------------------------------


def test_the_seeds_create_statement_is_read_whole():
    statement = parse_statement(SEED_EXAMPLE)
    assert statement == CreateMaterializedTable(
        name=("dwd_orders",),
        freshness=Freshness(3, TimeUnit.MINUTE),
        query=SEED_EXAMPLE[SEED_EXAMPLE.index("SELECT") :],
        primary_key=("ds", "id"),
        partitioned_by=("ds",),
    )


def test_the_seeds_partitioned_full_refresh_example_is_read():
    statement = parse_statement(
        """CREATE MATERIALIZED TABLE dt_sink
        PARTITIONED BY (ds)
        WITH(
          --hint time partition format
          'partition.fields.ds.date-formatter' = 'yyyy-MM-dd'
        )
        FRESHNESS = INTERVAL '1' DAY
        AS SELECT ds, id, order_number, user_id FROM source"""
    )
    assert statement.options == {"partition.fields.ds.date-formatter": "yyyy-MM-dd"}
    assert statement.freshness == Freshness(1, TimeUnit.DAY)


def test_every_create_clause_is_read_in_any_case_and_around_comments():
    statement = parse_statement(
        """create /* a block comment */ Materialized TABLE lv.`sales eu`.daily (
             constraint pk primary key (day, `re gion`) not enforced)
           comment 'Daily; totals -- not a comment'
           -- a line comment; with a semicolon
           partitioned by (day)
           with ('partition.fields.day.date-formatter' = 'yyyy-MM-dd', 'k' = 'it\\'s; -- x')
           freshness = interval '1' day
           refresh_mode = full
           as select day, sum(amount) as total from sales.orders group by day"""
    )
    assert statement == CreateMaterializedTable(
        name=("lv", "sales eu", "daily"),
        freshness=Freshness(1, TimeUnit.DAY),
        query="select day, sum(amount) as total from sales.orders group by day",
        refresh_mode=RefreshMode.FULL,
        primary_key=("day", "re gion"),
        constraint_name="pk",
        comment="Daily; totals -- not a comment",
        partitioned_by=("day",),
        options={"partition.fields.day.date-formatter": "yyyy-MM-dd", "k": "it's; -- x"},
    )


@pytest.mark.parametrize(
    ("name_sql", "name"),
    [
        ("t", ("t",)),
        ("sales.t", ("sales", "t")),
        ("lv.sales.t", ("lv", "sales", "t")),
        ("`my catalog`.`a.b`.`t``x`", ("my catalog", "a.b", "t`x")),
        ("`select`.date", ("select", "date")),
        # Spark reads a backslash in a quoted name as itself (only `` is an escape there),
        # as SHOW CREATE writes such names
        ("`a\\rb`", ("a\\rb",)),
        ("`a\\\\b`.`c\\`", ("a\\\\b", "c\\")),
        ("`a\\``b`", ("a\\`b",)),
    ],
)
def test_a_name_may_have_catalog_and_namespace_parts_and_backticks(name_sql, name):
    sql = f"CREATE MATERIALIZED TABLE {name_sql} FRESHNESS = INTERVAL '5' SECOND AS SELECT 1"
    assert parse_statement(sql).name == name
    assert parse_statement(f"DROP MATERIALIZED TABLE {name_sql}").name == name


@pytest.mark.parametrize(
    "query",
    [
        "SELECT a FROM t WHERE b > 1",
        "SELECT a FROM t UNION ALL SELECT a FROM u",
        "WITH c AS (SELECT a FROM t) SELECT * FROM c",
        "(SELECT 1)",
    ],
)
def test_the_query_after_as_may_be_a_select_a_union_or_a_with(query):
    sql = f"CREATE MATERIALIZED TABLE t FRESHNESS = INTERVAL '5' SECOND AS {query}"
    assert parse_statement(sql).query == query


def test_a_trailing_semicolon_and_comment_are_not_part_of_the_query():
    statement = parse_statement(
        "CREATE MATERIALIZED TABLE t FRESHNESS = INTERVAL '5' SECOND\n"
        "AS SELECT a -- the column\nFROM t -- trailing\n;\n"
    )
    assert statement.query == "SELECT a -- the column\nFROM t"


def test_an_explicit_full_mode_takes_a_freshness_the_threshold_would_make_continuous():
    statement = parse_statement(
        "CREATE MATERIALIZED TABLE t FRESHNESS = INTERVAL '30' SECOND REFRESH_MODE = FULL "
        "AS SELECT 1"
    )
    assert statement.refresh_mode is RefreshMode.FULL


def test_a_create_whose_mode_comes_out_full_needs_a_freshness_a_cron_can_express():
    sql = "CREATE MATERIALIZED TABLE t\nFRESHNESS = INTERVAL '40' MINUTE\nAS SELECT 1"
    error = refusal(sql)
    assert error.message == (
        "In full refresh mode, only freshness that are factors of 60 are currently supported "
        "when the time unit is MINUTE. (line 2, column 22)"
    )
    # Under a higher threshold the same freshness is CONTINUOUS, and needs no cron.
    assert parse_statement(sql, threshold=timedelta(hours=1)).freshness.value == 40


# -- ALTER, DROP, DESCRIBE, SHOW ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("ALTER MATERIALIZED TABLE t SUSPEND", Suspend(("t",))),
        ("alter materialized table ns.t resume", Resume(("ns", "t"))),
        (
            "ALTER MATERIALIZED TABLE dwd_orders RESUME\n-- Set table option via WITH clause\n"
            "WITH(\n  'sink.parallesim' = '10'\n);",
            Resume(("dwd_orders",), {"sink.parallesim": "10"}),
        ),
        ("ALTER MATERIALIZED TABLE t REFRESH", Refresh(("t",))),
        (
            "ALTER MATERIALIZED TABLE dwd_orders REFRESH PARTITION(ds='20231023')",
            Refresh(("dwd_orders",), {"ds": "20231023"}),
        ),
        (
            "ALTER MATERIALIZED TABLE t REFRESH PARTITION (part1 = 2023, `part 2` = '-1')",
            Refresh(("t",), {"part1": "2023", "part 2": "-1"}),
        ),
        (
            "ALTER MATERIALIZED TABLE dwd_orders SET FRESHNESS = INTERVAL '1' DAY",
            SetFreshness(("dwd_orders",), Freshness(1, TimeUnit.DAY)),
        ),
        (
            "alter materialized table t set refresh_mode = continuous",
            SetRefreshMode(("t",), RefreshMode.CONTINUOUS),
        ),
        ("ALTER MATERIALIZED TABLE t SET REFRESH_MODE = FULL", SetRefreshMode(("t",), "FULL")),
        ("ALTER MATERIALIZED TABLE t SET ('key' = 'val')", SetOptions(("t",), {"key": "val"})),
        ("ALTER MATERIALIZED TABLE t SET ()", SetOptions(("t",), {})),
        ("ALTER MATERIALIZED TABLE t RESET ('key')", ResetOptions(("t",), ("key",))),
        ("ALTER MATERIALIZED TABLE t RESET ('a', 'b')", ResetOptions(("t",), ("a", "b"))),
        ("ALTER MATERIALIZED TABLE t RESET ()", ResetOptions(("t",), ())),
        ("DROP MATERIALIZED TABLE t", DropMaterializedTable(("t",))),
        ("drop materialized table if exists c.n.t", DropMaterializedTable(("c", "n", "t"), True)),
        ("DESCRIBE JOB '228d70913eab60dda85c5e7'", DescribeJob("228d70913eab60dda85c5e7")),
        ("desc job 42", DescribeJob("42")),
        ("SHOW MATERIALIZED TABLES", ShowMaterializedTables()),
        ("show materialized tables in sales", ShowMaterializedTables(("sales",))),
        ("SHOW MATERIALIZED TABLES FROM lv.`eu sales`", ShowMaterializedTables(("lv", "eu sales"))),
        ("SELECT * FROM t", Query("SELECT", "SELECT * FROM t")),
        ("with d as (select 1) select * from d;",
         Query("SELECT", "with d as (select 1) select * from d")),
        ("(SELECT 1) UNION ALL (SELECT 2)", Query("SELECT", "(SELECT 1) UNION ALL (SELECT 2)")),
        ("FROM t SELECT a", Query("SELECT", "FROM t SELECT a")),
        ("TABLE t", Query("SELECT", "TABLE t")),
        ("VALUES (1, 'a')", Query("VALUES", "VALUES (1, 'a')")),
        ("SELECT * FROM t FOR VERSION AS OF 42",
         Query("SELECT", "SELECT * FROM t FOR VERSION AS OF 42")),
        ("DESCRIBE t", Query("DESCRIBE", "DESCRIBE t")),
        ("desc table lv.s.t", Query("DESCRIBE", "desc table lv.s.t")),
        ("DESCRIBE QUERY SELECT 1", Query("DESCRIBE", "DESCRIBE QUERY SELECT 1")),
        ("SHOW COLUMNS FROM t IN s", Query("SHOW COLUMNS", "SHOW COLUMNS FROM t IN s")),
        ("EXPLAIN FORMATTED SELECT 'a;b'", Query("EXPLAIN", "EXPLAIN FORMATTED SELECT 'a;b'")),
    ],
)  # fmt: skip
def test_each_statement_form_is_read(sql, expected):
    assert parse_statement(sql) == expected


def test_update_delete_and_merge_keep_their_target_and_their_spark_sql():
    gdpr = "UPDATE dwd_orders SET order_number = 10 WHERE id = 73635185;"
    assert parse_statement(gdpr) == DataChange("UPDATE", ("dwd_orders",), gdpr[:-1])
    assert parse_statement("delete from lv.`s a`.t where x = 'a;b'") == DataChange(
        "DELETE", ("lv", "s a", "t"), "delete from lv.`s a`.t where x = 'a;b'"
    )
    merge = "MERGE INTO mt t USING fixes f ON t.id = f.id WHEN MATCHED THEN UPDATE SET t.v = f.v"
    assert parse_statement(merge) == DataChange("MERGE", ("mt",), merge)


# -- refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "message", "line", "column"),
    [
        ("INSERT INTO t VALUES (1)", "Unknown statement: 'INSERT INTO t'; expected CREATE [OR "
         "ALTER] MATERIALIZED TABLE, ALTER MATERIALIZED TABLE, DROP MATERIALIZED TABLE, DESCRIBE "
         "JOB, SHOW MATERIALIZED TABLES, SHOW CREATE MATERIALIZED TABLE, UPDATE, DELETE or MERGE "
         "of a materialized table, or a query (SELECT, WITH, VALUES, DESCRIBE, SHOW COLUMNS, "
         "EXPLAIN)", 1, 1),
        ("MERGE t USING s ON t.id = s.id", "Expected INTO after MERGE, found 't'", 1, 7),
        ("  \n  ", "The statement is empty", 1, 1),
        ("CREATE TABLE t AS SELECT 1", "Expected MATERIALIZED TABLE after CREATE, found "
         "'TABLE'", 1, 8),
        ("CREATE TEMPORARY MATERIALIZED TABLE t", "CREATE TEMPORARY MATERIALIZED TABLE is not "
         "supported.", 1, 18),
        ("CREATE OR REPLACE MATERIALIZED TABLE t", "REPLACE MATERIALIZED TABLE is not "
         "supported.", 1, 19),
        ("CREATE MATERIALIZED TABLE t\nCOMMENT 'c'", "Expected DISTRIBUTED BY, PARTITIONED BY, "
         "WITH, FRESHNESS = INTERVAL '<n>' <unit>, REFRESH_MODE or AS <query>, found the end "
         "of the statement", 2, 12),
        ("CREATE MATERIALIZED TABLE t REFRESH_MODE = FULL FRESHNESS = INTERVAL '1' DAY AS "
         "SELECT 1", "FRESHNESS must come before REFRESH_MODE", 1, 49),
        ("CREATE MATERIALIZED TABLE t\nFRESHNESS = INTERVAL '1' DAY\nCOMMENT 'late' AS "
         "SELECT 1", "COMMENT must come before FRESHNESS: the clauses go in the order "
         "COMMENT, DISTRIBUTED BY, PARTITIONED BY, WITH, FRESHNESS, REFRESH_MODE, AS", 3, 1),
        ("CREATE MATERIALIZED TABLE t FRESHNESS = INTERVAL '1' DAY FRESHNESS = INTERVAL "
         "'2' DAY AS SELECT 1", "FRESHNESS is given twice", 1, 58),
        ("CREATE MATERIALIZED TABLE t FRESHNESS = INTERVAL '1' DAY AS", "Expected a query "
         "after AS", 1, 60),
        ("CREATE MATERIALIZED TABLE t FRESHNESS = INTERVAL '1' DAY AS\n  INSERT INTO u "
         "SELECT 1", "Expected a SELECT (or a set operation, or WITH), found INSERT", 2, 3),
        ("CREATE MATERIALIZED TABLE t FRESHNESS = INTERVAL '1' DAY AS VALUES (1)",
         "Expected a SELECT (or a set operation, or WITH), found VALUES", 1, 61),
        ("CREATE MATERIALIZED TABLE t (a INT FROM) FRESHNESS = INTERVAL '1' DAY AS SELECT 1",
         "Unknown type 'INT FROM' for column 'a'", 1, 32),
        ("CREATE MATERIALIZED TABLE t (CONSTRAINT ct1 UNIQUE(a) NOT ENFORCED)\nFRESHNESS = "
         "INTERVAL '30' SECOND\nAS SELECT * FROM t1", "UNIQUE constraint is not supported "
         "yet", 1, 30),
        ("CREATE MATERIALIZED TABLE t (PRIMARY KEY (a, b)) FRESHNESS = INTERVAL '1' DAY AS "
         "SELECT 1", "Flink doesn't support ENFORCED mode for PRIMARY KEY constraint.", 1, 30),
        ("CREATE MATERIALIZED TABLE t (PRIMARY KEY (a, a) NOT ENFORCED) FRESHNESS = INTERVAL "
         "'1' DAY AS SELECT 1", "Duplicate primary key column 'a'", 1, 46),
        ("CREATE MATERIALIZED TABLE t PARTITIONED BY (ds, ds) FRESHNESS = INTERVAL '1' DAY "
         "AS SELECT 1", "Duplicate partition column 'ds'", 1, 49),
        ("CREATE MATERIALIZED TABLE t WITH ('a'='1', 'a'='2') FRESHNESS = INTERVAL '1' DAY "
         "AS SELECT 1", "Duplicate option 'a'", 1, 44),
        ("CREATE MATERIALIZED TABLE t COMMENT x FRESHNESS = INTERVAL '1' DAY AS SELECT 1",
         "Expected a quoted comment, found 'x'", 1, 37),
        ("ALTER MATERIALIZED TABLE t STOP", "Expected SUSPEND, RESUME, REFRESH, SET "
         "FRESHNESS, SET REFRESH_MODE, SET (...), RESET (...) or AS <query>, found 'STOP'", 1, 28),
        ("ALTER MATERIALIZED TABLE tb1 SUSPEND PARTITION", "Unexpected 'PARTITION' after "
         "the statement", 1, 38),
        ("ALTER MATERIALIZED TABLE tb1 RESUME PARTITION", "Unexpected 'PARTITION' after "
         "the statement", 1, 37),
        ("ALTER MATERIALIZED TABLE tbl1 REFRESH PARTITION()", "Expected a partition column, "
         "found ')'", 1, 49),
        ("ALTER MATERIALIZED TABLE t REFRESH PARTITION (ds = '1', ds = '2')",
         "Duplicate partition column 'ds'", 1, 57),
        ("ALTER MATERIALIZED TABLE t REFRESH PARTITION (ds = now())", "Expected a quoted "
         "value for ds, as in ds = '2024-01-01', found 'now'", 1, 52),
        ("ALTER MATERIALIZED TABLE tbl1 SET REFRESH_MODE = NONE", "Expected CONTINUOUS or "
         "FULL, found 'NONE'", 1, 50),
        ("ALTER MATERIALIZED TABLE tbl1 SET REFRESH_MODE", "Expected '=' after REFRESH_MODE, "
         "found the end of the statement", 1, 47),
        ("ALTER MATERIALIZED TABLE tbl1 SET", "Expected FRESHNESS, REFRESH_MODE or ('key' = "
         "'value', ...) after SET", 1, 34),
        ("ALTER MATERIALIZED TABLE t RESET ('a', 'a')", "Duplicate option 'a'", 1, 40),
        ("DROP MATERIALIZED TABLE tb1 IF EXISTS", "Unexpected 'IF' after the statement", 1,
         29),
        ("DROP TEMPORARY MATERIALIZED TABLE tbl1", "DROP TEMPORARY MATERIALIZED TABLE is not "
         "supported.", 1, 16),
        ("DESCRIBE JOB", "Expected a job id, as in DESCRIBE JOB '<id>'", 1, 13),
        ("SHOW TABLES", "Expected MATERIALIZED TABLES or CREATE after SHOW, found 'TABLES'", 1, 6),
        ("SHOW MATERIALIZED TABLES IN", "Expected a namespace, found the end of the "
         "statement", 1, 28),
        ("DELETE t", "Expected FROM after DELETE, found 't'", 1, 8),
        ("UPDATE t SET", "The SQL does not parse as Spark SQL", 1, None),
        ("SHOW MATERIALIZED TABLES; DROP MATERIALIZED TABLE t", "Only one statement is read "
         "here: split a script into statements", 1, 27),
        ("ALTER MATERIALIZED TABLE t\nSET ('a' = 'b)", "Unclosed string literal", 2, 12),
        ("DROP MATERIALIZED TABLE `t", "Unclosed quoted name", 1, 25),
        ("SHOW MATERIALIZED TABLES /* open", "Unclosed comment", 1, 26),
    ],
)  # fmt: skip
def test_each_refusal_names_the_problem_with_its_line_and_column(sql, message, line, column):
    error = refusal(sql)
    assert message in error.message
    assert error.line == line
    if column is not None:
        assert error.column == column
    assert error.message.endswith(f"(line {error.line}, column {error.column})")


def test_an_error_inside_the_query_is_placed_in_the_statements_lines():
    error = refusal(
        "CREATE MATERIALIZED TABLE t\nFRESHNESS = INTERVAL '3' MINUTE\nAS SELECT a\n  FROM"
    )
    assert error.message.startswith("The SQL does not parse as Spark SQL: ")
    assert "near 'FROM'" in error.message
    assert (error.line, error.column) == (4, 3)


def test_flinks_lookup_join_is_not_spark_sql_and_is_refused_where_it_starts():
    error = refusal(
        "CREATE MATERIALIZED TABLE t FRESHNESS = INTERVAL '3' MINUTE\n"
        "AS SELECT o.id FROM orders AS o\n"
        "  LEFT JOIN products FOR SYSTEM_TIME AS OF proctime() AS p ON o.p = p.id"
    )
    assert (error.line, error.column) == (3, 22)


# -- FRESHNESS, as Flink refuses it ------------------------------------------------------------

POSITIVE = "The freshness interval currently only supports positive integer type values. But was"
UNIT = "Materialized table freshness only support SECOND, MINUTE, HOUR, DAY as the time unit."
INTERVAL_ONLY = (
    "MATERIALIZED TABLE only supports define interval type FRESHNESS, please refer to the "
    "materialized table document."
)


@pytest.mark.parametrize(
    ("freshness", "message", "where"),
    [
        ("INTERVAL '0' SECOND", f"{POSITIVE}: 0", (2, 22)),
        ("INTERVAL '-30' SECOND", f"{POSITIVE}: -30", (2, 22)),
        ("INTERVAL '1.5' SECOND", f"{POSITIVE}: 1.5", (2, 22)),
        ("INTERVAL 'ten' MINUTE", f"{POSITIVE}: ten", (2, 22)),
        ("INTERVAL '2147483648' SECOND", f"{POSITIVE}: 2147483648", (2, 22)),
        (
            "INTERVAL -'30' SECOND",
            "Materialized table freshness doesn't support negative value.",
            (2, 22),
        ),
        (
            "INTERVAL -'30' YEAR",
            "Materialized table freshness doesn't support negative value.",
            (2, 22),
        ),
        ("INTERVAL '30' YEAR", UNIT, (2, 27)),
        ("INTERVAL '3' WEEK", UNIT, (2, 26)),
        ("INTERVAL '30' DAY TO HOUR", UNIT, (2, 27)),
        ("INTERVAL '30' WEEKS", UNIT, (2, 27)),
        ("INTERVAL '30'", UNIT, (3, 1)),  # the unit is missing: AS is where it is not
        ("123", INTERVAL_ONLY, (2, 13)),
        ("INTERVAL 3 MINUTE", INTERVAL_ONLY, (2, 22)),
        ("'3' MINUTE", INTERVAL_ONLY, (2, 13)),
    ],
)
def test_a_freshness_flink_refuses_is_refused_in_flinks_words_at_its_place(
    freshness, message, where
):
    error = refusal(f"CREATE MATERIALIZED TABLE t\nFRESHNESS = {freshness}\nAS SELECT 1")
    assert error.message == f"{message} (line {where[0]}, column {where[1]})"
    with pytest.raises(SqlError, match=message.split(".")[0]):
        parse_statement(f"ALTER MATERIALIZED TABLE t SET FRESHNESS = {freshness}")


def test_a_signed_or_zero_padded_freshness_reads_as_javas_integer_parse_reads_it():
    sql = "ALTER MATERIALIZED TABLE t SET FRESHNESS = INTERVAL +'05' MINUTE"
    assert parse_statement(sql) == SetFreshness(("t",), Freshness(5, TimeUnit.MINUTE))


# -- options naming partitions -----------------------------------------------------------------


def test_a_date_formatter_must_name_a_partition_column_as_flink_says():
    error = refusal(
        "CREATE MATERIALIZED TABLE mtbl1\nPARTITIONED BY (b, c)\nWITH (\n"
        " 'partition.fields.ds.date-formatter' = 'yyyy-MM-dd'\n)\n"
        "FRESHNESS = INTERVAL '30' SECOND\nREFRESH_MODE = FULL\nAS SELECT * FROM t3"
    )
    assert error.message == (
        "Column 'ds' referenced by materialized table option 'partition.fields.ds.date-"
        "formatter' isn't a partition column. Available partition columns: ['b', 'c']. "
        "(line 4, column 2)"
    )


def test_a_date_formatter_on_an_unpartitioned_table_lists_flinks_empty_columns():
    error = refusal(
        "CREATE MATERIALIZED TABLE t WITH ('partition.fields.c.date-formatter' = 'yyyy-MM-dd')"
        " FRESHNESS = INTERVAL '1' DAY AS SELECT 1"
    )
    assert "isn't a partition column. Available partition columns: ['']." in error.message


def test_a_date_formatter_whose_pattern_cannot_translate_is_refused_at_the_pattern():
    error = refusal(
        "CREATE MATERIALIZED TABLE t PARTITIONED BY (ds)\n"
        "WITH ('partition.fields.ds.date-formatter' = 'yyyy-MM-dd EEE')\n"
        "FRESHNESS = INTERVAL '1' DAY AS SELECT 1"
    )
    assert error.message.startswith("Unsupported pattern letters 'EEE'")
    assert (error.line, error.column) == (2, 46)


# -- scripts -----------------------------------------------------------------------------------


def test_a_script_splits_on_semicolons_outside_quotes_backticks_and_comments():
    script = """SHOW MATERIALIZED TABLES;
    -- a comment; not a statement
    ALTER MATERIALIZED TABLE `a;b` SET ('a' = 'x;y', 'b' = "p;q");
    /* ; */ DESCRIBE JOB '7';;
    -- only a comment at the end;"""
    assert split_statements(script) == [
        ScriptStatement("SHOW MATERIALIZED TABLES", 1, 1),
        ScriptStatement(
            "-- a comment; not a statement\n    ALTER MATERIALIZED TABLE `a;b` SET "
            "('a' = 'x;y', 'b' = \"p;q\")",
            2,
            5,
        ),
        ScriptStatement("/* ; */ DESCRIBE JOB '7'", 4, 5),
    ]
    assert parse_script(script) == [
        ShowMaterializedTables(),
        SetOptions(("a;b",), {"a": "x;y", "b": "p;q"}),
        DescribeJob("7"),
    ]


def test_an_error_in_a_script_is_placed_in_the_scripts_lines():
    with pytest.raises(SqlError) as caught:
        parse_script("SHOW MATERIALIZED TABLES;\n\n  ALTER MATERIALIZED TABLE t STOP;")
    assert (caught.value.line, caught.value.column) == (3, 30)


# -- values into SQL ---------------------------------------------------------------------------

HOSTILE = ["it's", "x'; DROP TABLE t; --", "a\\b", "a\\'", "; --", "/* x */", 'q"q', "`"]


@pytest.mark.parametrize("value", HOSTILE)
def test_a_partition_value_becomes_a_literal_never_spliced_text(value):
    predicate = partition_predicate({"ds": value, "h`h": "00"})
    tokens = Spark().tokenize(predicate)
    types = [token.token_type for token in tokens]
    assert types == [
        TokenType.IDENTIFIER, TokenType.EQ, TokenType.STRING, TokenType.AND,
        TokenType.IDENTIFIER, TokenType.EQ, TokenType.STRING,
    ]  # fmt: skip
    parsed = sqlglot.parse_one(predicate, read="spark")
    first, second = parsed.this, parsed.expression
    assert (first.this.name, first.expression.this) == ("ds", value)
    assert (second.this.name, second.expression.this) == ("h`h", "00")


def test_a_partition_read_from_a_refresh_statement_comes_back_as_the_same_literals():
    statement = parse_statement(
        "ALTER MATERIALIZED TABLE t REFRESH PARTITION (ds = 'x\\'; DROP TABLE t; --')"
    )
    assert statement.partition == {"ds": "x'; DROP TABLE t; --"}
    condition = sqlglot.parse_one(partition_predicate(statement.partition), read="spark")
    assert condition.expression.this == "x'; DROP TABLE t; --"


def test_no_partition_means_no_condition():
    assert partition_condition({}) is None
    assert partition_predicate({}) == ""


def test_alter_as_reads_a_new_query_placed_in_the_statements_lines():
    statement = parse_statement(
        "ALTER MATERIALIZED TABLE sales.daily\nAS SELECT ds, count(*) AS n FROM orders GROUP BY ds;"
    )
    assert statement == AlterQuery(
        ("sales", "daily"), "SELECT ds, count(*) AS n FROM orders GROUP BY ds"
    )
    with pytest.raises(SqlError) as refused:
        parse_statement("ALTER MATERIALIZED TABLE daily AS\nUPDATE t SET a = 1")
    assert refused.value.line == 2


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("CREATE OR ALTER MATERIALIZED TABLE t AS SELECT 1", ["CREATE", "OR", "ALTER"]),
        ("/* why */ create  or\n alter materialized table t", ["CREATE", "OR", "ALTER"]),
        ("-- a note\nCREATE MATERIALIZED TABLE t", ["CREATE", "MATERIALIZED", "TABLE"]),
        ("CREATE", ["CREATE"]),
        ("`CREATE` OR ALTER", []),
        ("'unclosed", []),
        ("", []),
    ],
)
def test_a_statements_leading_keywords_are_read_from_tokens_past_comments_and_case(text, words):
    assert leading_words(text, 3) == words
