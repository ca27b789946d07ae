"""How a FULL table's refresh decides between NO_DATA, INCREMENTAL and FULL, and the reason
it records (refresh.core.incremental): the rules on lineages written by hand."""

from __future__ import annotations

from refresh.core.incremental import (
    Baseline,
    Kind,
    Step,
    appended,
    decide,
    has_outer_join,
)
from refresh.core.streaming import StreamPlan

APPEND = StreamPlan("append", (("s", "orders"),), ())
MERGE = StreamPlan("merge", (("s", "orders"),), (("s", "customers"),), ("region",))


def lineage(*steps: tuple[int, int | None, str, int]) -> dict[int, Step]:
    return {s[0]: Step(*s) for s in steps}


ORDERS = lineage((1, None, "append", 10), (2, 1, "append", 5), (3, 2, "replace", 0))
TABLE = lineage((100, None, "overwrite", 10))


def decision(**changes):
    arguments = dict(
        now={"s.orders": 3},
        unknown=[],
        baseline=Baseline(7, {"s.orders": 1}, 1, 100),
        lineages={"s.orders": ORDERS},
        plan=APPEND,
        table_lineage=TABLE,
        table_snapshot=100,
        definition_version=1,
    )
    arguments.update(changes)
    return decide(**arguments)


def test_appends_since_the_last_refresh_are_applied_incrementally_with_their_count():
    made = decision()
    assert made.kind is Kind.INCREMENTAL
    assert made.reason == ("incremental: 1 source snapshot appended 5 rows (s.orders +5 in 1)")
    [delta] = made.deltas
    assert (delta.source, delta.since, delta.until) == ("s.orders", 1, 3)


def test_unchanged_sources_are_no_data_unless_forced_and_forced_is_full():
    assert decision(now={"s.orders": 1}).kind is Kind.NO_DATA
    forced = decision(now={"s.orders": 1}, force=True)
    assert forced.kind is Kind.FULL
    assert "no source changed" in forced.reason


def test_a_source_changed_only_by_compaction_is_no_data():
    made = decision(baseline=Baseline(7, {"s.orders": 2}, 1, 100))
    assert made.kind is Kind.NO_DATA
    assert "only compacted" in made.reason


def test_a_delete_in_a_source_means_full_naming_the_source_and_the_snapshot():
    orders = {**ORDERS, 4: Step(4, 3, "delete", 0), 5: Step(5, 4, "append", 2)}
    made = decision(now={"s.orders": 5}, lineages={"s.orders": orders})
    assert made.kind is Kind.FULL
    assert made.reason == "full: source s.orders had a delete in snapshot 4"


def test_an_overwrite_and_a_rollback_and_an_expired_snapshot_mean_full():
    overwrite = {**ORDERS, 4: Step(4, 3, "overwrite", 3)}
    assert (
        "an overwrite in snapshot 4"
        in decision(now={"s.orders": 4}, lineages={"s.orders": overwrite}).reason
    )
    # Rolled back to a branch that does not pass through snapshot 1.
    other = lineage((9, None, "append", 1))
    assert (
        "no longer in its history"
        in decision(now={"s.orders": 9}, lineages={"s.orders": other}).reason
    )
    expired = {3: ORDERS[3], 2: ORDERS[2]}  # snapshot 1 expired
    assert "snapshot 1 that the last refresh read of source s.orders expired" in (
        decision(lineages={"s.orders": expired}).reason
    )
    assert "incomplete" in decision(lineages={"s.orders": {3: ORDERS[3]}}).reason


def test_a_source_empty_at_the_last_refresh_counts_everything_appended():
    made = decision(baseline=Baseline(7, {"s.orders": None}, 1, 100))
    assert made.kind is Kind.INCREMENTAL
    assert made.deltas[0].since is None
    assert made.deltas[0].rows == 15


def test_full_asked_option_off_new_definition_first_refresh_and_unknown_sources_are_full():
    assert decision(full_asked=True).reason == "full: a full refresh was asked for"
    assert decision(now={"s.orders": 1}, full_asked=True).kind is Kind.FULL, "even unchanged"
    assert (
        "refresh.incremental = 'false'" in decision(options={"refresh.incremental": "FALSE"}).reason
    )
    assert "definition changed (version 1 to 2)" in decision(definition_version=2).reason
    assert "no earlier successful refresh" in decision(baseline=None).reason
    assert "not in this catalog" in decision(unknown=["other.x.y"]).reason


def test_shapes_the_continuous_mode_cannot_keep_and_outer_joins_are_full():
    made = decision(plan="the query cannot be kept incrementally: LIMIT cannot be kept")
    assert made.reason == "full: the query cannot be kept incrementally: LIMIT cannot be kept"
    assert "outer join" in decision(plan=MERGE, outer_join=True).reason
    assert has_outer_join("SELECT * FROM a LEFT JOIN b ON a.k = b.k")
    assert has_outer_join("SELECT * FROM a FULL OUTER JOIN b ON a.k = b.k")
    assert not has_outer_join("SELECT * FROM a JOIN b ON a.k = b.k")


def test_a_table_written_by_something_else_is_full_but_compactions_and_own_runs_are_not():
    written = {**TABLE, 101: Step(101, 100, "append", 1)}
    made = decision(table_lineage=written, table_snapshot=101)
    assert made.kind is Kind.FULL
    assert "written by something other than its refreshes (snapshot 101" in made.reason
    compacted = {**TABLE, 101: Step(101, 100, "replace", 0)}
    assert decision(table_lineage=compacted, table_snapshot=101).kind is Kind.INCREMENTAL
    assert (
        decision(table_lineage=written, table_snapshot=101, own_snapshots=[101]).kind
        is Kind.INCREMENTAL
    )


def test_a_partition_of_a_merge_table_is_incremental_only_when_the_key_holds_its_column():
    made = decision(plan=MERGE, partition={"ds": "2024-01-01"}, partition_columns=["ds"])
    assert made.kind is Kind.FULL
    assert "partition column ds is not in the primary key" in made.reason
    keyed = StreamPlan("merge", MERGE.streams, MERGE.static, ("ds", "region"))
    assert (
        decision(plan=keyed, partition={"ds": "2024-01-01"}, partition_columns=["ds"]).kind
        is Kind.INCREMENTAL
    )


def test_the_walk_is_bounded():
    long = {i: Step(i, i - 1 if i > 1 else None, "append", 1) for i in range(1, 10_050)}
    assert "more than 10,000 snapshots" in appended("s.t", long, since=1, until=10_049)


def test_aggregations_of_counts_sums_minima_and_maxima_by_the_key_combine():
    from refresh.core.incremental import combinable

    assert combinable(
        "SELECT k, count(*) AS n, sum(v) AS s, min(v) AS lo, max(v) AS hi FROM f "
        "WHERE v > 0 GROUP BY k",
        ["k"],
    ) == {"k": "key", "n": "count", "s": "sum", "lo": "min", "hi": "max"}
    for query in (
        "SELECT k, avg(v) AS a FROM f GROUP BY k",  # an average does not add up
        "SELECT k, sum(v) + 1 AS s FROM f GROUP BY k",  # an expression over an aggregate
        "SELECT k, count(DISTINCT v) AS n FROM f GROUP BY k",
        "SELECT k, count(*) AS n FROM f GROUP BY k HAVING count(*) < 3",  # keys may leave
        "SELECT c.r, count(*) AS n FROM f JOIN c ON f.k = c.k GROUP BY c.r",  # a join
        "SELECT k AS kk, count(*) AS n FROM f GROUP BY k",  # the key renamed
    ):
        assert combinable(query, ["k"]) is None, query
    assert combinable("SELECT k, j, count(*) AS n FROM f GROUP BY k, j", ["k"]) is None


def test_a_source_the_last_refresh_did_not_read_is_not_taken_as_empty_then():
    made = decision(baseline=Baseline(7, {}, 1, 100))
    assert made.kind is Kind.FULL
    assert made.reason == "full: source s.orders was not read by run 7"


def test_the_keys_appended_rows_touch_are_found_without_the_having():
    from refresh.core.streaming import without_having

    # Three new rows of customer 1 fail `count(*) < 3` on their own, yet the group changed
    # (and must leave the table): its key is found from the query without HAVING.
    assert (
        without_having(
            "SELECT customer, count(*) AS n FROM orders GROUP BY customer HAVING count(*) < 3"
        )
        == "SELECT customer, COUNT(*) AS n FROM orders GROUP BY customer"
    )
