"""Hostile input to the materialized-table endpoints: wrong JSON types, NUL characters,
encoded path tricks, deep bodies. Every answer is a 4xx in JSON and nothing is created."""

from __future__ import annotations

import json

import pytest
from django_celery_beat.models import PeriodicTask
from rest_framework.test import APIClient

from catalog.models import CatalogObject
from refresh import runs
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


# -- today's surfaces: cancelling a run, the time-limit option, run settings ----------------

ACTIVE_STATES = ("QUEUED", "RUNNING")


@pytest.fixture
def daily(api) -> MaterializedTable:
    assert run_sql(api, CREATE_DAILY).status_code == 200
    return MaterializedTable.objects.get()


@pytest.mark.parametrize(
    "path",
    [
        "/api/refresh-runs/99999999999999999999999/cancel",
        "/api/refresh-runs/9223372036854775808/cancel",
        "/api/refresh-runs/0/cancel",
        "/api/refresh-runs/-1/cancel",
        "/api/refresh-runs/1%00/cancel",
        "/api/refresh-runs/%EF%BC%91/cancel",  # a fullwidth digit one
        "/api/refresh-runs/1/cancel/",
        "/api/refresh-runs/x/cancel",
    ],
)
def test_cancelling_a_run_that_cannot_exist_is_a_json_404_and_changes_nothing(api, daily, path):
    before = list(RefreshRun.objects.values_list("pk", "state", "cancel_requested_at"))
    refused(api.post(path), 400, 404)
    assert list(RefreshRun.objects.values_list("pk", "state", "cancel_requested_at")) == before


def page_cancel(namespace: str, name: str, run_id: int | str) -> str:
    return f"/namespaces/{namespace}/materialized-tables/{name}/runs/{run_id}/cancel"


@pytest.mark.parametrize(
    "run_id", ["99999999999999999999999", "9223372036854775808", "0", "123456789"]
)
def test_the_pages_cancel_of_a_run_that_cannot_exist_is_a_404_not_a_500(
    client, editor, daily, run_id
):
    client.force_login(editor)
    response = client.post(page_cancel("sales", "daily", run_id))
    assert response.status_code == 404, response.content[:300]


def queued_run(mt: MaterializedTable) -> RefreshRun:
    return runs.enqueue(mt, trigger="MANUAL")


def test_a_cancel_without_the_csrf_token_is_refused_on_the_page_and_in_the_api(editor, daily):
    from django.test import Client

    run = queued_run(daily)
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(editor)
    assert browser.post(page_cancel("sales", "daily", run.pk)).status_code == 403
    answer = browser.post(f"/api/refresh-runs/{run.pk}/cancel")
    refused(answer, 403)
    run.refresh_from_db()
    assert run.state == "QUEUED" and run.cancel_requested_at is None


@pytest.mark.parametrize("who", ["anonymous", "viewer"])
def test_no_one_but_an_editor_can_cancel_a_run(client, viewer, daily, who):
    run = queued_run(daily)
    api = APIClient()
    if who == "viewer":
        api.force_authenticate(viewer)
        client.force_login(viewer)
    refused(api.post(f"/api/refresh-runs/{run.pk}/cancel"), 401, 403)
    assert client.post(page_cancel("sales", "daily", run.pk)).status_code in (302, 403)
    run.refresh_from_db()
    assert run.state == "QUEUED" and run.cancel_requested_at is None


@pytest.mark.parametrize("method", ["get", "put", "patch", "delete"])
def test_a_cancel_by_any_method_but_post_is_a_json_405(api, daily, method):
    run = queued_run(daily)
    refused(getattr(api, method)(f"/api/refresh-runs/{run.pk}/cancel"), 405)
    run.refresh_from_db()
    assert run.state == "QUEUED"


def test_a_get_of_the_pages_cancel_is_a_405_and_cancels_nothing(client, editor, daily):
    run = queued_run(daily)
    client.force_login(editor)
    assert client.get(page_cancel("sales", "daily", run.pk)).status_code == 405
    run.refresh_from_db()
    assert run.state == "QUEUED"


def test_a_cancel_body_is_ignored_and_cannot_choose_who_cancelled(api, editor, daily):
    run = queued_run(daily)
    body = {"state": "SUCCEEDED", "cancel_requested_by": "mallory", "error": "x\x00"}
    answer = api.post(f"/api/refresh-runs/{run.pk}/cancel", body, format="json")
    assert answer.status_code == 200, answer.content[:300]
    run.refresh_from_db()
    assert (
        run.state == "CANCELLED"
        and run.error == f"Cancelled by {editor.username} before it started"
    )


def options_of(mt: MaterializedTable) -> dict:
    mt.refresh_from_db()
    return dict(mt.options)


@pytest.mark.parametrize(
    "value",
    [
        "'0'",
        "'-5'",
        "'1e3'",
        "'1.5'",
        "'²'",
        "'\uff11\uff10'",  # fullwidth 10
        f"'{HUGE}'",
        "'1000000000'",  # ten digits: past the option's 999,999,999
        "''",
        "'10\x00'",
        "'10\u202e'",
        "10",
        "NULL",
        "TRUE",
    ],
)
@pytest.mark.parametrize("dry_run", [True, False])
def test_a_time_limit_no_one_can_use_is_refused_naming_the_option_and_not_stored(
    api, daily, value, dry_run
):
    before = options_of(daily)
    sql = f"ALTER MATERIALIZED TABLE daily SET ('refresh.timeout-seconds' = {value})"
    response = api.post(
        "/api/statements/", {"sql": sql, "namespace": "sales", "dry_run": dry_run}, format="json"
    )
    assert response.status_code < 500, response.content[:500]
    assert response["Content-Type"].startswith("application/json")
    if not dry_run:
        body = refused(response)
        named = ("timeout-seconds", "quoted value", "NUL character")
        assert any(word in json.dumps(body) for word in named), body
    assert options_of(daily) == before


def suspended(api, mt: MaterializedTable) -> MaterializedTable:
    assert run_sql(api, "ALTER MATERIALIZED TABLE daily SUSPEND").status_code == 200
    mt.refresh_from_db()
    assert mt.state == "SUSPENDED"
    return mt


HOSTILE_RUN_SETTINGS = [
    ("'spark.sql.shuffle.partitions' = '2000000000'", "spark.sql.shuffle.partitions"),
    ("'spark.sql.shuffle.partitions' = '0'", "spark.sql.shuffle.partitions"),
    ("'spark.sql.shuffle.partitions' = '-1'", "spark.sql.shuffle.partitions"),
    ("'spark.sql.shuffle.partitions' = '1e5'", "spark.sql.shuffle.partitions"),
    ("'spark.sql.shuffle.partitions' = '\uff15'", "spark.sql.shuffle.partitions"),
    (f"'spark.sql.shuffle.partitions' = '{HUGE}'", "spark.sql.shuffle.partitions"),
    ("'spark.sql.shuffle.partitions' = 10", "quoted value"),
    ("'spark.sql.shuffle.partitions' = NULL", "quoted value"),
    ("'spark.sql.files.maxPartitionBytes' = '1'", "spark.sql.files.maxPartitionBytes"),
    ("'spark.sql.files.maxPartitionBytes' = '2t'", "spark.sql.files.maxPartitionBytes"),
    ("'spark.sql.files.maxPartitionBytes' = '1p'", "spark.sql.files.maxPartitionBytes"),
    ("'spark.sql.files.maxPartitionBytes' = '64 m'", "spark.sql.files.maxPartitionBytes"),
    ("'spark.sql.files.maxPartitionBytes' = '0x10m'", "spark.sql.files.maxPartitionBytes"),
    ("'spark.sql.adaptive.enabled' = 'yes'", "spark.sql.adaptive.enabled"),
    ("'spark.sql.adaptive.enabled' = 'TRUE; x'", "spark.sql.adaptive.enabled"),
    (
        "'spark.sql.adaptive.rebalancePartitionsSmallPartitionFactor' = '1'",
        "rebalancePartitionsSmallPartitionFactor",
    ),
    (
        "'spark.sql.adaptive.rebalancePartitionsSmallPartitionFactor' = 'NaN'",
        "rebalancePartitionsSmallPartitionFactor",
    ),
    (
        "'spark.sql.adaptive.skewJoin.skewedPartitionFactor' = 'Infinity'",
        "skewedPartitionFactor",
    ),
    ("'spark.sql.adaptive.customCostEvaluatorClass' = 'x.Y'", "Unknown run option"),
    ("'spark.sql.warehouse.dir' = '/etc'", "Unknown run option"),
    ("'spark.sql.catalog.evil' = 'x.Y'", "Unknown run option"),
    ("'spark.sql.shuffle.partitions\u200b' = '10'", "Unknown run option"),
    ("'SPARK.SQL.SHUFFLE.PARTITIONS' = '10'", "Unknown run option"),
    ("'' = '10'", "Unknown run option"),
    (
        "'spark.sql.shuffle.partitions' = '10', 'spark.sql.shuffle.partitions' = '20'",
        "Duplicate option",
    ),
    (
        "'spark.sql.shuffle.partitions' = '10', 'spark.sql.files.maxPartitionBytes' = '1'",
        "spark.sql.files.maxPartitionBytes",
    ),
]


@pytest.mark.parametrize(("options", "named"), HOSTILE_RUN_SETTINGS)
def test_resume_with_a_setting_no_run_may_use_is_a_400_naming_it_and_leaves_the_table_suspended(
    api, daily, options, named
):
    from refresh import schedules

    mt = suspended(api, daily)
    before = schedules.run_options(mt)
    response = run_sql(api, f"ALTER MATERIALIZED TABLE daily RESUME WITH ({options})")
    body = refused(response)
    assert named in json.dumps(body), body
    mt.refresh_from_db()
    assert mt.state == "SUSPENDED" and mt.stream_options == {}
    assert schedules.run_options(mt) == before


@pytest.mark.parametrize(
    "config",
    [
        {"spark.sql.shuffle.partitions": True},
        {"spark.sql.shuffle.partitions": 1.5},
        {"spark.sql.shuffle.partitions": 5.0},
        {"spark.sql.shuffle.partitions": -3},
        {"spark.sql.shuffle.partitions": 10**30},
        {"spark.sql.shuffle.partitions": None},
        {"spark.sql.shuffle.partitions": ""},
        {"spark.sql.shuffle.partitions": " "},
        {"spark.sql.shuffle.partitions": "1\x00"},
        {"spark.sql.shuffle.partitions": "10" * 100_000},
        {"spark.sql.adaptive.enabled": 1},
        {"spark.sql.adaptive.enabled": "\u0130"},  # 'İ'.lower() is two characters
        {"spark.sql.files.maxPartitionBytes": "\u212a"},  # Kelvin sign: lower() is 'k'
        {"spark.sql.files.maxPartitionBytes": "64\u212a"},
        {"spark.sql.adaptive.skewJoin.skewedPartitionFactor": "1e400"},
        {"spark.sql.adaptive.skewJoin.skewedPartitionFactor": 1e-5},
        {"x" * 100_000: "1"},
        {"\x00": "1"},
    ],
)
def test_a_refresh_config_value_of_any_json_type_spark_cannot_take_is_a_400_queueing_nothing(
    api, daily, config
):
    before = RefreshRun.objects.count()
    response = api.post(
        "/api/namespaces/sales/materialized-tables/daily/refresh",
        json.dumps({"config": config}),
        content_type="application/json",
    )
    body = refused(response)
    assert body.get("field") == "config" or "NUL" in json.dumps(body), json.dumps(body)[:300]
    assert RefreshRun.objects.count() == before


@pytest.mark.parametrize(
    "body",
    [
        '{"config": {"spark.sql.shuffle.partitions": NaN}}',
        '{"config": {"spark.sql.shuffle.partitions": Infinity}}',
        '{"config": {"spark.sql.shuffle.partitions": 1e999}}',
        '{"config": {"spark.sql.shuffle.partitions": ' + "9" * 5000 + "}}",
        '{"config": {"spark.sql.shuffle.partitions": "1", "spark.sql.shuffle.partitions": "0"}}',
    ],
)
def test_a_refresh_config_in_json_python_reads_loosely_is_a_400_queueing_nothing(api, daily, body):
    before = RefreshRun.objects.count()
    response = api.post(
        "/api/namespaces/sales/materialized-tables/daily/refresh",
        body,
        content_type="application/json",
    )
    refused(response)
    assert RefreshRun.objects.count() == before


@pytest.mark.parametrize(
    "value",
    [0, -1, 1.5, True, None, [], {}, "", "0", "1e3", "²", 10**10, "10\x00"]
    + [pytest.param(HUGE, id="huge")],
)
def test_a_time_limit_of_any_json_type_in_an_update_is_a_400_and_sets_nothing(api, daily, value):
    before = options_of(daily)
    response = api.patch(
        "/api/namespaces/sales/materialized-tables/daily/",
        {"options": {"refresh.timeout-seconds": value, "write.format.default": "orc"}},
        format="json",
    )
    refused(response)
    assert options_of(daily) == before


@pytest.mark.parametrize(
    "options",
    [
        {"spark.sql.shuffle.partitions": 2_000_000_000},
        {"spark.sql.shuffle.partitions": True},
        {"spark.sql.shuffle.partitions": None},
        {"spark.sql.shuffle.partitions": ["1"]},
        {"spark.sql.shuffle.partitions": "1\x00"},
        {"spark.sql.files.maxPartitionBytes": "1"},
        {"spark.sql.adaptive.customCostEvaluatorClass": "x.Y"},
        {"spark.executor.memory": "64g"},
        {"refresh.timeout-seconds": "10"},  # a table's option, not a run's
    ],
)
def test_the_resume_endpoint_refuses_settings_no_run_may_use_and_leaves_the_table_suspended(
    api, daily, options
):
    from refresh import schedules

    mt = suspended(api, daily)
    before = schedules.run_options(mt)
    response = api.post(
        "/api/namespaces/sales/materialized-tables/daily/resume",
        {"options": options},
        format="json",
    )
    refused(response)
    mt.refresh_from_db()
    assert mt.state == "SUSPENDED" and schedules.run_options(mt) == before


def test_resume_with_settings_in_spark_units_keeps_them_in_bytes_as_spark_is_to_read_them(
    api, daily
):
    from refresh import schedules

    mt = suspended(api, daily)
    sql = (
        "ALTER MATERIALIZED TABLE daily RESUME WITH ("
        "'spark.sql.files.maxPartitionBytes' = ' 64M ', 'spark.sql.adaptive.enabled' = 'TRUE')"
    )
    assert run_sql(api, sql).status_code == 200
    mt.refresh_from_db()
    assert mt.state == "ACTIVATED"
    assert schedules.run_options(mt) == {
        "spark.sql.files.maxPartitionBytes": str(64 << 20),
        "spark.sql.adaptive.enabled": "true",
    }


# -- generated: any JSON as a run's settings or the time limit ------------------------------

import os  # noqa: E402

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from refresh.core.options import RUN_SETTINGS, TIMEOUT_OPTION  # noqa: E402

EXAMPLES = int(os.environ.get("HOSTILE_EXAMPLES", "40"))
json_value = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**20), max_value=10**20),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=12),
        st.sampled_from(["64m", " 1G ", "0", "100000", "100001", "true", "FALSE", "0.5", "1t"]),
    ),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=4,
)
setting_name = st.one_of(st.sampled_from(sorted(RUN_SETTINGS)), st.text(max_size=40))
generated = settings(
    max_examples=EXAMPLES,
    derandomize=True,  # the same draws every run: CI fails on a bug, not on a draw
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def _spark_reads_what_was_checked(options: dict) -> None:
    """Stored run settings are ones RUN_SETTINGS knows, each already as its check writes it
    (so the worker's second check, jobs.run_session, passes them unchanged)."""
    for key, text in options.items():
        assert key in RUN_SETTINGS and isinstance(text, str)
        assert RUN_SETTINGS[key][1](text) == text, (key, text)


@generated
@given(config=st.one_of(json_value, st.dictionaries(setting_name, json_value, max_size=3)))
def test_any_json_as_a_refresh_config_is_queued_as_spark_reads_it_or_a_400_queueing_nothing(
    api, daily, config
):
    before = RefreshRun.objects.count()
    response = api.post(
        "/api/namespaces/sales/materialized-tables/daily/refresh",
        {"config": config},
        format="json",
    )
    assert response.status_code in (202, 400), response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    if response.status_code == 400:
        assert RefreshRun.objects.count() == before
    else:
        run = RefreshRun.objects.get(pk=response.json()["jobId"])
        _spark_reads_what_was_checked(run.options)
        run.delete()


@generated
@given(options=st.one_of(json_value, st.dictionaries(setting_name, json_value, max_size=3)))
def test_any_json_as_resume_options_resumes_with_settings_spark_reads_or_is_a_400(
    api, daily, options
):
    from refresh import schedules

    if daily.state != "SUSPENDED":
        daily = suspended(api, daily)
    response = api.post(
        "/api/namespaces/sales/materialized-tables/daily/resume",
        {"options": options},
        format="json",
    )
    assert response.status_code in (200, 400), response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    daily.refresh_from_db()
    if response.status_code == 400:
        assert daily.state == "SUSPENDED"
    else:
        assert daily.state == "ACTIVATED"
        _spark_reads_what_was_checked(schedules.run_options(daily))


@generated
@given(value=st.one_of(json_value, st.text(max_size=30)))
def test_any_json_as_the_time_limit_is_stored_only_as_a_whole_number_of_seconds(api, daily, value):
    from refresh.core.options import run_time_limit

    before = options_of(daily)
    response = api.patch(
        "/api/namespaces/sales/materialized-tables/daily/",
        {"options": {TIMEOUT_OPTION: value}},
        format="json",
    )
    assert response.status_code in (200, 400), response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    after = options_of(daily)
    if response.status_code == 400:
        assert after == before
    else:
        limit = run_time_limit(after, cap=10**9)
        assert limit is not None and 1 <= limit <= 999_999_999


@generated
@given(text=st.text(max_size=30))
def test_any_text_as_the_time_limit_in_a_set_statement_is_stored_only_if_it_is_seconds(
    api, daily, text
):
    from refresh.core.options import run_time_limit

    before = options_of(daily)
    quoted = "'" + text.replace("'", "''") + "'"
    sql = f"ALTER MATERIALIZED TABLE daily SET ('{TIMEOUT_OPTION}' = {quoted})"
    response = api.post("/api/statements/", {"sql": sql, "namespace": "sales"}, format="json")
    assert response.status_code in (200, 400), response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    after = options_of(daily)
    if response.status_code == 400:
        assert after == before
    else:
        assert run_time_limit(after, cap=10**9) is not None


@generated
@given(
    # Digits name a run (that is a cancel); a line feed is the case below.
    run_id=st.text(min_size=1, max_size=30).filter(
        lambda t: not (t.isascii() and t.isdigit()) and "\n" not in t
    )
)
def test_any_text_but_digits_as_the_run_id_of_a_cancel_is_a_json_4xx_and_cancels_nothing(
    api, daily, run_id
):
    from urllib.parse import quote

    before = list(RefreshRun.objects.values_list("pk", "state", "cancel_requested_at"))
    response = api.post(f"/api/refresh-runs/{quote(run_id, safe='')}/cancel")
    assert 400 <= response.status_code < 500, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    assert list(RefreshRun.objects.values_list("pk", "state", "cancel_requested_at")) == before


@pytest.mark.parametrize(
    "path", ["/api/refresh-runs/1%0A/cancel", "/api/x%0Ay", "/iceberg/v1/x%0A/y"]
)
def test_a_line_feed_in_an_unknown_machine_path_is_still_a_json_404(api, path):
    refused(api.post(path), 404)


def _events() -> int:
    from catalog.models import CatalogEvent

    return CatalogEvent.objects.count()


@pytest.mark.parametrize("how", ["finished", "continuous", "another table's"])
def test_a_run_that_is_not_the_pages_to_cancel_is_refused_and_nothing_is_recorded(
    api, client, editor, daily, how
):
    run = queued_run(daily)
    if how == "finished":
        runs.finish(run, state="SUCCEEDED")
    elif how == "continuous":
        MaterializedTable.objects.filter(pk=daily.pk).update(refresh_mode="CONTINUOUS")
    before = (_events(), list(RefreshRun.objects.values_list("state", "cancel_requested_at")))
    client.force_login(editor)
    name = "orders" if how == "another table's" else "daily"
    page = client.post(page_cancel("sales", name, run.pk), follow=True)
    if how == "another table's":
        assert page.status_code == 404
    else:
        assert page.status_code == 200
        shown = page.content.decode()
        assert "already ended" in shown or "SUSPEND stops it" in shown
        refused(api.post(f"/api/refresh-runs/{run.pk}/cancel"), 409)
    assert (_events(), list(RefreshRun.objects.values_list("state", "cancel_requested_at"))) == (
        before
    )


@pytest.mark.parametrize("state", ["QUEUED", "RUNNING"])
def test_cancelling_a_run_of_a_dropped_table_is_an_answer_not_a_500(api, daily, state):
    run = queued_run(daily)
    if state == "RUNNING":
        assert runs.claim(run.pk, worker="w:1") is not None
    assert run_sql(api, "DROP MATERIALIZED TABLE daily").status_code == 200
    response = api.post(f"/api/refresh-runs/{run.pk}/cancel")
    assert response["Content-Type"].startswith("application/json")
    run.refresh_from_db()
    if state == "QUEUED":  # the drop cancelled it
        assert response.status_code == 409 and run.state == "CANCELLED", response.content[:300]
    else:  # its worker is still writing: it is asked to stop
        assert response.status_code == 200 and run.cancel_requested_at is not None
