"""Materialized tables run with their owner's rights (issue 39, refresh.rights): a refresh
reads a source only while the table's owner may read it, and its definition is shown only
to those who may read every source. The worker's Spark is faked (its session, the job that
recomputes the table); the decision, the runs and the suspension are the app's own."""

# ruff: noqa: F811 - the shared fixtures are imported by name
from __future__ import annotations

from contextlib import nullcontext
from types import SimpleNamespace

import pytest
from pyspark.sql.types import DoubleType, StringType, StructField, StructType

from catalog import services
from catalog.core.access import READ_DATA
from catalog.models import Table
from refresh import definitions, runner, runs, stream_hosts, verification
from refresh import services as mts
from refresh.core.freshness import Freshness
from refresh.core.streaming import StreamPlan
from refresh.models import MaterializedTable, RefreshRun
from refresh.rights import DEFINITION_HIDDEN, OwnerLacksPrivilege
from refresh.streams import starts, stops
from refresh.streams.state import Running
from refresh.streams.supervisor import Supervisor
from tests.integration.grant_fixtures import admin, alice, api_as, bob, give, take  # noqa: F401

pytestmark = pytest.mark.django_db

ORDERS = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "ds", "type": "string", "required": False},
        {"id": 2, "name": "amount", "type": "double", "required": False},
    ],
}
DAILY = StructType(
    [StructField("ds", StringType(), True), StructField("total", DoubleType(), True)]
).json()
QUERY = "SELECT ds, sum(amount) AS total FROM orders GROUP BY ds"
LACKS = "The owner alice lacks read_data on sales.orders, a source of sales.daily"


@pytest.fixture
def spark(monkeypatch) -> list[int]:
    """The worker's Spark: a session that is never used and a recompute that commits
    nothing (the runs it was asked for, by id)."""
    recomputed: list[int] = []
    monkeypatch.setattr("refresh.analysis.query_schema", lambda query, **kw: DAILY)
    monkeypatch.setattr("refresh.runs.dispatch", lambda run, **kw: None)
    monkeypatch.setattr("refresh.runner.engine.run_session", lambda **kw: object())
    monkeypatch.setattr("refresh.runner.engine.job_group", lambda *a, **kw: nullcontext())
    monkeypatch.setattr(
        "refresh.runner._full", lambda session, run, *a, **kw: recomputed.append(run.pk)
    )
    return recomputed


@pytest.fixture
def daily(admin, alice, spark) -> MaterializedTable:
    """sales.daily, owned by alice (who made it), reading sales.orders (the admin's), which
    alice was granted read_data on."""
    services.create_namespace(name="sales", actor=admin)
    services.create_table(namespace="sales", name="orders", schema=ORDERS, actor=admin)
    give(admin, READ_DATA, alice, namespace="sales", name="orders")
    mt = mts.create_materialized_table(
        namespace="sales", name="daily", query=QUERY, freshness=Freshness(1, "HOUR"), actor=alice
    )
    assert mt.table.owner_id == alice.pk
    return mt


def refresh(mt: MaterializedTable, *, force: bool = False) -> RefreshRun:
    run = runs.enqueue(mt, trigger=RefreshRun.Trigger.MANUAL, force=force)
    runner._execute(run.pk)
    run.refresh_from_db()
    return run


def test_a_refresh_whose_owner_lost_read_data_on_a_source_fails_naming_it_and_writes_nothing(
    daily, admin, alice, spark, monkeypatch
):
    take(admin, READ_DATA, alice, namespace="sales", name="orders")
    decided = []
    monkeypatch.setattr("refresh.sources.decide", lambda *a, **kw: decided.append(a))
    before = Table.objects.get(pk=daily.table_id).current_snapshot_id

    run = refresh(daily)

    assert run.state == "FAILED"
    assert run.error.startswith(LACKS)
    assert decided == [] and spark == []  # nothing decided from the sources, nothing read
    assert Table.objects.get(pk=daily.table_id).current_snapshot_id == before
    assert MaterializedTable.objects.get(pk=daily.pk).consecutive_failures == 1


def test_after_the_configured_number_of_such_failures_the_table_is_suspended(
    daily, admin, alice, settings
):
    settings.MT_FAILURES_BEFORE_SUSPEND = 3
    take(admin, READ_DATA, alice, namespace="sales", name="orders")

    states = [refresh(daily).state for _ in range(3)]

    mt = MaterializedTable.objects.get(pk=daily.pk)
    assert states == ["FAILED"] * 3
    assert mt.state == "SUSPENDED"
    assert "3 consecutive failed refreshes" in mt.suspended_reason
    assert LACKS in mt.suspended_reason


def test_granting_read_data_back_lets_the_next_refresh_succeed(daily, admin, alice, spark):
    take(admin, READ_DATA, alice, namespace="sales", name="orders")
    assert refresh(daily).state == "FAILED"

    give(admin, READ_DATA, alice, namespace="sales", name="orders")
    run = refresh(daily)

    assert run.state == "SUCCEEDED", run.error
    assert spark == [run.pk]
    assert MaterializedTable.objects.get(pk=daily.pk).consecutive_failures == 0


def test_a_superuser_owner_reads_everything_and_a_table_without_owner_reads_as_before_grants(
    daily, admin, alice, spark
):
    take(admin, READ_DATA, alice, namespace="sales", name="orders")
    Table.objects.filter(pk=daily.table_id).update(owner=admin)
    assert refresh(daily).state == "SUCCEEDED"

    Table.objects.filter(pk=daily.table_id).update(owner=None)
    assert refresh(daily, force=True).state == "SUCCEEDED"


def test_a_rebuild_after_alter_fails_when_the_owner_may_not_read_the_new_source(
    daily, admin, alice
):
    services.create_table(namespace="sales", name="returns", schema=ORDERS, actor=admin)
    run = definitions.alter_query(
        daily, query="SELECT ds, sum(amount) AS total FROM returns GROUP BY ds", actor=admin
    )

    assert runner._execute(run.pk) == "FAILED"

    run.refresh_from_db()
    assert run.error.startswith(
        "The owner alice lacks read_data on sales.returns, a source of sales.daily"
    )
    assert MaterializedTable.objects.get(pk=daily.pk).current_version == 1


def test_a_verification_is_refused_before_spark_when_the_owner_lost_a_source(
    daily, admin, alice, monkeypatch
):
    monkeypatch.setattr(
        "refresh.selectors.snapshots_with_refresh_state", lambda mt, limit: [(1, {})]
    )
    monkeypatch.setattr(
        "refresh.verification.read", lambda summary: SimpleNamespace(view_version_id=1)
    )
    take(admin, READ_DATA, alice, namespace="sales", name="orders")
    with pytest.raises(OwnerLacksPrivilege, match=LACKS):
        verification.verify(daily)


def test_a_reader_of_the_table_but_not_its_source_sees_its_rows_not_its_query(
    daily, admin, alice, bob
):
    give(admin, READ_DATA, bob, namespace="sales", name="daily")
    reader, owner = api_as(bob), api_as(alice)

    preview = reader.get("/api/namespaces/sales/tables/daily/preview")
    assert preview.status_code == 200, preview.content
    assert [c["name"] for c in preview.json()["columns"]] == ["ds", "total"]
    assert reader.get("/api/namespaces/sales/tables/orders/preview").status_code == 404

    seen = reader.get("/api/namespaces/sales/materialized-tables/daily/")
    assert seen.status_code == 200, seen.content
    assert (seen.json()["query"], seen.json()["query_hidden"]) == (None, DEFINITION_HIDDEN)
    versions = reader.get("/api/namespaces/sales/materialized-tables/daily/versions/").json()
    assert [v["query"] for v in versions["versions"]] == [None]

    mine = owner.get("/api/namespaces/sales/materialized-tables/daily/").json()
    assert (mine["query"], mine["query_hidden"]) == (QUERY, None)


def test_a_user_who_may_not_see_the_table_gets_the_missing_tables_answer(daily, admin, bob):
    give(admin, READ_DATA, bob, namespace="sales", name="orders")
    missing = api_as(bob).get("/api/namespaces/sales/materialized-tables/nothing/")
    hidden = api_as(bob).get("/api/namespaces/sales/materialized-tables/daily/")
    assert hidden.status_code == missing.status_code == 404
    assert hidden.content == missing.content.replace(b"nothing", b"daily")


@pytest.fixture
def live(admin, alice, spark) -> MaterializedTable:
    """sales.live, a continuous table owned by alice reading sales.orders, which she may
    not read (made as a row: its streaming host is driven by hand, with no Spark)."""
    services.create_namespace(name="sales", actor=admin)
    services.create_table(namespace="sales", name="orders", schema=ORDERS, actor=admin)
    table = services.create_table(namespace="sales", name="live", schema=ORDERS, actor=alice).obj
    return MaterializedTable.objects.create(
        table=table,
        query="SELECT ds, amount FROM sales.orders",
        sources=["sales.orders"],
        freshness_value=5,
        freshness_unit="SECOND",
        refresh_mode="CONTINUOUS",
        state="ACTIVATED",
    )


def host() -> Supervisor:
    supervisor = Supervisor(config=None, host_name="h:1")  # type: ignore[arg-type]
    supervisor.host = stream_hosts.register("h:1")
    return supervisor


LIVE_LACKS = "The owner alice lacks read_data on sales.orders, a source of sales.live"


def test_a_stream_whose_owner_may_not_read_a_source_does_not_start_and_counts_a_failure(live):
    supervisor = host()

    starts.start(
        supervisor, MaterializedTable.objects.select_related("table__namespace").get(pk=live.pk)
    )

    mt = MaterializedTable.objects.get(pk=live.pk)
    assert supervisor.running == {} and supervisor._spark is None  # no Spark was started
    assert (mt.stream_status, mt.consecutive_failures) == ("FAILED", 1)
    assert mt.stream_error.startswith(LIVE_LACKS)
    [run] = mt.runs.all()
    assert (run.trigger, run.state) == ("CONTINUOUS", "FAILED")
    assert run.error.startswith(LIVE_LACKS)


def test_a_micro_batch_after_a_revoke_fails_the_stream_with_the_reason(
    live, admin, alice, monkeypatch
):
    # Spark's thread closes its stale connection first; the test's one is in a transaction.
    monkeypatch.setattr("refresh.streams.starts.close_old_connections", lambda: None)
    give(admin, READ_DATA, alice, namespace="sales", name="orders")
    supervisor = host()
    starts.may_read(supervisor, live.pk)  # alice may read: the batch goes on

    take(admin, READ_DATA, alice, namespace="sales", name="orders")
    with pytest.raises(OwnerLacksPrivilege, match=LIVE_LACKS):
        starts.may_read(supervisor, live.pk)
    # Spark ends the query with its own words for the failed batch function.
    query = SimpleNamespace(isActive=False, exception=lambda: RuntimeError("foreachBatch failed"))
    supervisor.running[live.pk] = Running(live.pk, query, (), "", StreamPlan("append", (), ()))
    stops.ended(supervisor, supervisor.running[live.pk], live, held=True)

    mt = MaterializedTable.objects.get(pk=live.pk)
    assert mt.stream_status == "FAILED" and mt.stream_error.startswith(LIVE_LACKS)
    assert mt.consecutive_failures == 1
    assert live.pk in supervisor.retry_after and live.pk not in supervisor.refusals


def test_the_check_costs_three_small_queries_one_of_them_the_owners_grants(daily):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from refresh.rights import check_owner_reads

    with CaptureQueriesContext(connection) as queries:
        check_owner_reads(daily)

    assert len(queries) == 3, [q["sql"] for q in queries]
    assert sum("catalog_grant" in q["sql"] for q in queries) == 1
