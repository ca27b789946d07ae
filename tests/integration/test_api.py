"""The management API at /api/: tokens, roles, the view lifecycle, errors, registration."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from catalog import services
from catalog.models import CatalogEvent, View

# Views the app creates let engines drop the dialects the app transpiled.
TRANSPILED_DIALECTS_MAY_DROP = {"replace.drop-dialect.allowed": "true"}

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
ORDERS_SQL = "SELECT id, amount FROM orders"
#: These views read a table `orders` the catalog never holds: made before their sources.
BEFORE_SOURCES = {"allow_unknown_sources": True}


def files_under(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()]


def client_with_token(username: str, password: str) -> APIClient:
    client = APIClient()
    response = client.post("/api/token/", {"username": username, "password": password})
    assert response.status_code == 200, response.content
    client.credentials(HTTP_AUTHORIZATION=f"Token {response.json()['token']}")
    return client


@pytest.fixture
def editor_client(editor) -> APIClient:
    return client_with_token("erin", "erin-password")


@pytest.fixture
def viewer_client(viewer) -> APIClient:
    return client_with_token("vic", "vic-password")


@pytest.fixture
def sales(editor):
    return services.create_namespace(name="sales", actor=editor)


def create_orders_view(client: APIClient, **overrides) -> dict:
    body = {"name": "orders_v", "sql": ORDERS_SQL, "dialect": "spark"}
    body.update({**BEFORE_SOURCES, **overrides})
    response = client.post("/api/namespaces/sales/views/", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


# -- the lifecycle ------------------------------------------------------------------------


def test_an_editor_creates_replaces_and_rolls_back_a_view_and_the_log_shows_1_2_1(
    editor, warehouse
):
    client = client_with_token("erin", "erin-password")

    response = client.post(
        "/api/namespaces/", {"name": "sales", "properties": {"owner": "erin"}}, format="json"
    )
    assert response.status_code == 201, response.content
    assert response.json()["properties"] == {"owner": "erin"}

    created = create_orders_view(
        client, column_comments=["Order id"], comment="Orders", properties={"team": "a"}
    )
    assert created["current_version_id"] == 1
    assert created["properties"] == {
        "team": "a",
        "comment": "Orders",
        **TRANSPILED_DIALECTS_MAY_DROP,
    }
    assert [f["name"] for f in created["schema"]["fields"]] == ["id", "amount"]
    assert created["schema"]["fields"][0]["doc"] == "Order id"
    representations = created["current_version"]["representations"]
    assert {r["dialect"] for r in representations} == {"spark", "trino"}
    assert [r["dialect"] for r in representations if r["is_original"]] == ["spark"]
    assert created["metadata_location"].startswith(str(warehouse))

    replaced = client.put(
        "/api/namespaces/sales/views/orders_v/",
        {
            "sql": "SELECT id FROM orders",
            "expected_metadata_location": created["metadata_location"],
            **BEFORE_SOURCES,
        },
        format="json",
    )
    assert replaced.status_code == 200, replaced.content
    assert replaced.json()["current_version_id"] == 2

    rolled_back = client.post(
        "/api/namespaces/sales/views/orders_v/rollback", {"version_id": 1}, format="json"
    )
    assert rolled_back.status_code == 200, rolled_back.content
    assert rolled_back.json()["current_version_id"] == 1

    log = client.get("/api/namespaces/sales/views/orders_v/log/")
    assert log.status_code == 200
    assert [entry["version_id"] for entry in log.json()] == [1, 2, 1]

    versions = client.get("/api/namespaces/sales/views/orders_v/versions/").json()
    assert [v["version_id"] for v in versions] == [1, 2]
    assert all(v["schema_id"] in (0, 1) for v in versions)
    version_2 = client.get("/api/namespaces/sales/views/orders_v/versions/2/").json()
    assert "SELECT" in version_2["representations"][0]["sql"]

    metadata = client.get("/api/namespaces/sales/views/orders_v/metadata").json()
    assert metadata["current-version-id"] == 1
    assert [e["version-id"] for e in metadata["version-log"]] == [1, 2, 1]

    history = client.get("/api/history/").json()
    assert history["count"] == 4
    assert [e["action"] for e in history["results"]] == [
        "rollback_view",
        "replace_view",
        "create_view",
        "create_namespace",
    ]
    assert history["results"][0]["actor"] == "erin"


def test_a_replace_against_a_stale_metadata_location_is_a_409(editor_client, sales):
    created = create_orders_view(editor_client)
    editor_client.put(
        "/api/namespaces/sales/views/orders_v/",
        {"sql": "SELECT id FROM orders", **BEFORE_SOURCES},
        format="json",
    )

    response = editor_client.put(
        "/api/namespaces/sales/views/orders_v/",
        {
            "sql": "SELECT amount FROM orders",
            "expected_metadata_location": created["metadata_location"],
            **BEFORE_SOURCES,
        },
        format="json",
    )

    assert response.status_code == 409
    assert response.json()["type"] == "CommitConflict"


def test_view_properties_are_set_and_removed_in_one_request(editor_client, sales):
    create_orders_view(editor_client, properties={"old": "1"})

    response = editor_client.post(
        "/api/namespaces/sales/views/orders_v/properties",
        {"updates": {"new": "2"}, "removals": ["old"]},
        format="json",
    )

    assert response.status_code == 200, response.content
    assert response.json()["properties"] == {"new": "2", **TRANSPILED_DIALECTS_MAY_DROP}


def test_a_view_gains_a_representation_is_renamed_and_is_dropped(editor_client, sales):
    create_orders_view(editor_client)
    services.create_namespace(name="sales.eu")

    added = editor_client.post(
        "/api/namespaces/sales/views/orders_v/representations",
        {"dialect": "duckdb", "sql": "SELECT id, amount FROM sales.orders"},
        format="json",
    )
    assert added.status_code == 200, added.content
    assert added.json()["current_version_id"] == 2
    dialects = {r["dialect"] for r in added.json()["current_version"]["representations"]}
    assert dialects == {"spark", "trino", "duckdb"}

    renamed = editor_client.post(
        "/api/namespaces/sales/views/orders_v/rename",
        {"namespace": "sales.eu", "name": "orders_eu"},
        format="json",
    )
    assert renamed.status_code == 200, renamed.content
    assert editor_client.get("/api/namespaces/sales.eu/views/orders_eu/").status_code == 200
    assert editor_client.get("/api/namespaces/sales/views/orders_v/").status_code == 404

    dropped = editor_client.delete("/api/namespaces/sales.eu/views/orders_eu/")
    assert dropped.status_code == 204
    assert not View.objects.exists()


def test_namespaces_with_dots_are_read_updated_and_dropped(editor_client):
    orphan = editor_client.post("/api/namespaces/", {"name": "sales.eu"}, format="json")
    assert orphan.status_code == 404, "a child namespace needs its parent first"
    assert "parent namespace sales does not exist" in orphan.json()["error"]
    editor_client.post("/api/namespaces/", {"name": "sales"}, format="json")
    editor_client.post("/api/namespaces/", {"name": "sales.eu"}, format="json")

    assert editor_client.get("/api/namespaces/sales.eu/").json()["name"] == "sales.eu"
    updated = editor_client.post(
        "/api/namespaces/sales.eu/properties", {"updates": {"a": "1"}}, format="json"
    )
    assert updated.json()["properties"] == {"a": "1"}
    assert editor_client.get("/api/namespaces/sales.eu/views/").json()["results"] == []
    assert editor_client.delete("/api/namespaces/sales.eu/").status_code == 204
    assert editor_client.get("/api/namespaces/sales.eu/").status_code == 404


def test_a_namespace_that_holds_a_view_is_not_dropped(editor_client, sales):
    create_orders_view(editor_client)

    response = editor_client.delete("/api/namespaces/sales/")

    assert response.status_code == 409
    assert response.json()["type"] == "NamespaceNotEmpty"


# -- authentication and roles -------------------------------------------------------------


def test_a_request_without_a_token_is_401(sales):
    response = APIClient().get("/api/namespaces/")

    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Token"


def test_a_wrong_password_gets_no_token(editor):
    response = APIClient().post("/api/token/", {"username": "erin", "password": "nope"})

    assert response.status_code == 400


def test_a_viewer_reads_but_may_not_write(viewer_client, editor_client, sales):
    create_orders_view(editor_client)

    assert viewer_client.get("/api/namespaces/").status_code == 200
    assert viewer_client.get("/api/namespaces/sales/views/orders_v/").status_code == 200
    # The catalog's history is the audit's: for those who manage the catalog, not readers.
    assert viewer_client.get("/api/history/").status_code == 403

    create = viewer_client.post("/api/namespaces/", {"name": "other"}, format="json")
    replace = viewer_client.put(
        "/api/namespaces/sales/views/orders_v/", {"sql": "SELECT 1 AS x"}, format="json"
    )
    drop = viewer_client.delete("/api/namespaces/sales/views/orders_v/")
    assert (create.status_code, replace.status_code, drop.status_code) == (403, 403, 403)
    assert View.objects.get().current_version_id == 1


# -- errors -------------------------------------------------------------------------------


def test_a_sql_parse_error_is_a_400_with_line_and_column_and_writes_nothing(
    editor_client, sales, warehouse
):
    response = editor_client.post(
        "/api/namespaces/sales/views/",
        {"name": "broken", "sql": "SELECT id\nFROM orders\nWHERE amount >"},
        format="json",
    )

    assert response.status_code == 400
    body = response.json()
    assert body["field"] == "sql"
    assert (body["line"], body["column"]) == (3, 14)
    assert body["type"] == "SqlError"
    assert not View.objects.exists()
    assert files_under(warehouse) == []


def test_an_unknown_dialect_is_a_400_naming_the_dialect(editor_client, sales):
    response = create_view_response(editor_client, dialect="cobol")

    assert response.status_code == 400
    assert response.json()["field"] == "dialect"
    assert "cobol" in response.json()["error"]


def test_a_wrong_type_is_a_400_naming_the_field(editor_client, sales):
    response = create_view_response(editor_client, column_aliases="id")

    assert response.status_code == 400
    assert "column_aliases" in response.json()


def test_a_missing_required_field_is_a_400_naming_it(editor_client, sales):
    response = editor_client.post("/api/namespaces/sales/views/", {"name": "v"}, format="json")

    assert response.status_code == 400
    assert "sql" in response.json()


def test_an_existing_view_name_is_a_409(editor_client, sales):
    create_orders_view(editor_client)

    response = create_view_response(editor_client)

    assert response.status_code == 409
    assert response.json()["field"] == "name"


def test_a_view_in_a_missing_namespace_is_a_404(editor_client):
    response = editor_client.post(
        "/api/namespaces/nowhere/views/", {"name": "v", "sql": ORDERS_SQL}, format="json"
    )

    assert response.status_code == 404
    assert response.json()["type"] == "NoSuchNamespace"


def test_a_missing_view_or_version_is_a_404(editor_client, sales):
    assert editor_client.get("/api/namespaces/sales/views/nope/").status_code == 404
    create_orders_view(editor_client)
    assert editor_client.get("/api/namespaces/sales/views/orders_v/versions/9/").status_code == 404
    rollback = editor_client.post(
        "/api/namespaces/sales/views/orders_v/rollback", {"version_id": 9}, format="json"
    )
    assert rollback.status_code == 404


def create_view_response(client: APIClient, **overrides):
    body = {"name": "orders_v", "sql": ORDERS_SQL, **BEFORE_SOURCES, **overrides}
    return client.post("/api/namespaces/sales/views/", body, format="json")


# -- registering metadata files -----------------------------------------------------------


def register(client: APIClient, namespace: str, name: str, metadata_location: str):
    return client.post(
        f"/api/namespaces/{namespace}/views/register",
        {"name": name, "metadata_location": metadata_location},
        format="json",
    )


def test_registering_a_file_outside_the_warehouse_is_a_400(editor_client, sales, tmp_path):
    outside = tmp_path / "elsewhere" / "v.metadata.json"
    outside.parent.mkdir()
    outside.write_text((FIXTURES / "view_spec_appendix_a_v1.json").read_text())

    response = register(editor_client, "sales", "adopted", str(outside))

    assert response.status_code == 400
    assert response.json()["field"] == "metadata_location"
    assert not View.objects.exists()


def test_registering_a_malformed_json_file_is_a_400(editor_client, sales, warehouse):
    broken = warehouse / "broken" / "metadata" / "00001-x.metadata.json"
    broken.parent.mkdir(parents=True)
    broken.write_text('{"view-uuid": ')

    response = register(editor_client, "sales", "adopted", str(broken))

    assert response.status_code == 400
    assert response.json()["type"] == "InvalidMetadata"
    assert response.json()["field"] == "metadata_location"
    assert not View.objects.exists()


def test_registering_a_folder_instead_of_a_file_is_a_400(editor_client, sales, warehouse):
    response = register(editor_client, "sales", "adopted", str(warehouse))

    assert response.status_code == 400
    assert response.json()["field"] == "metadata_location"


def write_appendix_a(example: str, warehouse: Path) -> tuple[Path, dict]:
    """The spec's example document, its location moved into the test's warehouse."""
    document = json.loads((FIXTURES / f"view_spec_appendix_a_{example}.json").read_text())
    location = warehouse / "default.db" / "event_agg"
    document["location"] = str(location)
    sequence = {"v1": "00001", "v2": "00002"}[example]
    path = location / "metadata" / f"{sequence}-{document['view-uuid']}.metadata.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2))
    return path, document


def test_the_view_spec_appendix_a_first_example_registers_with_one_version(
    editor_client, warehouse
):
    services.create_namespace(name="default")
    path, document = write_appendix_a("v1", warehouse)

    response = register(editor_client, "default", "event_agg", str(path))

    assert response.status_code == 201, response.content
    view = response.json()
    assert view["uuid"] == "fa6506c3-7681-40c8-86dc-e36561f83385"
    assert view["metadata_location"] == str(path)
    assert view["current_version_id"] == 1
    assert view["properties"] == {"comment": "Daily event counts"}
    assert view["dependencies"] == [["prod", "default", "events"]]
    assert view["schema"]["schema_id"] == 1
    assert [(f["id"], f["name"], f["type"], f["doc"]) for f in view["schema"]["fields"]] == [
        (1, "event_count", "int", "Count of events"),
        (2, "event_date", "date", None),
    ]
    base = "/api/namespaces/default/views/event_agg"
    versions = editor_client.get(f"{base}/versions/").json()
    assert [(v["version_id"], v["schema_id"]) for v in versions] == [(1, 1)]
    assert versions[0]["default_catalog"] == "prod"
    assert versions[0]["default_namespace"] == ["default"]
    assert versions[0]["summary"] == {"engine-name": "Spark", "engineVersion": "3.3.2"}
    assert versions[0]["representations"] == [
        {
            "dialect": "spark",
            "sql": "SELECT\n    COUNT(1), CAST(event_ts AS DATE)\nFROM events\nGROUP BY 2",
            "is_original": True,
        }
    ]
    log = editor_client.get(f"{base}/log/").json()
    assert [(e["version_id"], e["timestamp_ms"]) for e in log] == [(1, 1573518431292)]
    assert editor_client.get(f"{base}/metadata").json() == document
    assert CatalogEvent.objects.filter(action="register_view").count() == 1


def test_the_view_spec_appendix_a_second_example_registers_with_two_versions(
    editor_client, warehouse
):
    services.create_namespace(name="default")
    path, _ = write_appendix_a("v2", warehouse)

    response = register(editor_client, "default", "event_agg", str(path))

    assert response.status_code == 201, response.content
    # The example literally keeps current-version-id 1 while its log ends at version 2.
    assert response.json()["current_version_id"] == 1
    base = "/api/namespaces/default/views/event_agg"
    versions = editor_client.get(f"{base}/versions/").json()
    assert [v["version_id"] for v in versions] == [1, 2]
    assert "FROM prod.default.events" in versions[1]["representations"][0]["sql"]
    log = editor_client.get(f"{base}/log/").json()
    assert [(e["version_id"], e["timestamp_ms"]) for e in log] == [
        (1, 1573518431292),
        (2, 1573518981593),
    ]


# -- the schema ---------------------------------------------------------------------------


def test_the_openapi_schema_documents_the_view_endpoints(viewer_client):
    response = viewer_client.get("/api/schema/", {"format": "json"})

    assert response.status_code == 200
    paths = json.loads(response.content)["paths"]
    assert "/api/namespaces/{namespace}/views/" in paths
    assert "/api/namespaces/{namespace}/views/{name}/rollback" in paths
    assert "requestBody" in paths["/api/namespaces/{namespace}/views/"]["post"]


def test_the_docs_page_is_swagger_ui_from_the_apps_own_static_files(client):
    response = client.get("/api/docs/")

    assert response.status_code == 200
    page = response.content.decode()
    sources = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert any("swagger-ui-bundle.js" in s for s in sources)
    assert all(not s.startswith(("http:", "https:", "//")) for s in sources), sources
    assert "/api/schema/" in page
    for source in sources:
        if source.startswith("/static/"):
            assert client.get(source).status_code == 200, source
