"""A refresh run is claim -> decide -> execute -> record (refresh.runner): it decides once
(one RefreshPlan, refresh.core.plan), parses its query once and hands the parsed query to
the Spark side, and enters the run's lifecycle (refresh.runs) only to claim, beat and
finish, a rebuild included. The worker's Spark is faked (its session and the jobs that
write the table); the decision, the plan and the runs are the app's own.
tests/spark/test_refresh_parses.py counts the same with real Spark jobs."""

# ruff: noqa: F811 - the shared fixtures are imported by name
from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

import pytest
from pyspark.sql.types import DoubleType, StringType, StructField, StructType
from sqlglot import exp

from catalog import services
from refresh import definitions, runner, runs
from refresh import services as mts
from refresh.core.freshness import Freshness
from refresh.models import MaterializedTable, MaterializedTableVersionLogEntry, RefreshRun
from tests.integration.grant_fixtures import admin  # noqa: F401
from tests.integration.snapshots import commit_snapshot
from tests.integration.test_owner_rights import ORDERS, QUERY
from tests.sql_parses import parses

pytestmark = pytest.mark.django_db

DAILY = StructType(
    [StructField("ds", StringType(), False), StructField("total", DoubleType(), True)]
).json()
ALTERED = "SELECT ds, max(amount) AS total FROM orders GROUP BY ds"
#: What refresh.runner may call in refresh.runs: the claim, the heartbeat's two, the finish.
LIFECYCLE = {"claim", "heartbeat", "cancel_asked", "finish"}


class Entered:
    """refresh.runs as the runner sees it, noting each function the runner takes from it."""

    def __init__(self, module: Any) -> None:
        self.module = module
        self.names: list[str] = []

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.module, name)
        if callable(value):
            self.names.append(name)
        return value


@pytest.fixture
def worker(monkeypatch) -> dict[str, list]:
    """The worker's Spark, faked: what each job was handed, by job."""
    jobs: dict[str, list] = {"recompute": [], "incremental": [], "rebuild": [], "fail": []}
    monkeypatch.setattr("refresh.analysis.query_schema", lambda query, **kw: DAILY)
    monkeypatch.setattr("refresh.runs.dispatch", lambda run, **kw: None)
    monkeypatch.setattr("refresh.runner.engine.run_session", lambda **kw: object())
    monkeypatch.setattr("refresh.runner.engine.job_group", lambda *a, **kw: nullcontext())

    def recompute(session, *, query, partition, **kw):
        jobs["recompute"].append((query, partition))

    def incremental_refresh(session, *, query, **kw):
        jobs["incremental"].append(query)

    @contextmanager
    def pinned_reads(session, *, query, **kw) -> Iterator[tuple[str, list[str]]]:
        jobs["rebuild"].append(query)
        yield "SELECT 'pinned'", []

    def rebuild(session, **kw):
        if jobs["fail"]:
            raise RuntimeError(jobs["fail"].pop())

    monkeypatch.setattr("refresh.runner.changes.recompute", recompute)
    monkeypatch.setattr("refresh.runner.changes.incremental_refresh", incremental_refresh)
    monkeypatch.setattr("refresh.runner.changes.pinned_reads", pinned_reads)
    monkeypatch.setattr("refresh.runner.batch.rebuild", rebuild)
    return jobs


@pytest.fixture
def entered(monkeypatch) -> Entered:
    spy = Entered(runs)
    monkeypatch.setattr("refresh.runner.runs", spy)
    return spy


@pytest.fixture
def daily(admin, worker) -> MaterializedTable:
    services.create_namespace(name="sales", actor=admin)
    services.create_table(namespace="sales", name="orders", schema=ORDERS, actor=admin)
    commit_snapshot("sales", "orders", "append", 10)
    return mts.create_materialized_table(
        namespace="sales",
        name="daily",
        query=QUERY,
        freshness=Freshness(1, "HOUR"),
        primary_key=("ds",),
        partitioned_by=("ds",),
        actor=admin,
    )


def execute(run: RefreshRun, entered: Entered) -> tuple[str, Counter]:
    """Run it as a worker does; its final state and the texts sqlglot parsed meanwhile."""
    entered.names.clear()
    with parses() as seen:
        state = runner._execute(run.pk)
    return state, seen


def first_run(mt: MaterializedTable) -> RefreshRun:
    return RefreshRun.objects.filter(materialized_table=mt).order_by("id").first()


def test_a_full_run_parses_its_query_once_and_hands_the_parsed_query_to_spark(
    daily, worker, entered
):
    state, seen = execute(first_run(daily), entered)

    assert state == "SUCCEEDED"
    assert seen == {QUERY: 1}
    [(query, partition)] = worker["recompute"]
    assert isinstance(query, exp.Query) and partition is None
    assert set(entered.names) <= LIFECYCLE and entered.names.count("finish") == 1


def test_incremental_skipped_and_partition_runs_each_parse_the_query_once(daily, worker, entered):
    assert execute(first_run(daily), entered)[0] == "SUCCEEDED"

    skipped = runs.enqueue(daily, trigger=RefreshRun.Trigger.MANUAL)
    state, seen = execute(skipped, entered)
    assert (state, seen) == ("SKIPPED", {QUERY: 1})
    assert entered.names == ["claim", "finish"]

    commit_snapshot("sales", "orders", "append", 5)
    incremental = runs.enqueue(daily, trigger=RefreshRun.Trigger.MANUAL, force=True)
    state, seen = execute(incremental, entered)
    incremental.refresh_from_db()
    assert (state, incremental.action, seen) == ("SUCCEEDED", "INCREMENTAL", {QUERY: 1})
    assert isinstance(worker["incremental"][-1], exp.Query)

    partition = runs.enqueue(
        daily, trigger=RefreshRun.Trigger.MANUAL, partition={"ds": "a"}, full=True
    )
    state, seen = execute(partition, entered)
    partition.refresh_from_db()
    assert (state, partition.action, seen) == ("SUCCEEDED", "PARTITION", {QUERY: 1})
    assert worker["recompute"][-1][1] == {"ds": "a"}
    assert set(entered.names) <= LIFECYCLE and entered.names.count("finish") == 1


def test_a_rebuild_parses_its_new_query_once_and_its_finish_applies_or_fails_the_version(
    daily, worker, entered, admin
):
    assert execute(first_run(daily), entered)[0] == "SUCCEEDED"
    worker["fail"].append("the new rows could not be written")
    failing = definitions.alter_query(daily, query=ALTERED, actor=admin)

    state, seen = execute(failing, entered)

    assert (state, seen) == ("FAILED", {ALTERED: 1})
    assert set(entered.names) <= LIFECYCLE and entered.names.count("finish") == 1
    entry = MaterializedTableVersionLogEntry.objects.get(run=failing)
    assert entry.outcome == "FAILED" and "could not be written" in entry.error
    assert MaterializedTable.objects.get(pk=daily.pk).current_version == 1

    rebuild = definitions.alter_query(daily, query=ALTERED, actor=admin)
    state, seen = execute(rebuild, entered)

    assert (state, seen) == ("SUCCEEDED", {ALTERED: 1})
    assert isinstance(worker["rebuild"][-1], exp.Query)
    assert set(entered.names) <= LIFECYCLE and entered.names.count("finish") == 1
    assert MaterializedTableVersionLogEntry.objects.get(run=rebuild).outcome == "APPLIED"
    daily.refresh_from_db()
    assert (daily.current_version, daily.query) == (rebuild.definition_version, ALTERED)


def test_a_strict_table_whose_refresh_cannot_be_incremental_fails_with_the_reason_and_no_job(
    admin, worker, entered
):
    """refresh.incremental = 'strict': a source's DELETE under a table without a primary key
    cannot be applied incrementally, so the run fails saying why, before any Spark job."""
    services.create_namespace(name="sales", actor=admin)
    services.create_table(namespace="sales", name="orders", schema=ORDERS, actor=admin)
    commit_snapshot("sales", "orders", "append", 10)
    mt = mts.create_materialized_table(
        namespace="sales",
        name="picked",
        query="SELECT ds, amount FROM orders WHERE amount > 1",
        freshness=Freshness(1, "HOUR"),
        options={"refresh.incremental": "strict"},
        actor=admin,
    )
    assert execute(first_run(mt), entered)[0] == "SUCCEEDED", "the first refresh recomputes"
    deleted = commit_snapshot("sales", "orders", "delete", summary={"added-position-deletes": "1"})
    jobs_before = len(worker["recompute"]) + len(worker["incremental"])

    run = runs.enqueue(mt, trigger=RefreshRun.Trigger.MANUAL)
    state, _ = execute(run, entered)
    run.refresh_from_db()

    assert state == "FAILED"
    assert run.reason.startswith(f"refused: source sales.orders had a delete in snapshot {deleted}")
    assert "refresh.incremental = 'strict' refuses a full refresh" in run.error
    assert len(worker["recompute"]) + len(worker["incremental"]) == jobs_before
