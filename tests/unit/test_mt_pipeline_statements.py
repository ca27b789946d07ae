"""Flink 2.x's statements for pipelines as code: CREATE OR ALTER MATERIALIZED TABLE (FLIP-546),
a schema part in CREATE (FLIP-550), DISTRIBUTED BY ... INTO n BUCKETS (FLIP-542) and SHOW
CREATE MATERIALIZED TABLE, read as Flink's parser tests write them
(MaterializedTableStatementParserTest) and refused with line and column; the schema part
checked against a query's schema with Flink's converter cases
(SqlMaterializedTableNodeToOperationConverterTest); SHOW CREATE's text read back whole."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

from catalog.core.errors import InvalidInput, SqlError
from catalog.core.types import iceberg_type_from_sqlglot
from refresh.core.columns import (
    ColumnDefinition,
    _from_sqlglot,
    canonical,
    check_declared,
    declared_type,
)
from refresh.core.freshness import Freshness, RefreshMode, TimeUnit
from refresh.core.statements import (
    CreateMaterializedTable,
    Distribution,
    ShowCreateMaterializedTable,
    TableColumn,
    parse_script,
    parse_statement,
    show_create,
)

QUERY = "SELECT a, b, h, t m FROM source"


def refusal(sql: str) -> SqlError:
    with pytest.raises(SqlError) as caught:
        parse_statement(sql)
    return caught.value


# -- Flink's accepted forms, with CREATE and CREATE OR ALTER alike ------------------------------

OPERATIONS = ["CREATE ", "CREATE OR ALTER "]


@pytest.mark.parametrize("operation", OPERATIONS)
def test_flinks_with_columns_example_reads_every_clause(operation):
    statement = parse_statement(
        operation + "MATERIALIZED TABLE tbl1\n"
        "(\n"
        "  a INT, b STRING, h INT, m INT\n"
        ")\n"
        "COMMENT 'table comment'\n"
        "DISTRIBUTED BY HASH (a) INTO 4 BUCKETS\n"
        "PARTITIONED BY (a, h)\n"
        "WITH (\n"
        "  'group.id' = 'latest', \n"
        "  'kafka.topic' = 'log.test'\n"
        ")\n"
        "FRESHNESS = INTERVAL '3' MINUTE\n"
        f"AS {QUERY}"
    )
    assert statement == CreateMaterializedTable(
        name=("tbl1",),
        freshness=Freshness(3, TimeUnit.MINUTE),
        query=QUERY,
        comment="table comment",
        partitioned_by=("a", "h"),
        options={"group.id": "latest", "kafka.topic": "log.test"},
        or_alter=operation == "CREATE OR ALTER ",
        columns=(
            ColumnDefinition("a", "INT"),
            ColumnDefinition("b", "STRING"),
            ColumnDefinition("h", "INT"),
            ColumnDefinition("m", "INT"),
        ),
        distribution=Distribution(("a",), 4),
    )


@pytest.mark.parametrize("operation", OPERATIONS)
def test_flinks_column_identifiers_only_example_is_a_list_of_names(operation):
    statement = parse_statement(
        operation + "MATERIALIZED TABLE tbl1\n(a, b, h, m)\nCOMMENT 'table comment'\n"
        "DISTRIBUTED BY HASH (a) INTO 4 BUCKETS\nPARTITIONED BY (a, h)\n"
        f"FRESHNESS = INTERVAL '3' MINUTE\nAS {QUERY}"
    )
    assert statement.columns == tuple(ColumnDefinition(n) for n in "abhm")


@pytest.mark.parametrize("operation", OPERATIONS)
def test_flinks_primary_key_and_no_constraint_examples_are_read(operation):
    with_key = parse_statement(
        operation + "MATERIALIZED TABLE tbl1\n(\n   PRIMARY KEY (a, b) NOT ENFORCED\n)\n"
        "COMMENT 'table comment'\nFRESHNESS = INTERVAL '3' MINUTE\nREFRESH_MODE = FULL\n"
        f"AS {QUERY}"
    )
    assert (with_key.primary_key, with_key.refresh_mode, with_key.columns) == (
        ("a", "b"),
        RefreshMode.FULL,
        (),
    )
    without = parse_statement(
        operation + "MATERIALIZED TABLE tbl1\nCOMMENT 'table comment'\n"
        f"FRESHNESS = INTERVAL '1' DAYS\nREFRESH_MODE = FULL\nAS {QUERY}"
    )
    assert without.freshness == Freshness(1, TimeUnit.DAY)
    assert without.or_alter == (operation == "CREATE OR ALTER ")


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize(
    ("mode", "freshness"),
    [("", Freshness(3, TimeUnit.MINUTE)), ("REFRESH_MODE = FULL\n", Freshness(1, TimeUnit.HOUR)),
     ("REFRESH_MODE = CONTINUOUS\n", Freshness(3, TimeUnit.MINUTE))],
)  # fmt: skip
def test_without_freshness_flinks_defaults_apply(operation, mode, freshness):
    """Flink's withoutFreshness case, and the converter's defaults: one hour for FULL, three
    minutes otherwise (which makes an automatic mode CONTINUOUS)."""
    statement = parse_statement(
        operation + "MATERIALIZED TABLE tbl1\n(\n   PRIMARY KEY (a, b) NOT ENFORCED\n)\n"
        "WITH (\n  'group.id' = 'latest', \n  'kafka.topic' = 'log.test'\n)\n"
        f"{mode}AS {QUERY}"
    )
    assert statement.freshness == freshness
    assert statement.options == {"group.id": "latest", "kafka.topic": "log.test"}


def test_columns_with_not_null_comments_nested_types_and_a_named_key_are_read():
    statement = parse_statement(
        "create or alter materialized table s.t (\n"
        "  `id` BIGINT NOT NULL COMMENT 'the key; -- not a comment',\n"
        "  tags ARRAY<STRUCT<k: STRING, v ARRAY<INT>>> NULL,\n"
        "  amount DECIMAL(10, 2) comment 'money',\n"
        "  constraint pk primary key (id) not enforced\n"
        ") distributed by (id, amount) into 16 buckets freshness = interval '1' hour "
        "as select 1"
    )
    assert statement.columns == (
        ColumnDefinition("id", "BIGINT", True, "the key; -- not a comment"),
        ColumnDefinition("tags", "ARRAY<STRUCT<k: STRING, v ARRAY<INT>>>"),
        ColumnDefinition("amount", "DECIMAL(10, 2)", False, "money"),
    )
    assert (statement.constraint_name, statement.primary_key) == ("pk", ("id",))
    assert statement.distribution == Distribution(("id", "amount"), 16)


def test_show_create_materialized_table_names_the_table():
    assert parse_statement("SHOW CREATE MATERIALIZED TABLE lv.sales.`daily x`") == (
        ShowCreateMaterializedTable(("lv", "sales", "daily x"))
    )
    assert parse_statement("show create materialized table t;") == (
        ShowCreateMaterializedTable(("t",))
    )


def test_a_script_mixes_the_new_statements_with_the_old():
    statements = parse_script(
        "CREATE OR ALTER MATERIALIZED TABLE a FRESHNESS = INTERVAL '1' HOUR AS SELECT 1;\n"
        "SHOW CREATE MATERIALIZED TABLE a;\nALTER MATERIALIZED TABLE a SUSPEND"
    )
    assert [type(s).__name__ for s in statements] == [
        "CreateMaterializedTable",
        "ShowCreateMaterializedTable",
        "Suspend",
    ]


# -- refusals, with Flink's words where Flink has them, at their line and column ----------------


@pytest.mark.parametrize(
    ("sql", "message", "line", "column"),
    [
        # Flink: Encountered "STRING" at line 2, column 7 (a list of names takes no types).
        ("CREATE MATERIALIZED TABLE tbl1\n(a, b STRING)\nFRESHNESS = INTERVAL '1' HOUR\n"
         "AS SELECT a, b, h, t m FROM source", "Expected ',' or ')', found 'STRING'", 2, 7),
        ("CREATE MATERIALIZED TABLE t (a INT, b) FRESHNESS = INTERVAL '1' HOUR AS SELECT 1",
         "Expected a type for column 'b' (every column is typed, or none)", 1, 38),
        ("CREATE OR REPLACE MATERIALIZED TABLE t FRESHNESS = INTERVAL '1' HOUR AS SELECT 1",
         "REPLACE MATERIALIZED TABLE is not supported.", 1, 19),
        ("CREATE OR ALTER TEMPORARY MATERIALIZED TABLE t FRESHNESS = INTERVAL '1' HOUR AS "
         "SELECT 1", "CREATE TEMPORARY MATERIALIZED TABLE is not supported.", 1, 27),
        ("CREATE OR ALTER MATERIALIZED TABLE t\nFRESHNESS = INTERVAL '3' MINUTE\n"
         "REFRESH_MODE = FULL\n", "Expected AS <query>, found the end of the statement", 3, 20),
        ("CREATE OR ALTER MATERIALIZED TABLE tbl1 FRESHNESS = 123 AS SELECT 1",
         "MATERIALIZED TABLE only supports define interval type FRESHNESS", 1, 53),
        ("CREATE MATERIALIZED TABLE t (ts TIMESTAMP,\n  WATERMARK FOR ts AS ts) "
         "FRESHNESS = INTERVAL '1' HOUR AS SELECT 1", "WATERMARK is not supported", 2, 3),
        ("CREATE MATERIALIZED TABLE t (a AS b + 1) FRESHNESS = INTERVAL '1' HOUR AS SELECT 1",
         "Computed columns are not supported", 1, 32),
        ("CREATE MATERIALIZED TABLE t (m STRING METADATA) FRESHNESS = INTERVAL '1' HOUR AS "
         "SELECT 1", "Metadata columns are not supported", 1, 39),
        ("CREATE MATERIALIZED TABLE t (a FOO) FRESHNESS = INTERVAL '1' HOUR AS SELECT 1",
         "Unknown type 'FOO' for column 'a'", 1, 32),
        ("CREATE MATERIALIZED TABLE t (a INTERVAL DAY) FRESHNESS = INTERVAL '1' HOUR AS "
         "SELECT 1", "is not one a Spark query gives a column", 1, 32),
        ("CREATE MATERIALIZED TABLE t (a INT, `a` INT) FRESHNESS = INTERVAL '1' HOUR AS "
         "SELECT 1", "Duplicate column 'a'", 1, 37),
        ("CREATE MATERIALIZED TABLE t (PRIMARY KEY (a) NOT ENFORCED, PRIMARY KEY (b) NOT "
         "ENFORCED) FRESHNESS = INTERVAL '1' HOUR AS SELECT 1",
         "A materialized table has at most one PRIMARY KEY", 1, 60),
        ("CREATE MATERIALIZED TABLE t (a INT, PRIMARY KEY (a)) FRESHNESS = INTERVAL '1' HOUR "
         "AS SELECT 1", "Flink doesn't support ENFORCED mode for PRIMARY KEY constraint.", 1,
         37),
        ("CREATE MATERIALIZED TABLE t DISTRIBUTED BY RANGE (a) INTO 4 BUCKETS FRESHNESS = "
         "INTERVAL '1' HOUR AS SELECT 1", "DISTRIBUTED BY RANGE is not supported", 1, 44),
        ("CREATE MATERIALIZED TABLE t DISTRIBUTED BY RANDOM(a) FRESHNESS = INTERVAL '1' HOUR "
         "AS SELECT 1", "Expected HASH (columns) or (columns) after DISTRIBUTED BY, found "
         "'RANDOM'", 1, 44),
        ("CREATE MATERIALIZED TABLE t DISTRIBUTED BY HASH (a) FRESHNESS = INTERVAL '1' HOUR AS"
         " SELECT 1", "Expected INTO <n> BUCKETS", 1, 53),
        ("CREATE MATERIALIZED TABLE t DISTRIBUTED BY HASH (a) INTO 0 BUCKETS FRESHNESS = "
         "INTERVAL '1' HOUR AS SELECT 1", "The number of buckets must be a positive integer, "
         "not 0", 1, 58),
        ("CREATE MATERIALIZED TABLE t DISTRIBUTED BY HASH (a, a) INTO 2 BUCKETS FRESHNESS = "
         "INTERVAL '1' HOUR AS SELECT 1", "Duplicate distribution column 'a'", 1, 53),
        ("CREATE MATERIALIZED TABLE t PARTITIONED BY (a) DISTRIBUTED BY (a) INTO 2 BUCKETS "
         "FRESHNESS = INTERVAL '1' HOUR AS SELECT 1", "DISTRIBUTED BY must come before "
         "PARTITIONED BY", 1, 48),
        ("SHOW CREATE MATERIALIZED TABLE", "Expected a materialized table name, found the end"
         " of the statement", 1, 31),
        ("SHOW CREATE TABLE t", "Expected MATERIALIZED TABLE after SHOW CREATE, found "
         "'TABLE'", 1, 13),
        ("SHOW CREATE MATERIALIZED TABLE t x", "Unexpected 'x' after the statement", 1, 34),
    ],
)  # fmt: skip
def test_each_refusal_of_the_new_forms_has_its_line_and_column(sql, message, line, column):
    error = refusal(sql)
    assert message in error.message
    assert (error.line, error.column) == (line, column)


# -- the schema part against the query's schema (Flink's converter cases) ----------------------

# SELECT 1 AS shop_id, 2 AS user_id: two INT NOT NULL columns.
USERS_SHOPS = {
    "fields": [
        {"id": 1, "name": "shop_id", "type": "int", "required": True},
        {"id": 2, "name": "user_id", "type": "int", "required": True},
    ]
}


def columns(sql_part: str) -> tuple[ColumnDefinition, ...]:
    sql = f"CREATE MATERIALIZED TABLE users_shops ({sql_part}) FRESHNESS = INTERVAL '30' " + (
        "SECOND AS SELECT 1 AS shop_id, 2 AS user_id"
    )
    return parse_statement(sql).columns


@pytest.mark.parametrize(
    ("part", "message"),
    [
        ("shop_id", "The number of columns in the column list must match the number of "
         "columns in the source schema."),
        ("id, name, address", "The number of columns in the column list must match the "
         "number of columns in the source schema."),
        ("id, name", "Column 'id' not found in the source schema."),
        ("user_id, shop_id", "Column 'user_id' is column 2 of the query but column 1 of the "
         "column list"),
        ("shop_id STRING, user_id STRING", "Incompatible types for sink column 'shop_id' at "
         "position 1. The source column has type 'INT NOT NULL', while the target column has "
         "type 'STRING'."),
        ("a INT, b INT", "Failed to execute CREATE MATERIALIZED TABLE statement.\nInvalid "
         "schema. All persisted (physical and metadata) columns in the schema part need to be "
         "present in the query part.\nHowever, physical column `a` could not be found in the "
         "query."),
        ("shop_id INT, b INT", "However, physical column `b` could not be found in the "
         "query."),
    ],
)  # fmt: skip
def test_a_schema_part_the_query_does_not_give_is_refused_naming_the_column(part, message):
    with pytest.raises(InvalidInput) as caught:
        check_declared(columns(part), USERS_SHOPS)
    assert message in caught.value.message


@pytest.mark.parametrize(
    "part",
    ["shop_id, user_id", "shop_id INT, user_id INT", "user_id INT NOT NULL",
     "shop_id INTEGER COMMENT 'the shop'", "PRIMARY KEY (user_id) NOT ENFORCED"],
)  # fmt: skip
def test_a_schema_part_the_query_gives_is_accepted(part):
    check_declared(columns(part), USERS_SHOPS)


def test_not_null_over_a_column_the_query_may_leave_null_is_refused():
    schema = {"fields": [{"id": 1, "name": "ds", "type": "string", "required": False}]}
    check_declared((ColumnDefinition("ds", "VARCHAR"),), schema)
    with pytest.raises(InvalidInput, match="source column has type 'STRING', while the target"):
        check_declared((ColumnDefinition("ds", "STRING", not_null=True),), schema)


@pytest.mark.parametrize(
    ("written", "iceberg"),
    [
        ("INT", "int"), ("INTEGER", "int"), ("SMALLINT", "int"), ("BIGINT", "long"),
        ("STRING", "string"), ("VARCHAR(10)", "string"), ("DECIMAL(10,2)", "decimal(10, 2)"),
        ("DECIMAL", "decimal(10, 0)"), ("TIMESTAMP", "timestamptz"),
        ("TIMESTAMP_NTZ", "timestamp"), ("DATE", "date"), ("BINARY", "binary"),
        ("ARRAY<BIGINT>", {"type": "list", "element-id": 3, "element": "long",
                           "element-required": True}),
        ("MAP<STRING, DOUBLE>", {"type": "map", "key-id": 3, "key": "string", "value-id": 4,
                                 "value": "double", "value-required": False}),
        ("STRUCT<a: INT, `b c`: STRING>", {"type": "struct", "fields": [
            {"id": 3, "name": "a", "type": "int", "required": False},
            {"id": 4, "name": "b c", "type": "string", "required": True}]}),
    ],
)  # fmt: skip
def test_a_declared_type_means_the_iceberg_type_spark_gives_such_a_column(written, iceberg):
    assert declared_type(written) == canonical(iceberg)


def test_declared_types_use_the_views_type_map_but_timestamp_is_timestamptz():
    timestamp = exp.DataType.build("TIMESTAMP")  # sqlglot's own TIMESTAMP, not Spark's reading
    assert timestamp.this == exp.DataType.Type.TIMESTAMP
    assert iceberg_type_from_sqlglot(timestamp) == ("timestamp", False)
    assert _from_sqlglot(timestamp, "TIMESTAMP") == "timestamptz"
    for written, iceberg in (
        ("BIGINT", "long"),
        ("NVARCHAR", "string"),
        ("VARBINARY", "binary"),
        ("TIMESTAMP_NTZ", "timestamp"),
        ("DATETIME", "timestamp"),
    ):
        assert iceberg_type_from_sqlglot(exp.DataType.build(written)) == (iceberg, False)
        assert declared_type(written) == iceberg


@pytest.mark.parametrize("written", ["TIME", "UUID"])
def test_a_type_spark_has_not_is_refused_though_views_map_it(written):
    assert not iceberg_type_from_sqlglot(exp.DataType.build(written))[1]
    with pytest.raises(InvalidInput, match=f"Type '{written}' is not one a Spark query gives"):
        declared_type(written)


# -- SHOW CREATE reads back as the definition it shows -----------------------------------------

names = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12)
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
primitives = st.sampled_from(
    ["int", "long", "string", "double", "float", "boolean", "date", "timestamptz",
     "timestamp", "binary", "decimal(38, 9)"]
)  # fmt: skip
iceberg_types = st.recursive(
    primitives,
    lambda inner: st.one_of(
        st.builds(lambda e: {"type": "list", "element-id": 1, "element": e}, inner),
        st.builds(
            lambda k, v: {"type": "map", "key-id": 1, "key": k, "value-id": 2, "value": v},
            primitives,
            inner,
        ),
        st.builds(
            lambda fs: {"type": "struct", "fields": [
                {"id": i, "name": n, "type": t} for i, (n, t) in enumerate(fs)]},
            st.lists(st.tuples(names, inner), min_size=1, max_size=3,
                     unique_by=lambda f: f[0]),
        ),
    ),
    max_leaves=5,
)  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(
    name=st.lists(names, min_size=1, max_size=3).map(tuple),
    table_columns=st.lists(
        st.builds(TableColumn, names, iceberg_types, st.booleans(), st.none() | texts),
        min_size=1,
        max_size=4,
        unique_by=lambda c: c.name,
    ),
    comment=st.none() | texts,
    options=st.dictionaries(texts, texts, max_size=3),
    buckets=st.none() | st.integers(1, 1024),
    explicit=st.sampled_from([None, RefreshMode.FULL, RefreshMode.CONTINUOUS]),
)
def test_show_creates_text_reads_back_as_the_definition_it_shows(
    name, table_columns, comment, options, buckets, explicit
):
    first = table_columns[0].name
    text = show_create(
        name,
        columns=table_columns,
        query="SELECT -- the end\n 1 AS x",
        freshness=Freshness(1, TimeUnit.DAY),
        refresh_mode=explicit,
        primary_key=(first,),
        constraint_name="pk",
        comment=comment,
        distribution=Distribution((first,), buckets) if buckets else None,
        partitioned_by=(first,),
        options=options,
    )
    statement = parse_statement(text)
    assert statement.or_alter and statement.name == name
    assert [(c.name, c.not_null, c.comment or None) for c in statement.columns] == [
        (c.name, c.required, c.doc or None) for c in table_columns
    ]
    assert [declared_type(c.type) for c in statement.columns] == [
        canonical(c.type) for c in table_columns
    ]
    assert (statement.comment or None, statement.options) == (comment or None, options)
    assert statement.distribution == (Distribution((first,), buckets) if buckets else None)
    assert (statement.primary_key, statement.partitioned_by) == ((first,), (first,))
    assert statement.refresh_mode == explicit
    assert statement.query == "SELECT -- the end\n 1 AS x"
