"""A continuous table whose stream stopped catches up, as the streaming process records it
(refresh.streams.catch_up): a source's MERGE that the stream cannot read, or a
static source of its join that moved on, is one INCREMENTAL run in the history (its reason
what changed, and that the stream resumed after it), the table's checkpoint and pins are new
and the old checkpoint goes; a table that cannot catch up (no primary key, changes that
cannot be read) is recomputed, the history and its load's run saying why; a catch-up that
fails otherwise is the stream's failure, tried again from the old checkpoint. Spark's side is
replaced by fakes that say what it would have found; the decision is the real one
(refresh.core.incremental.catch_up) over lineages written by hand."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from catalog.models import CatalogEvent
from refresh import stream_hosts
from refresh.core import incremental
from refresh.core.incremental import Step
from refresh.core.streaming import StreamPlan
from refresh.models import MaterializedTable, RefreshRun
from refresh.spark.changes import Applied
from refresh.spark.source_changes import UnreadableChanges
from refresh.spark.stream_catch_up import CatchUp
from refresh.streams import catch_up as catching_up
from refresh.streams import loads, stops
from refresh.streams.state import Running
from refresh.streams.supervisor import Supervisor
from tests.integration.test_mt_pipelines import api, dispatched, ok, sales  # noqa: F401

pytestmark = pytest.mark.django_db

TOTALS = (
    "CREATE MATERIALIZED TABLE totals (PRIMARY KEY (id) NOT ENFORCED) "
    "FRESHNESS = INTERVAL '30' SECOND AS SELECT id, sum(amount) AS total FROM orders GROUP BY id"
)
FILTERED = (
    "CREATE MATERIALIZED TABLE filtered FRESHNESS = INTERVAL '30' SECOND "
    "AS SELECT id, amount FROM orders WHERE amount > 0"
)
#: The stream read through snapshot 3 of sales.orders; 4 is a MERGE INTO (merge-on-read:
#: 2 position deletes, 3 rows added) it refused, 5 an append after it.
ORDERS = {
    1: Step(1, None, "append", 10, total_records=10),
    3: Step(3, 1, "append", 5, total_records=15),
    4: Step(4, 3, "overwrite", 3, added_deletes=2, total_records=16),
    5: Step(5, 4, "append", 1, total_records=17),
}
REFUSED = "Cannot process overwrite snapshot: 4, to ignore overwrites, set ..."


@pytest.fixture
def warehouse(tmp_path: Path, settings) -> Path:
    settings.WAREHOUSE = str(tmp_path / "warehouse")
    return tmp_path / "warehouse"


@pytest.fixture
def spark(monkeypatch) -> dict[str, Any]:
    """Spark's side of a catch-up, faked: where the stream stood and the sources are now
    (`plan_catch_up`, deciding with the real rule over ORDERS), and what applying it read
    (`catch_up`: or its `failure`). What each was given is kept."""
    seen: dict[str, Any] = {"position": {"sales.orders": 3}, "failure": None}

    def plan_and_session(self, mt):
        key = tuple(mt.primary_key or ())
        return StreamPlan("append" if not key else "merge", (("sales", "orders"),), (), key), None

    def plan_catch_up(session, *, plan, key, checkpoint, start_after, **kw):
        seen["checkpoint"] = checkpoint
        now = seen.get("now", {"sales.orders": 5})
        decision = incremental.catch_up(
            position=seen["position"],
            now=now,
            lineages=seen.get("lineages", {"sales.orders": ORDERS}),
            key=key,
        )
        pins = {name: (snapshot, 1_700_000_000_000 + snapshot) for name, snapshot in now.items()}
        return CatchUp(decision, seen["position"], pins)

    def catch_up(session, caught, *, properties, violations, **kw):
        if seen["failure"] is not None:
            raise seen["failure"]
        seen["properties"] = properties
        violations.update({"positive": 1})
        return Applied(counted={"sales.orders": (2, 4)}, keys=3)

    monkeypatch.setattr(loads, "plan_and_session", plan_and_session)
    monkeypatch.setattr("refresh.streams.catch_up.stream_catch_up.plan_catch_up", plan_catch_up)
    monkeypatch.setattr("refresh.streams.catch_up.stream_catch_up.catch_up", catch_up)
    monkeypatch.setattr(
        "refresh.streams.catch_up.stream_queries.stop_between_batches", lambda query: None
    )
    return seen


def streaming(api, sql: str, name: str) -> tuple[MaterializedTable, Path]:  # noqa: F811
    """The table of `sql`, loaded (pins: snapshot 3 of sales.orders) and streaming from a
    checkpoint folder of its own."""
    ok(api, sql)
    mt = MaterializedTable.objects.get(table__name=name)
    checkpoint = Path(f"{mt.table.location}.checkpoints") / "v1-1"
    (checkpoint / "offsets").mkdir(parents=True)
    MaterializedTable.objects.filter(pk=mt.pk).update(
        stream_checkpoint=str(checkpoint),
        stream_start={"sales.orders": [3, 1_700_000_000_003]},
        stream_status="RUNNING",
    )
    mt.refresh_from_db()
    return mt, checkpoint


def stopped(supervisor: Supervisor, mt: MaterializedTable, error: str = REFUSED) -> None:
    """The table's query ended with `error`, as the loop finds it."""
    query = SimpleNamespace(isActive=False, exception=lambda: RuntimeError(error))
    plan = StreamPlan("merge", (("sales", "orders"),), (), ("id",))
    supervisor.running[mt.pk] = Running(mt.pk, query, (), mt.stream_checkpoint, plan)
    stops.ended(supervisor, supervisor.running[mt.pk], mt, held=True)


@pytest.fixture
def supervisor() -> Supervisor:
    host = Supervisor(config=None, host_name="h:1")  # type: ignore[arg-type]
    host.host = stream_hosts.register("h:1")
    return host


def test_a_keyed_table_whose_source_took_a_merge_catches_up_in_one_incremental_run(
    api,  # noqa: F811
    sales,  # noqa: F811
    warehouse,
    spark,
    supervisor,
):
    mt, checkpoint = streaming(api, TOTALS, "totals")

    stopped(supervisor, mt)

    [run] = mt.runs.filter(trigger="CONTINUOUS")
    assert (run.action, run.state, run.batch_id) == ("INCREMENTAL", "SUCCEEDED", None)
    assert run.reason == (
        "incremental: sales.orders changed by an overwrite in snapshot 4 and 1 more "
        "(2 rows deleted, 4 inserted); 3 keys recomputed; the stream resumed after it"
    )
    assert run.source_snapshots == {"sales.orders": 5}
    assert run.expectations == {"positive": 1}
    # The catch-up read from where the stream stood, and its commit says what it answers.
    assert spark["checkpoint"] == str(checkpoint)
    state = json.loads(spark["properties"]["refresh-state"])
    assert [s["snapshot-id"] for s in state["source-states"]] == [5]
    assert spark["properties"][stream_hosts.HOST_PROPERTY] == str(supervisor.host.token)
    # The stream starts again just after the snapshots the catch-up read, from a new
    # checkpoint; the old one goes. No recompute.
    mt.refresh_from_db()
    assert mt.stream_start == {"sales.orders": [5, 1_700_000_000_005]}
    assert mt.stream_checkpoint and mt.stream_checkpoint != str(checkpoint)
    assert not checkpoint.exists()
    assert not CatalogEvent.objects.filter(action="recompute_materialized_table").exists()
    assert supervisor.restarting, "the pass reads the new checkpoint before it starts streams"


def test_a_static_source_that_moved_on_is_caught_up_by_key_and_the_stream_goes_on(
    api,  # noqa: F811
    sales,  # noqa: F811
    warehouse,
    spark,
    supervisor,
    monkeypatch,
):
    mt, checkpoint = streaming(api, TOTALS, "totals")
    # The stream's source stands where it stood; the join's other table moved 20 -> 21.
    customers = {20: Step(20, None, "append", 4), 21: Step(21, 20, "overwrite", 1)}
    spark["lineages"] = {"sales.orders": ORDERS, "sales.customers": customers}
    spark["position"] = {"sales.orders": 5, "sales.customers": 20}
    spark["now"] = {"sales.orders": 5, "sales.customers": 21}
    plan = StreamPlan("merge", (("sales", "orders"),), (("sales", "customers"),), ("id",))
    query = SimpleNamespace(isActive=True)
    supervisor.running[mt.pk] = Running(mt.pk, query, (), str(checkpoint), plan, started=-1e9)
    monkeypatch.setattr(
        "refresh.streams.catch_up.source_snapshots", lambda s: ({"sales.customers": 21}, [])
    )
    MaterializedTable.objects.filter(pk=mt.pk).update(
        stream_start={"sales.orders": [5, 1], "sales.customers": [20, 2]}
    )
    mt.refresh_from_db()

    catching_up.follow_static(supervisor, supervisor.running[mt.pk], mt)

    assert mt.pk not in supervisor.running
    [run] = mt.runs.filter(trigger="CONTINUOUS")
    assert (run.action, run.state) == ("INCREMENTAL", "SUCCEEDED")
    assert run.reason.startswith("incremental: sales.customers changed by an overwrite")
    mt.refresh_from_db()
    assert mt.stream_start["sales.customers"][0] == 21
    assert not CatalogEvent.objects.filter(action="recompute_materialized_table").exists()


def test_a_table_without_a_primary_key_is_recomputed_and_its_load_says_why(
    api,  # noqa: F811
    sales,  # noqa: F811
    warehouse,
    spark,
    supervisor,
    monkeypatch,
):
    mt, checkpoint = streaming(api, FILTERED, "filtered")

    stopped(supervisor, mt)

    mt.refresh_from_db()
    assert (mt.stream_checkpoint, mt.stream_status) == ("", "RECOMPUTING")
    assert not checkpoint.exists()
    [event] = CatalogEvent.objects.filter(action="recompute_materialized_table")
    assert event.message.startswith(
        "A source snapshot its stream cannot read (Cannot process overwrite snapshot: 4"
    )
    assert "recomputing: source sales.orders had an overwrite in snapshot 4" in event.message
    assert "PRIMARY KEY (...) NOT ENFORCED" in event.message
    assert not mt.runs.filter(action="INCREMENTAL").exists()

    # The next pass loads the table; its run says why it was recomputed.
    loaded = SimpleNamespace(rows_written=3, bytes_written=30, snapshot_id=None)
    monkeypatch.setattr(
        loads, "pinned_load", lambda state, *a, **kw: ({"sales.orders": (5, 9)}, loaded)
    )
    loads.load(supervisor, None, mt, StreamPlan("append", (("sales", "orders"),), ()))
    [load] = mt.runs.filter(action="FULL", reason__startswith="full: ")
    assert load.reason.startswith("full: source sales.orders had an overwrite in snapshot 4")
    assert load.reason.endswith("the stream restarted after them")


def test_changes_that_cannot_be_read_after_all_are_recomputed_saying_why(
    api,  # noqa: F811
    sales,  # noqa: F811
    warehouse,
    spark,
    supervisor,
):
    mt, _ = streaming(api, TOTALS, "totals")
    unreadable = "The changes of source sales.orders cannot be read: x"
    spark["failure"] = UnreadableChanges(unreadable)

    stopped(supervisor, mt)

    mt.refresh_from_db()
    assert (mt.stream_checkpoint, mt.stream_status) == ("", "RECOMPUTING")
    [event] = CatalogEvent.objects.filter(action="recompute_materialized_table")
    assert event.message.endswith(f"recomputing: {unreadable}")
    assert supervisor.recompute_reasons[mt.pk].startswith(f"full: {unreadable}")


def test_an_unknown_position_is_recomputed_saying_why(
    api,  # noqa: F811
    sales,  # noqa: F811
    warehouse,
    spark,
    supervisor,
):
    mt, _ = streaming(api, TOTALS, "totals")
    spark["position"] = "micro-batch 7's end offsets do not each end a snapshot of its sources"

    stopped(supervisor, mt)

    [event] = CatalogEvent.objects.filter(action="recompute_materialized_table")
    assert event.message.endswith(f"recomputing: {spark['position']}")


def test_a_catch_up_that_fails_otherwise_is_the_streams_failure_tried_again_from_its_checkpoint(
    api,  # noqa: F811
    sales,  # noqa: F811
    warehouse,
    spark,
    supervisor,
):
    mt, checkpoint = streaming(api, TOTALS, "totals")
    spark["failure"] = RuntimeError("Executor lost")

    stopped(supervisor, mt)

    mt.refresh_from_db()
    assert (mt.stream_checkpoint, mt.stream_status) == (str(checkpoint), "FAILED")
    assert checkpoint.exists()
    [failed] = mt.runs.filter(trigger="CONTINUOUS")
    assert failed.state == RefreshRun.State.FAILED
    assert failed.error.startswith("Catching up after a source snapshot its stream cannot read")
    assert failed.error.endswith("failed: Executor lost")
    assert mt.pk in supervisor.retry_after
    assert not CatalogEvent.objects.filter(action="recompute_materialized_table").exists()
