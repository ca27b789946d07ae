"""The warehouse's disk floor (WAREHOUSE_MIN_FREE_BYTES, catalog.watch.warehouse_floor):
work still writing when the file system's free space falls below it is stopped, so that
one runaway query cannot fill the disk the other tables and the database live on. The
floor is set above this machine's free space to stand for a disk that is filling up; how
Spark aborts the write is Spark's (tests/spark cancels job groups the same way)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from catalog import jobs
from catalog.models import SparkJob
from catalog.watch import warehouse_floor
from refresh import runner
from refresh.models import MaterializedTable, RefreshRun
from refresh.streams import loads, rebuilds
from refresh.streams import supervisor as streams
from runtime.running import Heartbeat
from tests.integration.test_run_cancel import mt, queued, running, wait_for  # noqa: F401
from tests.integration.test_spark_jobs import (  # noqa: F401 - fixtures
    _queued_preview,
    alive,
    sales,
    spark_job_until_cancelled,
)

pytestmark = pytest.mark.django_db

#: More free space than any disk has: the floor is reached.
FULL = 1 << 60


def test_a_local_warehouse_below_its_floor_says_how_much_is_free_and_the_setting(
    settings, tmp_path
):
    settings.WAREHOUSE = str(tmp_path / "not-made-yet" / "warehouse")
    settings.WAREHOUSE_MIN_FREE_BYTES = 1
    assert warehouse_floor() is None
    settings.WAREHOUSE_MIN_FREE_BYTES = FULL
    why = warehouse_floor()
    assert why is not None and why.startswith("the warehouse's disk has ")
    assert "under its floor of 1048576.0 TiB (WAREHOUSE_MIN_FREE_BYTES)" in why


@pytest.mark.parametrize("warehouse", ["s3://bucket/warehouse", "gs://b/w"])
def test_an_object_store_warehouse_or_a_floor_of_zero_has_no_floor(settings, warehouse):
    settings.WAREHOUSE_MIN_FREE_BYTES = FULL
    settings.WAREHOUSE = warehouse
    assert warehouse_floor() is None
    settings.WAREHOUSE = "/tmp"
    settings.WAREHOUSE_MIN_FREE_BYTES = 0
    assert warehouse_floor() is None


@pytest.mark.django_db(transaction=True)
def test_a_refresh_writing_when_the_disk_reaches_its_floor_is_stopped_and_fails_saying_why(
    mt,  # noqa: F811
    settings,
    monkeypatch,
):
    cancelled: list[str] = []
    monkeypatch.setattr("runtime.engine.cancel_group", cancelled.append)
    run = running(mt)
    beating = Heartbeat(run, watch="lakeview-run-d", limit=None)
    beating.start()
    try:
        time.sleep(1.5)
        assert cancelled == [] and beating.ended_by is None  # room enough
        settings.WAREHOUSE_MIN_FREE_BYTES = FULL
        wait_for(lambda: len(cancelled) >= 2)  # and again at the next look
    finally:
        beating.stop()
    assert beating.ended_by == "disk" and set(cancelled) == {"lakeview-run-d"}
    state, message = runner._stopped(run, beating)
    assert state == "FAILED"
    assert message.startswith("Stopped after ") and "(WAREHOUSE_MIN_FREE_BYTES)" in message
    assert message.endswith("Spark aborted the write; the table is unchanged")


@pytest.mark.django_db(transaction=True)
def test_a_spark_job_writing_when_the_disk_reaches_its_floor_fails_with_507(
    sales,  # noqa: F811
    viewer,
    alive,  # noqa: F811
    settings,
    spark_job_until_cancelled,  # noqa: F811
):
    job = _queued_preview(viewer)
    cancels = spark_job_until_cancelled()
    settings.WAREHOUSE_MIN_FREE_BYTES = FULL
    assert jobs._run(jobs.claim(job.pk)) == "FAILED"
    job = SparkJob.objects.get(pk=job.pk)
    assert job.status == 507 and job.error["type"] == "InsufficientStorage"
    assert "(WAREHOUSE_MIN_FREE_BYTES)" in job.error["message"] and cancels


class _Query:
    """A running streaming query as the supervisor sees it, between micro-batches."""

    def __init__(self) -> None:
        self.isActive, self.status, self.stops = True, {"isTriggerActive": False}, 0

    def stop(self) -> None:
        self.isActive, self.stops = False, self.stops + 1


def test_a_streaming_host_stops_its_streams_at_the_floor_and_starts_none_until_there_is_room(
    mt,  # noqa: F811
    settings,
):
    host = streams.Supervisor(config=SimpleNamespace())
    query = _Query()
    host.running[mt.pk] = SimpleNamespace(query=query)
    assert host._paused_for_room() is False and query.stops == 0
    settings.WAREHOUSE_MIN_FREE_BYTES = FULL
    assert host._paused_for_room() is True
    assert query.stops == 1 and host.running == {}
    mt = MaterializedTable.objects.get(pk=mt.pk)
    assert mt.stream_status == "FAILED"
    assert mt.stream_error.startswith("Stopped: the warehouse's disk has ")
    assert mt.stream_error.endswith("it starts again once there is room")
    assert host._paused_for_room() is True  # nothing left to stop; still no starts


class _Context:
    """The streaming host's SparkContext as its refreshes use it: a job group per thread,
    cancelled on request."""

    def __init__(self) -> None:
        self.groups: list[str | None] = []
        self.cancelled: list[str] = []

    def setJobGroup(self, group: str, description: str, interruptOnCancel: bool) -> None:  # noqa: N802
        self.groups.append(group)

    def setLocalProperty(self, key: str, value: str | None) -> None:  # noqa: N802
        self.groups.append(value)

    def cancelJobGroup(self, group: str) -> None:  # noqa: N802
        self.cancelled.append(group)


@pytest.mark.django_db(transaction=True)
def test_a_manual_refresh_run_by_a_streaming_host_is_stopped_at_the_floor_saying_why(
    mt,  # noqa: F811
    settings,
    monkeypatch,
):
    monkeypatch.setattr(streams, "jvm_gone", lambda: False)
    mt.refresh_mode, mt.stream_checkpoint = "CONTINUOUS", ""
    mt.save()
    host = streams.Supervisor(config=SimpleNamespace())
    context = _Context()
    host._spark = SimpleNamespace(sparkContext=context)

    def load_until_cancelled(state, table):
        settings.WAREHOUSE_MIN_FREE_BYTES = FULL  # the load fills the disk
        wait_for(lambda: context.cancelled)
        raise RuntimeError("Job 3 cancelled part of cancelled job group")

    monkeypatch.setattr(loads, "plan_and_session", load_until_cancelled)
    run = queued(mt)
    rebuilds.recompute(host, run.pk)
    run = RefreshRun.objects.get(pk=run.pk)
    group = f"lakeview-run-{run.pk}"
    assert context.groups == [group, None] and set(context.cancelled) == {group}
    assert run.state == "FAILED" and "(WAREHOUSE_MIN_FREE_BYTES)" in run.error
    assert run.error.endswith("Spark aborted the write; the table is unchanged")
