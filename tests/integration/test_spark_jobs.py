"""No web request waits on Spark: what needs a worker's Spark becomes a job (catalog.jobs)
the request answers at once (202 with the job, 503 when no worker is alive, 429 past the
bounds); the job's URL gives its state and, once finished, the answer. Real Redis is the
broker; no worker consumes it here, so jobs are run by calling the worker's side directly
(tests/spark runs them on a real worker)."""

from __future__ import annotations

import time
from contextlib import nullcontext
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from catalog import jobs, services, workers
from catalog.models import SparkJob
from refresh import console, runner
from refresh.models import RefreshRun
from refresh.tasks import run_console_job
from runtime import running

pytestmark = pytest.mark.django_db

ORDERS = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": False},
        {"id": 2, "name": "ds", "type": "string", "required": False},
    ],
}
SCHEMA = (
    '{"type":"struct","fields":[{"name":"ds","type":"string","nullable":true,"metadata":{}},'
    '{"name":"n","type":"long","nullable":false,"metadata":{}}]}'
)
CREATE = (
    "CREATE MATERIALIZED TABLE daily FRESHNESS = INTERVAL '1' HOUR REFRESH_MODE = FULL "
    "AS SELECT ds, count(*) AS n FROM orders GROUP BY ds"
)


@pytest.fixture
def sales(editor):
    services.create_namespace(name="sales", actor=editor)
    services.create_table(namespace="sales", name="orders", schema=ORDERS, actor=editor)
    services.create_view(namespace="sales", name="v", sql="SELECT id, ds FROM orders")
    return "sales"


@pytest.fixture
def alive():
    """A worker that said it is alive a moment ago."""
    workers.beat("host:1")
    return "host:1"


def api_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def preview(client: APIClient, row_filter: str | None = None):
    params = {"filter": row_filter} if row_filter else {}
    return client.get("/api/namespaces/sales/views/v/preview", params)


def test_with_no_worker_alive_a_preview_is_an_immediate_503_that_says_so(sales, viewer):
    started = time.monotonic()
    response = preview(api_for(viewer))
    assert response.status_code == 503
    assert "No refresh worker is running" in response.json()["error"]
    assert time.monotonic() - started < 1
    assert not SparkJob.objects.exists()


def test_a_worker_silent_for_too_long_counts_as_gone(sales, viewer, alive):
    workers.beat("host:1", at=time.time() - 60)
    assert preview(api_for(viewer)).status_code == 503


def test_a_preview_is_a_202_with_its_job_whose_url_gives_the_state_then_the_rows(
    sales, viewer, alive
):
    client = api_for(viewer)
    response = preview(client)
    assert response.status_code == 202
    job = response.json()["job"]
    assert response["Location"] == job["url"]
    assert (job["kind"], job["state"], job["requested_by"]) == ("preview_view", "QUEUED", "vic")
    assert client.get(job["url"]).json()["state"] == "QUEUED"

    # Asked again while it waits: the same job, no second one.
    assert preview(client).json()["job"]["id"] == job["id"]
    assert SparkJob.objects.count() == 1

    # The worker answered: the job has the rows, and asking again gives them.
    body = {"columns": [{"name": "id", "type": "long"}], "rows": [[1]], "read_by": "spark"}
    SparkJob.objects.filter(pk=job["id"]).update(state="SUCCEEDED", status=200, result=body)
    finished = client.get(job["url"]).json()
    assert (finished["state"], finished["status"], finished["result"]["rows"]) == (
        "SUCCEEDED",
        200,
        [[1]],
    )
    again = preview(client)
    assert again.status_code == 200 and again.json()["rows"] == [[1]]


def test_a_bad_filter_is_still_a_400_at_once_and_makes_no_job(sales, viewer, alive):
    response = preview(api_for(viewer), "nosuchcolumn = 1")
    assert response.status_code == 400
    assert not SparkJob.objects.exists()


def test_a_user_past_their_bound_gets_429_with_retry_after(sales, viewer, alive, settings):
    settings.JOBS_PER_USER = 2
    client = api_for(viewer)
    assert preview(client, "id = 1").status_code == 202
    assert preview(client, "id = 2").status_code == 202
    refused = preview(client, "id = 3")
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0
    assert "2 Spark jobs waiting or running" in refused.json()["error"]
    # A finished job frees its place.
    SparkJob.objects.filter(pk=SparkJob.objects.first().pk).update(state="FAILED")
    assert preview(client, "id = 3").status_code == 202


def test_the_jobs_waiting_in_all_are_bounded(sales, viewer, editor, alive, settings):
    settings.JOBS_QUEUED_MAX = 2
    assert preview(api_for(viewer), "id = 1").status_code == 202
    assert preview(api_for(editor), "id = 1").status_code == 202
    refused = preview(api_for(editor), "id = 2")
    assert refused.status_code == 429
    assert "2 Spark jobs waiting" in refused.json()["error"]


def test_a_waiting_job_is_cancelled_at_once_and_a_finished_one_is_a_409(sales, viewer, alive):
    client = api_for(viewer)
    job = preview(client).json()["job"]
    cancelled = client.post(job["cancel_url"])
    assert cancelled.status_code == 200 and cancelled.json()["state"] == "CANCELLED"
    assert client.post(job["cancel_url"]).status_code == 409
    # A cancelled preview is not reused: asking again makes a new job.
    assert preview(client).json()["job"]["id"] != job["id"]


def test_a_running_job_is_asked_to_cancel(sales, viewer, alive):
    client = api_for(viewer)
    job = preview(client).json()["job"]
    SparkJob.objects.filter(pk=job["id"]).update(state="RUNNING", heartbeat_at=timezone.now())
    asked = client.post(job["cancel_url"]).json()
    assert (asked["state"], asked["cancel_requested"]) == ("RUNNING", True)


def test_another_users_job_is_not_there(sales, viewer, editor, alive):
    job = preview(api_for(viewer)).json()["job"]
    assert api_for(editor).get(job["url"]).status_code == 404
    assert api_for(editor).post(job["cancel_url"]).status_code == 404
    assert [j["id"] for j in api_for(viewer).get("/api/jobs/").json()["results"]] == [job["id"]]


def test_a_job_whose_worker_went_silent_is_failed_with_the_reason(sales, viewer, alive, settings):
    job = preview(api_for(viewer)).json()["job"]
    long_ago = timezone.now() - timedelta(seconds=settings.MT_ABANDONED_AFTER_SECONDS + 5)
    SparkJob.objects.filter(pk=job["id"]).update(
        state="RUNNING", worker="host:1", heartbeat_at=long_ago
    )
    assert jobs.fail_abandoned() == 1
    failed = SparkJob.objects.get(pk=job["id"])
    assert failed.state == "FAILED" and "host:1 stopped" in failed.error["message"]


def test_a_job_no_worker_took_is_failed_after_its_timeout(sales, viewer, alive, settings):
    job = preview(api_for(viewer)).json()["job"]
    SparkJob.objects.filter(pk=job["id"]).update(
        queued_at=timezone.now() - timedelta(seconds=settings.JOBS_QUEUED_TIMEOUT_SECONDS + 1)
    )
    jobs.fail_abandoned()
    assert "No worker took the job" in SparkJob.objects.get(pk=job["id"]).error["message"]


def test_finished_jobs_are_forgotten_after_the_days_kept(sales, viewer, alive, settings):
    job = preview(api_for(viewer)).json()["job"]
    old = timezone.now() - timedelta(days=settings.JOBS_KEEP_DAYS + 1)
    SparkJob.objects.filter(pk=job["id"]).update(state="SUCCEEDED", queued_at=old)
    assert jobs.prune() == 1


def test_a_console_script_runs_until_a_statement_needs_spark_then_hands_the_rest_to_a_job(
    sales, editor, alive, monkeypatch
):
    script = f"SHOW MATERIALIZED TABLES;\n{CREATE};\nSHOW MATERIALIZED TABLES"
    response = api_for(editor).post(
        "/api/statements/", {"sql": script, "namespace": "sales"}, format="json"
    )
    assert response.status_code == 202, response.content
    body = response.json()
    shown, pending = body["results"]
    assert shown["ok"] and shown["kind"] == "ShowMaterializedTables"
    assert pending["spark_job"] == body["job"]["id"] and pending["line"] == 2
    job = SparkJob.objects.get(pk=body["job"]["id"])
    assert (job.kind, job.arguments["start"]) == ("statements", 1)

    # The worker runs the rest: its Spark derives the schema; results grow on the job.
    monkeypatch.setattr("refresh.analysis.query_schema", lambda query, *, namespace: SCHEMA)
    monkeypatch.setattr("refresh.runs.dispatch", lambda run, **kw: None)
    monkeypatch.setattr("runtime.engine.job_group", lambda group, description: nullcontext())
    assert run_console_job(job.pk) == "SUCCEEDED"
    job.refresh_from_db()
    created, listed = job.result["results"]
    assert created["ok"] and created["table"] == "sales.daily" and created["line"] == 2
    assert listed["rows"][0][0] == "sales.daily"
    assert RefreshRun.objects.filter(table_name="sales.daily", trigger="CREATE").exists()


def test_a_failed_statement_fails_the_job_with_its_position(sales, editor, alive, monkeypatch):
    from catalog.core.errors import SqlError

    def refused(query, *, namespace):
        raise SqlError("Spark cannot analyze the query: no such column x", line=1, column=8)

    job = jobs.submit(
        "statements",
        {"sql": CREATE, "namespace": "sales", "start": 0},
        actor=editor,
        summary="a script",
        task=console.TASK,
    )
    monkeypatch.setattr("refresh.analysis.query_schema", refused)
    monkeypatch.setattr("runtime.engine.job_group", lambda group, description: nullcontext())
    assert run_console_job(job.pk) == "FAILED"
    job.refresh_from_db()
    assert job.status == 400 and "no such column x" in job.error["message"]
    assert job.error["line"] == 1


def test_a_console_job_that_reached_the_generic_task_fails_saying_so_and_runs_nothing(
    sales, editor, alive
):
    job = jobs.submit(
        "statements",
        {"sql": CREATE, "namespace": "sales", "start": 0},
        actor=editor,
        summary="a script",
        task=console.TASK,
    )
    assert jobs.run(job.pk) == "FAILED"  # as a message queued before an upgrade would
    job.refresh_from_db()
    assert job.status == 409 and "run it again" in job.error["message"]
    assert not RefreshRun.objects.filter(table_name="sales.daily").exists()


def test_with_no_worker_a_console_create_is_a_503_statement_and_creates_nothing(sales, editor):
    response = api_for(editor).post(
        "/api/statements/", {"sql": CREATE, "namespace": "sales"}, format="json"
    )
    assert response.status_code == 503
    assert "No refresh worker is running" in response.json()["error"]["message"]
    assert not SparkJob.objects.exists()


def test_the_pages_show_the_job_and_say_when_no_worker_runs(sales, client, viewer, editor):
    client.force_login(viewer)
    unavailable = client.get("/namespaces/sales/views/v/?preview=1")
    assert "No refresh worker is running" in unavailable.content.decode()
    workers.beat("host:2")
    page = client.get("/namespaces/sales/views/v/?preview=1")
    assert page.status_code == 200
    html = page.content.decode()
    job = SparkJob.objects.get()
    assert f'data-job-url="/api/jobs/{job.pk}/"' in html and "js/jobs.js" in html
    job_page = client.get(f"/jobs/{job.pk}/")
    assert job_page.status_code == 200 and "Preview of view sales.v" in job_page.content.decode()
    client.force_login(editor)
    assert client.get(f"/jobs/{job.pk}/").status_code == 404


def test_refreshes_leave_a_worker_thread_free_for_jobs(sales, editor, settings, monkeypatch):
    settings.CELERY_WORKER_CONCURRENCY = 2
    settings.WORKER_INTERACTIVE_THREADS = 1
    monkeypatch.setattr(running, "_slots", None)
    sent: list[tuple[int, float | None]] = []
    monkeypatch.setattr(
        "refresh.runs.dispatch", lambda run, countdown=None: sent.append((run.pk, countdown))
    )
    monkeypatch.setattr("refresh.analysis.query_schema", lambda query, *, namespace: SCHEMA)
    from refresh import services as mts
    from refresh.core.freshness import Freshness, TimeUnit

    mt = mts.create_materialized_table(
        namespace="sales",
        name="daily",
        query="SELECT ds, count(*) AS n FROM orders GROUP BY ds",
        freshness=Freshness(1, TimeUnit.HOUR),
        actor=editor,
    )
    run = mt.runs.get()
    slots = running.refresh_slots()
    assert slots.acquire(blocking=False)  # the one refresh thread is busy
    try:
        assert runner.execute(run.pk) == "waiting for a refresh thread"
    finally:
        slots.release()
    run.refresh_from_db()
    assert run.state == "QUEUED" and sent[-1] == (run.pk, runner.BUSY_RETRY_SECONDS)


def test_the_workers_are_listed_with_whether_they_are_alive(viewer, alive):
    workers.beat("host:9", at=time.time() - 600)
    listed = {w["name"]: w["alive"] for w in api_for(viewer).get("/api/workers/").json()}
    assert listed == {"host:1": True, "host:9": False}


def test_workers_silent_for_an_hour_are_forgotten(viewer, alive):
    workers.beat("host:gone", at=time.time() - 3700)
    listed = [w["name"] for w in api_for(viewer).get("/api/workers/").json()]
    assert listed == ["host:1"]
    assert [w["name"] for w in workers.listed()] == ["host:1"]


@pytest.fixture
def spark_job_until_cancelled(monkeypatch, settings):
    """Call it once the job is made (the request runs the job's kind until it needs Spark):
    from then on a view preview's Spark work runs until its job group is cancelled, as
    Spark's does, and the job's watch looks every 0.2 s. It returns the cancels seen."""
    import threading

    from catalog.core.errors import InvalidInput

    cancels: list[str] = []
    stopped = threading.Event()

    def cancel(group: str) -> None:
        cancels.append(group)
        if len(cancels) >= 2:
            stopped.set()

    def work(arguments, actor, job):
        # The first cancel finds no Spark job running (as when it comes while Spark plans
        # the next statement); the work stops only when the watch cancels again.
        assert stopped.wait(30), "cancelled once, then never again"
        raise InvalidInput("Job 7 cancelled part of cancelled job group")

    def install() -> list[str]:
        settings.MT_HEARTBEAT_SECONDS = 0.2
        untagged = jobs.Executor(running=lambda group, description: nullcontext(), cancel=cancel)
        jobs.use_executor(untagged)
        monkeypatch.setitem(jobs.KINDS, "preview_view", work)
        return cancels

    try:
        yield install
    finally:
        from refresh import analysis

        jobs.use_executor(analysis.EXECUTOR)


def _queued_preview(viewer) -> SparkJob:
    job = preview(api_for(viewer)).json()["job"]
    return SparkJob.objects.get(pk=job["id"])


@pytest.mark.django_db(transaction=True)
def test_a_cancel_asked_stops_the_jobs_spark_work_and_keeps_stopping_what_starts_after(
    sales, viewer, alive, spark_job_until_cancelled
):
    job = _queued_preview(viewer)
    cancels = spark_job_until_cancelled()
    # Asked as it starts.
    SparkJob.objects.filter(pk=job.pk).update(cancel_requested_at=timezone.now())
    outcome = jobs._run(jobs.claim(job.pk))
    job.refresh_from_db()
    assert outcome == "CANCELLED", (job.error, job.status)
    assert len(cancels) >= 2 and set(cancels) == {f"lakeview-job-{job.pk}"}


@pytest.mark.django_db(transaction=True)
def test_a_job_past_jobs_timeout_seconds_is_stopped_and_fails_with_a_504_saying_so(
    sales, viewer, alive, settings, spark_job_until_cancelled
):
    settings.JOBS_TIMEOUT_SECONDS = 1
    job = _queued_preview(viewer)
    cancels = spark_job_until_cancelled()
    assert jobs._run(jobs.claim(job.pk)) == "FAILED"
    job.refresh_from_db()
    assert job.status == 504 and job.error["type"] == "Timeout"
    assert job.error["message"].startswith("Timed out: stopped after 1 s") and cancels


def test_a_console_scripts_job_page_shows_its_sql(sales, client, editor, alive):
    """A console script's job keeps its text as `sql` (a view's as `query`): its page shows
    either."""
    job = jobs.submit(
        "statements",
        {"sql": CREATE, "namespace": "sales", "start": 0},
        actor=editor,
        summary="Console script, from statement 1",
    )
    client.force_login(editor)

    response = client.get(f"/jobs/{job.pk}/")

    assert response.status_code == 200
    assert "CREATE MATERIALIZED TABLE daily" in response.content.decode()


def test_requests_on_their_way_to_a_job_count_against_the_users_bound_so_a_burst_is_refused_early(
    sales, viewer, alive, settings, monkeypatch
):
    # Two previews admitted and not yet at `submit` (as in a burst, where every request's
    # first look comes before any job row exists): the third is refused before its work.
    settings.JOBS_PER_USER = 2
    ran: list[str] = []
    monkeypatch.setitem(jobs.KINDS, "preview_view", lambda *args: ran.append("ran") or (200, {}))
    with jobs.admitted(viewer, summary="one"), jobs.admitted(viewer, summary="two"):
        refused = preview(api_for(viewer), "id = 3")
        assert refused.status_code == 429
        assert "2 Spark jobs waiting, running or being asked for" in refused.json()["error"]
        assert ran == [] and not SparkJob.objects.exists()
    # Once they are through, their places are free again.
    assert preview(api_for(viewer), "id = 3").status_code == 200
    assert ran == ["ran"]


def test_a_job_sent_to_the_workers_leaves_no_result_subscription_in_the_web_process(
    sales, viewer, alive, monkeypatch
):
    # Celery's send_task has the result backend subscribe the sender to each task's result
    # channel (on_task_call) unless told the result is ignored: a web process would keep one
    # subscription per job it ever sent, and wait on Redis for each.
    from celery import current_app

    subscribed: list[str] = []
    monkeypatch.setattr(
        current_app.backend, "on_task_call", lambda producer, task_id: subscribed.append(task_id)
    )
    for index in range(3):
        assert preview(api_for(viewer), f"id = {index}").status_code == 202
    assert SparkJob.objects.count() == 3
    assert subscribed == []
