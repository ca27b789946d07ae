"""The parse counter (tests/sql_parses.py) that the refresh tests rely on to hold a run to
one parse sees every way the app asks sqlglot to parse, or those tests could not fail."""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from tests.sql_parses import parses

SQL = "SELECT a FROM t"


def test_the_counter_counts_a_parse_one_without_a_target():
    with parses() as seen:
        sqlglot.parse_one(SQL, read="spark")

    assert seen == {SQL: 1}


def test_the_counter_counts_a_parse_one_into_a_named_expression():
    with parses() as seen:
        parsed = sqlglot.parse_one(SQL, read="spark", into=exp.Select)

    assert isinstance(parsed, exp.Select)
    assert seen == {SQL: 1}


def test_the_counter_counts_each_parse_of_the_same_text_through_either_entry():
    with parses() as seen:
        sqlglot.parse(SQL, read="spark")
        sqlglot.parse_one(SQL, read="spark", into=exp.Select)

    assert seen == {SQL: 2}


def test_the_counter_stops_counting_when_the_block_ends():
    with parses() as seen:
        pass
    sqlglot.parse_one(SQL, read="spark", into=exp.Select)

    assert seen == {}
