"""A FULL table's refresh decides from the catalog's mirror (refresh.sources.decide): the
snapshots its sources and its own table went through since the refresh it starts from, which
refresh that is (the whole table's last, or a partition's), and the reason it records."""

from __future__ import annotations

import pytest

from catalog import services
from refresh import runs
from refresh import services as mts
from refresh.models import MaterializedTable, RefreshRun
from refresh.sources import decide
from tests.integration.snapshots import commit_snapshot

pytestmark = pytest.mark.django_db

ORDERS = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "ds", "type": "string", "required": False},
        {"id": 2, "name": "amount", "type": "double", "required": False},
    ],
}
DAILY = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "ds", "type": "string", "required": True},
        {"id": 2, "name": "total", "type": "double", "required": False},
    ],
}


def commit(name: str, operation: str, rows: int = 0, summary: dict | None = None) -> int:
    """A snapshot of `sales.<name>` on top of its current one."""
    return commit_snapshot("sales", name, operation, rows, summary=summary)


@pytest.fixture
def mt() -> MaterializedTable:
    services.create_namespace(name="sales")
    services.create_table(namespace="sales", name="orders", schema=ORDERS)
    table = services.create_table(namespace="sales", name="daily", schema=DAILY).obj
    commit("orders", "append", 10)
    return MaterializedTable.objects.create(
        table=table,
        query="SELECT ds, sum(amount) AS total FROM sales.orders GROUP BY ds",
        primary_key=["ds"],
        freshness_value=1,
        freshness_unit="HOUR",
        refresh_mode="FULL",
        mode_is_explicit=True,
        state="ACTIVATED",
        partitioned_by=["ds"],
        current_version=1,
    )


def refreshed(mt: MaterializedTable, *, partition: dict | None = None, action: str = "FULL"):
    """A successful refresh run, as the runner records one (its commit to the table first)."""
    plan = decide(mt, partition=partition, force=True, full_asked=False)
    decision, now = plan.decision, dict(plan.snapshots)
    run = runs.claim(runs.enqueue(mt, trigger="MANUAL", partition=partition).pk, worker="w:1")
    table_snapshot = commit("daily", "overwrite")
    runs.finish(
        run,
        state="SUCCEEDED",
        action=action,
        source_snapshots=now,
        snapshot_id=table_snapshot,
        reason=decision.reason,
    )
    return run


def decided(mt: MaterializedTable, **kwargs):
    arguments = {"partition": None, "force": False, "full_asked": False, **kwargs}
    plan = decide(mt, **arguments)
    return plan.decision, plan.stream


def test_appends_since_the_last_refresh_are_incremental_and_say_how_many_rows(mt):
    refreshed(mt)
    commit("orders", "append", 7)
    commit("orders", "replace")  # a compaction between appends
    commit("orders", "append", 5)
    decision, plan = decided(mt)
    assert decision.kind == "INCREMENTAL"
    assert decision.reason == (
        "incremental: 2 source snapshots appended 12 rows (sales.orders +12 in 2)"
    )
    assert plan is not None and plan.mode == "merge" and plan.key == ("ds",)


def test_a_delete_in_a_source_is_incremental_by_key_unless_it_is_too_large_or_strict_fails(mt):
    refreshed(mt)
    commit("orders", "append", 7, summary={"total-records": "1000"})
    deleted = commit(
        "orders", "delete", summary={"added-position-deletes": "1", "total-records": "999"}
    )
    decision, _ = decided(mt)
    assert decision.kind == "INCREMENTAL"
    assert decision.reason == (
        f"incremental: sales.orders changed by a delete in snapshot {deleted} and 1 more "
        "(up to 1 row deleted, 7 inserted)"
    )
    [delta] = decision.deltas
    assert delta.changed and delta.total == 999
    # 8 of 999 rows touched: more than a share of 0.001.
    mts.set_options(mt, options={"refresh.incremental.max-change-ratio": "0.001"})
    mt.refresh_from_db()
    assert decided(mt)[0].reason.startswith("full: source sales.orders changed 8 rows of 999 (1%)")
    mts.set_options(mt, options={"refresh.incremental": "strict"})
    mt.refresh_from_db()
    strict, _ = decided(mt)
    assert strict.kind == "INCREMENTAL", "strict applies no share"
    mts.set_options(mt, options={"refresh.incremental": "auto"})
    mt.refresh_from_db()

    refreshed(mt)
    commit("orders", "append", 1)
    written = commit("daily", "append", 1)  # an engine wrote to the table itself
    reason = decided(mt)[0].reason
    assert reason.startswith(
        f"full: the table was written by something other than its refreshes (snapshot {written}"
    )


def test_a_table_option_and_the_runs_full_flag_turn_incremental_off(mt):
    refreshed(mt)
    commit("orders", "append", 1)
    assert decided(mt, full_asked=True)[0].reason == "full: a full refresh was asked for"
    mts.set_options(mt, options={"refresh.incremental": "false"})
    mt.refresh_from_db()
    assert "refresh.incremental = 'off'" in decided(mt)[0].reason


def test_a_bad_value_for_the_incremental_option_is_refused_naming_it(mt):
    from catalog.core.errors import InvalidInput

    with pytest.raises(InvalidInput, match="refresh.incremental"):
        mts.set_options(mt, options={"refresh.incremental": "sometimes"})


def test_a_partition_starts_from_its_own_last_refresh_and_the_whole_table_from_the_last(mt):
    refreshed(mt)
    commit("orders", "append", 3)
    refreshed(mt, partition={"ds": "a"}, action="PARTITION")
    commit("orders", "append", 2)
    # Partition b starts from the whole-table refresh: 5 rows since; a's own refresh and its
    # commit to the table are the table's own, not a foreign write.
    decision, _ = decided(mt, partition={"ds": "b"})
    assert decision.kind == "INCREMENTAL" and decision.deltas[0].rows == 5
    decision, _ = decided(mt, partition={"ds": "a"})
    assert decision.kind == "INCREMENTAL" and decision.deltas[0].rows == 2
    # The whole table cannot start from a refresh of one partition.
    decision, _ = decided(mt)
    assert decision.kind == "FULL" and "covered only" in decision.reason


def test_a_new_definition_means_full(mt):
    refreshed(mt)
    commit("orders", "append", 1)
    MaterializedTable.objects.filter(pk=mt.pk).update(current_version=2)
    mt.refresh_from_db()
    assert "definition changed (version 1 to 2)" in decided(mt)[0].reason


def test_the_run_records_the_decision_and_its_reason_for_the_api(mt, admin_client):
    run = refreshed(mt)
    answer = admin_client.get(f"/api/refresh-runs/{run.pk}/")
    assert answer.status_code == 200
    body = answer.json()
    assert body["reason"] == "full: no earlier successful refresh of these rows to start from"
    assert body["full"] is False
    assert RefreshRun.objects.get(pk=run.pk).reason == body["reason"]


def test_micro_batches_are_never_where_a_refresh_starts_and_a_continuous_table_recomputes(mt):
    refreshed(mt)
    commit("orders", "append", 4)
    # A micro-batch (the table was continuous for a while) records offsets, no snapshots.
    RefreshRun.objects.create(
        materialized_table=mt,
        table_name="sales.daily",
        trigger=RefreshRun.Trigger.CONTINUOUS,
        action=RefreshRun.Action.INCREMENTAL,
        state=RefreshRun.State.SUCCEEDED,
        snapshot_id=commit("daily", "append", 4),
        definition_version=1,
    )
    decision, _ = decided(mt)
    assert decision.kind == "FULL", "the batch's commit is not one of the refreshes'"
    MaterializedTable.objects.filter(pk=mt.pk).update(refresh_mode="CONTINUOUS")
    mt.refresh_from_db()
    decision, _ = decided(mt, force=True)
    assert decision.reason == "full: a continuous table's manual refresh recomputes it"
