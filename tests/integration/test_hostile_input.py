"""What an outside fuzzing run sent, and what it must get: a clear 4xx in JSON (Iceberg's
error shape on /iceberg, ours on /api), never a 500 or an HTML page, and nothing written.
Runs on SQLite and on PostgreSQL (which refuses NUL characters and enforces column sizes)."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from catalog import services
from catalog.models import CatalogObject, Namespace, TableMetricsReport
from tests.integration.test_iceberg_rest import (
    BASE,
    SCHEMA,
    assert_error,
    metadata_files,
)

pytestmark = pytest.mark.django_db


def test_an_unknown_iceberg_path_is_a_json_404(api):
    assert_error(api.get("/no/such/thing"), 404, "NotFoundException")


def test_an_unknown_api_path_is_a_json_404(client, editor):
    client.force_login(editor)
    response = client.get("/api/no/such/thing")
    assert response.status_code == 404
    assert "No such endpoint" in response.json()["error"]


METHODS = ["get", "post", "put", "patch", "delete"]


@pytest.mark.parametrize("method", METHODS)
def test_an_unknown_api_path_is_a_json_404_for_every_method_with_a_session_and_no_csrf_token(
    editor, method
):
    """A browser session (its cookie sent, no CSRF token) used to get the CSRF check's HTML
    403 page for a write to a path that does not exist."""
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(editor)

    body = {} if method == "get" else {"data": "{}", "content_type": "application/json"}
    response = getattr(browser, method)("/api/no/such/thing", **body)

    assert response.status_code == 404, response.content[:300]
    assert response["Content-Type"] == "application/json"
    assert "No such endpoint" in response.json()["error"]


@pytest.mark.parametrize("method", METHODS)
def test_an_unknown_api_path_is_a_json_404_for_every_method_with_a_token(editor, method):
    from rest_framework.authtoken.models import Token

    key = Token.objects.create(user=editor).key
    headers = {"Authorization": f"Token {key}"}
    caller = Client(enforce_csrf_checks=True)

    response = getattr(caller, method)("/api/no/such/thing", headers=headers)

    assert response.status_code == 404, response.content[:300]
    assert "No such endpoint" in response.json()["error"]


def test_a_real_api_endpoint_still_refuses_a_session_write_without_the_csrf_token(editor):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(editor)

    response = browser.post(
        "/api/namespaces/", data={"name": "sneaky"}, content_type="application/json"
    )

    assert response.status_code == 403, response.content[:300]
    assert "CSRF" in response.json()["detail"]
    assert not Namespace.objects.filter(name="sneaky").exists()


@pytest.mark.parametrize("method", METHODS)
def test_an_unknown_iceberg_path_is_a_json_404_for_every_method(api, method):
    caller = Client(enforce_csrf_checks=True)

    response = getattr(caller, method)(f"{BASE}/no/such/thing", headers=api.headers)

    assert_error(response, 404, "NotFoundException")


@pytest.mark.parametrize("method", ["post", "delete", "put"])
def test_config_answers_a_wrong_method_with_a_json_405(api, method):
    response = getattr(api.client, method)(f"{BASE}/config", headers=api.headers)
    assert_error(response, 405, "BadRequestException")
    assert response["Allow"] == "GET"


def test_a_nul_in_a_path_is_refused(api, ns):
    assert_error(api.get("/namespaces/a%00b"), 400, "BadRequestException")
    assert_error(api.get("/namespaces/ns/tables/a%00b"), 400, "BadRequestException")


def test_a_nul_in_a_query_parameter_is_refused(api, ns):
    assert_error(api.get("/namespaces", parent="ns\x00"), 400, "BadRequestException")
    assert_error(api.get("/namespaces", pageToken="\x00"), 400, "BadRequestException")
    assert_error(api.get("/namespaces", **{"page\x00Token": "x"}), 400, "BadRequestException")
    assert_error(api.get("/namespaces/ns/tables/t", snapshots="\x00"), 400, "BadRequestException")


@pytest.mark.parametrize(
    "body",
    [
        {"namespace": ["a\x00b"]},
        {"namespace": ["ok"], "properties": {"k\x00": "v"}},
        {"namespace": ["ok"], "properties": {"k": "v\x00"}},
    ],
)
def test_a_nul_in_a_body_is_refused_and_nothing_is_created(api, body):
    assert_error(api.post("/namespaces", body), 400, "BadRequestException")
    assert not Namespace.objects.exists()


def test_a_metrics_report_with_a_nul_is_refused(api, ns):
    services.create_table(namespace="ns", name="t", schema=SCHEMA)
    response = api.post("/namespaces/ns/tables/t/metrics", {"report-type": "scan\x00"})
    assert_error(response, 400, "BadRequestException")
    assert not TableMetricsReport.objects.exists()


def test_a_deeply_nested_body_is_refused_before_it_is_parsed_further(api, ns):
    response = api.post("/namespaces/ns/tables", raw="[" * 1_000_000)
    assert_error(response, 400, "BadRequestException")
    nested: dict = {"name": "t", "schema": SCHEMA}
    for _ in range(200):
        nested = {"x": nested}
    response = api.post("/namespaces/ns/tables", {"name": "t", "schema": SCHEMA, "x": nested})
    assert_error(response, 400, "BadRequestException")


def test_a_body_over_the_size_limit_is_a_json_413(api, ns, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    response = api.post("/namespaces", {"namespace": ["big"], "properties": {"k": "v" * 5000}})
    assert response.status_code in (400, 413)
    assert "too large" in json.dumps(response.json())
    assert not Namespace.objects.filter(name="big").exists()


def test_a_nul_in_an_api_body_is_a_json_400(client, editor):
    client.force_login(editor)
    response = client.post(
        "/api/namespaces/",
        {"name": "ok", "properties": {"k": "v\x00"}},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert not Namespace.objects.exists()


@pytest.mark.parametrize(
    ("namespace", "name"),
    [("日本", "Straße"), ("sales", "vue_été"), ("sales", "2024_sales"), ("sales", "my table")],
)
def test_names_iceberg_accepts_are_accepted_and_kept_safe_as_folders(
    api, warehouse, namespace, name
):
    assert api.post("/namespaces", {"namespace": [namespace]}).status_code == 200
    created = api.post(f"/namespaces/{namespace}/tables", {"name": name, "schema": SCHEMA})
    assert created.status_code == 200, created.content
    listed = api.get(f"/namespaces/{namespace}/tables").json()["identifiers"]
    assert listed == [{"namespace": [namespace], "name": name}]
    location = created.json()["metadata"]["location"]
    assert location.startswith(str(warehouse) + "/")
    assert " " not in location


def test_a_name_that_would_climb_folders_is_kept_inside_its_namespace(api, ns, warehouse):
    created = api.post("/namespaces/ns/tables", {"name": "%2e%2e", "schema": SCHEMA})
    assert created.status_code == 200, created.content
    assert created.json()["metadata"]["location"] == f"{warehouse}/ns/~252e~252e"


@pytest.mark.parametrize("name", ["a/b", "a.b", "a\x1fb", "", " ", "x" * 256])
def test_names_that_would_break_paths_or_identifiers_are_refused(api, ns, name):
    response = api.post("/namespaces/ns/tables", {"name": name, "schema": SCHEMA})
    assert_error(response, 400, "BadRequestException")
    assert not CatalogObject.objects.exists()


def test_a_namespace_whose_parent_does_not_exist_is_refused(api):
    response = api.post("/namespaces", {"namespace": ["a", "b"]})
    assert_error(response, 404, "NoSuchNamespaceException")
    assert not Namespace.objects.exists()


def test_a_namespace_level_too_long_is_refused(api):
    assert_error(api.post("/namespaces", {"namespace": ["x" * 300]}), 400, "BadRequestException")


def test_a_long_metrics_report_type_is_stored(api, ns):
    services.create_table(namespace="ns", name="t", schema=SCHEMA)
    response = api.post("/namespaces/ns/tables/t/metrics", {"report-type": "r" * 5000})
    assert response.status_code == 204


def test_a_table_page_renders_a_timestamp_too_large_to_show(client, viewer, api, ns):
    loaded = services.create_table(namespace="ns", name="t", schema=SCHEMA)
    response = api.post(
        "/namespaces/ns/tables/t",
        {
            "requirements": [{"type": "assert-table-uuid", "uuid": str(loaded.obj.uuid)}],
            "updates": [
                {
                    "action": "add-snapshot",
                    "snapshot": {
                        "snapshot-id": 1,
                        "sequence-number": 1,
                        "timestamp-ms": 9_000_000_000_000_000_000,
                        "manifest-list": "/nowhere/snap-1.avro",
                        "summary": {"operation": "append"},
                        "schema-id": 0,
                    },
                },
            ],
        },
    )
    assert response.status_code == 200, response.content
    client.force_login(viewer)
    assert client.get("/namespaces/ns/tables/t/").status_code == 200


def test_oauth_tokens_answers_a_wrong_method_with_json():
    response = Client().get(f"{BASE}/oauth/tokens")
    assert response.status_code == 405
    assert response.json()["error"] == "invalid_request"


def test_a_refused_create_leaves_no_file(api, ns, warehouse):
    response = api.post(
        "/namespaces/ns/tables", {"name": "t", "schema": {"type": "struct", "fields": "x"}}
    )
    assert response.status_code == 400
    assert metadata_files(warehouse) == []


def test_a_version_id_past_javas_int_is_a_404_not_a_database_error(client, editor, ns):
    services.create_view(namespace="ns", name="v", sql="SELECT 1 AS id")
    client.force_login(editor)
    huge = 2**40
    assert client.get(f"/api/namespaces/ns/views/v/versions/{huge}/").status_code == 404
    assert client.get(f"/namespaces/ns/views/v/rollback/{huge}").status_code == 404
    assert client.get("/api/namespaces/ns/views/v/versions/1/").status_code == 200


def test_a_view_page_renders_a_version_timestamp_too_large_to_show(client, viewer, api, ns):
    version = {
        "version-id": 1,
        "schema-id": 0,
        "timestamp-ms": 9_000_000_000_000_000_000,
        "summary": {"engine-name": "spark"},
        "representations": [{"type": "sql", "sql": "SELECT 1 AS id", "dialect": "spark"}],
        "default-namespace": ["ns"],
    }
    schema = {"type": "struct", "schema-id": 0, "fields": [
        {"id": 1, "name": "id", "type": "int", "required": False}
    ]}  # fmt: skip
    created = api.post(
        "/namespaces/ns/views", {"name": "v", "schema": schema, "view-version": version}
    )
    assert created.status_code == 200, created.content
    client.force_login(viewer)
    assert client.get("/namespaces/ns/views/v/").status_code == 200


def _long(field_id: int, name: str) -> dict:
    return {"id": field_id, "name": name, "type": "long", "required": False}


@pytest.mark.parametrize(
    ("updates", "message"),
    [
        (
            [{"action": "add-schema", "schema": {"type": "struct", "schema-id": 1,
              "fields": [_long(5, "a"), _long(5, "b")]}}],
            "duplicate field id 5",
        ),
        (
            [{"action": "add-schema", "schema": {"type": "struct", "schema-id": 0,
              "fields": [_long(1, "x")]}}],
            "schema id 0 is used twice",
        ),
        (
            [{"action": "add-spec", "spec": {"spec-id": 1, "fields": [
                {"source-id": 1, "field-id": 1000, "name": "p", "transform": "frobnicate"}]}}],
            "unknown transform",
        ),
    ],
)  # fmt: skip
def test_a_commit_of_metadata_engines_cannot_read_is_a_400_and_writes_nothing(
    api, ns, warehouse, updates, message
):
    assert api.post("/namespaces/ns/tables", {"name": "t", "schema": SCHEMA}).status_code == 200
    before = metadata_files(warehouse)

    response = api.post("/namespaces/ns/tables/t", {"requirements": [], "updates": updates})

    error = assert_error(response, 400, "ValidationException")
    assert message in error["message"]
    assert metadata_files(warehouse) == before


def test_a_table_created_with_duplicate_field_ids_is_a_400_and_writes_nothing(api, ns, warehouse):
    schema = {"type": "struct", "schema-id": 0, "fields": [_long(1, "a"), _long(1, "b")]}
    response = api.post("/namespaces/ns/tables", {"name": "t", "schema": schema})
    assert_error(response, 400, "ValidationException")
    assert metadata_files(warehouse) == []
    assert not CatalogObject.objects.exists()


def test_a_view_whose_sql_sqlglot_cannot_read_is_stored_as_sent_and_marked_not_transpiled(
    api, ns, client, editor
):
    sql = "SELECT * FROM lake.ns.inner.t"  # Spark reads a namespace named inner; sqlglot not
    version = {
        "version-id": 1, "schema-id": 0, "timestamp-ms": 1, "summary": {},
        "representations": [{"type": "sql", "sql": sql, "dialect": "spark"}],
        "default-namespace": ["ns"],
    }  # fmt: skip
    schema = {"type": "struct", "schema-id": 0, "fields": [_long(0, "id")]}
    response = api.post(
        "/namespaces/ns/views", {"name": "v", "schema": schema, "view-version": version}
    )
    assert response.status_code == 200, response.content
    [representation] = response.json()["metadata"]["versions"][0]["representations"]
    assert representation["sql"] == sql
    client.force_login(editor)
    [stored] = client.get("/api/namespaces/ns/views/v/versions/").json()
    assert stored["transpiled"] is False and "inner" in stored["sql_error"]
    assert [r["dialect"] for r in stored["representations"]] == ["spark"]
    page = client.get("/namespaces/ns/views/v/").content.decode()
    assert "Not transpiled" in page


@pytest.mark.parametrize(
    "path", ["/tmp/elsewhere", "file:///etc/cron.d", "{location}/../other", "s3://bucket/data"]
)
def test_a_write_path_outside_the_tables_location_is_a_400_and_writes_nothing(
    api, ns, warehouse, path
):
    created = api.post("/namespaces/ns/tables", {"name": "t", "schema": SCHEMA})
    location = created.json()["metadata"]["location"]
    before = metadata_files(warehouse)
    updates = [
        {"action": "set-properties", "updates": {"write.data.path": path.format(location=location)}}
    ]

    response = api.post("/namespaces/ns/tables/t", {"requirements": [], "updates": updates})

    error = assert_error(response, 400, "BadRequestException")
    assert "write.data.path must name a folder inside the table's location" in error["message"]
    assert metadata_files(warehouse) == before
    inside = [{"action": "set-properties", "updates": {"write.data.path": f"{location}/files"}}]
    ok = api.post("/namespaces/ns/tables/t", {"requirements": [], "updates": inside})
    assert ok.status_code == 200, ok.content


@pytest.mark.parametrize(
    "decimal",
    ["DECIMAL(a, b)", "DECIMAL(1.5, 2)", "DECIMAL(99999, 2)", "DECIMAL(10, 20)", "DECIMAL(0, 0)",
     pytest.param("DECIMAL(" + "9" * 5000 + ", 1)", id="DECIMAL(5000 digits, 1)")],
)  # fmt: skip
def test_a_view_casting_to_a_decimal_no_engine_can_hold_is_a_400_naming_it(
    client, editor, ns, warehouse, decimal
):
    """sqlglot reads these as types; the view's schema would hold a decimal Iceberg refuses
    (a 500 while it was built) or one Spark cannot read."""
    services.create_table(namespace="ns", name="t", schema=SCHEMA)
    client.force_login(editor)
    response = client.post(
        "/api/namespaces/ns/views/",
        {"name": "w", "sql": f"SELECT CAST(id AS {decimal}) AS c FROM ns.t"},
        content_type="application/json",
    )
    assert response.status_code == 400, response.content[:300]
    assert "DECIMAL's precision" in json.dumps(response.json())
    assert not CatalogObject.objects.filter(name="w").exists()
    assert not (warehouse / "ns" / "w").exists()


def test_a_view_casting_to_a_decimal_in_range_keeps_its_precision_and_scale(
    client, editor, ns, api
):
    services.create_table(namespace="ns", name="t", schema=SCHEMA)
    client.force_login(editor)
    sql = "SELECT CAST(id AS DECIMAL(38, 38)) AS a, CAST(id AS DECIMAL(5)) AS b FROM ns.t"
    response = client.post(
        "/api/namespaces/ns/views/", {"name": "w", "sql": sql}, content_type="application/json"
    )
    assert response.status_code == 201, response.content[:300]
    fields = api.get("/namespaces/ns/views/w").json()["metadata"]["schemas"][-1]["fields"]
    assert [f["type"] for f in fields] == ["decimal(38, 38)", "decimal(5, 0)"]


#: Texts str.isdigit takes that are no number int() reads, or more digits than it reads.
NOT_PLAIN_NUMBERS = [
    pytest.param("²", id="superscript two"),
    pytest.param("-²", id="minus superscript two"),
    pytest.param("9" * 5000, id="5000 digits"),
]


@pytest.mark.parametrize("depth", [*NOT_PLAIN_NUMBERS, pytest.param("٣", id="arabic-indic 3")])
def test_a_lineage_depth_that_is_not_a_plain_number_is_a_400_naming_it(client, editor, ns, depth):
    services.create_table(namespace="ns", name="t", schema=SCHEMA)
    client.force_login(editor)
    response = client.get("/api/lineage/", {"namespace": "ns", "name": "t", "depth": depth})
    assert response.status_code == 400, response.content[:300]
    assert "depth" in response.json()["error"]
    ok = client.get("/api/lineage/", {"namespace": "ns", "name": "t", "depth": "2"})
    assert ok.status_code == 200


@pytest.mark.parametrize("moment", NOT_PLAIN_NUMBERS)
def test_a_table_page_asked_for_a_preview_at_a_moment_that_is_not_a_number_says_so(
    client, editor, ns, moment
):
    """The moment picks the preview's columns, and the form says what is wrong with it."""
    services.create_table(namespace="ns", name="t", schema=SCHEMA)
    client.force_login(editor)
    response = client.get("/namespaces/ns/tables/t/", {"preview": "1", "timestamp": moment})
    assert response.status_code == 400
    page = response.content.decode()
    assert "is not a date and time" in page or "at most 40 characters" in page


@pytest.mark.parametrize("version", NOT_PLAIN_NUMBERS)
def test_a_view_diff_naming_a_version_that_is_not_a_number_renders(
    client, editor, api, ns, version
):
    services.create_table(namespace="ns", name="t", schema=SCHEMA)
    column = {"id": 1, "name": "id", "type": "long", "required": False}
    body = {
        "name": "v",
        "schema": {"type": "struct", "schema-id": 0, "fields": [column]},
        "view-version": {
            "version-id": 1, "schema-id": 0, "timestamp-ms": 1, "summary": {},
            "representations": [{"type": "sql", "sql": "SELECT id FROM ns.t", "dialect": "spark"}],
            "default-namespace": ["ns"],
        },
    }  # fmt: skip
    assert api.post("/namespaces/ns/views", body).status_code == 200
    client.force_login(editor)
    response = client.get("/namespaces/ns/views/v/diff", {"left": version, "right": "1"})
    assert response.status_code in (200, 400), response.status_code
