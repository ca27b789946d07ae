"""Expectations through /api/statements/: stored on the table and its definition version,
shown by SHOW CREATE (whose text applied back changes nothing), the API's detail, versions
and runs, and the table's page; CREATE OR ALTER that changes them is a new definition
version built by a rebuild, as a new query is; conditions over columns the query lacks are
refused with nothing written; CONTINUOUS tables may have them, a micro-batch's counts are on
its run and a FAIL UPDATE batch is the stream's failed run. Spark's analyzer is
test_mt_pipelines' fake; runs sent to a worker are recorded."""

from __future__ import annotations

from contextlib import nullcontext

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from catalog import services, workers
from refresh import runner, runs
from refresh.core.expectations import ExpectationFailed
from refresh.models import MaterializedTable, MaterializedTableVersion, RefreshRun
from tests.integration.test_mt_pipelines import ORDERS, counts, fake_schema, ok, refused

pytestmark = pytest.mark.django_db

DAILY = """CREATE OR ALTER MATERIALIZED TABLE daily (
  CONSTRAINT valid_id EXPECT (id IS NOT NULL) ON VIOLATION DROP ROW,
  CONSTRAINT positive EXPECT (total > 0) ON VIOLATION FAIL UPDATE,
  CONSTRAINT `known day` EXPECT (ds <> 'unknown')
)
FRESHNESS = INTERVAL '1' HOUR
AS SELECT id, ds, sum(amount) AS total FROM orders GROUP BY id, ds"""
DETAIL = "/api/namespaces/sales/materialized-tables/daily/"


@pytest.fixture
def dispatched(monkeypatch) -> list[int]:
    sent: list[int] = []
    monkeypatch.setattr("refresh.runs.dispatch", lambda run, **kw: sent.append(run.pk))
    return sent


@pytest.fixture
def sales(editor, dispatched, monkeypatch) -> str:
    monkeypatch.setattr("refresh.analysis.query_schema", fake_schema)
    workers.beat("fake-spark")
    services.create_namespace(name="sales", actor=editor)
    services.create_table(namespace="sales", name="orders", schema=ORDERS, actor=editor)
    return "sales"


@pytest.fixture
def api(editor) -> APIClient:
    client = APIClient()
    client.force_authenticate(editor)
    return client


EXPECTED = [
    {"name": "valid_id", "condition": "id IS NOT NULL", "on_violation": "DROP ROW"},
    {"name": "positive", "condition": "total > 0", "on_violation": "FAIL UPDATE"},
    {"name": "known day", "condition": "ds <> 'unknown'", "on_violation": None},
]


def test_expectations_are_stored_shown_by_show_create_and_the_api_and_applied_back_change_nothing(
    api, sales
):
    assert ok(api, DAILY)["plan"]["action"] == "create"
    mt = MaterializedTable.objects.get()
    assert mt.expectations == EXPECTED
    assert mt.versions.get().expectations == EXPECTED
    text = ok(api, "SHOW CREATE MATERIALIZED TABLE daily")["rows"][0][0]
    assert "  CONSTRAINT `valid_id` EXPECT (id IS NOT NULL) ON VIOLATION DROP ROW" in text
    assert "  CONSTRAINT `known day` EXPECT (ds <> 'unknown')\n)" in text
    before = counts()

    assert ok(api, text)["plan"]["action"] == "nothing"
    assert counts() == before

    assert api.get(DETAIL).json()["expectations"] == EXPECTED
    versions = api.get(f"{DETAIL}versions/").json()
    assert versions["versions"][0]["expectations"] == EXPECTED


def test_changing_expectations_is_a_new_definition_version_built_by_a_rebuild(
    api, sales, dispatched
):
    ok(api, DAILY)
    changed = DAILY.replace(
        "(total > 0) ON VIOLATION FAIL UPDATE", "(total >= 0) ON VIOLATION DROP ROW"
    )

    result = ok(api, changed)

    assert result["plan"]["changes"] == [
        "expectations (valid_id, positive, known day): a new definition version after 1, "
        "built by a rebuild"
    ]
    mt = MaterializedTable.objects.get()
    [rebuild] = RefreshRun.objects.filter(trigger=RefreshRun.Trigger.REBUILD)
    assert rebuild.definition_version == 2 and rebuild.pk in dispatched
    assert mt.versions.get(version_id=2).expectations[1] == {
        "name": "positive",
        "condition": "total >= 0",
        "on_violation": "DROP ROW",
    }
    assert mt.expectations == EXPECTED, "the table keeps its own until the rebuild commits"
    # The rebuild commits (what the worker does once Spark wrote the rows).
    RefreshRun.objects.filter(pk=rebuild.pk).update(state=RefreshRun.State.RUNNING)
    runs.apply_rebuild(rebuild, expectations={"valid_id": 1, "positive": 0})
    mt.refresh_from_db()
    assert mt.current_version == 2 and mt.expectations[1]["condition"] == "total >= 0"
    # ALTER ... AS keeps them; a CREATE OR ALTER without any drops them (a new version).
    ok(api, "ALTER MATERIALIZED TABLE daily AS SELECT id, ds, sum(amount) AS total FROM orders "
        "WHERE ds > '2020' GROUP BY id, ds")  # fmt: skip
    assert MaterializedTableVersion.objects.get(version_id=3).expectations == mt.expectations


def test_a_run_records_each_expectations_failing_count_in_the_api_and_on_the_page(
    api, sales, editor
):
    ok(api, DAILY)
    mt = MaterializedTable.objects.get()
    run = mt.runs.get()
    RefreshRun.objects.filter(pk=run.pk).update(
        state=RefreshRun.State.RUNNING, started_at=timezone.now()
    )
    runs.finish(
        run,
        state=RefreshRun.State.FAILED,
        error="Expectation 'positive' (ON VIOLATION FAIL UPDATE) failed: 2 rows violate it",
        expectations={"valid_id": 3, "positive": 2, "known day": 0},
    )

    [listed] = api.get(f"{DETAIL}runs/").json()["results"]
    assert listed["expectations"] == {"valid_id": 3, "positive": 2, "known day": 0}
    assert api.get(f"/api/refresh-runs/{run.pk}/").json()["expectations"]["positive"] == 2
    page = Client()
    page.force_login(editor)
    html = page.get(reverse("refresh:mt-detail", args=["sales", "daily"])).content.decode()
    assert 'id="expectations"' in html and "<code>total &gt; 0</code>" in html
    assert "<td>FAIL UPDATE</td>" in html and "<td>keep and count</td>" in html
    assert "<code>positive</code>: 2 violated" in html
    assert "failed: 2 rows violate it" in html
    mt.refresh_from_db()
    assert mt.consecutive_failures == 1, "a failed expectation counts as a failed refresh"
    assert 'id="chart-expectations"' in html
    charts = page.get(reverse("refresh:mt-charts", args=["sales", "daily"])).json()
    assert charts["expectations"]["names"] == ["valid_id", "positive", "known day"]
    [point] = charts["expectations"]["points"]
    assert point["counts"] == {"valid_id": 3, "positive": 2, "known day": 0}


PLAIN = """CREATE MATERIALIZED TABLE plain (CONSTRAINT has_id EXPECT (id > 0))
FRESHNESS = INTERVAL {freshness}
AS SELECT id, ds FROM orders"""


def test_an_expectation_over_a_column_the_query_lacks_is_refused_and_nothing_is_written(api, sales):
    before = counts()
    error = refused(api, DAILY.replace("(total > 0)", "(nope > 0)"))
    assert (
        "Expectation 'positive' names nope, which is not a column of the query's result"
        in error["message"]
    )
    assert counts() == before and not MaterializedTable.objects.exists()


def test_a_continuous_table_may_have_expectations_and_a_table_with_them_may_become_continuous(
    api, sales
):
    planned = api.post(
        "/api/statements/",
        {"sql": PLAIN.format(freshness="'30' SECOND"), "namespace": "sales", "dry_run": True},
        format="json",
    )
    assert planned.status_code == 200, planned.content
    ok(api, PLAIN.format(freshness="'30' SECOND"))
    continuous = MaterializedTable.objects.get()
    assert continuous.refresh_mode == "CONTINUOUS"
    assert [e["name"] for e in continuous.expectations] == ["has_id"]

    ok(api, PLAIN.replace("plain", "hourly").format(freshness="'1' HOUR"))
    ok(api, "ALTER MATERIALIZED TABLE hourly SET FRESHNESS = INTERVAL '30' SECOND")
    assert MaterializedTable.objects.get(table__name="hourly").refresh_mode == "CONTINUOUS"


def test_the_api_creates_a_table_with_expectations_and_refuses_bad_ones_by_field(api, sales):
    url = "/api/namespaces/sales/materialized-tables/"
    body = {
        "name": "plain",
        "query": "SELECT id, ds FROM orders",
        "freshness": {"value": 1, "unit": "HOUR"},
        "expectations": [
            {"name": "has_id", "condition": "id > 0", "on_violation": "DROP ROW"},
            {"name": "has_day", "condition": "ds IS NOT NULL"},
        ],
    }
    bad = [
        ({"name": "x", "condition": "id IN (SELECT id FROM orders)"}, "subquery"),
        ({"name": "x", "condition": "id > 0", "on_violation": "WARN"}, "WARN"),
        ({"name": "has_id", "condition": "id > 1"}, "Duplicate expectation name 'has_id'"),
        ({"name": "x", "condition": "id > 1", "on_violaton": "DROP ROW"}, "on_violaton"),
    ]
    for extra, said in bad:
        refusal = api.post(
            url, {**body, "expectations": [*body["expectations"], extra]}, format="json"
        )
        assert refusal.status_code == 400 and said in refusal.content.decode(), refusal.content
        assert "expectations" in refusal.content.decode()
    assert not MaterializedTable.objects.exists()

    created = api.post(url, body, format="json")

    assert created.status_code == 201, created.content
    assert created.json()["expectations"] == [
        {"name": "has_id", "condition": "id > 0", "on_violation": "DROP ROW"},
        {"name": "has_day", "condition": "ds IS NOT NULL", "on_violation": None},
    ]


@pytest.fixture
def worker_spark(monkeypatch) -> dict[str, list]:
    """The worker's Spark below the runner: a session never used, and a recompute that
    counts what the last entry of "counted" says and raises the error it names, committing
    nothing; the expectations each call was given go in "calls"."""
    spark: dict[str, list] = {"calls": [], "counted": []}
    monkeypatch.setattr("refresh.runner.engine.run_session", lambda **kw: object())
    monkeypatch.setattr("refresh.runner.engine.job_group", lambda *a, **kw: nullcontext())

    def recompute(session, *, expectations, violations, **kw):
        spark["calls"].append(expectations)
        counts, error = spark["counted"][-1]
        violations.update(counts)
        if error is not None:
            raise error

    monkeypatch.setattr("refresh.runner.changes.recompute", recompute)
    return spark


def test_the_runner_records_each_runs_counts_and_a_failed_expectation_fails_the_run(
    api, sales, worker_spark
):
    ok(api, DAILY)
    mt = MaterializedTable.objects.get()

    worker_spark["counted"].append(({"valid_id": 1, "positive": 0, "known day": 4}, None))
    run = runs.enqueue(mt, trigger=RefreshRun.Trigger.MANUAL, force=True)
    assert runner._execute(run.pk) == RefreshRun.State.SUCCEEDED
    run.refresh_from_db()
    assert run.expectations == {"valid_id": 1, "positive": 0, "known day": 4}
    names = [e.name for e in worker_spark["calls"][-1]]
    assert names == ["valid_id", "positive", "known day"]

    failing = ExpectationFailed("positive", 3)
    worker_spark["counted"].append(({"valid_id": 0, "positive": 3, "known day": 0}, failing))
    failed = runs.enqueue(mt, trigger=RefreshRun.Trigger.MANUAL, force=True)
    assert runner._execute(failed.pk) == RefreshRun.State.FAILED
    failed.refresh_from_db()
    mt.refresh_from_db()
    assert failed.error.startswith(
        "Expectation 'positive' (ON VIOLATION FAIL UPDATE) failed: 3 rows violate it."
    )
    assert failed.expectations == {"valid_id": 0, "positive": 3, "known day": 0}
    assert mt.consecutive_failures == 1


def test_an_incremental_refresh_applies_the_expectations_and_records_its_counts(
    api, sales, monkeypatch
):
    from refresh.core import expectations as ex
    from refresh.core.incremental import Decision, Delta, Kind
    from refresh.core.plan import RefreshPlan
    from refresh.core.streaming import StreamPlan

    ok(api, DAILY)
    mt = MaterializedTable.objects.get()
    monkeypatch.setattr("refresh.runner.engine.run_session", lambda **kw: object())
    monkeypatch.setattr("refresh.runner.engine.job_group", lambda *a, **kw: nullcontext())
    stream = StreamPlan("merge", (("sales", "orders"),), (), ("id", "ds"))
    decision = Decision(Kind.INCREMENTAL, "appends only", (Delta("sales.orders", 1, 2, 1, 4),))
    plan = RefreshPlan(
        version=mt.current_version,
        query=mt.query,
        namespace="sales",
        parsed=None,
        snapshots={"sales.orders": 2},
        decision=decision,
        stream=stream,
        expectations=ex.from_json(mt.expectations),
    )
    monkeypatch.setattr("refresh.runner.sources.decide", lambda *a, **kw: plan)
    calls = []

    def incremental_refresh(session, *, expectations, violations, **kw):
        calls.append([e.name for e in expectations])
        violations.update({"valid_id": 0, "positive": 1, "known day": 2})

    monkeypatch.setattr("refresh.runner.changes.incremental_refresh", incremental_refresh)
    run = runs.enqueue(mt, trigger=RefreshRun.Trigger.MANUAL, force=True)

    assert runner._execute(run.pk) == RefreshRun.State.SUCCEEDED
    run.refresh_from_db()
    assert run.action == "INCREMENTAL", "a table with expectations is refreshed incrementally"
    assert calls == [["valid_id", "positive", "known day"]]
    assert run.expectations == {"valid_id": 0, "positive": 1, "known day": 2}


def test_a_micro_batchs_counts_are_on_its_run_and_a_fail_update_batch_is_the_streams_failure(
    api, sales, monkeypatch
):
    import time
    from types import SimpleNamespace

    from refresh import stream_hosts
    from refresh.core.streaming import StreamPlan
    from refresh.spark.stream_queries import BatchResult
    from refresh.streams import starts, stops
    from refresh.streams.batches import record_batch
    from refresh.streams.state import Running
    from refresh.streams.supervisor import Supervisor

    monkeypatch.setattr("refresh.streams.batches.close_old_connections", lambda: None)
    ok(api, PLAIN.format(freshness="'30' SECOND"))
    mt = MaterializedTable.objects.get()
    now = time.time()
    record_batch(mt.pk, 1, BatchResult(0, -1, None, None, now - 1, now, expectations={"has_id": 2}))
    batch = mt.runs.get(trigger="CONTINUOUS", batch_id=0)
    assert batch.expectations == {"has_id": 2}

    supervisor = Supervisor(config=None, host_name="h:1")  # type: ignore[arg-type]
    supervisor.host = stream_hosts.register("h:1")
    failure = ExpectationFailed("has_id", 3)
    starts.expectation_failed(supervisor, mt.pk, failure, {"has_id": 3})
    wrapped = RuntimeError("[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in ...")
    query = SimpleNamespace(isActive=False, exception=lambda: wrapped)
    supervisor.running[mt.pk] = Running(mt.pk, query, (), "", StreamPlan("append", (), ()))
    stops.ended(supervisor, supervisor.running[mt.pk], mt, held=True)

    failed = mt.runs.get(state="FAILED")
    assert failed.error == failure.message
    assert failed.expectations == {"has_id": 3}
    mt.refresh_from_db()
    assert mt.stream_status == "FAILED" and mt.stream_error == failure.message
    [listed, *_] = api.get("/api/namespaces/sales/materialized-tables/plain/runs/").json()[
        "results"
    ]
    assert listed["expectations"] == {"has_id": 3}
