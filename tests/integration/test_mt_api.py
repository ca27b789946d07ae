"""The materialized-table API: statements through /api/statements/, the structured endpoints,
the Gateway-style refresh endpoint, runs. No Spark and no Celery worker: Spark's analyzer
is a fake that returns a StructType's JSON, and sending runs to a worker is recorded."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest
from django_celery_beat.models import PeriodicTask
from pyspark.sql.types import DoubleType, StringType, StructField, StructType
from rest_framework.test import APIClient

from catalog import services, workers
from catalog.models import CatalogObject, Table
from refresh.models import MaterializedTable, RefreshRun

pytestmark = pytest.mark.django_db

ORDERS_SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "ds", "type": "string", "required": False},
        {"id": 2, "name": "amount", "type": "double", "required": False},
    ],
}
DAILY_SCHEMA = StructType(
    [StructField("ds", StringType(), True), StructField("total", DoubleType(), True)]
).json()
QUERY = "SELECT ds, sum(amount) AS total FROM orders GROUP BY ds"
CREATE_DAILY = (
    "CREATE MATERIALIZED TABLE daily\n"
    "PARTITIONED BY (ds)\n"
    "WITH ('partition.fields.ds.date-formatter' = 'yyyy-MM-dd')\n"
    "FRESHNESS = INTERVAL '1' DAY\n"
    f"AS {QUERY}"
)


@pytest.fixture
def dispatched(monkeypatch) -> list[int]:
    """Runs sent to a worker (none is running), by id."""
    sent: list[int] = []
    monkeypatch.setattr("refresh.runs.dispatch", lambda run, **kw: sent.append(run.pk))
    return sent


@pytest.fixture
def spark(monkeypatch) -> Iterator[list[str]]:
    """Spark's analyzer, faked as a live worker's: every query has the schema of `daily`."""
    asked: list[str] = []

    def query_schema(query: str, *, namespace: str) -> str:
        asked.append(query)
        return DAILY_SCHEMA

    monkeypatch.setattr("refresh.analysis.query_schema", query_schema)
    # The faked Spark stands for a worker: one is alive, so the web side admits the work.
    # It keeps beating as a live worker does, so that a long test (the page fuzz sends
    # hundreds of forms) is not answered "no worker" once WORKER_SILENT_AFTER_SECONDS pass.
    stop = threading.Event()

    def beating() -> None:
        while True:
            workers.beat("fake-spark")
            if stop.wait(1):
                return

    workers.beat("fake-spark")
    thread = threading.Thread(target=beating, name="fake-spark-heartbeat", daemon=True)
    thread.start()
    yield asked
    stop.set()
    thread.join()


@pytest.fixture
def sales(editor, spark, dispatched) -> str:
    services.create_namespace(name="sales", actor=editor)
    services.create_table(namespace="sales", name="orders", schema=ORDERS_SCHEMA, actor=editor)
    return "sales"


@pytest.fixture
def editor_api(editor) -> APIClient:
    client = APIClient()
    client.force_authenticate(editor)
    return client


@pytest.fixture
def viewer_api(viewer) -> APIClient:
    client = APIClient()
    client.force_authenticate(viewer)
    return client


def run_sql(client: APIClient, sql: str, namespace: str | None = "sales"):
    return client.post("/api/statements/", {"sql": sql, "namespace": namespace}, format="json")


def created_daily(client: APIClient) -> dict:
    response = run_sql(client, CREATE_DAILY)
    assert response.status_code == 200, response.content
    return response.json()["results"][0]


def nothing_was_created() -> bool:
    return (
        not Table.objects.filter(name="daily").exists()
        and not MaterializedTable.objects.exists()
        and not PeriodicTask.objects.filter(task="refresh.scheduled_refresh").exists()
    )


# -- statements ---------------------------------------------------------------------------


def test_the_console_creates_shows_describes_suspends_resumes_refreshes_and_drops(
    editor_api, sales, dispatched
):
    created = created_daily(editor_api)
    assert created["ok"] and created["table"] == "sales.daily"
    assert created["run_id"] in dispatched
    mt = MaterializedTable.objects.get()
    assert mt.state == "ACTIVATED" and mt.refresh_mode == "FULL"
    assert mt.periodic_task is not None

    shown = run_sql(editor_api, "SHOW MATERIALIZED TABLES").json()["results"][0]
    assert shown["columns"][0] == "name" and shown["rows"][0][0] == "sales.daily"

    described = run_sql(editor_api, f"DESCRIBE JOB '{created['run_id']}'").json()["results"][0]
    assert ["state", "QUEUED"] in described["rows"]

    script = (
        "ALTER MATERIALIZED TABLE daily SUSPEND;\n"
        "ALTER MATERIALIZED TABLE daily RESUME;\n"
        "ALTER MATERIALIZED TABLE daily REFRESH PARTITION (ds = '2024-01-01')"
    )
    response = run_sql(editor_api, script)
    assert response.status_code == 200, response.content
    suspend, resume, refresh = response.json()["results"]
    assert [r["line"] for r in (suspend, resume, refresh)] == [1, 2, 3]
    run = RefreshRun.objects.get(pk=refresh["run_id"])
    assert run.partition == {"ds": "2024-01-01"} and run.trigger == "MANUAL"

    dropped = run_sql(editor_api, "DROP MATERIALIZED TABLE daily")
    assert dropped.status_code == 200, dropped.content
    assert nothing_was_created()


def test_a_syntax_error_in_the_second_statement_is_a_400_at_its_line_and_column(editor_api, sales):
    created_daily(editor_api)
    script = "ALTER MATERIALIZED TABLE daily SUSPEND;\nALTER MATERIALIZED TABLE daily SUSPND"

    response = run_sql(editor_api, script)

    assert response.status_code == 400
    body = response.json()
    first, second = body["results"]
    assert first["ok"] and not second["ok"]
    assert body["error"]["type"] == "SqlError"
    assert body["error"]["line"] == 2 and body["error"]["column"] > 1
    assert MaterializedTable.objects.get().state == "SUSPENDED", "what ran before it stays done"


def test_an_unknown_source_table_is_a_400_at_its_line_and_column_and_creates_nothing(
    editor_api, sales
):
    script = (
        "CREATE MATERIALIZED TABLE daily\nFRESHNESS = INTERVAL '1' DAY\n"
        "AS SELECT ds FROM\n  missing"
    )

    response = run_sql(editor_api, script)

    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert "missing" in error["message"]
    assert (error["line"], error["column"]) == (4, 3)
    assert nothing_was_created()


def test_an_unknown_option_is_a_400_naming_it_and_creates_nothing(editor_api, sales):
    script = f"CREATE MATERIALIZED TABLE daily WITH ('colour' = 'blue') FRESHNESS = INTERVAL '1' DAY AS {QUERY}"  # noqa: E501

    response = run_sql(editor_api, script)

    assert response.status_code == 400
    assert "colour" in response.json()["error"]["message"]
    assert nothing_was_created()


def test_a_partition_value_its_date_formatter_cannot_read_is_a_400_and_queues_nothing(
    editor_api, sales
):
    created_daily(editor_api)
    before = RefreshRun.objects.count()
    # Spark's escape is a backslash ('' would be two adjacent literals, concatenated).
    script = r"ALTER MATERIALIZED TABLE daily REFRESH PARTITION (ds = 'x\'; DROP TABLE orders; --')"

    response = run_sql(editor_api, script)

    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert (
        "does not match its date-formatter 'yyyy-MM-dd' (for example '2024-01-31')"
        in (error["message"])
    )
    assert RefreshRun.objects.count() == before
    assert Table.objects.filter(name="orders").exists()
    ok = run_sql(editor_api, "ALTER MATERIALIZED TABLE daily REFRESH PARTITION (ds = '2024-01-31')")
    assert ok.status_code == 200, ok.content
    assert RefreshRun.objects.get(pk=ok.json()["results"][0]["run_id"]).partition == {
        "ds": "2024-01-31"
    }


def test_a_statement_that_is_not_a_materialized_table_statement_is_a_400(editor_api, sales):
    response = run_sql(editor_api, "INSERT INTO orders VALUES (1, '2024-01-01')")

    assert response.status_code == 400
    assert response.json()["error"]["type"] == "SqlError"
    assert response.json()["error"]["line"] == 1


def test_a_continuous_aggregation_without_a_primary_key_is_refused_and_creates_nothing(
    editor_api, sales
):
    script = f"CREATE MATERIALIZED TABLE daily FRESHNESS = INTERVAL '10' SECOND AS {QUERY}"

    response = run_sql(editor_api, script)

    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert "continuous materialized table cannot maintain this query" in message
    assert "PRIMARY KEY" in message and "REFRESH_MODE = FULL" in message
    assert nothing_was_created()


def test_a_viewer_cannot_create_but_can_show(viewer_api, sales):
    refused = run_sql(viewer_api, CREATE_DAILY)
    assert refused.status_code == 403
    assert refused.json()["error"]["type"] == "Forbidden"
    assert nothing_was_created()

    shown = run_sql(viewer_api, "SHOW MATERIALIZED TABLES")
    assert shown.status_code == 200
    assert shown.json()["results"][0]["rows"] == []


def test_an_unknown_job_is_a_404(viewer_api, sales):
    response = run_sql(viewer_api, "DESCRIBE JOB '999'")
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "NoSuchJob"


def test_an_empty_script_is_a_400_naming_the_field(editor_api, sales):
    response = run_sql(editor_api, "   ")
    assert response.status_code == 400


def test_a_request_without_credentials_is_refused(sales):
    response = APIClient().post("/api/statements/", {"sql": "SHOW MATERIALIZED TABLES"})
    assert response.status_code in (401, 403)


# -- structured endpoints -----------------------------------------------------------------


def test_an_editor_creates_reads_changes_and_drops_a_materialized_table(editor_api, sales):
    body = {
        "name": "daily",
        "query": QUERY,
        "freshness": {"value": 1, "unit": "DAY"},
        "partitioned_by": ["ds"],
        "options": {"partition.fields.ds.date-formatter": "yyyy-MM-dd"},
        "comment": "Daily totals",
    }
    created = editor_api.post("/api/namespaces/sales/materialized-tables/", body, format="json")
    assert created.status_code == 201, created.content
    detail = created.json()
    assert detail["state"] == "ACTIVATED" and detail["refresh_mode"] == "FULL"
    assert detail["freshness"] == {"value": 1, "unit": "DAY", "text": "INTERVAL '1' DAY"}
    assert detail["schedule"]["schedule"] == "0 0 * * *"
    assert "sales.daily" in detail["schedule"]["periodic_task"]
    assert [c["name"] for c in detail["schema"]] == ["ds", "total"]
    assert detail["sources"] == ["sales.orders"] and detail["comment"] == "Daily totals"
    assert detail["lag_seconds"] is None and detail["next_run"] is not None

    listed = editor_api.get("/api/namespaces/sales/materialized-tables/").json()
    assert listed["count"] == 1 and listed["results"][0]["name"] == "daily"

    changed = editor_api.patch(
        "/api/namespaces/sales/materialized-tables/daily/",
        {"freshness": "INTERVAL '1' HOUR", "options": {"write.format.default": "orc"}},
        format="json",
    )
    assert changed.status_code == 200, changed.content
    assert changed.json()["freshness"]["unit"] == "HOUR"
    assert changed.json()["options"]["write.format.default"] == "orc"

    reset = editor_api.patch(
        "/api/namespaces/sales/materialized-tables/daily/",
        {"reset_options": ["write.format.default"]},
        format="json",
    )
    assert "write.format.default" not in reset.json()["options"]

    suspended = editor_api.post("/api/namespaces/sales/materialized-tables/daily/suspend")
    assert suspended.status_code == 200 and suspended.json()["state"] == "SUSPENDED"
    again = editor_api.post("/api/namespaces/sales/materialized-tables/daily/suspend")
    assert again.status_code == 409 and again.json()["type"] == "InvalidState"
    resumed = editor_api.post(
        "/api/namespaces/sales/materialized-tables/daily/resume",
        {"options": {"spark.sql.shuffle.partitions": "4"}},
        format="json",
    )
    assert resumed.status_code == 200 and resumed.json()["state"] == "ACTIVATED"

    runs = editor_api.get("/api/namespaces/sales/materialized-tables/daily/runs/").json()
    assert runs["count"] == 1 and runs["results"][0]["trigger"] == "CREATE"

    dropped = editor_api.delete("/api/namespaces/sales/materialized-tables/daily/")
    assert dropped.status_code == 204
    assert nothing_was_created()
    assert editor_api.get("/api/namespaces/sales/materialized-tables/daily/").status_code == 404


def test_a_structured_create_with_a_bad_freshness_is_a_400_and_creates_nothing(editor_api, sales):
    for freshness in ({"value": -1, "unit": "DAY"}, {"value": 1, "unit": "WEEK"}, "1 day"):
        response = editor_api.post(
            "/api/namespaces/sales/materialized-tables/",
            {"name": "daily", "query": QUERY, "freshness": freshness},
            format="json",
        )
        assert response.status_code == 400, response.content
        assert response.json()["field"] == "freshness"
    assert nothing_was_created()


def test_a_viewer_reads_materialized_tables_but_may_not_change_them(editor_api, viewer_api, sales):
    created_daily(editor_api)
    url = "/api/namespaces/sales/materialized-tables/daily/"
    assert viewer_api.get(url).status_code == 200
    assert viewer_api.post(f"{url}suspend").status_code == 403
    assert viewer_api.post(f"{url}refresh").status_code == 403
    assert viewer_api.patch(url, {"refresh_mode": "FULL"}, format="json").status_code == 403
    assert viewer_api.delete(url).status_code == 403
    assert MaterializedTable.objects.get().state == "ACTIVATED"


# -- the Gateway refresh endpoint -----------------------------------------------------------


def test_a_periodic_refresh_refreshes_the_partition_its_schedule_time_implies(editor_api, sales):
    created_daily(editor_api)

    response = editor_api.post(
        "/api/namespaces/sales/materialized-tables/daily/refresh",
        {"isPeriodic": True, "scheduleTime": "2024-01-02 00:00:00"},
        format="json",
    )

    assert response.status_code == 202, response.content
    body = response.json()
    run = RefreshRun.objects.get(pk=body["jobId"])
    assert run.partition == {"ds": "2024-01-01"}
    assert run.trigger == "API" and run.requested_by.username == "erin"
    assert body["run"]["partition"] == {"ds": "2024-01-01"}
    assert body["run"]["schedule_time"].startswith("2024-01-02T00:00:00")

    fetched = editor_api.get(f"/api/refresh-runs/{run.pk}/")
    assert fetched.status_code == 200
    assert fetched.json()["state"] == "QUEUED" and fetched.json()["requested_by"] == "erin"
    assert fetched.json()["namespace"] == "sales" and fetched.json()["name"] == "daily"


def test_the_runs_list_writes_each_run_as_the_run_endpoint_does(editor_api, editor, sales):
    created_daily(editor_api)
    url = "/api/namespaces/sales/materialized-tables/daily/refresh"
    editor_api.post(url, {"isPeriodic": True, "scheduleTime": "2024-01-02 00:00:00"}, format="json")
    editor_api.post(url, {"partition": {"ds": "2023-12-31"}, "force": True}, format="json")
    started = RefreshRun.objects.order_by("pk").first()
    RefreshRun.objects.filter(pk=started.pk).update(
        state="RUNNING",
        started_at=started.queued_at,
        heartbeat_at=started.queued_at,
        worker="w:1",
        cancel_requested_at=started.queued_at,
        cancel_requested_by=editor,
        error="a <b>bad</b> day",
        rows_written=3,
        snapshot_id=2**62,
    )

    listed = editor_api.get("/api/namespaces/sales/materialized-tables/daily/runs/").json()

    assert listed["count"] == RefreshRun.objects.count() >= 3
    ids = list(RefreshRun.objects.order_by("-queued_at", "-id").values_list("pk", flat=True))
    assert [run["id"] for run in listed["results"]] == ids
    for run in listed["results"]:
        assert run == editor_api.get(f"/api/refresh-runs/{run['id']}/").json()
    assert listed["results"][-1]["cancel_requested_by"] == "erin"
    paged = editor_api.get(
        "/api/namespaces/sales/materialized-tables/daily/runs/", {"page_size": 1, "page": 2}
    ).json()
    assert [run["id"] for run in paged["results"]] == ids[1:2] and paged["next"]


def test_the_materialized_tables_list_writes_each_table_as_its_serializer_does(editor_api, sales):
    from unittest import mock

    from django.utils import timezone

    from refresh import selectors
    from refresh.api.serializers.tables import MaterializedTableSummarySerializer

    created_daily(editor_api)
    run_sql(editor_api, CREATE_DAILY.replace("daily", "hourly").replace("'1' DAY", "'1' HOUR"))
    for run in RefreshRun.objects.filter(table_name="sales.daily"):
        RefreshRun.objects.filter(pk=run.pk).update(
            state="SUCCEEDED",
            started_at=run.queued_at,
            finished_at=run.queued_at,
            data_timestamp=run.queued_at,
            rows_written=3,
        )
    MaterializedTable.objects.filter(table__name="hourly").update(state="SUSPENDED", comment="<x>")

    now = timezone.now()
    with mock.patch("django.utils.timezone.now", return_value=now):
        listed = editor_api.get("/api/namespaces/sales/materialized-tables/").json()
        tables = selectors.with_last_runs(
            list(selectors.materialized_tables("sales", with_freshness=True))
        )
        expected = json.loads(
            json.dumps(MaterializedTableSummarySerializer(tables, many=True).data)
        )

    assert listed["count"] == 2 and listed["results"] == expected
    assert [t["name"] for t in expected] == ["daily", "hourly"]
    assert expected[0]["last_refresh"]["state"] == "SUCCEEDED"


def test_a_refresh_with_a_schedule_time_in_another_format_and_run_options(editor_api, sales):
    created_daily(editor_api)

    response = editor_api.post(
        "/api/namespaces/sales/materialized-tables/daily/refresh",
        {
            "isPeriodic": True,
            "scheduleTime": "20240305",
            "scheduleTimeFormat": "yyyyMMdd",
            "config": {"spark.sql.shuffle.partitions": 8},
            "force": True,
        },
        format="json",
    )

    assert response.status_code == 202, response.content
    run = RefreshRun.objects.get(pk=response.json()["jobId"])
    assert run.partition == {"ds": "2024-03-04"}
    assert run.options == {"spark.sql.shuffle.partitions": "8"} and run.force


def test_a_refresh_with_unknown_fields_or_a_bad_schedule_time_is_a_400(editor_api, sales):
    created_daily(editor_api)
    url = "/api/namespaces/sales/materialized-tables/daily/refresh"
    before = RefreshRun.objects.count()

    unknown = editor_api.post(url, {"isPeriodc": True, "sheduleTime": "x"}, format="json")
    assert unknown.status_code == 400
    assert "isPeriodc" in unknown.json()["error"] and "sheduleTime" in unknown.json()["error"]

    bad_time = editor_api.post(
        url, {"isPeriodic": True, "scheduleTime": "yesterday"}, format="json"
    )
    assert bad_time.status_code == 400 and bad_time.json()["field"] == "scheduleTime"

    bad_partition = editor_api.post(url, {"partition": {"region": "eu"}}, format="json")
    assert bad_partition.status_code == 400

    bad_option = editor_api.post(url, {"config": {"spark.master": "local"}}, format="json")
    assert bad_option.status_code == 400
    assert RefreshRun.objects.count() == before


def test_a_manual_refresh_of_a_given_partition(editor_api, sales):
    created_daily(editor_api)
    response = editor_api.post(
        "/api/namespaces/sales/materialized-tables/daily/refresh",
        {"partition": {"ds": "2023-12-31"}},
        format="json",
    )
    assert response.status_code == 202
    assert RefreshRun.objects.get(pk=response.json()["jobId"]).partition == {"ds": "2023-12-31"}


def test_a_missing_run_or_table_is_a_404(viewer_api, sales):
    assert viewer_api.get("/api/refresh-runs/12345/").status_code == 404
    assert viewer_api.get("/api/namespaces/sales/materialized-tables/nope/").status_code == 404
    assert viewer_api.get("/api/namespaces/nope/materialized-tables/").status_code == 404


def test_the_openapi_schema_documents_the_materialized_table_endpoints(viewer_api):
    response = viewer_api.get("/api/schema/", {"format": "json"})

    paths = json.loads(response.content)["paths"]
    mt = "/api/namespaces/{namespace}/materialized-tables/{name}"
    assert "/api/statements/" in paths
    assert "requestBody" in paths["/api/namespaces/{namespace}/materialized-tables/"]["post"]
    assert {"get", "patch", "delete"} <= set(paths[f"{mt}/"])
    assert "requestBody" in paths[f"{mt}/refresh"]["post"]
    assert "/api/refresh-runs/{run_id}/" in paths


def test_the_table_behind_a_materialized_table_is_one_catalog_object(editor_api, sales):
    created_daily(editor_api)
    assert CatalogObject.objects.filter(namespace__name="sales", name="daily").count() == 1
