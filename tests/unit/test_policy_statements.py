"""Row filters and column masks as the console reads them (refresh.core.policy_statements,
through refresh.core.statements): Databricks' grammar with the expression inline, its text
kept as written, refusals at their line and column."""

from __future__ import annotations

import pytest

from catalog.core.errors import SqlError
from refresh.core import statements as st
from refresh.core.policy_statements import (
    DropColumnMask,
    DropRowFilter,
    SetColumnMask,
    SetRowFilter,
    ShowPolicies,
)


def parse(sql: str):
    return st.parse_statement(sql)


def refusal(sql: str) -> SqlError:
    with pytest.raises(SqlError) as caught:
        parse(sql)
    return caught.value


# -- each form -------------------------------------------------------------------------------


def test_a_row_filter_is_its_expression_as_written_and_the_groups_exempt_from_it():
    statement = parse(
        "ALTER TABLE sales.orders SET ROW FILTER region = 'EU' OR is_member('admins')\n"
        "  EXEMPT GROUPS finance, auditors"
    )
    assert statement == SetRowFilter(
        ("sales", "orders"), "region = 'EU' OR is_member('admins')", ("finance", "auditors")
    )
    assert statement.expression_at == (1, 41)


def test_a_row_filter_without_exempt_groups_exempts_nobody():
    statement = parse("alter table orders set row filter current_user() = owner")
    assert statement == SetRowFilter(("orders",), "current_user() = owner")


def test_dropping_a_row_filter_names_only_the_table():
    assert parse("ALTER TABLE sales.orders DROP ROW FILTER;") == DropRowFilter(("sales", "orders"))


@pytest.mark.parametrize("alter", ["ALTER COLUMN", "ALTER", "CHANGE COLUMN", "change"])
def test_a_mask_is_set_on_a_column_as_databricks_writes_it(alter):
    statement = parse(
        f"ALTER TABLE sales.orders {alter} email SET MASK sha2(email, 256) EXEMPT GROUPS finance"
    )
    assert statement == SetColumnMask(
        ("sales", "orders"), "email", "sha2(email, 256)", ("finance",)
    )


def test_dropping_a_mask_names_the_table_and_the_column():
    statement = parse("ALTER TABLE sales.orders ALTER COLUMN `e-mail` DROP MASK")
    assert statement == DropColumnMask(("sales", "orders"), "e-mail")


@pytest.mark.parametrize(
    "sql", ["SHOW POLICIES ON sales.orders", "show policies on table sales.orders"]
)
def test_show_policies_names_a_table(sql):
    assert parse(sql) == ShowPolicies(("sales", "orders"))


def test_a_materialized_table_takes_the_same_clauses():
    assert parse("ALTER MATERIALIZED TABLE sales.daily DROP ROW FILTER") == DropRowFilter(
        ("sales", "daily")
    )
    statement = parse("ALTER MATERIALIZED TABLE daily ALTER COLUMN total SET MASK 0")
    assert statement == SetColumnMask(("daily",), "total", "0")


# -- names -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "name"),
    [
        ("orders", ("orders",)),
        ("sales.orders", ("sales", "orders")),
        ("lakeview.sales.eu.orders", ("lakeview", "sales", "eu", "orders")),
        ("`odd ns`.`x;y`.`order lines`", ("odd ns", "x;y", "order lines")),
        ("`exempt`", ("exempt",)),
    ],
)
def test_table_names_are_dotted_and_quoted_as_in_the_other_statements(written, name):
    assert parse(f"ALTER TABLE {written} DROP ROW FILTER").name == name
    assert parse(f"SHOW POLICIES ON {written}").name == name


def test_group_names_may_be_quoted_and_one_named_twice_counts_once():
    statement = parse(
        "ALTER TABLE t SET ROW FILTER TRUE EXEMPT GROUPS `data team`, 'eu-analysts', x, `x`"
    )
    assert statement.exempt_groups == ("data team", "eu-analysts", "x")


# -- the expression ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "expression",
    [
        "note <> 'exempt groups'",
        "status = 'EXEMPT' AND note NOT LIKE '%exempt%'",
        "`exempt` = 1",
        "payload.exempt = false",
        "coalesce(exempt_until, current_date()) >= current_date()",
        "f(a, exempt) IN (1, 2, 3)",
        "CASE WHEN is_member('hr') THEN email ELSE concat('***', ',', right(email, 4)) END",
        "(a > 1 AND (b < 2 OR c IN ('x', 'y')))",
        "tags[0] = 'eu'",
        "CAST(total AS STRING) -- a comment keeps its place\n  = '1'",
    ],
)
def test_the_expression_runs_to_a_top_level_exempt_keyword_and_keeps_its_text(expression):
    statement = parse(f"ALTER TABLE t SET ROW FILTER {expression} EXEMPT GROUPS g")
    assert statement.expression == expression
    assert statement.exempt_groups == ("g",)
    mask = parse(f"ALTER TABLE t ALTER COLUMN c SET MASK {expression}")
    assert (mask.expression, mask.exempt_groups) == (expression, ())


def test_an_expression_on_several_lines_is_kept_with_its_line_breaks():
    statement = parse("ALTER TABLE t SET ROW FILTER\n  region = 'EU'\n  OR region IS NULL\n")
    assert statement.expression == "region = 'EU'\n  OR region IS NULL"
    assert statement.expression_at == (2, 3)


def test_a_cast_inside_an_expression_needs_no_spark_but_alter_as_does():
    [mask, alter] = st.read_script(
        "ALTER TABLE t ALTER COLUMN c SET MASK CAST(c AS STRING);\n"
        "ALTER MATERIALIZED TABLE a.`b`.c AS SELECT 1"
    )
    assert (mask.needs_spark, alter.needs_spark) == (False, True)


def test_a_script_places_each_statement_and_expression_in_the_scripts_own_lines():
    statements = st.parse_script(
        "GRANT SELECT ON TABLE t TO alice;\nALTER TABLE t SET ROW FILTER a = 1;\nSHOW POLICIES ON t"
    )
    assert [type(s).__name__ for s in statements] == [
        "GrantPrivileges",
        "SetRowFilter",
        "ShowPolicies",
    ]
    assert statements[1].expression_at == (2, 30)


# -- refusals ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "where", "words"),
    [
        ("ALTER TABLE t SET ROW FILTER", (1, 29), "Expected a boolean expression"),
        ("ALTER TABLE t SET ROW FILTER EXEMPT GROUPS g", (1, 30), "Expected a boolean"),
        ("ALTER TABLE t SET ROW FILTER a = EXEMPT GROUPS g", (1, 32), "does not parse"),
        ("ALTER TABLE t SET ROW FILTER\n  a = 1 EXEMPT g", (2, 16), "Expected GROUPS"),
        ("ALTER TABLE t SET ROW FILTER a = 1 EXEMPT GROUPS", (1, 49), "a group name"),
        ("ALTER TABLE t SET ROW FILTER a = 1 EXEMPT GROUPS g,", (1, 52), "a group name"),
        ("ALTER TABLE t SET ROW FILTER a = 1 EXEMPT GROUPS g h", (1, 52), "Unexpected 'h'"),
        ("ALTER TABLE t SET ROW FILTER SELECT 1", (1, 30), "found SELECT"),
        ("ALTER TABLE t SET ROW FILTER a b", (1, 30), "an alias"),
        ("ALTER TABLE t SET ROW FILTER (a = 1", (1, 35), "Expecting )"),
        ("ALTER TABLE t ALTER COLUMN c SET MASK", (1, 38), "Expected an expression"),
        ("ALTER TABLE t ALTER COLUMN c", (1, 29), "SET MASK <expression> or DROP MASK"),
        ("ALTER TABLE t ALTER COLUMN c TYPE INT", (1, 30), "SET MASK"),
        ("ALTER TABLE t ALTER COLUMN", (1, 27), "a column name"),
        ("ALTER TABLE t DROP ROW FILTER x", (1, 31), "Unexpected 'x'"),
        ("ALTER TABLE t DROP MASK", (1, 15), "Expected SET ROW FILTER"),
        ("ALTER TABLE", (1, 12), "a table name"),
        ("ALTER TABLE t.", (1, 15), "name after '.'"),
        ("SHOW POLICIES t", (1, 15), "ON <table>"),
        ("SHOW POLICIES ON", (1, 17), "a table name"),
        ("SHOW POLICIES ON t x", (1, 20), "Unexpected 'x'"),
    ],
)
def test_syntax_errors_carry_their_line_and_column(sql, where, words):
    error = refusal(sql)
    assert (error.line, error.column) == where, error.message
    assert words in error.message


def test_other_alter_table_forms_are_refused_naming_what_the_console_runs():
    error = refusal("ALTER TABLE sales.orders ADD COLUMN x INT")
    assert (error.line, error.column) == (1, 26)
    assert "SET ROW FILTER" in error.message and "SET MASK" in error.message
    assert "found 'ADD'" in error.message


def test_alter_of_anything_but_a_table_or_materialized_table_is_refused_as_before():
    error = refusal("ALTER VIEW v AS SELECT 1")
    assert "Expected MATERIALIZED TABLE after ALTER, found 'VIEW'" in error.message


def test_an_unclosed_string_in_the_expression_is_refused_at_its_quote():
    with pytest.raises(SqlError) as caught:
        st.parse_script("SHOW POLICIES ON t;\nALTER TABLE t SET ROW FILTER a = 'EU")
    assert (caught.value.line, caught.value.column) == (2, 34)
