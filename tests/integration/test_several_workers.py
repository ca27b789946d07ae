"""Several worker processes on one broker and database: a refresh or Spark job that reaches a
busy worker while another is idle is put back on the queue for that one (at most
MAX_HOPS times); a scheduled tick is made for the tick beat sent, however long its message
waited, and its run says how late it started. Workers' state is real Redis; sending is
recorded (tests/spark/test_cluster.py runs two real workers)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone
from pyspark.sql.types import DoubleType, LongType, StructField, StructType

from catalog import jobs, services, workers
from catalog.models import SparkJob
from refresh import runner
from refresh import services as mts
from refresh.api.serializers.runs import RefreshRunSerializer
from refresh.core.freshness import Freshness, RefreshMode
from refresh.models import RefreshRun
from webapp.celery import _stamp_ticks

pytestmark = pytest.mark.django_db

OTHER = "other-host:4242"


@pytest.fixture
def sent(monkeypatch) -> list[tuple[str, list, dict]]:
    """Messages sent to the queue, recorded instead of sent."""
    messages: list[tuple[str, list, dict]] = []

    def send_task(name, args=None, kwargs=None, **options):
        messages.append((name, list(args or []), dict(kwargs or {})))

    monkeypatch.setattr("celery.current_app.send_task", send_task)
    return messages


def test_a_worker_hands_work_on_only_while_it_runs_something_and_another_is_idle():
    workers.beat()
    workers.beat(OTHER)
    assert not workers.hand_over(0), "this worker runs nothing: it takes the work"
    with workers.occupied():
        assert workers.running_here() == 1
        assert workers.hand_over(0)
        assert not workers.hand_over(workers.MAX_HOPS), "handed on enough: run it here"
        with workers.occupied():  # the other one starts something too
            pass
        workers._publish(1, OTHER)
        assert not workers.hand_over(0), "both busy: run it here"
        workers._publish(0, OTHER)
        assert workers.hand_over(0)
        workers.beat(OTHER, at=time.time() - 60)
        assert not workers.hand_over(0), "a silent worker is not idle, it is gone"
    assert workers.running_here() == 0


def test_a_spark_job_reaching_a_busy_worker_goes_back_to_the_queue_unclaimed(sent):
    workers.beat()
    workers.beat(OTHER)
    job = SparkJob.objects.create(kind="preview_view", arguments={}, summary="a preview")
    with workers.occupied():
        assert jobs.run(job.pk) == "handed to an idle worker"
        assert jobs.run(job.pk, hops=2) == "handed to an idle worker"
    assert sent == [
        ("catalog.run_spark_job", [job.pk], {"hops": 1}),
        ("catalog.run_spark_job", [job.pk], {"hops": 3}),
    ]
    job.refresh_from_db()
    assert (job.state, job.worker) == (SparkJob.State.QUEUED, "")


def test_a_console_query_is_sent_to_the_consoles_task_and_handed_on_as_it(sent, viewer):
    """The console's jobs run through refresh's own task, which imports the console's
    operation (refresh.tasks.run_console_job): a busy worker hands one on to that task."""
    from rest_framework.test import APIClient

    from refresh.tasks import run_console_job

    workers.beat()
    workers.beat(OTHER)
    client = APIClient()
    client.force_authenticate(viewer)
    response = client.post("/api/statements/", {"sql": "SELECT 1"}, format="json")
    assert response.status_code == 202, response.content
    job_id = response.json()["job"]["id"]
    with workers.occupied():
        assert run_console_job(job_id) == "handed to an idle worker"
    assert sent == [
        ("refresh.run_console_job", [job_id], {}),
        ("refresh.run_console_job", [job_id], {"hops": 1}),
    ]


def test_a_refresh_reaching_a_busy_worker_goes_back_to_the_queue_unless_already_taken(sent):
    workers.beat()
    workers.beat(OTHER)
    run = RefreshRun.objects.create(table_name="s.t", trigger=RefreshRun.Trigger.MANUAL)
    with workers.occupied():
        assert runner.execute(run.pk) == "handed to an idle worker"
        RefreshRun.objects.filter(pk=run.pk).update(state=RefreshRun.State.SUCCEEDED)
        assert runner.execute(run.pk) == "not claimed"
    assert sent == [("refresh.run_refresh", [run.pk], {"hops": 1})]


ORDERS = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": True},
        {"id": 2, "name": "amount", "type": "double", "required": False},
    ],
}


@pytest.fixture
def hourly(editor, monkeypatch):
    """A FULL table refreshed every hour (Spark's schema analysis is a fake; nothing runs)."""
    schema = StructType(
        [StructField("id", LongType(), False), StructField("amount", DoubleType(), True)]
    ).json()
    monkeypatch.setattr("refresh.analysis.query_schema", lambda query, **kw: schema)
    monkeypatch.setattr("refresh.runs.dispatch", lambda run, **kw: None)
    services.create_namespace(name="sales", actor=editor)
    services.create_table(namespace="sales", name="orders", schema=ORDERS, actor=editor)
    return mts.create_materialized_table(
        namespace="sales",
        name="hourly",
        query="SELECT id, amount FROM orders",
        freshness=Freshness(1, "HOUR"),
        refresh_mode=RefreshMode.FULL,
    )


def test_a_tick_that_waited_past_the_next_one_is_still_its_own_run_and_says_how_late(
    hourly, monkeypatch
):
    executed: list[int] = []
    monkeypatch.setattr(runner, "execute", lambda run_id, **kw: executed.append(run_id) or "")
    headers: dict = {}
    _stamp_ticks(sender="refresh.scheduled_refresh", headers=headers)
    assert abs(headers["lakeview_sent_at"] - time.time()) < 5
    _stamp_ticks(sender="refresh.run_refresh", headers=(other := {}))
    assert other == {}, "only ticks are stamped"

    now = timezone.now()
    this_hour = now.replace(minute=0, second=0, microsecond=0)
    earlier = this_hour - timedelta(hours=1)
    # Beat sent the earlier tick 2 s after it; a worker takes it only now, after the next
    # tick's message was sent too.
    late = runner.run_scheduled(hourly.pk, sent_at=(earlier + timedelta(seconds=2)).timestamp())
    on_time = runner.run_scheduled(hourly.pk, sent_at=this_hour.timestamp() + 1)
    assert late is not None and on_time is not None and late != on_time
    assert executed == [late, on_time]
    ticks = {r.pk: r.schedule_time for r in RefreshRun.objects.filter(pk__in=[late, on_time])}
    assert ticks == {late: earlier, on_time: this_hour}

    RefreshRun.objects.filter(pk=late).update(started_at=this_hour + timedelta(seconds=30))
    body = RefreshRunSerializer(RefreshRun.objects.get(pk=late)).data
    assert body["start_delay_seconds"] == 3630.0
    assert body["schedule_time"].startswith(earlier.astimezone(UTC).strftime("%Y-%m-%dT%H"))


def test_a_tick_without_a_stamp_is_the_tick_of_the_moment_it_is_taken(hourly, monkeypatch):
    monkeypatch.setattr(runner, "execute", lambda run_id, **kw: "")
    hours = [datetime.now(UTC).replace(minute=0, second=0, microsecond=0)]
    run_id = runner.run_scheduled(hourly.pk)
    hours.append(datetime.now(UTC).replace(minute=0, second=0, microsecond=0))
    assert RefreshRun.objects.get(pk=run_id).schedule_time in hours
    assert (
        RefreshRunSerializer(RefreshRun.objects.get(pk=run_id)).data["start_delay_seconds"] is None
    ), "not started yet"


def test_spark_conf_reaches_every_session_the_app_starts_but_never_undoes_the_sandbox(settings):
    from runtime import engine

    settings.SPARK_MASTER = "spark://spark-master:7077"
    settings.SPARK_CONF = {"spark.cores.max": "1", "spark.executor.memory": "512m"}
    conf = engine.session_config().spark_conf()
    assert (conf["spark.cores.max"], conf["spark.executor.memory"]) == ("1", "512m")
    assert "spark.driver.host" not in conf, "a cluster's driver is found by its host name"
    assert conf["spark.jars"].count(".jar") >= 2, "the jars reach the executors"

    settings.SPARK_CONF = {"spark.sql.runSQLOnFiles": "true"}
    with pytest.raises(ValueError, match="fixed by the Spark sandbox"):
        engine.session_config("lakeview-streams").spark_conf()
