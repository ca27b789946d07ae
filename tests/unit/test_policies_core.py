"""The SQL of row filters and column masks: what `check_expression` lets a table's manager
keep, and what `bind` gives Spark for one reader (catalog.core.policies)."""

from __future__ import annotations

import pytest

from catalog.core.errors import InvalidInput, SqlError
from catalog.core.policies import MASK, ROW_FILTER, bind, check_expression

COLUMNS = {
    "id": "long",
    "region": "string",
    "email": "string",
    "amount": "decimal(10,2)",
    "paid": "boolean",
    "tags": "list<string>",
}


def refused(sql: str, kind: str = ROW_FILTER, column: str | None = None) -> SqlError:
    with pytest.raises(SqlError) as caught:
        check_expression(sql, columns=COLUMNS, kind=kind, column=column)
    assert caught.value.field == "expression"
    return caught.value


def test_a_row_filter_over_the_tables_columns_is_kept_as_written():
    kept = check_expression(" region = 'EU' and paid ", columns=COLUMNS, kind=ROW_FILTER)
    assert kept == "region = 'EU' and paid"


def test_a_mask_may_read_other_columns_and_call_the_sandboxs_functions():
    sql = "case when region = 'EU' then concat('***@', split_part(email, '@', 2)) else email end"
    assert check_expression(sql, columns=COLUMNS, kind=MASK, column="email") == sql


def test_current_user_and_is_member_with_a_literal_are_allowed():
    sql = "is_member('finance') or current_user() = email"
    assert check_expression(sql, columns=COLUMNS, kind=ROW_FILTER) == sql


def test_a_second_statement_is_refused_with_its_position():
    error = refused("region = 'EU'; DROP TABLE sales.orders")
    assert "one expression" in error.message
    assert (error.line, error.column) == (1, 16)


def test_a_subquery_is_refused_with_its_position():
    error = refused("region IN (SELECT region FROM sales.allowed)")
    assert "subquery" in error.message
    assert error.line == 1 and error.column is not None


def test_reflect_and_java_method_are_refused_as_outside_the_sandbox():
    error = refused("reflect('java.lang.Runtime', 'getRuntime') = 'x'")
    assert "reflect()" in error.message and "sandbox" in error.message
    assert (error.line, error.column) == (1, 1)
    assert "java_method()" in refused("java_method('java.lang.System', 'exit', 0)", MASK).message


def test_an_unknown_column_is_named_with_line_and_column():
    error = refused("region = 'EU'\n  and country = 'FR'")
    assert "Unknown column 'country'" in error.message
    assert (error.line, error.column) == (2, 7)


def test_aggregates_window_functions_and_generators_are_refused():
    assert "aggregate" in refused("count(*) > 1").message
    assert "window" in refused("row_number() OVER (ORDER BY id) = 1").message
    assert "explode() is not allowed" in refused("explode(tags)", MASK, "email").message


def test_functions_whose_value_is_not_the_rows_are_refused():
    # user() is the worker's account in Spark, never the reader's; rand() differs per read;
    # input_file_name() tells where the data lies.
    for sql in ("user() = email", "rand() > 0.5", "input_file_name() like '%eu%'"):
        assert "is not allowed in a row filter" in refused(sql).message


def test_is_member_takes_one_literal_group_name():
    assert "string literal" in refused("is_member(region)").message
    assert "string literal" in refused("is_member('a', 'b')").message


def test_a_row_filter_that_is_not_boolean_is_refused():
    assert "boolean" in refused("amount + 1").message
    assert "boolean" in refused("region").message


def test_an_unterminated_comment_does_not_parse():
    error = refused("region = 'EU' /* the rest of the reader's query")
    assert "Cannot read" in error.message


def test_an_alias_star_and_parameter_are_refused():
    assert "alias" in refused("region = 'EU' AS everything").message
    assert "*" in refused("concat(*)", MASK, "email").message


def test_an_empty_or_huge_expression_is_refused():
    assert "empty" in refused("   ").message
    assert "too long" in refused("id = 1 or " * 500 + "true").message


def test_a_mask_of_a_column_the_table_lacks_names_the_column_field():
    with pytest.raises(InvalidInput) as caught:
        check_expression("'***'", columns=COLUMNS, kind=MASK, column="phone")
    assert caught.value.field == "column"


def test_bind_puts_the_readers_name_and_memberships_in_place():
    sql = "is_member('finance') or (is_member('eu') and region = 'EU') or current_user() = email"
    bound = bind(sql, user="ana", groups={"eu"})
    assert bound == "FALSE OR (TRUE AND region = 'EU') OR 'ana' = email"


def test_bind_quotes_a_name_that_holds_a_quote():
    bound = bind("current_user() = email", user="o'brien", groups=set())
    assert bound == "'o\\'brien' = email"


def test_bind_escapes_a_backslash_at_the_end_of_a_name():
    # Spark reads backslash escapes in literals: a bare one would swallow the quote.
    assert bind("current_user() = email", user="a\\", groups=set()) == "'a\\\\' = email"


def test_bind_drops_comments_so_nothing_runs_on_into_the_readers_sql():
    # sqlglot would write `-- x */ or true` as `/* x */ or true */`: a comment that closes
    # early. The bound SQL holds no comment at all.
    bound = bind("region = 'EU' -- x */ OR TRUE", user="ana", groups=set())
    assert bound == "region = 'EU'"


def test_bind_writes_spark_sql():
    assert bind("concat('***@', split_part(email, '@', 2))", user="a", groups=set()) == (
        "CONCAT('***@', SPLIT_PART(email, '@', 2))"
    )
