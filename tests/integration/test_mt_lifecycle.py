"""Materialized tables' lifecycle rules (FLIP-435, as Flink applies them), their schedules
in django-celery-beat, and refresh runs claimed by one worker at a time."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from catalog import services
from catalog.core.errors import InvalidInput
from catalog.models import CatalogEvent
from refresh import runs, schedules, table_state
from refresh import services as mts
from refresh.models import MaterializedTable, RefreshRun
from tests.integration.snapshots import commit_snapshot

pytestmark = pytest.mark.django_db

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "ds", "type": "string", "required": False},
        {"id": 2, "name": "total", "type": "double", "required": False},
    ],
}


def make_mt(*, value: int = 10, unit: str = "SECOND", state: str = "ACTIVATED"):
    services.create_namespace(name="sales")
    table = services.create_table(namespace="sales", name="daily", schema=SCHEMA).obj
    mt = MaterializedTable.objects.create(
        table=table,
        query="SELECT ds, sum(amount) AS total FROM sales.orders GROUP BY ds",
        freshness_value=value,
        freshness_unit=unit,
        refresh_mode="FULL",
        mode_is_explicit=True,
        state=state,
        partitioned_by=["ds"],
    )
    schedules.install(mt, enabled=state == "ACTIVATED")
    return mt


def test_a_seconds_freshness_is_an_interval_schedule_and_minutes_a_crontab():
    mt = make_mt(value=10, unit="SECOND")
    task = PeriodicTask.objects.get(pk=mt.periodic_task_id)
    assert task.interval.every == 10 and task.crontab is None
    assert json.loads(task.kwargs) == {"materialized_table_id": mt.pk}
    assert "sales.daily" in task.name

    mt.freshness_value, mt.freshness_unit = 15, "MINUTE"
    schedules.install(mt, enabled=True)
    task.refresh_from_db()
    assert (task.crontab.minute, task.crontab.hour) == ("*/15", "*")
    assert task.interval is None
    assert PeriodicTask.objects.filter(task=schedules.TASK).count() == 1


def test_suspend_disables_the_schedule_and_resume_enables_it():
    mt = make_mt()
    table_state.suspend(mt)
    assert not PeriodicTask.objects.get(pk=mt.periodic_task_id).enabled
    mts.resume(mt)
    assert PeriodicTask.objects.get(pk=mt.periodic_task_id).enabled
    actions = CatalogEvent.objects.filter(object_uuid=mt.table.uuid).values_list(
        "action", flat=True
    )
    assert {"suspend_materialized_table", "resume_materialized_table"} <= set(actions)


def test_flinks_lifecycle_refusals():
    mt = make_mt(state="INITIALIZING")
    with pytest.raises(table_state.InvalidState, match="initializing"):
        table_state.suspend(mt)
    with pytest.raises(table_state.InvalidState, match="initializing"):
        mts.resume(mt)
    MaterializedTable.objects.filter(pk=mt.pk).update(state="ACTIVATED")
    with pytest.raises(table_state.InvalidState, match="already active"):
        mts.resume(mt)
    table_state.suspend(mt)
    with pytest.raises(table_state.InvalidState, match="already suspended"):
        table_state.suspend(mt)


def test_a_run_is_claimed_once_and_not_beside_another_run_of_its_table():
    mt = make_mt()
    first = runs.enqueue(mt, trigger="SCHEDULED")
    second = runs.enqueue(mt, trigger="MANUAL")

    assert runs.claim(first.pk, worker="w1:1").state == "RUNNING"
    assert runs.claim(first.pk, worker="w2:2") is None, "a redelivered message does nothing"
    assert runs.claim(second.pk, worker="w2:2") is None, "one run of a table at a time"

    runs.finish(first, state="SUCCEEDED", rows_written=3)
    assert runs.claim(second.pk, worker="w2:2").worker == "w2:2"


def test_a_partition_that_is_not_a_partition_column_is_refused():
    mt = make_mt()
    with pytest.raises(InvalidInput, match="region is not a partition column"):
        runs.enqueue(mt, trigger="MANUAL", partition={"region": "eu"})
    assert not RefreshRun.objects.exists()


def test_five_failed_refreshes_suspend_the_table_with_the_reason(settings):
    settings.MT_FAILURES_BEFORE_SUSPEND = 5
    mt = make_mt()
    for attempt in range(5):
        run = runs.claim(runs.enqueue(mt, trigger="SCHEDULED").pk, worker="w:1")
        runs.finish(run, state="FAILED", error=f"boom {attempt}")

    mt.refresh_from_db()
    assert mt.state == "SUSPENDED"
    assert "after 5 consecutive failed refreshes" in mt.suspended_reason
    assert "boom 4" in mt.suspended_reason
    assert not PeriodicTask.objects.get(pk=mt.periodic_task_id).enabled


def test_a_run_queued_too_long_is_sent_again_once_per_interval_and_claimed_once(monkeypatch):
    # A worker SIGKILLed while it held a run's message (a run waiting for a thread is sent
    # again with a countdown) leaves the run QUEUED until Redis's visibility timeout.
    import redis
    from django.conf import settings

    mt = make_mt()
    stranded = runs.enqueue(mt, trigger="SCHEDULED")
    fresh = runs.enqueue(mt, trigger="MANUAL")
    RefreshRun.objects.filter(pk=stranded.pk).update(
        queued_at=timezone.now() - timedelta(minutes=11)
    )
    redis.Redis.from_url(settings.REDIS_URL).delete(f"lakeview:resent-run:{stranded.pk}")
    sent: list[int] = []
    monkeypatch.setattr(runs, "dispatch", lambda run, countdown=None: sent.append(run.pk))

    assert runs.resend_stranded(queued_for=timedelta(minutes=10)) == 1
    assert sent == [stranded.pk], "only the run queued too long, not the one just queued"
    assert runs.resend_stranded(queued_for=timedelta(minutes=10)) == 0, "once per interval"

    # Two messages for one run: the first claims it, the second finds it taken.
    assert runs.claim(stranded.pk, worker="w:1") is not None
    assert runs.claim(stranded.pk, worker="w:2") is None
    assert RefreshRun.objects.get(pk=fresh.pk).state == "QUEUED"


def test_a_continuous_table_s_run_by_hand_waits_for_the_streaming_process_not_a_resend(
    monkeypatch,
):
    mt = make_mt()
    MaterializedTable.objects.filter(pk=mt.pk).update(refresh_mode="CONTINUOUS")
    run = runs.enqueue(mt, trigger="MANUAL")
    RefreshRun.objects.filter(pk=run.pk).update(queued_at=timezone.now() - timedelta(hours=1))
    monkeypatch.setattr(runs, "dispatch", lambda run, countdown=None: pytest.fail("sent"))
    assert runs.resend_stranded(queued_for=timedelta(minutes=10)) == 0


def test_a_success_resets_the_failure_count():
    mt = make_mt()
    for state in ("FAILED", "FAILED", "SUCCEEDED"):
        runs.finish(runs.claim(runs.enqueue(mt, trigger="MANUAL").pk, worker="w:1"), state=state)
    mt.refresh_from_db()
    assert mt.consecutive_failures == 0


def test_a_run_whose_worker_went_silent_is_failed_and_frees_the_table():
    mt = make_mt()
    run = runs.claim(runs.enqueue(mt, trigger="SCHEDULED").pk, worker="host:4242")
    RefreshRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=10))

    assert runs.fail_abandoned(silent_for=timedelta(minutes=2)) == 1

    run.refresh_from_db()
    assert run.state == "FAILED" and "host:4242 stopped" in run.error
    next_run = runs.enqueue(mt, trigger="SCHEDULED")
    assert runs.claim(next_run.pk, worker="w:2") is not None


def test_dropping_the_table_keeps_its_runs_as_history():
    mt = make_mt()
    runs.finish(runs.claim(runs.enqueue(mt, trigger="CREATE").pk, worker="w:1"), state="SUCCEEDED")
    services.drop_table(namespace="sales", name="daily")
    run = RefreshRun.objects.get()
    assert run.materialized_table is None and run.table_name == "sales.daily"
    assert not PeriodicTask.objects.filter(task=schedules.TASK).exists(), "no orphan schedule"


def _decide(mt):
    from refresh.sources import decide

    plan = decide(mt, partition=None, force=False, full_asked=False)
    return plan.kind, dict(plan.snapshots)


def test_no_data_is_decided_from_the_sources_snapshots_through_views():
    mt = make_mt()
    services.create_table(namespace="sales", name="orders", schema=SCHEMA)
    commit_snapshot("sales", "orders", snapshot_id=1)
    services.create_view(namespace="sales", name="recent", sql="SELECT ds FROM sales.orders")
    MaterializedTable.objects.filter(pk=mt.pk).update(query="SELECT ds FROM recent")
    mt.refresh_from_db()

    kind, now = _decide(mt)
    assert (kind, now) == ("FULL", {"sales.orders": 1}), "never refreshed: a full refresh"
    run = runs.claim(runs.enqueue(mt, trigger="CREATE").pk, worker="w:1")
    runs.finish(run, state="SUCCEEDED", action="FULL", source_snapshots=now)

    assert _decide(mt)[0] == "NO_DATA"
    commit_snapshot("sales", "orders", snapshot_id=2)
    # The view's SQL is merged into the query: its table's append is applied incrementally.
    assert _decide(mt) == ("INCREMENTAL", {"sales.orders": 2})
    # A new version of the view since that refresh: its text is not what the table answers.
    services.replace_view(namespace="sales", name="recent", sql="SELECT ds FROM sales.orders")
    services.replace_view(
        namespace="sales", name="recent", sql="SELECT ds FROM sales.orders WHERE ds > 'a'"
    )
    assert _decide(mt)[0] == "FULL"


def test_a_source_outside_the_catalog_is_never_taken_as_unchanged():
    mt = make_mt()
    MaterializedTable.objects.filter(pk=mt.pk).update(query="SELECT * FROM other.ns.t")
    mt.refresh_from_db()
    run = runs.claim(runs.enqueue(mt, trigger="CREATE").pk, worker="w:1")
    runs.finish(run, state="SUCCEEDED", action="FULL", source_snapshots={})
    assert _decide(mt)[0] == "FULL"
