"""Queries from the console's API (refresh.queries): a SELECT is a Spark job (202), its
result is kept bounded and read in pages through the job's URL and its own, downloaded as
CSV and Parquet, listed in its user's history and readable by no one else; the bounds
(queries at a time, the statement timeout, the result's size) each answer clearly, never a
5xx. No worker runs here: the worker's side is called directly with its Spark faked
(tests/spark runs the real thing)."""

from __future__ import annotations

import io
import os
import threading
import time
from contextlib import nullcontext
from datetime import timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from catalog import job_news, jobs, workers
from catalog.core.errors import Forbidden, SqlError
from catalog.models import SparkJob
from infra import broker
from refresh import analysis, queries
from refresh.models import Query
from refresh.spark.query import Prepared
from refresh.tasks import run_console_job
from tests.waiting import PATIENCE, eventually

pytestmark = pytest.mark.django_db

COLUMNS = [("id", "bigint"), ("label", "string")]


def rows(count: int) -> pa.Table:
    return pa.table({"id": list(range(count)), "label": [f"row-{i}" for i in range(count)]})


@pytest.fixture
def alive():
    workers.beat("host:1")


@pytest.fixture
def spark(monkeypatch):
    """The worker's Spark, faked: `spark.table` is what the next query gives, `spark.reads`
    what its plan reads, `spark.prepared` the SQL it was asked."""

    class Fake:
        table = rows(3)
        reads: list[tuple[str, ...]] = [("sales", "orders")]
        places: dict = {}
        prepared: list[tuple[str, str | None]] = []
        #: The reader's row filters and masks each query was prepared with.
        policies: list[tuple] = []
        refuse: Exception | None = None
        fetch_started = threading.Event()
        fetch_waits: threading.Event | None = None

    fake = Fake()

    def prepare(sql, *, namespace, policies=()):
        fake.prepared.append((sql, namespace))
        fake.policies.append(tuple(policies))
        if fake.refuse is not None:
            raise fake.refuse
        return Prepared(
            kind="SELECT", columns=COLUMNS, reads=list(fake.reads), places=dict(fake.places)
        )

    def fetch(prepared, *, max_rows):
        fake.fetch_started.set()
        if fake.fetch_waits is not None:
            assert fake.fetch_waits.wait(30), "never cancelled"
            raise RuntimeError("Job 3 cancelled part of cancelled job group lakeview-job-1")
        return fake.table.slice(0, max_rows + 1)

    monkeypatch.setattr("refresh.analysis.prepare_query", prepare)
    monkeypatch.setattr("refresh.analysis.fetch_query", fetch)
    monkeypatch.setattr("runtime.engine.job_group", lambda group, description: nullcontext())
    return fake


def api_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def run_sql(client: APIClient, sql: str, namespace: str | None = "sales"):
    return client.post("/api/statements/", {"sql": sql, "namespace": namespace}, format="json")


def submitted(client: APIClient, sql: str = "SELECT * FROM orders") -> dict:
    response = run_sql(client, sql)
    assert response.status_code == 202, response.content
    return response.json()


def test_a_viewers_select_is_a_job_whose_url_gives_its_rows_with_their_types(viewer, alive, spark):
    client = api_for(viewer)
    body = submitted(client)
    job = body["job"]
    [pending] = body["results"]
    assert job["kind"] == "query" and pending["spark_job"] == job["id"]
    assert pending["query"]["state"] == "QUEUED"
    waiting = client.get(f"{job['url']}rows").json()
    assert (waiting["state"], waiting["complete"], waiting["rows"]) == ("QUEUED", False, [])

    assert run_console_job(job["id"]) == "SUCCEEDED"
    assert spark.prepared == [("SELECT * FROM orders", "sales")]
    page = client.get(f"{job['url']}rows", {"offset": 1, "limit": 5}).json()
    assert page["rows"] == [[1, "row-1"], [2, "row-2"]]
    assert page["columns"] == [
        {"name": "id", "type": "bigint"},
        {"name": "label", "type": "string"},
    ]
    assert (page["state"], page["complete"], page["row_count"], page["cut"]) == (
        "SUCCEEDED", True, 3, None
    )  # fmt: skip
    assert page["duration_seconds"] is not None
    # The same rows at the query's own URL, and the job's answer names them.
    query = pending["query"]
    assert client.get(query["rows_url"]).json()["rows"][0] == [0, "row-0"]
    finished = client.get(job["url"]).json()
    [result] = finished["result"]["results"]
    assert result["ok"] and result["query"]["row_count"] == 3
    assert result["message"].startswith("SELECT: 3 rows in ")


def test_the_first_page_is_readable_while_the_rest_is_still_being_stored(
    viewer, alive, spark, monkeypatch
):
    spark.table = rows(250)
    client = api_for(viewer)
    job = submitted(client)["job"]
    seen: list[dict] = []
    write_part = queries.results.write_part

    def watched(folder, index, table):
        if index == 1:  # the first page is stored; the second part is not yet
            seen.append(client.get(f"{job['url']}rows", {"limit": 1000}).json())
        return write_part(folder, index, table)

    monkeypatch.setattr(queries.results, "write_part", watched)
    assert run_console_job(job["id"]) == "SUCCEEDED"
    [early] = seen
    assert (early["state"], early["complete"], len(early["rows"])) == ("RUNNING", False, 100)
    assert early["columns"][0] == {"name": "id", "type": "bigint"}
    final = client.get(f"{job['url']}rows", {"offset": 0, "limit": 1000}).json()
    assert len(final["rows"]) == 250 and final["rows"][-1] == [249, "row-249"]


def test_a_result_past_its_rows_or_bytes_is_cut_and_says_so(viewer, alive, spark, settings):
    settings.QUERY_RESULT_MAX_ROWS = 5
    spark.table = rows(8)
    client = api_for(viewer)
    job = submitted(client)["job"]
    run_console_job(job["id"])
    page = client.get(f"{job['url']}rows").json()
    assert (page["row_count"], len(page["rows"]), page["cut"]) == (5, 5, "rows")
    assert "Cut at 5 rows (QUERY_RESULT_MAX_ROWS)" in page["cut_message"]

    settings.QUERY_RESULT_MAX_ROWS = 1000
    settings.QUERY_RESULT_MAX_BYTES = rows(8).slice(0, 3).nbytes
    job = submitted(client)["job"]
    run_console_job(job["id"])
    page = client.get(f"{job['url']}rows").json()
    assert (page["row_count"], page["cut"], page["state"]) == (3, "bytes", "SUCCEEDED")
    assert "QUERY_RESULT_MAX_BYTES" in page["cut_message"]
    [result] = client.get(job["url"]).json()["result"]["results"]
    assert "QUERY_RESULT_MAX_BYTES" in result["message"]


def test_results_and_history_are_their_users_own_and_a_superusers(
    viewer, editor, alive, spark, django_user_model
):
    mine = api_for(viewer)
    job = submitted(mine)["job"]
    run_console_job(job["id"])
    query = Query.objects.get()
    other = api_for(editor)
    for url in (
        f"/api/queries/{query.pk}/",
        f"/api/queries/{query.pk}/rows",
        f"/api/queries/{query.pk}/result.csv",
        f"{job['url']}rows",
    ):
        assert other.get(url).status_code == 404, url
    assert other.post(f"/api/queries/{query.pk}/run").status_code == 404
    assert other.get("/api/queries/").json()["results"] == []
    admin = django_user_model.objects.create_superuser("root", password="root-password")
    assert api_for(admin).get(f"/api/queries/{query.pk}/rows").json()["row_count"] == 3
    listed = mine.get("/api/queries/").json()["results"]
    assert [item["id"] for item in listed] == [query.pk]
    item = listed[0]
    assert (item["sql"], item["namespace"], item["state"], item["row_count"]) == (
        "SELECT * FROM orders", "sales", "SUCCEEDED", 3
    )  # fmt: skip
    assert item["kept"] and item["csv_url"] and item["duration_seconds"] is not None


def test_a_kept_result_downloads_as_csv_and_as_parquet(viewer, alive, spark):
    spark.table = rows(150)
    client = api_for(viewer)
    job = submitted(client)["job"]
    run_console_job(job["id"])
    query = Query.objects.get()
    csv = client.get(f"/api/queries/{query.pk}/result.csv")
    assert csv.status_code == 200 and csv["Content-Type"].startswith("text/csv")
    assert csv["Content-Disposition"] == f'attachment; filename="query-{query.pk}.csv"'
    lines = b"".join(csv.streaming_content).decode().splitlines()
    assert lines[:2] == ['"id","label"', '0,"row-0"'] and len(lines) == 151
    parquet = client.get(f"/api/queries/{query.pk}/result.parquet")
    read = pq.read_table(io.BytesIO(b"".join(parquet.streaming_content)))
    assert read.equals(rows(150))
    assert client.get(f"/api/queries/{query.pk}/result.xls").status_code == 404


def test_a_users_queries_at_a_time_are_bounded_with_a_429_and_retry_after(
    viewer, alive, spark, settings
):
    settings.QUERIES_PER_USER = 1
    client = api_for(viewer)
    submitted(client)
    refused = run_sql(client, "SELECT 2")
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) > 0
    assert "QUERIES_PER_USER" in refused.json()["error"]["message"]
    assert SparkJob.objects.count() == 1 and Query.objects.count() == 1
    # Other statements are not queries: a SHOW still runs.
    assert run_sql(client, "SHOW MATERIALIZED TABLES").status_code == 200


@pytest.fixture
def cancellable(settings):
    """The worker's watch looks every 0.2 s and cancelling the job's Spark group releases
    the faked Spark; returns the groups cancelled."""
    from refresh import analysis

    settings.MT_HEARTBEAT_SECONDS = 0.2
    cancels: list[str] = []

    def install(spark) -> list[str]:
        spark.fetch_waits = threading.Event()

        def cancel(group: str) -> None:
            cancels.append(group)
            spark.fetch_waits.set()

        jobs.use_executor(
            jobs.Executor(running=lambda group, description: analysis.on_worker(), cancel=cancel)
        )
        return cancels

    try:
        yield install
    finally:
        jobs.use_executor(analysis.EXECUTOR)


@pytest.mark.django_db(transaction=True)
def test_a_query_past_its_timeout_is_stopped_and_fails_with_a_400_that_says_so(
    viewer, alive, spark, settings, cancellable
):
    settings.QUERY_TIMEOUT_SECONDS = 1
    client = api_for(viewer)
    job = submitted(client)["job"]
    cancels = cancellable(spark)
    started = time.monotonic()
    assert run_console_job(job["id"]) == "FAILED", SparkJob.objects.get(pk=job["id"]).error
    assert time.monotonic() - started < 10
    assert cancels and set(cancels) == {f"lakeview-job-{job['id']}"}
    finished = client.get(job["url"]).json()
    assert finished["status"] == 400 and finished["error"]["type"] == "StatementTimeout"
    page = client.get(f"{job['url']}rows").json()
    assert page["state"] == "FAILED" and "QUERY_TIMEOUT_SECONDS" in page["error"]["message"]


@pytest.mark.django_db(transaction=True)
def test_a_cancelled_query_stops_its_spark_job_group_and_says_cancelled(
    viewer, alive, spark, cancellable
):
    client = api_for(viewer)
    job = submitted(client)["job"]
    cancels = cancellable(spark)
    outcome: list[str] = []

    def work() -> None:
        try:
            outcome.append(run_console_job(job["id"]))
        finally:
            connection.close()  # the thread's own; the test database is dropped after

    worker = threading.Thread(target=work)
    worker.start()
    assert spark.fetch_started.wait(10)
    assert client.post(job["cancel_url"]).status_code == 200
    worker.join(20)
    assert outcome == ["CANCELLED"]
    assert cancels[0] == f"lakeview-job-{job['id']}"
    page = client.get(f"{job['url']}rows").json()
    assert (page["state"], page["rows"]) == ("CANCELLED", [])


def test_a_query_cancelled_before_a_worker_took_it_is_cancelled_in_the_history(
    viewer, alive, spark
):
    client = api_for(viewer)
    job = submitted(client)["job"]
    assert client.post(job["cancel_url"]).status_code == 200
    [item] = client.get("/api/queries/").json()["results"]
    assert item["state"] == "CANCELLED"
    queries.prune()
    assert Query.objects.get().state == "CANCELLED"


def test_a_query_spark_refuses_fails_at_its_line_and_column_with_nothing_stored(
    viewer, alive, spark, query_results
):
    spark.refuse = SqlError("reflect() is not allowed", line=2, column=8)
    client = api_for(viewer)
    job = submitted(client, "SHOW MATERIALIZED TABLES;\nSELECT reflect('a', 'b')")["job"]
    assert run_console_job(job["id"]) == "FAILED"
    finished = client.get(job["url"]).json()
    assert finished["status"] == 400
    assert (finished["error"]["line"], finished["error"]["column"]) == (2, 8)
    failed = finished["result"]["results"][-1]
    assert not failed["ok"] and failed["query"]["state"] == "FAILED"  # the page keeps its grid
    page = client.get(f"{job['url']}rows").json()
    assert page["state"] == "FAILED" and page["error"]["line"] == 2
    assert not list(query_results.glob("*/*"))


def test_what_the_plan_reads_is_asked_of_the_one_read_decision_before_any_row(
    viewer, alive, spark, monkeypatch
):
    asked: list[list[tuple[str, ...]]] = []

    def may_read(user, objects):
        asked.append(list(objects))
        raise Forbidden("You may not read sales.secret")

    monkeypatch.setattr("refresh.queries.may_read", may_read)
    spark.reads = [("sales", "orders"), ("sales", "secret")]
    client = api_for(viewer)
    job = submitted(client)["job"]
    assert run_console_job(job["id"]) == "FAILED"
    assert asked == [[("sales", "orders"), ("sales", "secret")]]
    assert not spark.fetch_started.is_set()
    finished = client.get(job["url"]).json()
    assert finished["status"] == 403 and "sales.secret" in finished["error"]["message"]


def test_a_non_superusers_select_of_a_table_they_may_not_see_fails_as_a_missing_one(
    alive, spark, django_user_model
):
    from catalog import services
    from catalog.core.access import READ_DATA
    from refresh.spark.query import not_found
    from tests.integration.grant_fixtures import give
    from tests.integration.test_owner_rights import ORDERS

    admin = django_user_model.objects.create_superuser("root")
    for name in ("sales", "hidden"):
        services.create_namespace(name=name, actor=admin)
    services.create_table(namespace="hidden", name="secret", schema=ORDERS, actor=admin)
    alice = django_user_model.objects.create_user("alice")
    give(admin, READ_DATA, alice, namespace="sales")  # a namespace grant, no catalog role
    client = api_for(alice)
    sql = "SELECT * FROM hidden.secret"
    spark.reads = [("hidden", "secret")]
    spark.places = {("hidden", "secret"): (1, 15, "`hidden`.`secret`")}

    unseen = submitted(client, sql)["job"]
    assert run_console_job(unseen["id"]) == "FAILED"
    refused = client.get(unseen["url"]).json()

    # The same statement, the table not there: Spark's own error, as its analysis raises it.
    spark.refuse = not_found(Prepared("SELECT", [], [], places=spark.places), ("hidden", "secret"))
    missing = submitted(client, sql)["job"]
    assert run_console_job(missing["id"]) == "FAILED"
    absent = client.get(missing["url"]).json()

    assert not spark.fetch_started.is_set()
    assert refused["status"] == absent["status"] == 400
    assert refused["error"] == absent["error"]
    assert refused["error"]["message"].startswith(
        "Spark cannot analyze the query: [TABLE_OR_VIEW_NOT_FOUND] The table or view "
        "`hidden`.`secret` cannot be found."
    )
    assert (refused["error"]["line"], refused["error"]["column"]) == (1, 15)


def test_a_mixed_script_runs_in_order_with_the_query_in_its_place(editor, alive, spark):
    client = api_for(editor)
    script = "SHOW MATERIALIZED TABLES;\nSELECT * FROM orders;\nSHOW MATERIALIZED TABLES"
    body = submitted(client, script)
    shown, pending = body["results"]
    assert shown["ok"] and pending["line"] == 2 and pending["query"]["state"] == "QUEUED"
    assert SparkJob.objects.get().arguments["start"] == 1
    assert run_console_job(body["job"]["id"]) == "SUCCEEDED"
    selected, listed = client.get(body["job"]["url"]).json()["result"]["results"]
    assert selected["query"]["row_count"] == 3 and selected["line"] == 2
    assert listed["kind"] == "ShowMaterializedTables"


def test_a_query_is_run_again_from_its_history(viewer, alive, spark):
    client = api_for(viewer)
    job = submitted(client)["job"]
    run_console_job(job["id"])
    first = Query.objects.get()
    again = client.post(f"/api/queries/{first.pk}/run")
    assert again.status_code == 202
    assert again.json()["results"][0]["query"]["id"] != first.pk
    newest = Query.objects.order_by("-id").first()
    assert (newest.sql, newest.namespace) == (first.sql, first.namespace)


def test_with_no_worker_a_query_is_a_503_and_nothing_is_recorded(viewer, spark):
    response = run_sql(api_for(viewer), "SELECT 1")
    assert response.status_code == 503
    assert not SparkJob.objects.exists() and not Query.objects.exists()


@pytest.mark.parametrize("params", [{"offset": "-1"}, {"limit": "0"}, {"limit": "ten"}])
def test_a_bad_page_is_a_400_naming_the_parameter(viewer, alive, spark, params):
    job = submitted(api_for(viewer))["job"]
    response = api_for(viewer).get(f"{job['url']}rows", params)
    assert response.status_code == 400
    assert response.json()["field"] == next(iter(params))


def test_results_are_pruned_after_their_hours_and_beyond_a_users_newest(
    viewer, alive, spark, settings, query_results
):
    settings.QUERIES_PER_USER = 10
    client = api_for(viewer)
    for _ in range(3):
        run_console_job(submitted(client)["job"]["id"])
    settings.QUERY_RESULTS_PER_USER = 2
    oldest, middle, newest = Query.objects.order_by("id")
    orphan = query_results / ("ab" * 16)
    orphan.mkdir()
    (orphan / "part-00000.parquet").write_bytes(b"x")
    os.utime(orphan, (time.time() - 7200, time.time() - 7200))
    assert queries.prune() == 2  # the oldest result (beyond the newest two) and the orphan
    assert not orphan.exists()
    assert [q.result_folder != "" for q in Query.objects.order_by("id")] == [False, True, True]
    gone = client.get(f"/api/queries/{oldest.pk}/rows").json()
    assert gone["rows"] == [] and gone["error"]["type"] == "Gone"
    # Why it went before its hours ran out: only the newest two are kept.
    dropped = "only your newest 2 results are kept (QUERY_RESULTS_PER_USER)"
    assert dropped in gone["error"]["message"]
    assert client.get(f"/api/queries/{oldest.pk}/result.parquet").status_code == 404
    assert client.get(f"/api/queries/{oldest.pk}/").json()["kept"] is False
    # Its page says so once, and offers Run again, not More rows or the downloads.
    page = Client()
    page.force_login(viewer)
    html = page.get(f"/queries/{oldest.pk}/").content.decode()
    assert html.count("The result is gone") == 1 and dropped in html
    assert 'data-gone="1"' in html and 'id="query-again"' in html
    assert '<button type="button" class="query-more" hidden>' in html
    assert "hidden>CSV</a>" in html and "hidden>Parquet</a>" in html

    Query.objects.filter(pk=middle.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    queries.prune()
    assert not (query_results / middle.result_folder).exists()
    assert Query.objects.get(pk=middle.pk).result_folder == ""
    expired = client.get(f"/api/queries/{middle.pk}/rows").json()["error"]["message"]
    assert expired.startswith("The result was kept until ") and "newest" not in expired

    Query.objects.filter(pk=oldest.pk).update(
        created_at=timezone.now() - timedelta(days=settings.QUERY_HISTORY_KEEP_DAYS + 1)
    )
    queries.prune()
    assert list(Query.objects.order_by("id").values_list("pk", flat=True)) == [middle.pk, newest.pk]


def console_post(client, sql: str, namespace: str = "sales"):
    return client.post("/console/", {"sql": sql, "namespace": namespace, "action": "run"})


def test_the_console_shows_a_querys_grid_then_its_history_and_runs_it_again(
    client, viewer, editor, alive, spark
):
    from catalog import services

    services.create_namespace(name="sales", actor=editor)
    client.force_login(viewer)
    page = console_post(client, "SELECT * FROM orders")
    assert page.status_code == 202
    html = page.content.decode()
    query = Query.objects.get()
    assert f'data-rows-url="/api/queries/{query.pk}/rows"' in html
    assert f'data-cancel-url="/api/jobs/{query.job_id}/cancel"' in html
    assert "js/query_results.js" in html and "js/jobs.js" in html
    run_console_job(query.job_id)

    console = client.get("/console/").content.decode()
    assert f'id="history-{query.pk}"' in console and "SELECT * FROM orders" in console
    assert f'href="/queries/{query.pk}/"' in console
    again = client.get(f"/console/?again={query.pk}").content.decode()
    assert "\nSELECT * FROM orders</textarea>" in again
    assert '<option value="sales" selected>' in again

    result = client.get(f"/queries/{query.pk}/")
    assert result.status_code == 200
    shown = result.content.decode()
    assert "<td>row-2</td>" in shown and 'class="query-type muted">bigint' in shown
    assert f'href="/api/queries/{query.pk}/result.csv"' in shown

    client.force_login(editor)
    assert client.get(f"/queries/{query.pk}/").status_code == 404
    assert "SELECT * FROM orders" not in client.get(f"/console/?again={query.pk}").content.decode()


@pytest.fixture
def items(editor):
    """sales.items: a managed table of 8 rows written through the commit path."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import DecimalType, LongType, NestedField, StringType

    from catalog import services
    from catalog.core.table_writes import all_or_nothing
    from catalog.services.table_writes import writer

    services.create_namespace(name="sales", actor=editor)
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "name", StringType(), required=False),
        NestedField(3, "price", DecimalType(10, 2), required=False),
    )
    from decimal import Decimal

    rows = pa.table(
        {
            "id": pa.array(range(8), pa.int64()),
            "name": [f"item-{i}" if i != 3 else None for i in range(8)],
            "price": pa.array([Decimal(i) / 4 for i in range(8)], pa.decimal128(10, 2)),
        }
    )
    catalog = writer(actor=editor)
    with all_or_nothing(catalog):
        created = catalog.create_table_transaction(("sales", "items"), schema=schema)
        created.append(rows)
        created.commit_transaction()
    return rows


def test_a_plain_read_of_one_table_is_answered_without_spark(
    viewer, alive, spark, items, monkeypatch
):
    def no_spark(sql, *, namespace, policies=()):
        raise AssertionError(f"Spark was asked: {sql}")

    monkeypatch.setattr("refresh.analysis.prepare_query", no_spark)
    client = api_for(viewer)
    job = submitted(client, "SELECT id, price FROM items WHERE price >= 1.0 AND name IS NOT NULL")
    outcome = run_console_job(job["job"]["id"])
    assert outcome == "SUCCEEDED", SparkJob.objects.get(pk=job["job"]["id"]).error
    page = client.get(f"{job['job']['url']}rows").json()
    assert page["columns"] == [
        {"name": "id", "type": "bigint"},
        {"name": "price", "type": "decimal(10,2)"},
    ]
    assert sorted(page["rows"]) == [[4, "1.00"], [5, "1.25"], [6, "1.50"], [7, "1.75"]]
    limited = submitted(client, "SELECT * FROM sales.items LIMIT 3")
    run_console_job(limited["job"]["id"])
    page = client.get(f"{limited['job']['url']}rows").json()
    assert (len(page["rows"]), page["cut"]) == (3, None)


def test_what_the_in_process_reader_cannot_answer_exactly_goes_to_spark(
    viewer, alive, spark, items, settings, monkeypatch
):
    client = api_for(viewer)
    for sql in (
        "SELECT id FROM items ORDER BY id",  # not a plain read
        "SELECT * FROM items WHERE id = '3'",  # text against a number: Spark's cast
        "SELECT * FROM nosuch",  # Spark names what is missing
    ):
        spark.prepared.clear()
        run_console_job(submitted(client, sql)["job"]["id"])
        assert spark.prepared == [(sql, "sales")], sql
    # A filter over more data than one thread should scan: Spark reads it in parallel.
    monkeypatch.setattr("refresh.queries.PLAIN_READ_MAX_BYTES", 100)
    spark.prepared.clear()
    run_console_job(submitted(client, "SELECT * FROM items WHERE id = 1")["job"]["id"])
    assert spark.prepared == [("SELECT * FROM items WHERE id = 1", "sales")]
    # More matching rows than one in-process read gives (without a LIMIT): Spark reads them.
    monkeypatch.setattr("catalog.core.preview.MAX_LIMIT", 5)
    spark.prepared.clear()
    run_console_job(submitted(client, "SELECT * FROM items")["job"]["id"])
    assert spark.prepared == [("SELECT * FROM items", "sales")]
    settings.QUERY_PLAIN_READS = False
    spark.prepared.clear()
    run_console_job(submitted(client, "SELECT * FROM items LIMIT 1")["job"]["id"])
    assert spark.prepared == [("SELECT * FROM items LIMIT 1", "sales")]


def waiting_requests(user) -> int:
    """How many of `user`'s requests are waiting for a job's news (catalog.jobs counts them
    in Redis to bound them)."""
    from django.conf import settings

    return int(broker.redis_client().get(f"{settings.WORKERS_KEY}:waiting:{user.pk}") or 0)


@pytest.mark.django_db(transaction=True)
def test_rows_asked_with_wait_come_as_soon_as_the_worker_stores_them(
    viewer, alive, spark, monkeypatch
):
    client = api_for(viewer)
    job = submitted(client)["job"]
    release = threading.Event()
    fetch = analysis.fetch_query

    def slow_fetch(prepared, *, max_rows):
        assert release.wait(PATIENCE)
        return fetch(prepared, max_rows=max_rows)

    monkeypatch.setattr("refresh.analysis.fetch_query", slow_fetch)
    # A wait long enough that answering at its end cannot pass for answering on the news,
    # and no look without news: only the worker's news wakes the waiter.
    monkeypatch.setattr(job_news, "MAX_WAIT_SECONDS", PATIENCE)
    monkeypatch.setattr(job_news, "LOOK_AGAIN_SECONDS", PATIENCE)
    nothing_yet = client.get(f"{job['url']}rows", {"wait": "0.3"}).json()
    assert (nothing_yet["rows"], nothing_yet["complete"]) == ([], False)

    def work() -> None:
        try:
            run_console_job(job["id"])
        finally:
            connection.close()

    answers: list[tuple[float, dict]] = []

    def wait() -> None:
        try:
            waiter = api_for(viewer)
            started = time.monotonic()
            page = waiter.get(f"{job['url']}rows", {"wait": f"{PATIENCE:g}"}).json()
            answers.append((time.monotonic() - started, page))
        finally:
            connection.close()

    threads = [threading.Thread(target=work), threading.Thread(target=wait)]
    for thread in threads:
        thread.start()
    eventually(lambda: waiting_requests(viewer) == 1, what="the request to wait for news")
    assert answers == []  # waiting: the worker holds the rows back
    release.set()
    for thread in threads:
        thread.join(PATIENCE + 30)
    [(seconds, page)] = answers
    assert page["rows"] == [[0, "row-0"], [1, "row-1"], [2, "row-2"]]
    assert seconds < PATIENCE, "answered at the wait's end, not when the rows came"


@pytest.mark.parametrize("wait", ["-1", "6", "nan", "soon"])
def test_a_wait_out_of_bounds_is_a_400_naming_it(viewer, alive, spark, wait):
    job = submitted(api_for(viewer))["job"]
    response = api_for(viewer).get(f"{job['url']}rows", {"wait": wait})
    assert response.status_code == 400
    assert response.json()["field"] == "wait"


@pytest.mark.django_db(transaction=True)
def test_a_user_waits_in_at_most_queries_per_user_plus_one_requests_the_next_answers_at_once(
    viewer, alive, spark, settings, monkeypatch
):
    settings.QUERIES_PER_USER = 1
    # Without news a waiter waits the whole (long) wait: one that answered early was not
    # made to wait, and the two holding their places answer only on the job's news.
    monkeypatch.setattr(job_news, "MAX_WAIT_SECONDS", PATIENCE)
    monkeypatch.setattr(job_news, "LOOK_AGAIN_SECONDS", PATIENCE)
    job = submitted(api_for(viewer))["job"]  # no worker runs it: it stays QUEUED
    answers: list[dict] = []

    def wait(seconds: str, job: dict = job) -> None:
        try:
            response = api_for(viewer).get(f"{job['url']}rows", {"wait": seconds})
            assert response.status_code == 200, response.content
            answers.append(response.json())
        finally:
            connection.close()

    holding = [threading.Thread(target=wait, args=(f"{PATIENCE:g}",)) for _ in range(2)]
    for thread in holding:
        thread.start()
    eventually(lambda: waiting_requests(viewer) == 2, what="two requests to wait for news")
    wait(f"{PATIENCE:g}")
    assert [page["state"] for page in answers] == ["QUEUED"], "the third answers at once"
    assert all(thread.is_alive() for thread in holding), "while the first two still wait"

    run_console_job(job["id"])  # its rows: news that wakes the two
    for thread in holding:
        thread.join(PATIENCE + 30)
    assert len(answers) == 3 and all(page["rows"] for page in answers[1:]), (
        "the first two waited for the news"
    )
    assert waiting_requests(viewer) == 0, "their places are given back once they answered"
    started = time.monotonic()
    wait("0.5", submitted(api_for(viewer))["job"])
    assert time.monotonic() - started >= 0.5 and answers[-1]["state"] == "QUEUED", (
        "so the next request waits again"
    )
