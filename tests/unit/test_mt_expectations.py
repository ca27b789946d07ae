"""Expectations in CREATE [OR ALTER] MATERIALIZED TABLE, in Databricks' syntax
(`CONSTRAINT name EXPECT (condition) [ON VIOLATION DROP ROW | FAIL UPDATE]` in the schema
part): every form, every refusal with its line and column, SHOW CREATE's round trip, and
the SQL a refresh and the verifier build from them."""

from __future__ import annotations

import pytest

from catalog.core.errors import InvalidInput, SqlError
from refresh.core import expectations as ex
from refresh.core.expectations import DROP_ROW, FAIL_UPDATE, Expectation
from refresh.core.freshness import Freshness, TimeUnit
from refresh.core.statements import TableColumn, parse_statement, show_create

QUERY = "SELECT id, amount FROM orders"


def create(schema_part: str) -> str:
    return (
        f"CREATE MATERIALIZED TABLE s.t (\n{schema_part}\n)\n"
        f"FRESHNESS = INTERVAL '1' HOUR\nAS {QUERY}"
    )


def refusal(sql: str) -> SqlError:
    with pytest.raises(SqlError) as caught:
        parse_statement(sql)
    return caught.value


def test_expectations_are_read_with_and_without_on_violation():
    statement = parse_statement(
        create(
            "  CONSTRAINT valid_id EXPECT (id IS NOT NULL) ON VIOLATION DROP ROW,\n"
            "  constraint `positive amount` expect (amount > 0 AND (amount < 1e6)) "
            "on violation fail update,\n"
            "  CONSTRAINT counted EXPECT (amount <> 13)"
        )
    )
    assert statement.expectations == (
        Expectation("valid_id", "id IS NOT NULL", DROP_ROW),
        Expectation("positive amount", "amount > 0 AND (amount < 1e6)", FAIL_UPDATE),
        Expectation("counted", "amount <> 13", None),
    )
    assert statement.columns == () and statement.primary_key == ()


def test_expectations_sit_beside_columns_and_a_primary_key():
    statement = parse_statement(
        create(
            "  id BIGINT NOT NULL, amount BIGINT,\n"
            "  CONSTRAINT pk PRIMARY KEY (id) NOT ENFORCED,\n"
            "  CONSTRAINT valid EXPECT (amount >= 0) ON VIOLATION DROP ROW"
        ).replace("CREATE", "CREATE OR ALTER", 1)
    )
    assert statement.or_alter
    assert [c.name for c in statement.columns] == ["id", "amount"]
    assert (statement.constraint_name, statement.primary_key) == ("pk", ("id",))
    assert statement.expectations == (Expectation("valid", "amount >= 0", DROP_ROW),)


def test_a_duplicate_expectation_name_is_refused_at_the_second_name():
    error = refusal(create("  CONSTRAINT a EXPECT (id > 0),\n  CONSTRAINT A EXPECT (id < 9)"))
    assert "Duplicate constraint name 'A'" in error.message
    assert (error.line, error.column) == (3, 14)


def test_an_expectation_may_not_take_the_primary_keys_name():
    error = refusal(
        create("  CONSTRAINT pk PRIMARY KEY (id) NOT ENFORCED,\n  CONSTRAINT pk EXPECT (id > 0)")
    )
    assert "Duplicate constraint name 'pk'" in error.message
    assert (error.line, error.column) == (3, 14)


def test_a_missing_parenthesis_after_expect_is_refused_where_it_is_missing():
    error = refusal(create("  CONSTRAINT a EXPECT id > 0"))
    assert "Expected '(' and a condition after EXPECT of expectation 'a'" in error.message
    assert (error.line, error.column) == (2, 23)


def test_an_unclosed_condition_is_refused_at_its_parenthesis():
    error = refusal(
        "CREATE MATERIALIZED TABLE s.t (\n  CONSTRAINT a EXPECT ((id > 0)\n"
        "FRESHNESS = INTERVAL '1' HOUR AS SELECT 1 AS id"
    )
    assert "The condition of expectation 'a' is not closed" in error.message
    assert (error.line, error.column) == (2, 23)


def test_an_unknown_on_violation_action_is_refused_at_the_action():
    error = refusal(create("  CONSTRAINT a EXPECT (id > 0) ON VIOLATION WARN"))
    assert "Expected DROP ROW or FAIL UPDATE after ON VIOLATION, found 'WARN'" in error.message
    assert (error.line, error.column) == (2, 45)


def test_an_empty_condition_is_refused():
    error = refusal(create("  CONSTRAINT a EXPECT ( )"))
    assert "needs a condition" in error.message
    assert (error.line, error.column) == (2, 25)


@pytest.mark.parametrize(
    ("condition", "said"),
    [
        ("id IN (SELECT id FROM other)", "may not contain a subquery"),
        ("EXISTS (SELECT 1 FROM other)", "may not contain a subquery"),
        ("count(*) > 1", "aggregate or window"),
        ("sum(id) OVER () > 1", "aggregate or window"),
        ("id AS x", "must be one expression"),
        ("id = = 2", "does not parse"),
    ],
)
def test_a_condition_that_is_not_one_row_level_expression_is_refused_at_the_condition(
    condition, said
):
    error = refusal(create(f"  CONSTRAINT c EXPECT ({condition})"))
    assert said in error.message and "Expectation 'c'" in error.message
    assert (error.line, error.column) == (2, 24)


def test_show_create_gives_the_expectations_back_and_reads_back_the_same():
    expectations = (
        Expectation("valid_id", "id IS NOT NULL", DROP_ROW),
        Expectation("odd`name", "amount BETWEEN 0 AND 100", FAIL_UPDATE),
        Expectation("kept", "lower(note) <> 'x)'", None),
    )
    text = show_create(
        ("s", "t"),
        columns=[TableColumn("id", "long", True), TableColumn("amount", "long")],
        query=QUERY,
        freshness=Freshness(1, TimeUnit.HOUR),
        expectations=expectations,
    )
    assert "  CONSTRAINT `valid_id` EXPECT (id IS NOT NULL) ON VIOLATION DROP ROW" in text
    assert parse_statement(text).expectations == expectations


def test_the_flagged_query_marks_false_and_null_as_violations_and_renders_the_condition():
    sql = ex.flagged_query(
        "SELECT id FROM t -- a comment", [Expectation("a", "id   >  0"), Expectation("b", "id")]
    )
    assert "NOT coalesce((id > 0), false) AS `__lakeview_violates_0`" in sql
    assert "NOT coalesce((id), false) AS `__lakeview_violates_1`" in sql
    assert "-- a comment\n)" in sql  # the query's comment cannot swallow the parenthesis


def test_the_kept_query_filters_only_drop_row_expectations():
    expectations = [
        Expectation("a", "id > 0", DROP_ROW),
        Expectation("b", "id < 5", FAIL_UPDATE),
        Expectation("c", "id <> 3"),
    ]
    sql = ex.kept_query("SELECT id FROM t", expectations)
    assert sql.endswith("WHERE coalesce((id > 0), false)")
    assert ex.kept_query("SELECT id FROM t", expectations[1:]) == "SELECT id FROM t"


def test_the_first_failing_fail_update_names_the_expectation_and_the_count():
    expectations = [Expectation("a", "id > 0", DROP_ROW), Expectation("b", "id < 5", FAIL_UPDATE)]
    assert ex.first_failure(expectations, {"a": 3, "b": 0}) is None
    failure = ex.first_failure(expectations, {"a": 3, "b": 2})
    assert failure is not None and failure.message.startswith(
        "Expectation 'b' (ON VIOLATION FAIL UPDATE) failed: 2 rows violate it"
    )


def test_conditions_naming_columns_the_query_lacks_are_refused_by_name():
    ex.check_columns([Expectation("a", "ID > 0 AND exists(tags, x -> x = 'a')")], ["id", "tags"])
    with pytest.raises(InvalidInput, match="Expectation 'b' names nope, which is not a column"):
        ex.check_columns([Expectation("b", "nope > 0")], ["id"])


def test_expectations_differ_by_name_action_or_condition_but_not_by_spacing():
    old = (Expectation("a", "id > 0", DROP_ROW),)
    assert not ex.changed(old, (Expectation("a", "id>0", DROP_ROW),))
    assert ex.changed(old, (Expectation("a", "id > 1", DROP_ROW),))
    assert ex.changed(old, (Expectation("a", "id > 0"),))
    assert ex.changed(old, ())
