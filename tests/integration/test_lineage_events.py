"""OpenLineage events of real runs (refresh.lineage_events): a refresh run on the worker's
runner (its Spark faked: the recompute commits a snapshot to the table, as Spark's commit
through the REST catalog would), a failed run, a rebuild and a continuous table's
micro-batch, written by openlineage-python's file transport, configured as operators do
(OPENLINEAGE_CONFIG naming an openlineage.yml). Transactional: events leave on commit."""

from __future__ import annotations

import json
import threading
import time
from contextlib import nullcontext
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from catalog import services
from catalog.models import Table
from infra import metrics
from refresh import definitions, lineage_events, runner, runs, signals
from refresh.models import MaterializedTable, RefreshRun
from refresh.spark.stream_queries import BatchResult
from refresh.streams import batches
from tests.integration.snapshots import commit_snapshot
from tests.integration.test_refresh_decisions import DAILY, ORDERS
from tests.unit.test_lineage_events import validate

pytestmark = pytest.mark.django_db(transaction=True)

QUERY = "SELECT ds, sum(amount) AS total FROM sales.orders GROUP BY ds"
#: How long a test waits for the sender's thread at most: it returns as soon as the thread has
#: done what is waited for, so only a broken sender takes this long.
WAIT = 120.0


@pytest.fixture
def mt() -> MaterializedTable:
    services.create_namespace(name="sales")
    services.create_table(namespace="sales", name="orders", schema=ORDERS)
    table = services.create_table(namespace="sales", name="daily", schema=DAILY).obj
    commit_snapshot("sales", "orders", "append", 10)
    return MaterializedTable.objects.create(
        table=table,
        query=QUERY,
        sources=["sales.orders"],
        freshness_value=1,
        freshness_unit="HOUR",
        refresh_mode="FULL",
        mode_is_explicit=True,
        state="ACTIVATED",
        current_version=1,
    )


@pytest.fixture
def spark(monkeypatch) -> list[int]:
    """The worker's Spark: the recompute commits an overwrite of 3 rows to the table."""
    written: list[int] = []
    monkeypatch.setattr("refresh.runner.engine.run_session", lambda **kw: object())
    monkeypatch.setattr("refresh.runner.engine.job_group", lambda *a, **kw: nullcontext())

    def recompute(session, mt, run, *args, **kwargs):
        written.append(commit_snapshot("sales", "daily", "overwrite", 3))

    monkeypatch.setattr("refresh.runner._full", recompute)
    return written


@pytest.fixture
def events_file(tmp_path: Path, settings, monkeypatch) -> Path:
    """Lineage on, through the client's file transport (one JSON event a line)."""
    path = tmp_path / "events.jsonl"
    config = tmp_path / "openlineage.yml"
    config.write_text(f"transport:\n  type: file\n  log_file_path: {path}\n  append: true\n")
    monkeypatch.setenv("OPENLINEAGE_CONFIG", str(config))
    settings.OPENLINEAGE_ENABLED = True
    lineage_events.SENDER.reset()
    yield path
    lineage_events.SENDER.reset()


def sent(path: Path) -> list[dict]:
    """The events the file transport wrote, each valid against OpenLineage's schemas."""
    assert lineage_events.SENDER.flush(timeout=WAIT)
    if not path.exists():
        return []
    return [validate(json.loads(line)) for line in path.read_text().splitlines()]


def refresh(mt: MaterializedTable) -> RefreshRun:
    run = runs.enqueue(mt, trigger=RefreshRun.Trigger.MANUAL, force=True)
    runner._execute(run.pk)
    run.refresh_from_db()
    return run


def test_a_refresh_run_sends_start_then_complete_with_sources_and_snapshot_written(
    mt, spark, events_file
):
    orders = Table.objects.get(name="orders").current_snapshot_id

    run = refresh(mt)

    assert run.state == "SUCCEEDED", run.error
    start, complete = sent(events_file)
    assert (start["eventType"], complete["eventType"]) == ("START", "COMPLETE")
    assert start["run"]["runId"] == complete["run"]["runId"]
    assert start["job"] == {**start["job"], "namespace": "lakeview", "name": "sales.daily"}
    assert complete["job"]["facets"]["sql"]["query"] == QUERY
    [source] = complete["inputs"]
    assert source["name"] == "sales.orders"
    assert source["facets"]["version"]["datasetVersion"] == str(orders)
    [output] = complete["outputs"]
    assert output["name"] == "sales.daily"
    assert output["facets"]["version"]["datasetVersion"] == str(spark[0]) == str(run.snapshot_id)
    assert [f["name"] for f in output["facets"]["schema"]["fields"]] == ["ds", "total"]
    assert output["outputFacets"]["outputStatistics"]["rowCount"] == 3
    assert output["facets"]["catalog"]["warehouseUri"].startswith("file:///")


def test_a_failed_refresh_sends_fail_with_the_error(mt, spark, events_file, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("Spark lost its executors")

    monkeypatch.setattr("refresh.runner._full", broken)

    run = refresh(mt)

    assert run.state == "FAILED"
    start, fail = sent(events_file)
    assert (start["eventType"], fail["eventType"]) == ("START", "FAIL")
    assert "Spark lost its executors" in fail["run"]["facets"]["errorMessage"]["message"]
    assert "version" not in fail["outputs"][0]["facets"]


def test_a_micro_batch_commit_sends_a_streaming_start_and_complete(mt, events_file):
    MaterializedTable.objects.filter(pk=mt.pk).update(refresh_mode="CONTINUOUS")
    orders = commit_snapshot("sales", "orders", "append", 4)
    daily = commit_snapshot("sales", "daily", "append", 4)
    now = time.time()
    result = BatchResult(7, 4, daily, 100, now - 1, now, sources={"sales.orders": orders})

    batches.record_batch(mt.pk, 1, result, worker="streams:test")

    start, complete = sent(events_file)
    assert (start["eventType"], complete["eventType"]) == ("START", "COMPLETE")
    assert start["job"]["facets"]["jobType"]["processingType"] == "STREAMING"
    assert complete["inputs"][0]["facets"]["version"]["datasetVersion"] == str(orders)
    assert complete["outputs"][0]["facets"]["version"]["datasetVersion"] == str(daily)


def test_a_rebuild_names_the_new_versions_query(mt, spark, events_file, monkeypatch):
    monkeypatch.setattr("refresh.analysis.query_schema", lambda query, **kw: _daily_spark())
    new_query = "SELECT ds, max(amount) AS total FROM sales.orders GROUP BY ds"
    run = definitions.alter_query(mt, query=new_query)
    assert runs.claim(run.pk, worker="w:1") is not None
    runs.fail_rebuild(run, error="Spark said no")

    start, fail = sent(events_file)
    assert (start["eventType"], fail["eventType"]) == ("START", "FAIL")
    assert start["job"]["facets"]["sql"]["query"] == new_query
    assert fail["run"]["facets"]["errorMessage"]["message"] == "Spark said no"


def _daily_spark() -> str:
    from pyspark.sql.types import DoubleType, StringType, StructField, StructType

    return StructType(
        [StructField("ds", StringType(), False), StructField("total", DoubleType(), True)]
    ).json()


def test_with_lineage_off_nothing_is_written_and_no_query_is_added(mt, spark, tmp_path, settings):
    assert settings.OPENLINEAGE_ENABLED is False
    path = tmp_path / "events.jsonl"
    assert refresh(mt).state == "SUCCEEDED"
    assert not path.exists() and lineage_events.SENDER.waiting() == 0

    MaterializedTable.objects.filter(pk=mt.pk).update(refresh_mode="CONTINUOUS")

    def batch(batch_id: int) -> int:
        daily = commit_snapshot("sales", "daily", "append", 1)
        now = time.time()
        result = BatchResult(batch_id, 1, daily, 10, now - 1, now, sources={})
        with CaptureQueriesContext(connection) as queries:
            batches.record_batch(mt.pk, 1, result)
        return len(queries)

    connected = batch(1)
    signals.run_finished.disconnect(dispatch_uid="openlineage")
    try:
        alone = batch(2)
    finally:
        signals.run_finished.connect(lineage_events.run_finished, dispatch_uid="openlineage")
    assert connected == alone


class Receiver:
    """A transport's receiver that answers only when told (a slow or dead Marquez)."""

    def __init__(self, fail: bool = False) -> None:
        self.entered, self.answer, self.fail = threading.Event(), threading.Event(), fail
        self.got: list[str] = []

    def emit(self, event: str) -> None:
        self.entered.set()
        # Long enough that a put waiting for this answer would outlast the test's checks.
        self.answer.wait(WAIT)
        if self.fail:
            raise ConnectionError("Connection refused")
        self.got.append(event)


def counted(outcome: str) -> float:
    return metrics.LINEAGE_EVENTS.labels(outcome)._value.get()


@pytest.mark.django_db
def test_a_receiver_that_does_not_answer_never_holds_up_the_run_and_a_full_queue_drops(settings):
    settings.OPENLINEAGE_QUEUE_SIZE = 2
    receiver = Receiver()
    sender = lineage_events.Sender(client=lambda: receiver)
    dropped = counted("dropped")

    sender.put("first")
    assert receiver.entered.wait(WAIT)  # the thread is stuck sending the first
    for event in ["second", "third", "fourth", "fifth"]:
        sender.put(event)

    # Every put returned while the receiver still held the first event: none waited for it
    # (one that had would have returned only after the receiver gave up, having sent it).
    assert receiver.got == []
    assert counted("dropped") - dropped == 2
    receiver.answer.set()
    assert sender.flush(timeout=WAIT)
    assert receiver.got == ["first", "second", "third"]


@pytest.mark.django_db
def test_a_transport_that_raises_is_logged_and_counted_and_the_next_events_still_go(settings):
    receiver = Receiver(fail=True)
    receiver.answer.set()
    sender = lineage_events.Sender(client=lambda: receiver)
    failed = counted("failed")

    sender.put(SimpleNamespace(eventType=SimpleNamespace(value="START"), job=None))
    assert sender.flush(timeout=WAIT)
    receiver.fail = False
    sender.put("next")
    assert sender.flush(timeout=WAIT)

    assert counted("failed") - failed == 1
    assert receiver.got == ["next"]
