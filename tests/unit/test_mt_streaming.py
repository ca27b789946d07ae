"""Which queries a continuous materialized table can maintain as a stream, and how, decided
from the SQL alone."""

from __future__ import annotations

import pytest

from catalog.core.errors import InvalidInput
from refresh.core.freshness import Freshness
from refresh.core.streaming import (
    StreamPlan,
    plan_stream,
    rewrite_sources,
    static_moved,
    trigger_seconds,
)


def plan(sql: str, **kwargs):
    return plan_stream(sql, namespace=["ns"], catalog="lakeview", **kwargs)


def test_a_filter_and_projection_appends_and_reads_its_table_as_a_stream():
    result = plan("SELECT id, amount * 2 AS doubled FROM orders WHERE amount > 0")
    assert (result.mode, result.streams, result.static) == ("append", (("ns", "orders"),), ())


def test_a_union_all_of_two_tables_appends_from_both_streams():
    result = plan("SELECT id FROM a UNION ALL SELECT id FROM other.b")
    assert result.mode == "append"
    assert result.streams == (("ns", "a"), ("other", "b"))


def test_an_aggregation_with_a_primary_key_merges_on_it():
    result = plan(
        "SELECT ds, sum(amount) AS total FROM lakeview.ns.orders GROUP BY ds", primary_key=["ds"]
    )
    assert (result.mode, result.streams, result.key) == ("merge", (("ns", "orders"),), ("ds",))


def test_a_join_streams_its_first_table_and_reads_the_others_as_static_sources():
    result = plan(
        "SELECT o.id, c.name FROM orders o JOIN customers c ON o.customer = c.id",
        primary_key=["id"],
    )
    assert result.streams == (("ns", "orders"),) and result.static == (("ns", "customers"),)


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("SELECT id FROM t ORDER BY id", "ORDER BY"),
        ("SELECT id FROM t LIMIT 5", "LIMIT"),
        ("SELECT id, row_number() OVER (ORDER BY id) AS n FROM t", "window functions"),
        ("SELECT DISTINCT id FROM t", "DISTINCT"),
        ("SELECT id FROM a UNION SELECT id FROM b", "UNION ALL"),
        ("SELECT count(*) AS n FROM t", "needs GROUP BY"),
        ("SELECT ds, count(*) AS n FROM t GROUP BY ds", "PRIMARY KEY"),
        ("SELECT id FROM t WHERE id IN (SELECT id FROM u)", "subqueries"),
    ],
)
def test_shapes_a_stream_cannot_maintain_are_refused_with_the_reason_and_full_suggested(sql, words):
    with pytest.raises(InvalidInput) as refused:
        plan(sql)
    assert words in refused.value.message
    assert "REFRESH_MODE = FULL" in refused.value.message
    assert refused.value.field == "query"


def test_a_view_is_not_a_stream():
    with pytest.raises(InvalidInput, match="ns.v is a view"):
        plan("SELECT id FROM v", is_view=lambda name: name == ("ns", "v"))


def test_sources_are_swapped_for_views_keeping_their_names_as_aliases():
    sql = rewrite_sources(
        "SELECT orders.id, c.name FROM orders JOIN ns.customers c ON orders.c = c.id",
        {("ns", "orders"): "__s0"},
        namespace=["ns"],
        catalog="lakeview",
    )
    assert "FROM __s0 AS `orders`" in sql and "ns.customers AS c" in sql


def test_the_trigger_is_half_the_freshness_and_at_least_a_second():
    assert trigger_seconds(Freshness(10, "SECOND")) == 5
    assert trigger_seconds(Freshness(1, "SECOND")) == 1


JOIN = StreamPlan(
    "merge", (("shop", "orders"),), (("shop", "customers"), ("shop", "zones")), ("k",)
)


def test_a_join_whose_static_sources_stayed_at_the_load_s_snapshots_is_not_recomputed():
    start = {"shop.orders": [70, 1], "shop.customers": [7, 1], "shop.zones": None}
    current = {"shop.orders": 75, "shop.customers": 7, "shop.zones": None}
    # The stream moving on is what micro-batches are for; only a static source counts.
    assert static_moved(JOIN, start, current) == {}


def test_a_static_source_that_moved_on_or_was_filled_or_was_never_pinned_is_named():
    start = {"shop.orders": [70, 1], "shop.customers": [7, 1], "shop.zones": None}
    assert static_moved(JOIN, start, {"shop.customers": 9}) == {"shop.customers": (7, 9)}
    assert static_moved(JOIN, start, {"shop.customers": 7, "shop.zones": 3}) == {
        "shop.zones": (None, 3)
    }
    # A load that predates the source (its pins do not name it) cannot say what was read.
    assert static_moved(JOIN, {"shop.customers": [7, 1]}, {"shop.customers": 7}) == {
        "shop.zones": (None, None)
    }
