"""A run's lifecycle (infra.runs), the same for a Spark job, a refresh run and a
maintenance run: one worker claims a queued run, its heartbeat says it is alive, a stop is
asked once, it ends once, and it is handed back or on only while queued. On SQLite and
PostgreSQL (make test runs the integration tests on both); two workers claiming at once are
raced on PostgreSQL, whose rows two connections really share."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from catalog.models import SparkJob
from infra import runs
from maintenance.models import MaintenanceRun
from refresh.models import RefreshRun

pytestmark = pytest.mark.django_db


def _spark_job() -> SparkJob:
    return SparkJob.objects.create(kind="preview_view", summary="Preview of view s.v")


def _refresh_run() -> RefreshRun:
    return RefreshRun.objects.create(table_name="s.mt", trigger=RefreshRun.Trigger.MANUAL)


def _maintenance_run() -> MaintenanceRun:
    return MaintenanceRun.objects.create(
        table_name="s.t", action="expire_snapshots", trigger=MaintenanceRun.Trigger.MANUAL
    )


KINDS: dict[str, Callable[[], runs.Run]] = {
    "spark job": _spark_job,
    "refresh run": _refresh_run,
    "maintenance run": _maintenance_run,
}


@pytest.fixture(params=sorted(KINDS))
def new_run(request) -> Callable[[], runs.Run]:
    return KINDS[request.param]


def test_of_two_claims_of_a_queued_run_only_the_first_takes_it(new_run):
    run = new_run()
    model = type(run)
    assert runs.claim(model, pk=run.pk, worker="host:1") is True
    assert runs.claim(model, pk=run.pk, worker="host:2") is False
    run.refresh_from_db()
    assert (run.state, run.worker) == ("RUNNING", "host:1")
    assert run.started_at is not None and run.heartbeat_at == run.started_at


def test_a_finished_run_cannot_be_claimed(new_run):
    run = new_run()
    assert runs.finish(type(run), pk=run.pk, state="CANCELLED") is True
    assert runs.claim(type(run), pk=run.pk, worker="host:1") is False
    run.refresh_from_db()
    assert (run.state, run.worker, run.started_at) == ("CANCELLED", "", None)


def test_a_heartbeat_moves_a_running_runs_time_and_leaves_a_finished_one(new_run):
    run = new_run()
    model = type(run)
    runs.claim(model, pk=run.pk, worker="host:1")
    long_ago = timezone.now() - timedelta(hours=1)
    model.objects.filter(pk=run.pk).update(heartbeat_at=long_ago)
    runs.beat(model, pk=run.pk)
    run.refresh_from_db()
    assert run.heartbeat_at > long_ago
    runs.finish(model, pk=run.pk, state="SUCCEEDED")
    model.objects.filter(pk=run.pk).update(heartbeat_at=long_ago)
    runs.beat(model, pk=run.pk)
    run.refresh_from_db()
    assert run.heartbeat_at == long_ago


def test_a_stop_is_asked_of_a_running_run_once_and_the_first_asker_stays(new_run, editor, viewer):
    run = new_run()
    model = type(run)
    assert runs.request_cancel(model, pk=run.pk, by=editor) is False  # queued: not asked
    assert runs.cancel_asked(model, pk=run.pk) is False
    runs.claim(model, pk=run.pk, worker="host:1")
    assert runs.request_cancel(model, pk=run.pk, by=editor) is True
    assert runs.request_cancel(model, pk=run.pk, by=viewer) is False
    assert runs.cancel_asked(model, pk=run.pk) is True
    assert runs.cancelled_by(model, pk=run.pk) == editor.get_username()
    run.refresh_from_db()
    assert run.cancel_requested_at is not None and run.state == "RUNNING"


def test_a_stop_asked_by_nobody_known_names_no_one(new_run):
    run = new_run()
    runs.claim(type(run), pk=run.pk, worker="host:1")
    assert runs.request_cancel(type(run), pk=run.pk, by=None) is True
    assert runs.cancelled_by(type(run), pk=run.pk) is None


def test_a_run_ends_once_with_its_own_fields(new_run):
    run = new_run()
    model = type(run)
    runs.claim(model, pk=run.pk, worker="host:1")
    error = {"message": "no"} if model is SparkJob else "no"
    assert runs.finish(model, pk=run.pk, state="FAILED", error=error) is True
    assert runs.finish(model, pk=run.pk, state="SUCCEEDED", error=error) is False
    run.refresh_from_db()
    assert (run.state, run.error) == ("FAILED", error)
    assert run.finished and run.duration_seconds is not None


def test_a_released_run_is_queued_again_as_if_never_claimed(new_run):
    run = new_run()
    model = type(run)
    runs.claim(model, pk=run.pk, worker="host:1")
    assert runs.release(model, pk=run.pk) is True
    run.refresh_from_db()
    assert (run.state, run.worker, run.started_at, run.heartbeat_at) == ("QUEUED", "", None, None)
    assert runs.claim(model, pk=run.pk, worker="host:2") is True


def test_a_run_is_handed_on_only_while_queued(new_run):
    run = new_run()
    model = type(run)
    sent: list[int] = []
    assert runs.hand_on(model, pk=run.pk, send=lambda: sent.append(run.pk), what="run") is True
    runs.claim(model, pk=run.pk, worker="host:1")
    assert runs.hand_on(model, pk=run.pk, send=lambda: sent.append(run.pk), what="run") is False
    assert sent == [run.pk]


def test_a_run_the_broker_cannot_take_stays_with_this_worker(new_run, caplog):
    run = new_run()

    def broker_down() -> None:
        raise ConnectionError("broker down")

    assert runs.hand_on(type(run), pk=run.pk, send=broker_down, what="Run 7") is False
    assert "Run 7 could not be handed on" in caplog.text


def test_only_running_runs_whose_worker_went_silent_are_abandoned(new_run):
    silent, beating, queued = new_run(), new_run(), new_run()
    model = type(silent)
    for run in (silent, beating):
        runs.claim(model, pk=run.pk, worker="host:1")
    long_ago = timezone.now() - timedelta(minutes=5)
    model.objects.filter(pk__in=[silent.pk, queued.pk]).update(heartbeat_at=long_ago)
    found = runs.abandoned(model, silent_for=timedelta(minutes=1))
    assert [run.pk for run in found] == [silent.pk]


def test_a_spark_job_still_says_when_it_was_asked_for_and_whether_a_stop_was_asked():
    job = _spark_job()
    assert job.created_at == job.queued_at
    assert job.cancel_requested is False
    runs.claim(SparkJob, pk=job.pk, worker="host:1")
    runs.request_cancel(SparkJob, pk=job.pk)
    job.refresh_from_db()
    assert job.cancel_requested is True


@pytest.mark.django_db(transaction=True)
def test_of_workers_claiming_one_run_at_once_exactly_one_takes_it(new_run):
    if connection.vendor != "postgresql":
        pytest.skip("two connections share rows on PostgreSQL (make test runs it there)")
    run = new_run()
    model = type(run)
    start = threading.Barrier(4)
    taken: list[bool] = []

    def worker(name: str) -> None:
        try:
            start.wait(10)
            taken.append(runs.claim(model, pk=run.pk, worker=name))
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(f"host:{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(taken) == [False, False, False, True]
