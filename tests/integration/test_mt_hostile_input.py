"""Hostile input to the materialized-table endpoints: wrong JSON types, NUL characters,
encoded path tricks, deep bodies. Every answer is a 4xx in JSON and nothing is created."""

from __future__ import annotations

import json

import pytest
from django_celery_beat.models import PeriodicTask
from rest_framework.test import APIClient

from catalog.models import CatalogObject
from refresh.models import MaterializedTable, RefreshRun
from tests.integration.test_mt_api import (  # noqa: F401 - fixtures
    CREATE_DAILY,
    dispatched,
    run_sql,
    sales,
    spark,
)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("sales")]


@pytest.fixture
def api(editor) -> APIClient:
    client = APIClient()
    client.force_authenticate(editor)
    return client


def refused(response, *statuses: int) -> dict:
    assert response.status_code in (statuses or (400,)), response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    return response.json()


@pytest.mark.parametrize(
    "body",
    [
        {"sql": 5},
        {"sql": ["SHOW MATERIALIZED TABLES"]},
        {"sql": None},
        {"sql": "SHOW MATERIALIZED TABLES\x00"},
        {"sql": "SHOW MATERIALIZED TABLES", "namespace": {"a": 1}},
        {},
    ],
)
def test_a_statements_body_of_the_wrong_shape_is_a_400(api, body):
    refused(api.post("/api/statements/", body, format="json"))
    assert not MaterializedTable.objects.exists()


def test_a_deeply_nested_statements_body_is_refused(api):
    nested: dict = {}
    for _ in range(200):
        nested = {"a": nested}
    response = api.post(
        "/api/statements/", json.dumps({"sql": "x", "n": nested}), content_type="application/json"
    )
    refused(response, 400, 413)


@pytest.mark.parametrize(
    "body",
    [
        {"partition": {"ds": {"a": 1}}},
        {"partition": ["ds"]},
        {"config": ["spark.sql.shuffle.partitions"]},
        {"config": {"spark.sql.shuffle.partitions": {"x": 1}}},
        {"config": {"spark.driver.extraJavaOptions": "-Dx=1"}},
        # Settings that would take the worker's Spark down, for every table.
        {"config": {"spark.sql.shuffle.partitions": 2000000000}},
        {"config": {"spark.sql.files.maxPartitionBytes": "1"}},
        {"config": {"spark.sql.adaptive.customCostEvaluatorClass": "x.Y"}},
        {"scheduleTime": 5},
        {"isPeriodic": "yes please"},
        {"force": []},
        {"full": "maybe"},
        {"full": {"a": 1}},
        {"partition": {"ds\x00": "a"}},
    ],
)
def test_a_refresh_body_of_the_wrong_shape_is_a_400_and_queues_nothing(api, body):
    assert run_sql(api, CREATE_DAILY).status_code == 200
    before = RefreshRun.objects.count()
    response = api.post(
        "/api/namespaces/sales/materialized-tables/daily/refresh", body, format="json"
    )
    refused(response)
    assert RefreshRun.objects.count() == before


@pytest.mark.parametrize(
    "path",
    [
        "/api/namespaces/%2e%2e/materialized-tables/",
        "/api/namespaces/sales/materialized-tables/%2e%2e%2fdaily/",
        "/api/namespaces/sales/materialized-tables/..%2f..%2fetc/refresh",
        "/api/refresh-runs/99999999999999999999999/",
        "/api/refresh-runs/99999999999999999999999/cancel",
        "/api/refresh-runs/-1/cancel",
        "/api/lineage/?namespace=%2e%2e&name=x",
    ],
)
def test_encoded_paths_are_json_4xx(api, path):
    refused(api.get(path), 400, 404, 405)


def test_nul_in_a_path_or_parameter_is_refused(api):
    refused(api.get("/api/lineage/?namespace=sales&name=a%00b"), 400, 404)
    refused(api.get("/api/namespaces/sales/materialized-tables/a%00b/"), 400, 404)


def test_a_create_with_a_hostile_name_or_location_creates_nothing(api):
    for name in ("`x`.`..`", "a/b", "..", "a\u0000b"):
        response = run_sql(
            api,
            f"CREATE MATERIALIZED TABLE {name} FRESHNESS = INTERVAL '1' DAY AS "
            "SELECT ds, sum(amount) AS total FROM orders GROUP BY ds",
        )
        refused(response)
    assert not MaterializedTable.objects.exists()
    assert CatalogObject.objects.count() == 1  # the orders table only
    assert not PeriodicTask.objects.filter(task="refresh.scheduled_refresh").exists()


HUGE = "9" * 5000  # past Python's 4,300-digit limit for int(text)


@pytest.mark.parametrize(
    ("clause", "named"),
    [
        ("DISTRIBUTED BY (id) INTO ² BUCKETS", "number of buckets"),
        pytest.param(
            f"DISTRIBUTED BY (id) INTO {HUGE} BUCKETS", "number of buckets", id="huge buckets"
        ),
        ("(id DECIMAL(a, b)) ", "DECIMAL(a, b)"),
        ("(id DECIMAL(1.5, 2)) ", "DECIMAL(1.5, 2)"),
        pytest.param(f"(id DECIMAL({HUGE}, 2)) ", "precision", id="huge precision"),
        ("(id DECIMAL(39, 2)) ", "precision"),
        ("(id DECIMAL(10, 20)) ", "scale"),
        pytest.param(f"FRESHNESS = INTERVAL '{HUGE}' MINUTE", "freshness", id="huge freshness"),
    ],
)
@pytest.mark.parametrize("dry_run", [True, False])
def test_a_statement_with_a_number_no_one_can_use_is_refused_naming_it_not_a_500(
    api, clause, named, dry_run
):
    """Bucket counts, decimal precisions and intervals are read as numbers before anything
    is planned: one that is not a plain ASCII number in range is refused where it is."""
    sql = f"CREATE MATERIALIZED TABLE sales.x {clause} AS SELECT id FROM sales.orders"
    response = api.post("/api/statements/", {"sql": sql, "dry_run": dry_run}, format="json")
    assert response.status_code < 500, response.content[:500]
    assert response["Content-Type"].startswith("application/json")
    text = json.dumps(response.json())
    assert named.lower() in text.lower(), text[:500]
    if not dry_run:
        assert response.status_code == 400, response.content[:500]
    assert not MaterializedTable.objects.exists()
    assert not CatalogObject.objects.filter(name="x").exists()
