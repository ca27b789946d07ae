"""How a FULL table's refresh decides between NO_DATA, INCREMENTAL and FULL, and the reason
it records (refresh.core.incremental): the rules on lineages written by hand."""

from __future__ import annotations

from refresh.core.incremental import (
    Baseline,
    Kind,
    Step,
    catch_up,
    changed_between,
    decide,
    has_full_outer_join,
    incremental_reason,
    null_supplied_key,
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


def test_a_delete_in_a_source_of_a_table_without_a_key_is_full_saying_a_key_would_help():
    orders = {**ORDERS, 4: Step(4, 3, "delete", 0), 5: Step(5, 4, "append", 2)}
    made = decision(now={"s.orders": 5}, lineages={"s.orders": orders})
    assert made.kind is Kind.FULL
    assert made.reason.startswith("full: source s.orders had a delete in snapshot 4")
    assert "PRIMARY KEY (...) NOT ENFORCED" in made.reason


def test_deletes_updates_and_merges_of_a_keyed_table_are_incremental_and_say_so():
    # 100 rows; snapshot 4 a merge-on-read UPDATE (3 position deletes, 3 rows added),
    # snapshot 5 an append.
    orders = {
        1: Step(1, None, "append", 100, total_records=100),
        4: Step(4, 1, "overwrite", 3, added_deletes=3, total_records=100),
        5: Step(5, 4, "append", 2, total_records=102),
    }
    for plan, key in ((APPEND, ("id",)), (MERGE, ())):
        made = decision(
            now={"s.orders": 5}, lineages={"s.orders": orders}, plan=plan, primary_key=key
        )
        assert made.kind is Kind.INCREMENTAL, made
        [delta] = made.deltas
        assert (delta.since, delta.until, delta.changed, delta.first_change) == (
            1,
            5,
            True,
            (4, "overwrite"),
        )
        assert made.reason == (
            "incremental: s.orders changed by an overwrite in snapshot 4 and 1 more "
            "(up to 3 rows deleted, 5 inserted)"
        )
    # After the run, the reason gives the rows it read and the keys it recomputed.
    assert incremental_reason(made.deltas, {"s.orders": (3, 5)}, 4) == (
        "incremental: s.orders changed by an overwrite in snapshot 4 and 1 more "
        "(3 rows deleted, 5 inserted); 4 keys recomputed"
    )


def test_a_change_larger_than_the_ratio_is_full_under_auto_and_incremental_under_strict():
    orders = {
        1: Step(1, None, "append", 10, total_records=10),
        4: Step(4, 1, "overwrite", 10, deleted_records=10, total_records=10),  # rewritten
    }
    changed = dict(now={"s.orders": 4}, lineages={"s.orders": orders}, plan=MERGE)
    made = decision(**changed)
    assert made.kind is Kind.FULL
    assert made.reason == (
        "full: source s.orders changed 20 rows of 10 (200%), more than "
        "refresh.incremental.max-change-ratio (0.3) of it: a full refresh is the cheaper"
    )
    assert decision(**changed, options={"refresh.incremental": "strict"}).kind is Kind.INCREMENTAL
    small = {
        1: Step(1, None, "append", 1000, total_records=1000),
        4: Step(4, 1, "overwrite", 1, added_deletes=1, total_records=1000),
    }
    small_change = dict(now={"s.orders": 4}, lineages={"s.orders": small}, plan=MERGE)
    assert decision(**small_change).kind is Kind.INCREMENTAL
    assert (
        decision(**small_change, options={"refresh.incremental.max-change-ratio": "0.001"}).kind
        is Kind.FULL
    )


def test_strict_refuses_an_avoidable_full_refresh_but_not_the_first_or_an_asked_one():
    strict = {"refresh.incremental": "strict"}
    orders = {**ORDERS, 4: Step(4, 3, "delete", 0)}
    refused = decision(now={"s.orders": 4}, lineages={"s.orders": orders}, options=strict)
    assert refused.refused and refused.kind is Kind.FULL
    assert refused.reason.startswith("refused: source s.orders had a delete in snapshot 4")
    assert "refresh.incremental = 'strict' refuses a full refresh" in refused.reason
    assert not decision(baseline=None, options=strict).refused
    assert not decision(full_asked=True, options=strict).refused
    assert not decision(definition_version=2, options=strict).refused
    assert decision(plan="the query cannot be kept incrementally: LIMIT", options=strict).refused
    assert decision(options={"refresh.incremental": "off"}).reason == (
        "full: incremental refreshes are off (refresh.incremental = 'off')"
    )


def test_a_schema_change_with_row_changes_is_full_but_appends_across_one_are_not():
    orders = {
        1: Step(1, None, "append", 10, schema_id=0),
        2: Step(2, 1, "append", 1, schema_id=1),
        3: Step(3, 2, "delete", 0, added_deletes=1, schema_id=1),
    }
    appends = decision(now={"s.orders": 2}, lineages={"s.orders": orders}, primary_key=("id",))
    assert appends.kind is Kind.INCREMENTAL
    made = decision(now={"s.orders": 3}, lineages={"s.orders": orders}, primary_key=("id",))
    assert made.kind is Kind.FULL
    assert "schema changed" in made.reason


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
        "refresh.incremental = 'off'" in decision(options={"refresh.incremental": "FALSE"}).reason
    )
    assert "definition changed (version 1 to 2)" in decision(definition_version=2).reason
    assert "no earlier successful refresh" in decision(baseline=None).reason
    assert "not in this catalog" in decision(unknown=["other.x.y"]).reason


def test_shapes_it_cannot_keep_full_outer_joins_self_joins_and_null_supplied_keys_are_full():
    made = decision(plan="the query cannot be kept incrementally: LIMIT cannot be kept")
    assert made.reason == "full: the query cannot be kept incrementally: LIMIT cannot be kept"
    assert "FULL OUTER join" in decision(plan=MERGE, full_outer_join=True).reason
    assert has_full_outer_join("SELECT * FROM a FULL OUTER JOIN b ON a.k = b.k")
    assert not has_full_outer_join("SELECT * FROM a LEFT JOIN b ON a.k = b.k")
    assert "read more than once" in decision(plan=MERGE, read_twice=["s.orders"]).reason
    assert decision(plan=MERGE, null_supplied="the key...").kind is Kind.FULL
    left = "SELECT o.id, c.region FROM orders o LEFT JOIN customers c ON o.c = c.c"
    assert null_supplied_key(left, ["id"]) == ""
    assert "comes from c" in null_supplied_key(left, ["region"])
    right = "SELECT o.id, c.region FROM orders o RIGHT JOIN customers c ON o.c = c.c"
    assert "comes from o" in null_supplied_key(right, ["id"])
    assert null_supplied_key(right, ["region"]) == ""
    assert "not qualified" in null_supplied_key(
        "SELECT id FROM orders o LEFT JOIN customers c ON o.c = c.c", ["id"]
    )
    assert null_supplied_key("SELECT id FROM orders o JOIN customers c ON o.c = c.c", ["id"]) == ""


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
    assert "more than 10,000 snapshots" in changed_between("s.t", long, since=1, until=10_049)


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


# -- a continuous table's catch-up after its stream stopped (refresh.core.incremental.catch_up)

#: Snapshot 4 a MERGE INTO (merge-on-read: 2 position deletes, 3 rows added) the stream's
#: source refused; 5 an append after it. The stream had read through snapshot 3.
MERGED = {
    **ORDERS,
    4: Step(4, 3, "overwrite", 3, added_deletes=2, total_records=16),
    5: Step(5, 4, "append", 1, total_records=17),
}


def caught_up(**changes):
    arguments = dict(
        position={"s.orders": 3},
        now={"s.orders": 5},
        lineages={"s.orders": MERGED},
        key=("customer",),
    )
    arguments.update(changes)
    return catch_up(**arguments)


def test_a_keyed_stream_stopped_by_a_merge_catches_up_incrementally_from_where_it_read():
    made = caught_up()
    assert made.kind is Kind.INCREMENTAL
    [delta] = made.deltas
    assert (delta.since, delta.until, delta.changed, delta.first_change) == (
        3,
        5,
        True,
        (4, "overwrite"),
    )
    assert made.reason == (
        "incremental: s.orders changed by an overwrite in snapshot 4 and 1 more "
        "(up to 2 rows deleted, 4 inserted); the stream resumed after it"
    )


def test_a_catch_up_is_never_full_for_its_size_nor_refused_by_the_tables_policy():
    # All 10 rows rewritten: a scheduled refresh under 'auto' would recompute; the stream
    # has no such choice to make, and no options are asked.
    rewritten = {**ORDERS, 4: Step(4, 3, "overwrite", 15, deleted_records=15, total_records=15)}
    made = caught_up(now={"s.orders": 4}, lineages={"s.orders": rewritten})
    assert made.kind is Kind.INCREMENTAL


def test_a_static_source_that_moved_is_caught_up_with_the_stream_source_where_it_stands():
    customers = lineage((20, None, "append", 4), (21, 20, "overwrite", 1))
    made = caught_up(
        position={"s.orders": 3, "s.customers": 20},
        now={"s.orders": 3, "s.customers": 21},
        lineages={"s.customers": customers},
    )
    assert made.kind is Kind.INCREMENTAL
    assert [(d.source, d.since, d.until) for d in made.deltas] == [("s.customers", 20, 21)]


def test_a_stream_without_a_primary_key_is_recomputed_saying_a_key_would_catch_it_up():
    made = caught_up(key=())
    assert made.kind is Kind.FULL
    assert made.reason.startswith("full: source s.orders had an overwrite in snapshot 4")
    assert "PRIMARY KEY (...) NOT ENFORCED" in made.reason
    assert "to catch up incrementally" in made.reason


def test_an_unknown_position_or_an_unreadable_range_is_recomputed_saying_why():
    inside = "micro-batch 7's end offsets do not each end a snapshot of its sources"
    assert caught_up(position=inside).reason == f"full: {inside}"
    expired = {5: MERGED[5], 4: MERGED[4]}  # snapshot 3, where the stream stood, expired
    assert caught_up(lineages={"s.orders": expired}).reason == (
        "full: snapshot 3 that the table's stream read of source s.orders expired"
    )
    assert "not known" in caught_up(position={}).reason
    assert "no snapshot any more" in caught_up(now={"s.orders": None}).reason


def test_a_catch_up_of_a_shape_whose_changes_cannot_be_applied_by_key_is_recomputed():
    assert "FULL OUTER join" in caught_up(full_outer_join=True).reason
    assert "read more than once" in caught_up(read_twice=["s.customers"]).reason
    assert caught_up(null_supplied="the key comes from c").reason == "full: the key comes from c"


def test_sources_only_compacted_since_the_position_need_no_catch_up():
    made = caught_up(position={"s.orders": 2}, now={"s.orders": 3})
    assert made.kind is Kind.NO_DATA


def test_a_snapshot_summary_any_engine_wrote_reads_as_counts_and_garbage_as_none():
    step = Step.of(
        5,
        4,
        "overwrite",
        {
            "added-records": "3",
            "deleted-records": "not a number",
            "added-position-deletes": "2",
            "added-equality-deletes": "1",
            "total-records": "1e9",
        },
        schema_id=1,
    )
    assert (step.added_records, step.deleted_records, step.added_deletes) == (3, 0, 3)
    assert (step.total_records, step.schema_id) == (0, 1)
    assert Step.of(6, None, "append", None).total_records is None
