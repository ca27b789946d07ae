"""The Iceberg REST catalog at /iceberg, driven with Django's test client in the protocol's
own JSON shapes (Iceberg 1.10 open-api/rest-catalog-open-api.yaml): tokens, config,
namespaces, tables (with staged creates and multi-table transactions) and views."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import pytest
from django.contrib.auth.hashers import make_password
from django.test import Client
from django.utils import timezone

from catalog import services
from catalog.models import AccessToken, Table, TableMetricsReport, View
from catalog.services.credentials import create_client

pytestmark = pytest.mark.django_db

BASE = "/iceberg/v1"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": True},
        {"id": 2, "name": "ts", "type": "timestamptz", "required": False},
        {"id": 3, "name": "category", "type": "string", "required": False},
    ],
}
PARTITION_SPEC = {
    "spec-id": 0,
    "fields": [
        {"source-id": 2, "field-id": 1000, "name": "ts_day", "transform": "day"},
        {"source-id": 3, "field-id": 1001, "name": "category", "transform": "identity"},
    ],
}
WRITE_ORDER = {
    "order-id": 1,
    "fields": [
        {"source-id": 1, "transform": "identity", "direction": "asc", "null-order": "nulls-first"}
    ],
}


# -- helpers -------------------------------------------------------------------------------


class Iceberg:
    """A test client that sends the bearer token and JSON bodies, as engines do."""

    def __init__(self, token: str) -> None:
        self.client = Client()
        self.headers = {"Authorization": f"Bearer {token}"}

    def get(self, path: str, **params: Any):
        return self.client.get(BASE + path, params, headers=self.headers)

    def head(self, path: str):
        return self.client.head(BASE + path, headers=self.headers)

    def post(self, path: str, body: Any = None, *, raw: str | None = None):
        data = raw if raw is not None else json.dumps(body if body is not None else {})
        return self.client.post(
            BASE + path, data=data, content_type="application/json", headers=self.headers
        )

    def delete(self, path: str):
        return self.client.delete(BASE + path, headers=self.headers)


def request_token(client_id: str, secret: str):
    return Client().post(
        f"{BASE}/oauth/tokens",
        {"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret},
    )


def token_for(user) -> str:
    client, secret = create_client(name=f"{user.username}-engine", user=user)
    response = request_token(client.client_id, secret)
    assert response.status_code == 200, response.content
    return response.json()["access_token"]


def assert_error(response, status: int, error_type: str, message: str | None = None) -> dict:
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert error["type"] == error_type, error
    assert error["code"] == status
    if message is not None:
        assert error["message"] == message
    return error


def metadata_files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.metadata.json"))


def pointer(namespace: str, name: str) -> str:
    return Table.objects.get(namespace__name=namespace, name=name).metadata_location


def spark_view_version(
    version_id: int, sql: str, *, schema_id: int = 0, namespace: str = "ns"
) -> dict:
    """A view version as Spark 3.5 with Iceberg 1.10 writes it: dialect spark, no catalog."""
    return {
        "version-id": version_id,
        "timestamp-ms": int(time.time() * 1000),
        "schema-id": schema_id,
        "summary": {
            "engine-name": "spark",
            "engine-version": "3.5.8",
            "app-id": "local-1700000000000",
            "iceberg-version": "Apache Iceberg 1.10.0",
        },
        "representations": [{"type": "sql", "sql": sql, "dialect": "spark"}],
        "default-namespace": [namespace],
    }


def view_schema(schema_id: int, *names: str) -> dict:
    return {
        "type": "struct",
        "schema-id": schema_id,
        "fields": [
            {"id": index, "name": name, "required": False, "type": "long"}
            for index, name in enumerate(names)
        ],
    }


def create_view_request(name: str, sql: str = "SELECT id FROM ns.t") -> dict:
    return {
        "name": name,
        "schema": view_schema(0, "id"),
        "view-version": spark_view_version(1, sql),
        "properties": {
            "create_engine_version": "Spark 3.5.8",
            "engine_version": "Spark 3.5.8",
            "spark.query-column-names": "id",
        },
    }


# -- fixtures ------------------------------------------------------------------------------


@pytest.fixture
def editor_token(editor) -> str:
    return token_for(editor)


@pytest.fixture
def api(editor_token) -> Iceberg:
    return Iceberg(editor_token)


@pytest.fixture
def viewer_api(viewer) -> Iceberg:
    return Iceberg(token_for(viewer))


@pytest.fixture
def ns(api) -> str:
    response = api.post("/namespaces", {"namespace": ["ns"], "properties": {"owner": "erin"}})
    assert response.status_code == 200, response.content
    return "ns"


def create_table(api: Iceberg, name: str = "t", namespace: str = "ns", **extra: Any) -> dict:
    body = {
        "name": name,
        "schema": SCHEMA,
        "partition-spec": PARTITION_SPEC,
        "write-order": WRITE_ORDER,
        "properties": {"write.format.default": "parquet"},
        **extra,
    }
    response = api.post(f"/namespaces/{namespace}/tables", body)
    assert response.status_code == 200, response.content
    return response.json()


@pytest.fixture
def table(api, ns) -> dict:
    return create_table(api)


def create_view(api: Iceberg, name: str = "v", namespace: str = "ns") -> dict:
    response = api.post(f"/namespaces/{namespace}/views", create_view_request(name))
    assert response.status_code == 200, response.content
    return response.json()


# -- tokens and authorization --------------------------------------------------------------


def test_client_credentials_are_exchanged_for_a_bearer_token(editor):
    client, secret = create_client(name="spark", user=editor)

    response = request_token(client.client_id, secret)

    assert response.status_code == 200
    body = response.json()
    assert body["access_token"]
    assert body["token_type"] == "bearer"
    assert body["expires_in"] > 0
    assert Iceberg(body["access_token"]).get("/config").status_code == 200


def test_a_wrong_client_secret_gets_invalid_client(editor):
    client, _ = create_client(name="spark", user=editor)

    response = request_token(client.client_id, "not-the-secret")

    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"


def test_an_unknown_client_id_gets_invalid_client(editor):
    response = request_token("no-such-client", "whatever")

    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"


def test_an_unsupported_grant_type_is_refused(editor):
    response = Client().post(f"{BASE}/oauth/tokens", {"grant_type": "password"})

    assert response.status_code == 400
    assert response.json()["error"] == "unsupported_grant_type"


def test_a_token_exchange_returns_a_new_working_token(editor_token):
    response = Client().post(
        f"{BASE}/oauth/tokens",
        {
            "grant_type": TOKEN_EXCHANGE,
            "subject_token": editor_token,
            "subject_token_type": ACCESS_TOKEN_TYPE,
        },
    )

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["token_type"] == "bearer"
    assert body["access_token"] != editor_token
    assert Iceberg(body["access_token"]).get("/namespaces").status_code == 200


def test_a_token_exchange_with_an_unknown_subject_token_is_refused(editor):
    response = Client().post(
        f"{BASE}/oauth/tokens",
        {"grant_type": TOKEN_EXCHANGE, "subject_token": "forged", "subject_token_type": "x"},
    )

    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"


def test_a_call_without_a_token_is_not_authorized(ns):
    response = Client().get(f"{BASE}/namespaces")

    assert_error(response, 401, "NotAuthorizedException")


def test_a_call_with_an_unknown_token_is_not_authorized(ns):
    response = Iceberg("forged-token").get("/namespaces")

    assert_error(response, 401, "NotAuthorizedException")


def test_a_head_without_a_token_is_not_authorized(ns):
    assert Client().head(f"{BASE}/namespaces/ns").status_code == 401


def test_a_viewer_can_read_but_not_write(viewer_api, ns):
    assert viewer_api.get("/namespaces").status_code == 200
    assert viewer_api.get("/namespaces/ns").status_code == 200

    response = viewer_api.post("/namespaces", {"namespace": ["other"]})

    assert_error(response, 403, "ForbiddenException")
    assert viewer_api.get("/namespaces/other").status_code == 404


def test_a_viewer_cannot_drop_a_table(viewer_api, table):
    response = viewer_api.delete("/namespaces/ns/tables/t")

    assert_error(response, 403, "ForbiddenException")
    assert Table.objects.filter(name="t").exists()


def test_an_expired_token_is_not_authorized(editor_token):
    AccessToken.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    response = Iceberg(editor_token).get("/namespaces")

    assert_error(response, 401, "NotAuthorizedException")


def test_an_expired_token_cannot_be_exchanged(editor_token):
    AccessToken.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    response = Client().post(
        f"{BASE}/oauth/tokens", {"grant_type": TOKEN_EXCHANGE, "subject_token": editor_token}
    )

    assert response.status_code == 401


def test_celery_beat_purges_expired_tokens_and_keeps_live_ones(editor_token, editor):
    from django.conf import settings

    from catalog.tasks import purge_expired_tokens

    live = token_for(editor)
    AccessToken.objects.exclude(digest=hashlib.sha256(live.encode()).hexdigest()).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    assert purge_expired_tokens() == 1
    assert AccessToken.objects.count() == 1
    assert Iceberg(live).get("/namespaces").status_code == 200
    schedule = settings.CELERY_BEAT_SCHEDULE["purge-expired-tokens"]
    assert schedule["task"] == purge_expired_tokens.name


def basic_auth(client_id: str, secret: str) -> str:
    """RFC 6749 section 2.3.1: each part form-urlencoded, joined by a colon, then base64."""
    pair = f"{quote_plus(client_id)}:{quote_plus(secret)}".encode()
    return "Basic " + base64.b64encode(pair).decode()


def test_http_basic_credentials_are_form_url_decoded_before_they_are_checked(editor):
    client, _ = create_client(name="duckdb", user=editor)
    secret = "s:e c+r%t/ü"  # every character Basic's encoding must carry
    client.secret_hash = make_password(secret)
    client.save()

    response = Client().post(
        f"{BASE}/oauth/tokens",
        {"grant_type": "client_credentials"},
        headers={"Authorization": basic_auth(client.client_id, secret)},
    )

    assert response.status_code == 200, response.content
    assert Iceberg(response.json()["access_token"]).get("/namespaces").status_code == 200


def test_form_credentials_still_work_when_another_scheme_is_in_the_authorization_header(editor):
    client, secret = create_client(name="spark", user=editor)

    response = Client().post(
        f"{BASE}/oauth/tokens",
        {"grant_type": "client_credentials", "client_id": client.client_id,
         "client_secret": secret},
        headers={"Authorization": "Bearer stale-token"},
    )  # fmt: skip

    assert response.status_code == 200, response.content


def test_a_wrong_http_basic_secret_is_a_401_that_names_the_basic_scheme(editor):
    client, _ = create_client(name="duckdb", user=editor)

    response = Client().post(
        f"{BASE}/oauth/tokens",
        {"grant_type": "client_credentials"},
        headers={"Authorization": basic_auth(client.client_id, "wrong")},
    )

    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"
    assert response["WWW-Authenticate"].startswith("Basic ")


@pytest.mark.parametrize(
    "header",
    [
        "Basic \u00e9t\u00e9",  # not ASCII: base64 cannot hold it (was a 500)
        "Basic " + base64.b64encode(b"\xc3(:secret").decode(),  # not UTF-8
        "Basic " + base64.b64encode(b"id:sec\x00ret").decode(),  # NUL in the secret
        "Basic " + base64.b64encode(b"id%00:secret").decode(),  # NUL once url-decoded
        "Basic",  # nothing after the scheme
        "Basic " + base64.b64encode(b"id:secret").decode()[:-2],  # truncated
    ],
)
def test_a_malformed_http_basic_header_is_a_json_401_never_a_500(editor, header):
    response = Client(raise_request_exception=False).post(
        f"{BASE}/oauth/tokens",
        {"grant_type": "client_credentials"},
        headers={"Authorization": header},
    )

    assert response.status_code == 401, response.content
    assert response.json()["error"] == "invalid_client"
    assert response.json()["error_description"]
    assert not AccessToken.objects.exists()


@pytest.mark.parametrize(
    "field", ["grant_type", "client_id", "client_secret", "scope", "x\x00"]
)  # fmt: skip
def test_a_nul_anywhere_in_the_token_form_is_a_json_400_and_no_token(editor, field):
    client, secret = create_client(name="spark", user=editor)
    form = {"grant_type": "client_credentials", "client_id": client.client_id,
            "client_secret": secret, "scope": "catalog"}  # fmt: skip
    form[field] = form.get(field, "") + "\x00"

    response = Client(raise_request_exception=False).post(f"{BASE}/oauth/tokens", form)

    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid_request"
    assert not AccessToken.objects.exists()


@pytest.mark.parametrize(
    "body, content_type",
    [
        (b"--x\r\nbroken", "multipart/form-data"),  # no boundary
        (b"--x\r\nbroken", "multipart/form-data; boundary=\u00e9"),  # a boundary Django refuses
        ("&".join(f"f{i}=1" for i in range(5000)), "application/x-www-form-urlencoded"),
    ],
)
def test_a_token_request_whose_form_cannot_be_read_is_a_json_400(editor, body, content_type):
    response = Client(raise_request_exception=False).post(
        f"{BASE}/oauth/tokens", body, content_type=content_type
    )

    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid_request"


def test_an_inactive_users_token_cannot_be_exchanged_for_a_new_one(editor):
    token = token_for(editor)
    assert Iceberg(token).get("/namespaces").status_code == 200  # now in the verified cache
    editor.is_active = False
    editor.save()

    response = Client().post(
        f"{BASE}/oauth/tokens", {"grant_type": TOKEN_EXCHANGE, "subject_token": token}
    )

    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"
    assert AccessToken.objects.count() == 1  # no new token was issued


# -- config --------------------------------------------------------------------------------


def test_config_lists_every_endpoint_including_the_view_endpoints(api):
    response = api.get("/config")

    assert response.status_code == 200
    body = response.json()
    assert body["defaults"] == {} and body["overrides"] == {}
    endpoints = set(body["endpoints"])
    assert {
        "GET /v1/{prefix}/namespaces/{namespace}/views",
        "POST /v1/{prefix}/namespaces/{namespace}/views",
        "GET /v1/{prefix}/namespaces/{namespace}/views/{view}",
        "HEAD /v1/{prefix}/namespaces/{namespace}/views/{view}",
        "POST /v1/{prefix}/namespaces/{namespace}/views/{view}",
        "DELETE /v1/{prefix}/namespaces/{namespace}/views/{view}",
        "POST /v1/{prefix}/views/rename",
    } <= endpoints
    assert {
        "GET /v1/{prefix}/namespaces",
        "POST /v1/{prefix}/namespaces",
        "HEAD /v1/{prefix}/namespaces/{namespace}",
        "POST /v1/{prefix}/namespaces/{namespace}/properties",
        "POST /v1/{prefix}/namespaces/{namespace}/tables",
        "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
        "POST /v1/{prefix}/namespaces/{namespace}/register",
        "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
        "POST /v1/{prefix}/tables/rename",
        "POST /v1/{prefix}/transactions/commit",
    } <= endpoints


# -- namespaces ----------------------------------------------------------------------------


def test_a_namespace_is_created_and_loaded_with_its_properties(api):
    created = api.post("/namespaces", {"namespace": ["sales"], "properties": {"owner": "erin"}})

    assert created.status_code == 200, created.content
    assert created.json() == {"namespace": ["sales"], "properties": {"owner": "erin"}}
    loaded = api.get("/namespaces/sales")
    assert loaded.status_code == 200
    assert loaded.json() == {"namespace": ["sales"], "properties": {"owner": "erin"}}


def test_creating_an_existing_namespace_is_a_conflict(api, ns):
    response = api.post("/namespaces", {"namespace": ["ns"]})

    assert_error(response, 409, "AlreadyExistsException")


def test_a_namespace_without_levels_is_a_bad_request(api):
    assert_error(api.post("/namespaces", {"namespace": []}), 400, "BadRequestException")
    assert_error(api.post("/namespaces", {}), 400, "BadRequestException")


def test_top_level_namespaces_are_listed_without_their_children(api):
    for levels in (["b"], ["a"], ["a", "b"], ["a", "b", "c"]):
        assert api.post("/namespaces", {"namespace": levels}).status_code == 200

    response = api.get("/namespaces")

    assert response.status_code == 200
    assert response.json()["namespaces"] == [["a"], ["b"]]
    assert response.json().get("next-page-token") is None


def test_children_of_a_parent_are_listed_with_unit_separated_levels(api):
    for levels in (["a"], ["a", "b"], ["a", "c"], ["a", "b", "c"], ["ab"]):
        assert api.post("/namespaces", {"namespace": levels}).status_code == 200

    assert api.get("/namespaces", parent="a").json()["namespaces"] == [["a", "b"], ["a", "c"]]
    assert api.get("/namespaces", parent="a\x1fb").json()["namespaces"] == [["a", "b", "c"]]
    assert api.get("/namespaces", parent="a\x1fb\x1fc").json()["namespaces"] == []


def test_children_of_a_missing_parent_is_no_such_namespace(api):
    response = api.get("/namespaces", parent="nope")

    assert_error(response, 404, "NoSuchNamespaceException", "Namespace does not exist: nope")


def test_a_multi_level_namespace_is_addressed_with_the_unit_separator(api):
    api.post("/namespaces", {"namespace": ["a"]})
    api.post("/namespaces", {"namespace": ["a", "b"], "properties": {"k": "v"}})

    response = api.get("/namespaces/a%1Fb")

    assert response.status_code == 200
    assert response.json() == {"namespace": ["a", "b"], "properties": {"k": "v"}}
    assert api.head("/namespaces/a%1Fb").status_code == 204


def test_namespaces_are_listed_page_by_page(api):
    for name in ("n1", "n2", "n3"):
        api.post("/namespaces", {"namespace": [name]})

    first = api.get("/namespaces", pageSize=2).json()
    assert first["namespaces"] == [["n1"], ["n2"]]
    assert first["next-page-token"]

    second = api.get("/namespaces", pageSize=2, pageToken=first["next-page-token"]).json()
    assert second["namespaces"] == [["n3"]]
    assert second.get("next-page-token") is None


def test_a_bad_page_size_is_a_bad_request(api, ns):
    assert_error(api.get("/namespaces", pageSize="many"), 400, "BadRequestException")
    assert_error(api.get("/namespaces", pageSize=0), 400, "BadRequestException")


def test_head_tells_whether_a_namespace_exists(api, ns):
    assert api.head("/namespaces/ns").status_code == 204
    missing = api.head("/namespaces/nope")
    assert missing.status_code == 404
    assert missing.content == b""


def test_a_missing_namespace_is_no_such_namespace(api):
    response = api.get("/namespaces/x")

    assert_error(response, 404, "NoSuchNamespaceException", "Namespace does not exist: x")


def test_listing_tables_of_a_missing_namespace_is_no_such_namespace(api):
    response = api.get("/namespaces/x/tables")

    assert_error(response, 404, "NoSuchNamespaceException", "Namespace does not exist: x")


def test_namespace_properties_are_updated_removed_and_missing_reported(api):
    api.post("/namespaces", {"namespace": ["ns"], "properties": {"owner": "erin", "old": "1"}})

    response = api.post(
        "/namespaces/ns/properties",
        {"updates": {"owner": "vic", "team": "data"}, "removals": ["old", "absent"]},
    )

    assert response.status_code == 200, response.content
    body = response.json()
    assert sorted(body["updated"]) == ["owner", "team"]
    assert body["removed"] == ["old"]
    assert body["missing"] == ["absent"]
    assert api.get("/namespaces/ns").json()["properties"] == {"owner": "vic", "team": "data"}


def test_setting_and_removing_the_same_namespace_property_is_a_bad_request(api, ns):
    response = api.post("/namespaces/ns/properties", {"updates": {"a": "1"}, "removals": ["a"]})

    assert_error(response, 400, "BadRequestException")


def test_updating_properties_of_a_missing_namespace_is_no_such_namespace(api):
    response = api.post("/namespaces/x/properties", {"updates": {"a": "1"}})

    assert_error(response, 404, "NoSuchNamespaceException", "Namespace does not exist: x")


def test_a_namespace_holding_a_table_cannot_be_dropped(api, table):
    response = api.delete("/namespaces/ns")

    assert_error(response, 409, "NamespaceNotEmptyException")
    assert api.head("/namespaces/ns").status_code == 204


def test_a_namespace_holding_a_view_cannot_be_dropped(api, ns):
    create_view(api)

    assert_error(api.delete("/namespaces/ns"), 409, "NamespaceNotEmptyException")


def test_a_namespace_with_child_namespaces_cannot_be_dropped(api, ns):
    api.post("/namespaces", {"namespace": ["ns", "child"]})

    assert_error(api.delete("/namespaces/ns"), 409, "NamespaceNotEmptyException")


def test_an_empty_namespace_is_dropped(api, ns):
    assert api.delete("/namespaces/ns").status_code == 204
    assert api.head("/namespaces/ns").status_code == 404


def test_dropping_a_missing_namespace_is_no_such_namespace(api):
    assert_error(api.delete("/namespaces/x"), 404, "NoSuchNamespaceException")


# -- tables: create, load, list ------------------------------------------------------------


def test_a_created_table_is_returned_as_a_load_table_result(api, ns, warehouse):
    result = create_table(api)

    location = result["metadata-location"]
    assert location.startswith(str(warehouse) + "/ns/t/metadata/")
    assert location.endswith(".metadata.json")
    assert Path(location).is_file()
    metadata = result["metadata"]
    assert metadata["format-version"] == 2
    assert metadata["location"] == str(warehouse / "ns" / "t")
    assert uuid.UUID(metadata["table-uuid"])
    [schema] = metadata["schemas"]
    assert [(f["id"], f["name"], f["type"]) for f in schema["fields"]] == [
        (1, "id", "long"),
        (2, "ts", "timestamptz"),
        (3, "category", "string"),
    ]
    [spec] = metadata["partition-specs"]
    assert [(f["source-id"], f["transform"]) for f in spec["fields"]] == [
        (2, "day"),
        (3, "identity"),
    ]
    assert metadata["default-sort-order-id"] == 1
    assert metadata["properties"]["write.format.default"] == "parquet"
    assert json.loads(Path(location).read_text())["table-uuid"] == metadata["table-uuid"]
    assert pointer("ns", "t") == location


def test_a_created_table_is_mirrored_in_the_database(api, table):
    row = Table.objects.get(namespace__name="ns", name="t")

    assert str(row.uuid) == table["metadata"]["table-uuid"]
    assert row.format_version == 2
    assert list(row.schema_fields().values_list("name", flat=True)) == ["id", "ts", "category"]


def test_a_table_is_loaded(api, table):
    response = api.get("/namespaces/ns/tables/t")

    assert response.status_code == 200
    body = response.json()
    assert body["metadata-location"] == table["metadata-location"]
    assert body["metadata"]["table-uuid"] == table["metadata"]["table-uuid"]


def test_head_tells_whether_a_table_exists(api, table):
    assert api.head("/namespaces/ns/tables/t").status_code == 204
    assert api.head("/namespaces/ns/tables/nope").status_code == 404


def test_tables_of_a_namespace_are_listed_as_identifiers(api, ns):
    create_table(api, "b")
    create_table(api, "a")
    create_view(api, "v")

    response = api.get("/namespaces/ns/tables")

    assert response.status_code == 200
    assert response.json()["identifiers"] == [
        {"namespace": ["ns"], "name": "a"},
        {"namespace": ["ns"], "name": "b"},
    ]


def test_tables_are_listed_page_by_page(api, ns):
    for name in ("a", "b", "c"):
        create_table(api, name)

    first = api.get("/namespaces/ns/tables", pageSize=2).json()
    second = api.get("/namespaces/ns/tables", pageSize=2, pageToken=first["next-page-token"])

    assert [i["name"] for i in first["identifiers"]] == ["a", "b"]
    assert [i["name"] for i in second.json()["identifiers"]] == ["c"]
    assert second.json().get("next-page-token") is None


def test_a_table_in_a_multi_level_namespace_is_created_and_loaded(api, warehouse):
    api.post("/namespaces", {"namespace": ["a"]})
    api.post("/namespaces", {"namespace": ["a", "b"]})

    result = create_table(api, "t", namespace="a%1Fb")

    assert result["metadata"]["location"] == str(warehouse / "a" / "b" / "t")
    listed = api.get("/namespaces/a%1Fb/tables").json()["identifiers"]
    assert listed == [{"namespace": ["a", "b"], "name": "t"}]
    assert api.get("/namespaces/a%1Fb/tables/t").status_code == 200


def test_loading_a_missing_table_is_no_such_table(api, ns):
    response = api.get("/namespaces/ns/tables/t")

    assert_error(response, 404, "NoSuchTableException", "Table does not exist: ns.t")


def test_creating_a_table_in_a_missing_namespace_is_no_such_namespace(api):
    response = api.post("/namespaces/x/tables", {"name": "t", "schema": SCHEMA})

    assert_error(response, 404, "NoSuchNamespaceException", "Namespace does not exist: x")


def test_creating_a_duplicate_table_is_already_exists(api, table):
    response = api.post("/namespaces/ns/tables", {"name": "t", "schema": SCHEMA})

    assert_error(response, 409, "AlreadyExistsException", "Table already exists: ns.t")


def test_creating_a_duplicate_table_is_a_conflict_and_writes_no_file(api, table, warehouse):
    before = metadata_files(warehouse)

    response = api.post("/namespaces/ns/tables", {"name": "t", "schema": SCHEMA})

    assert_error(response, 409, "AlreadyExistsException")
    assert metadata_files(warehouse) == before


def test_creating_a_table_with_a_views_name_is_already_exists(api, ns):
    create_view(api, "x")

    response = api.post("/namespaces/ns/tables", {"name": "x", "schema": SCHEMA})

    assert_error(
        response, 409, "AlreadyExistsException", "View with same name already exists: ns.x"
    )


def test_creating_a_table_with_a_views_name_is_a_conflict(api, ns):
    create_view(api, "x")

    response = api.post("/namespaces/ns/tables", {"name": "x", "schema": SCHEMA})

    assert_error(response, 409, "AlreadyExistsException")
    assert not Table.objects.filter(name="x").exists()


def test_a_malformed_json_body_is_a_bad_request(api, ns):
    response = api.post("/namespaces/ns/tables", raw="{not json")

    assert_error(response, 400, "BadRequestException")


def test_a_json_body_that_is_not_an_object_is_a_bad_request(api, ns):
    response = api.post("/namespaces/ns/tables", [1, 2])

    assert_error(response, 400, "BadRequestException")


def test_a_table_without_a_schema_is_a_bad_request(api, ns):
    response = api.post("/namespaces/ns/tables", {"name": "t"})

    assert_error(response, 400, "BadRequestException")


def test_a_schema_with_an_invalid_type_is_a_bad_request(api, ns, warehouse):
    schema = {
        "type": "struct",
        "schema-id": 0,
        "fields": [{"id": 1, "name": "id", "type": "varchar(10)", "required": False}],
    }

    response = api.post("/namespaces/ns/tables", {"name": "t", "schema": schema})

    assert_error(response, 400, "BadRequestException")
    assert metadata_files(warehouse) == []


def test_a_partition_spec_naming_a_missing_column_is_a_bad_request(api, ns):
    spec = {
        "spec-id": 0,
        "fields": [{"source-id": 99, "field-id": 1000, "name": "p", "transform": "identity"}],
    }

    response = api.post(
        "/namespaces/ns/tables", {"name": "t", "schema": SCHEMA, "partition-spec": spec}
    )

    assert response.status_code == 400, response.content


def test_an_invalid_table_name_is_a_bad_request(api, ns):
    response = api.post("/namespaces/ns/tables", {"name": "bad/name", "schema": SCHEMA})

    assert_error(response, 400, "BadRequestException")


def test_a_table_location_outside_the_warehouse_is_a_bad_request(api, ns, tmp_path, warehouse):
    outside = tmp_path / "elsewhere"

    response = api.post(
        "/namespaces/ns/tables", {"name": "t", "schema": SCHEMA, "location": str(outside)}
    )

    assert_error(response, 400, "BadRequestException")
    assert not outside.exists()


# -- tables: commits -----------------------------------------------------------------------


def test_a_commit_sets_properties_and_grows_the_metadata_log(api, table):
    body = {
        "requirements": [
            {"type": "assert-table-uuid", "uuid": table["metadata"]["table-uuid"]},
        ],
        "updates": [{"action": "set-properties", "updates": {"owner": "erin"}}],
    }

    response = api.post("/namespaces/ns/tables/t", body)

    assert response.status_code == 200, response.content
    result = response.json()
    assert set(result) == {"metadata-location", "metadata"}
    assert result["metadata-location"] != table["metadata-location"]
    assert Path(result["metadata-location"]).is_file()
    assert result["metadata"]["properties"]["owner"] == "erin"
    log = [entry["metadata-file"] for entry in result["metadata"]["metadata-log"]]
    assert log == [table["metadata-location"]]
    assert pointer("ns", "t") == result["metadata-location"]
    assert Table.objects.get(name="t").properties["owner"] == "erin"
    reloaded = api.get("/namespaces/ns/tables/t").json()
    assert reloaded["metadata-location"] == result["metadata-location"]


def test_successive_commits_number_metadata_files_and_keep_the_log(api, table):
    locations = [table["metadata-location"]]
    for value in ("1", "2"):
        response = api.post(
            "/namespaces/ns/tables/t",
            {"updates": [{"action": "set-properties", "updates": {"n": value}}]},
        )
        assert response.status_code == 200, response.content
        locations.append(response.json()["metadata-location"])

    assert [Path(p).name[:6] for p in locations] == ["00001-", "00002-", "00003-"]
    log = api.get("/namespaces/ns/tables/t").json()["metadata"]["metadata-log"]
    assert [entry["metadata-file"] for entry in log] == locations[:2]


def test_a_commit_whose_requirement_fails_is_refused_and_leaves_no_file(api, table, warehouse):
    before = metadata_files(warehouse)
    body = {
        "requirements": [{"type": "assert-current-schema-id", "current-schema-id": 7}],
        "updates": [{"action": "set-properties", "updates": {"owner": "erin"}}],
    }

    response = api.post("/namespaces/ns/tables/t", body)

    assert_error(response, 409, "CommitFailedException")
    assert metadata_files(warehouse) == before
    assert pointer("ns", "t") == table["metadata-location"]
    loaded = api.get("/namespaces/ns/tables/t").json()
    assert loaded["metadata-location"] == table["metadata-location"]
    assert "owner" not in loaded["metadata"]["properties"]


def test_a_commit_asserting_another_table_uuid_is_refused(api, table, warehouse):
    before = metadata_files(warehouse)
    body = {
        "requirements": [{"type": "assert-table-uuid", "uuid": str(uuid.uuid4())}],
        "updates": [{"action": "set-properties", "updates": {"owner": "erin"}}],
    }

    assert_error(api.post("/namespaces/ns/tables/t", body), 409, "CommitFailedException")
    assert metadata_files(warehouse) == before
    assert pointer("ns", "t") == table["metadata-location"]


def test_a_commit_asserting_create_on_an_existing_table_is_refused(api, table):
    body = {"requirements": [{"type": "assert-create"}], "updates": []}

    assert_error(api.post("/namespaces/ns/tables/t", body), 409, "CommitFailedException")


def test_a_commit_with_an_unknown_update_action_is_a_bad_request(api, table, warehouse):
    before = metadata_files(warehouse)

    response = api.post("/namespaces/ns/tables/t", {"updates": [{"action": "teleport"}]})

    assert_error(response, 400, "BadRequestException")
    assert metadata_files(warehouse) == before


def test_a_commit_to_a_missing_table_is_no_such_table(api, ns):
    response = api.post(
        "/namespaces/ns/tables/t", {"updates": [{"action": "set-properties", "updates": {}}]}
    )

    assert_error(response, 404, "NoSuchTableException", "Table does not exist: ns.t")


def test_a_commit_adds_a_column_with_add_schema_and_set_current_schema(api, table):
    new_schema = {
        "type": "struct",
        "schema-id": 1,
        "fields": [
            *SCHEMA["fields"],
            {"id": 4, "name": "amount", "type": "double", "required": False},
        ],
    }
    body = {
        "requirements": [
            {"type": "assert-table-uuid", "uuid": table["metadata"]["table-uuid"]},
            {"type": "assert-current-schema-id", "current-schema-id": 0},
            {"type": "assert-last-assigned-field-id", "last-assigned-field-id": 3},
        ],
        "updates": [
            {"action": "add-schema", "schema": new_schema, "last-column-id": 4},
            {"action": "set-current-schema", "schema-id": -1},
        ],
    }

    response = api.post("/namespaces/ns/tables/t", body)

    assert response.status_code == 200, response.content
    metadata = response.json()["metadata"]
    assert metadata["current-schema-id"] == 1
    assert metadata["last-column-id"] == 4
    assert [s["schema-id"] for s in metadata["schemas"]] == [0, 1]
    current = next(s for s in metadata["schemas"] if s["schema-id"] == 1)
    assert [f["name"] for f in current["fields"]] == ["id", "ts", "category", "amount"]
    row = Table.objects.get(name="t")
    assert row.current_schema_id == 1
    assert list(row.schema_fields().values_list("name", flat=True))[-1] == "amount"


def test_a_staged_create_returns_metadata_without_creating_the_table(api, ns, warehouse):
    response = api.post(
        "/namespaces/ns/tables",
        {
            "name": "staged",
            "schema": SCHEMA,
            "partition-spec": PARTITION_SPEC,
            "stage-create": True,
        },
    )

    assert response.status_code == 200, response.content
    result = response.json()
    assert result.get("metadata-location") is None
    assert result["metadata"]["format-version"] == 2
    assert result["metadata"]["location"] == str(warehouse / "ns" / "staged")
    assert api.head("/namespaces/ns/tables/staged").status_code == 404
    assert not Table.objects.filter(name="staged").exists()
    assert metadata_files(warehouse) == []


def staged_create_commit(metadata: dict) -> dict:
    """The commit the Java client sends to create a staged table (RESTSessionCatalog)."""
    [schema] = metadata["schemas"]
    [spec] = metadata["partition-specs"]
    order = next(
        o for o in metadata["sort-orders"] if o["order-id"] == metadata["default-sort-order-id"]
    )
    return {
        "requirements": [{"type": "assert-create"}],
        "updates": [
            {"action": "assign-uuid", "uuid": metadata["table-uuid"]},
            {"action": "upgrade-format-version", "format-version": 2},
            {
                "action": "add-schema",
                "schema": schema,
                "last-column-id": metadata["last-column-id"],
            },
            {"action": "set-current-schema", "schema-id": -1},
            {"action": "add-spec", "spec": spec},
            {"action": "set-default-spec", "spec-id": -1},
            {"action": "add-sort-order", "sort-order": order},
            {"action": "set-default-sort-order", "sort-order-id": -1},
            {"action": "set-location", "location": metadata["location"]},
            {
                "action": "set-properties",
                "updates": {"created-by": "spark", **metadata["properties"]},
            },
        ],
    }


def test_a_staged_create_is_completed_by_a_commit_asserting_create(api, ns, warehouse):
    staged = api.post(
        "/namespaces/ns/tables",
        {
            "name": "staged",
            "schema": SCHEMA,
            "partition-spec": PARTITION_SPEC,
            "write-order": WRITE_ORDER,
            "stage-create": True,
        },
    ).json()["metadata"]

    response = api.post("/namespaces/ns/tables/staged", staged_create_commit(staged))

    assert response.status_code == 200, response.content
    result = response.json()
    metadata = result["metadata"]
    assert Path(result["metadata-location"]).is_file()
    assert result["metadata-location"].startswith(str(warehouse / "ns" / "staged" / "metadata"))
    assert metadata["table-uuid"] == staged["table-uuid"]
    assert metadata["format-version"] == 2
    assert metadata["current-schema-id"] == 0
    assert [f["name"] for f in metadata["schemas"][0]["fields"]] == ["id", "ts", "category"]
    spec = next(
        s for s in metadata["partition-specs"] if s["spec-id"] == metadata["default-spec-id"]
    )
    assert [f["transform"] for f in spec["fields"]] == ["day", "identity"]
    assert metadata["default-sort-order-id"] == 1
    assert metadata["properties"]["created-by"] == "spark"
    assert metadata["metadata-log"] == []
    loaded = api.get("/namespaces/ns/tables/staged").json()
    assert loaded["metadata-location"] == result["metadata-location"]
    assert str(Table.objects.get(name="staged").uuid) == staged["table-uuid"]


def test_a_second_commit_asserting_create_is_refused(api, ns, warehouse):
    staged = api.post(
        "/namespaces/ns/tables", {"name": "staged", "schema": SCHEMA, "stage-create": True}
    ).json()["metadata"]
    body = staged_create_commit(staged)
    assert api.post("/namespaces/ns/tables/staged", body).status_code == 200
    before = metadata_files(warehouse)

    response = api.post("/namespaces/ns/tables/staged", body)

    assert_error(response, 409, "CommitFailedException")
    assert metadata_files(warehouse) == before


def test_a_staged_create_with_a_location_outside_the_warehouse_is_refused(api, ns, tmp_path):
    staged = api.post(
        "/namespaces/ns/tables", {"name": "staged", "schema": SCHEMA, "stage-create": True}
    ).json()["metadata"]
    staged["location"] = str(tmp_path / "elsewhere")

    response = api.post("/namespaces/ns/tables/staged", staged_create_commit(staged))

    assert_error(response, 400, "BadRequestException")
    assert not Table.objects.filter(name="staged").exists()
    assert not (tmp_path / "elsewhere").exists()


# -- tables: rename, register, drop, metrics -----------------------------------------------


def identifier(namespace: str, name: str) -> dict:
    return {"namespace": namespace.split("."), "name": name}


def test_a_table_is_renamed(api, table):
    api.post("/namespaces", {"namespace": ["other"]})

    response = api.post(
        "/tables/rename", {"source": identifier("ns", "t"), "destination": identifier("other", "u")}
    )

    assert response.status_code == 204, response.content
    assert api.head("/namespaces/ns/tables/t").status_code == 404
    loaded = api.get("/namespaces/other/tables/u").json()
    assert loaded["metadata-location"] == table["metadata-location"]


def test_renaming_a_table_to_an_existing_table_is_a_conflict(api, table):
    create_table(api, "u")

    response = api.post(
        "/tables/rename", {"source": identifier("ns", "t"), "destination": identifier("ns", "u")}
    )

    assert_error(response, 409, "AlreadyExistsException")
    assert api.head("/namespaces/ns/tables/t").status_code == 204


def test_renaming_a_table_to_a_views_name_is_a_conflict(api, table):
    create_view(api, "v")

    response = api.post(
        "/tables/rename", {"source": identifier("ns", "t"), "destination": identifier("ns", "v")}
    )

    assert_error(response, 409, "AlreadyExistsException")


def test_renaming_a_missing_table_is_no_such_table(api, ns):
    response = api.post(
        "/tables/rename", {"source": identifier("ns", "t"), "destination": identifier("ns", "u")}
    )

    assert_error(response, 404, "NoSuchTableException", "Table does not exist: ns.t")


def test_renaming_a_table_into_a_missing_namespace_is_no_such_namespace(api, table):
    response = api.post(
        "/tables/rename", {"source": identifier("ns", "t"), "destination": identifier("x", "t")}
    )

    assert_error(response, 404, "NoSuchNamespaceException")


def test_a_rename_without_a_destination_is_a_bad_request(api, table):
    response = api.post("/tables/rename", {"source": identifier("ns", "t")})

    assert_error(response, 400, "BadRequestException")


def test_an_existing_metadata_file_is_registered_under_a_new_name(api, table):
    registration = {"name": "registered", "metadata-location": table["metadata-location"]}
    # While the table lives, a second object would own its folder: a purge of either would
    # delete the other's files.
    error = assert_error(
        api.post("/namespaces/ns/register", registration), 409, "AlreadyExistsException"
    )
    assert "overlaps the location of table ns.t" in error["message"]
    assert api.delete("/namespaces/ns/tables/t").status_code == 204

    response = api.post("/namespaces/ns/register", registration)

    assert response.status_code == 200, response.content
    result = response.json()
    assert result["metadata-location"] == table["metadata-location"]
    assert result["metadata"]["table-uuid"] == table["metadata"]["table-uuid"]
    loaded = api.get("/namespaces/ns/tables/registered").json()
    assert loaded["metadata-location"] == table["metadata-location"]


def test_registering_under_a_taken_name_is_a_conflict(api, table):
    response = api.post(
        "/namespaces/ns/register", {"name": "t", "metadata-location": table["metadata-location"]}
    )

    assert_error(response, 409, "AlreadyExistsException")


def test_registering_a_metadata_file_outside_the_warehouse_is_a_bad_request(api, table, tmp_path):
    outside = tmp_path / "outside" / "metadata"
    outside.mkdir(parents=True)
    copy = outside / "00001-copy.metadata.json"
    copy.write_text(Path(table["metadata-location"]).read_text())

    response = api.post("/namespaces/ns/register", {"name": "r", "metadata-location": str(copy)})

    assert_error(response, 400, "BadRequestException")
    assert not Table.objects.filter(name="r").exists()


def test_registering_a_missing_metadata_file_is_a_bad_request(api, ns, warehouse):
    missing = warehouse / "ns" / "r" / "metadata" / "00001-x.metadata.json"

    response = api.post("/namespaces/ns/register", {"name": "r", "metadata-location": str(missing)})

    assert_error(response, 400, "BadRequestException")


def test_registering_a_gzip_file_over_corrupt_data_is_a_bad_request_and_registers_nothing(
    api, ns, warehouse
):
    corrupt = warehouse / "ns" / "r" / "metadata" / "00001-x.gz.metadata.json"
    corrupt.parent.mkdir(parents=True)
    # A gzip header over corrupt deflate data: zlib.error, once a 500.
    corrupt.write_bytes(gzip.compress(b'{"format-version": 2}' * 50)[:10] + b"\x00garbage" * 5)

    response = api.post("/namespaces/ns/register", {"name": "r", "metadata-location": str(corrupt)})

    assert_error(response, 400, "BadRequestException")
    assert "not valid JSON" in response.json()["error"]["message"]
    assert api.head("/namespaces/ns/tables/r").status_code == 404


def test_a_table_is_dropped_and_its_files_kept(api, table):
    response = api.delete("/namespaces/ns/tables/t")

    assert response.status_code == 204
    assert api.head("/namespaces/ns/tables/t").status_code == 404
    assert Path(table["metadata-location"]).is_file()


def test_a_table_dropped_with_purge_loses_its_folder(
    api, table, warehouse, django_capture_on_commit_callbacks
):
    folder = warehouse / "ns" / "t"
    assert folder.is_dir()

    with django_capture_on_commit_callbacks(execute=True):
        response = api.delete("/namespaces/ns/tables/t?purgeRequested=true")

    assert response.status_code == 204
    assert not folder.exists()
    assert warehouse.is_dir()
    assert api.head("/namespaces/ns/tables/t").status_code == 404


def test_dropping_a_missing_table_is_no_such_table(api, ns):
    assert_error(api.delete("/namespaces/ns/tables/t"), 404, "NoSuchTableException")


def test_a_metrics_report_is_accepted_and_kept(api, table):
    report = {
        "report-type": "scan-report",
        "table-name": "lakeview.ns.t",
        "snapshot-id": 1,
        "filter": True,
        "schema-id": 0,
        "projected-field-ids": [1],
        "projected-field-names": ["id"],
        "metrics": {
            "total-planning-duration": {
                "count": 1,
                "time-unit": "nanoseconds",
                "total-duration": 10,
            }
        },
    }

    response = api.post("/namespaces/ns/tables/t/metrics", report)

    assert response.status_code == 204, response.content
    [row] = TableMetricsReport.objects.all()
    assert row.table.name == "t"
    assert row.table_name == "ns.t"
    assert row.report_type == "scan-report"
    assert row.report["projected-field-names"] == ["id"]


def test_a_commit_report_for_a_table_being_created_is_accepted_and_not_kept(api, ns):
    """Spark reports a CTAS's commit while the create is still staged (no row yet): the
    reference server accepts any report, and a 404 here is a stack trace in every CTAS's
    log. Nothing is kept for a name without a table."""
    staged = api.post(
        "/namespaces/ns/tables", {"name": "staged", "schema": SCHEMA, "stage-create": True}
    )
    assert staged.status_code == 200, staged.content
    report = {"report-type": "commit-report", "table-name": "lakeview.ns.staged"}

    response = api.post("/namespaces/ns/tables/staged/metrics", report)

    assert response.status_code == 204, response.content
    assert not TableMetricsReport.objects.exists()
    assert not Table.objects.filter(name="staged").exists()


def test_a_scan_report_for_a_table_just_dropped_is_accepted_and_not_kept(viewer_api, api, table):
    assert api.delete("/namespaces/ns/tables/t").status_code == 204

    response = viewer_api.post("/namespaces/ns/tables/t/metrics", {"report-type": "scan-report"})

    assert response.status_code == 204, response.content
    assert not TableMetricsReport.objects.exists()


def test_a_metrics_report_for_a_missing_table_is_still_read_as_json(api, ns):
    response = api.post("/namespaces/ns/tables/t/metrics", raw="{not json")

    assert_error(response, 400, "BadRequestException")


@pytest.mark.parametrize("name", ["t", "missing"])
def test_a_user_without_a_role_may_not_send_metrics_reports_for_any_name(
    django_user_model, table, name
):
    """Whether the table exists or not, the answer is the same refusal: a caller who may
    not read learns nothing of which tables exist."""
    outsider = django_user_model.objects.create_user(username="olga", password="olga-password")
    reader = Iceberg(token_for(outsider))

    response = reader.post(f"/namespaces/ns/tables/{name}/metrics", {"report-type": "x"})

    assert_error(response, 403, "ForbiddenException")
    assert not TableMetricsReport.objects.exists()


# -- multi-table transactions --------------------------------------------------------------


def set_properties_change(namespace: str, name: str, **properties: str) -> dict:
    return {
        "identifier": identifier(namespace, name),
        "requirements": [],
        "updates": [{"action": "set-properties", "updates": properties}],
    }


def test_a_transaction_commits_changes_to_two_tables(api, ns):
    a = create_table(api, "a")
    b = create_table(api, "b")
    change_a = set_properties_change("ns", "a", owner="erin")
    change_a["requirements"] = [{"type": "assert-table-uuid", "uuid": a["metadata"]["table-uuid"]}]

    response = api.post(
        "/transactions/commit",
        {"table-changes": [change_a, set_properties_change("ns", "b", owner="vic")]},
    )

    assert response.status_code == 204, response.content
    assert pointer("ns", "a") != a["metadata-location"]
    assert pointer("ns", "b") != b["metadata-location"]
    assert api.get("/namespaces/ns/tables/a").json()["metadata"]["properties"]["owner"] == "erin"
    assert api.get("/namespaces/ns/tables/b").json()["metadata"]["properties"]["owner"] == "vic"


def test_a_transaction_with_one_failing_requirement_changes_no_table(api, ns, warehouse):
    a = create_table(api, "a")
    b = create_table(api, "b")
    files_before = metadata_files(warehouse)
    failing = set_properties_change("ns", "b", owner="vic")
    failing["requirements"] = [{"type": "assert-current-schema-id", "current-schema-id": 9}]

    response = api.post(
        "/transactions/commit",
        {"table-changes": [set_properties_change("ns", "a", owner="erin"), failing]},
    )

    assert_error(response, 409, "CommitFailedException")
    assert pointer("ns", "a") == a["metadata-location"]
    assert pointer("ns", "b") == b["metadata-location"]
    assert metadata_files(warehouse) == files_before
    assert "owner" not in api.get("/namespaces/ns/tables/a").json()["metadata"]["properties"]


def test_a_transaction_naming_a_missing_table_changes_no_table(api, ns, warehouse):
    a = create_table(api, "a")
    files_before = metadata_files(warehouse)

    response = api.post(
        "/transactions/commit",
        {
            "table-changes": [
                set_properties_change("ns", "a", owner="erin"),
                set_properties_change("ns", "missing", owner="vic"),
            ]
        },
    )

    assert_error(response, 404, "NoSuchTableException")
    assert pointer("ns", "a") == a["metadata-location"]
    assert metadata_files(warehouse) == files_before


def test_a_transaction_naming_a_table_twice_is_a_bad_request(api, ns):
    create_table(api, "a")
    change = set_properties_change("ns", "a", owner="erin")

    response = api.post("/transactions/commit", {"table-changes": [change, change]})

    assert_error(response, 400, "BadRequestException")


def test_a_transaction_without_identifiers_is_a_bad_request(api, table):
    response = api.post(
        "/transactions/commit", {"table-changes": [{"requirements": [], "updates": []}]}
    )

    assert_error(response, 400, "BadRequestException")


# -- views ---------------------------------------------------------------------------------


def test_a_view_is_created_as_spark_sends_it(api, ns, warehouse):
    response = api.post("/namespaces/ns/views", create_view_request("v"))

    assert response.status_code == 200, response.content
    result = response.json()
    assert result["metadata-location"].startswith(str(warehouse / "ns" / "v" / "metadata"))
    assert Path(result["metadata-location"]).is_file()
    metadata = result["metadata"]
    assert metadata["format-version"] == 1
    assert uuid.UUID(metadata["view-uuid"])
    assert metadata["current-version-id"] == 1
    [version] = metadata["versions"]
    assert version["schema-id"] == 0
    assert version["representations"] == [
        {"type": "sql", "sql": "SELECT id FROM ns.t", "dialect": "spark"}
    ]
    assert version["default-namespace"] == ["ns"]
    assert "default-catalog" not in version
    assert [f["name"] for f in metadata["schemas"][0]["fields"]] == ["id"]
    assert metadata["properties"]["spark.query-column-names"] == "id"


def test_a_created_view_is_loaded_with_its_version_log(api, ns):
    created = create_view(api)

    response = api.get("/namespaces/ns/views/v")

    assert response.status_code == 200
    body = response.json()
    assert body["metadata-location"] == created["metadata-location"]
    assert [e["version-id"] for e in body["metadata"]["version-log"]] == [1]


def spark_replace(metadata: dict, sql: str = "SELECT id, id * 2 AS twice FROM ns.t") -> dict:
    """CREATE OR REPLACE VIEW as Spark's Iceberg catalog commits it."""
    return {
        "requirements": [{"type": "assert-view-uuid", "uuid": metadata["view-uuid"]}],
        "updates": [
            {
                "action": "set-properties",
                "updates": {
                    "spark.query-column-names": "id,twice",
                    "engine_version": "Spark 3.5.8",
                },
            },
            {"action": "add-schema", "schema": view_schema(1, "id", "twice"), "last-column-id": 1},
            {
                "action": "add-view-version",
                "view-version": spark_view_version(2, sql, schema_id=-1),
            },
            {"action": "set-current-view-version", "view-version-id": -1},
        ],
    }


def test_a_view_is_replaced_as_spark_replaces_it(api, ns):
    created = create_view(api)

    response = api.post("/namespaces/ns/views/v", spark_replace(created["metadata"]))

    assert response.status_code == 200, response.content
    result = response.json()
    metadata = result["metadata"]
    assert result["metadata-location"] != created["metadata-location"]
    assert [v["version-id"] for v in metadata["versions"]] == [1, 2]
    assert metadata["current-version-id"] == 2
    assert [e["version-id"] for e in metadata["version-log"]] == [1, 2]
    current = next(v for v in metadata["versions"] if v["version-id"] == 2)
    assert current["schema-id"] == 1
    assert current["representations"][0]["sql"] == "SELECT id, id * 2 AS twice FROM ns.t"
    assert metadata["properties"]["spark.query-column-names"] == "id,twice"
    loaded = api.get("/namespaces/ns/views/v").json()
    assert loaded["metadata-location"] == result["metadata-location"]


def test_a_view_replace_asserting_another_uuid_is_refused(api, ns, warehouse):
    created = create_view(api)
    before = metadata_files(warehouse)
    body = spark_replace(created["metadata"])
    body["requirements"] = [{"type": "assert-view-uuid", "uuid": str(uuid.uuid4())}]

    response = api.post("/namespaces/ns/views/v", body)

    assert_error(response, 409, "CommitFailedException")
    assert metadata_files(warehouse) == before
    loaded = api.get("/namespaces/ns/views/v").json()
    assert loaded["metadata-location"] == created["metadata-location"]


def test_a_view_commit_with_an_unknown_update_is_a_bad_request(api, ns):
    create_view(api)

    response = api.post("/namespaces/ns/views/v", {"updates": [{"action": "teleport"}]})

    assert_error(response, 400, "BadRequestException")


def test_a_commit_to_a_missing_view_is_no_such_view(api, ns):
    response = api.post("/namespaces/ns/views/v", {"updates": []})

    assert_error(response, 404, "NoSuchViewException", "View does not exist: ns.v")


def test_views_of_a_namespace_are_listed_without_tables(api, ns):
    create_view(api, "w")
    create_view(api, "v")
    create_table(api, "t")

    response = api.get("/namespaces/ns/views")

    assert response.status_code == 200
    assert response.json()["identifiers"] == [
        {"namespace": ["ns"], "name": "v"},
        {"namespace": ["ns"], "name": "w"},
    ]


def test_listing_views_of_a_missing_namespace_is_no_such_namespace(api):
    response = api.get("/namespaces/x/views")

    assert_error(response, 404, "NoSuchNamespaceException", "Namespace does not exist: x")


def test_head_tells_whether_a_view_exists(api, ns):
    create_view(api)

    assert api.head("/namespaces/ns/views/v").status_code == 204
    assert api.head("/namespaces/ns/views/nope").status_code == 404


def test_a_table_is_not_a_view(api, table):
    assert api.head("/namespaces/ns/views/t").status_code == 404
    assert_error(
        api.get("/namespaces/ns/views/t"), 404, "NoSuchViewException", "View does not exist: ns.t"
    )


def test_loading_a_missing_view_is_no_such_view(api, ns):
    response = api.get("/namespaces/ns/views/v")

    assert_error(response, 404, "NoSuchViewException", "View does not exist: ns.v")


def test_a_view_is_renamed(api, ns):
    created = create_view(api)
    api.post("/namespaces", {"namespace": ["other"]})

    response = api.post(
        "/views/rename", {"source": identifier("ns", "v"), "destination": identifier("other", "w")}
    )

    assert response.status_code == 204, response.content
    assert api.head("/namespaces/ns/views/v").status_code == 404
    loaded = api.get("/namespaces/other/views/w").json()
    assert loaded["metadata-location"] == created["metadata-location"]


def test_renaming_a_view_to_a_tables_name_is_a_conflict(api, table):
    create_view(api)

    response = api.post(
        "/views/rename", {"source": identifier("ns", "v"), "destination": identifier("ns", "t")}
    )

    assert_error(
        response, 409, "AlreadyExistsException", "Table with same name already exists: ns.t"
    )


def test_renaming_a_missing_view_is_no_such_view(api, ns):
    response = api.post(
        "/views/rename", {"source": identifier("ns", "v"), "destination": identifier("ns", "w")}
    )

    assert_error(response, 404, "NoSuchViewException", "View does not exist: ns.v")


def test_a_view_is_dropped(api, ns):
    create_view(api)

    assert api.delete("/namespaces/ns/views/v").status_code == 204
    assert api.head("/namespaces/ns/views/v").status_code == 404
    assert not View.objects.filter(name="v").exists()


def test_dropping_a_missing_view_is_no_such_view(api, ns):
    assert_error(
        api.delete("/namespaces/ns/views/v"),
        404,
        "NoSuchViewException",
        "View does not exist: ns.v",
    )


def test_creating_a_view_with_a_tables_name_is_already_exists(api, ns, warehouse):
    create_table(api, "x")
    before = metadata_files(warehouse)

    response = api.post("/namespaces/ns/views", create_view_request("x"))

    assert_error(
        response, 409, "AlreadyExistsException", "Table with same name already exists: ns.x"
    )
    assert metadata_files(warehouse) == before


def test_creating_a_duplicate_view_is_already_exists(api, ns):
    create_view(api)

    response = api.post("/namespaces/ns/views", create_view_request("v"))

    assert_error(response, 409, "AlreadyExistsException", "View already exists: ns.v")


def test_creating_a_view_in_a_missing_namespace_is_no_such_namespace(api):
    response = api.post("/namespaces/x/views", create_view_request("v"))

    assert_error(response, 404, "NoSuchNamespaceException", "Namespace does not exist: x")


def test_a_view_request_without_a_view_version_is_a_bad_request(api, ns):
    body = create_view_request("v")
    del body["view-version"]

    assert_error(api.post("/namespaces/ns/views", body), 400, "BadRequestException")


def test_a_view_created_over_rest_is_mirrored_in_the_apps_models(api, ns, editor):
    created = create_view(api)
    api.post("/namespaces/ns/views/v", spark_replace(created["metadata"]))

    view = View.objects.get(namespace__name="ns", name="v")

    assert str(view.uuid) == created["metadata"]["view-uuid"]
    assert view.current_version_id == 2
    assert list(view.log_entries.values_list("version_id", flat=True)) == [1, 2]
    assert list(view.versions.values_list("version_id", flat=True)) == [1, 2]
    assert view.current_version().original_dialect == "spark"
    assert [f.name for f in view.schema_fields(1)] == ["id", "twice"]
    assert view.created_by == editor


def test_a_view_created_by_the_app_is_loadable_with_spark_and_trino_sql(api, ns):
    services.create_view(namespace="ns", name="app_v", sql="SELECT 1 AS id, 'a' AS label")

    response = api.get("/namespaces/ns/views/app_v")

    assert response.status_code == 200, response.content
    metadata = response.json()["metadata"]
    [version] = metadata["versions"]
    dialects = {r["dialect"] for r in version["representations"]}
    assert {"spark", "trino"} <= dialects
    assert [f["name"] for f in metadata["schemas"][0]["fields"]] == ["id", "label"]
    listed = api.get("/namespaces/ns/views").json()["identifiers"]
    assert {"namespace": ["ns"], "name": "app_v"} in listed


def test_a_spark_only_replace_of_an_app_view_may_drop_the_transpiled_dialects(api, ns):
    services.create_view(namespace="ns", name="app_v", sql="SELECT 1 AS id")
    loaded = api.get("/namespaces/ns/views/app_v").json()
    assert loaded["metadata"]["properties"]["replace.drop-dialect.allowed"] == "true"

    response = api.post("/namespaces/ns/views/app_v", spark_replace(loaded["metadata"]))

    assert response.status_code == 200, response.content
    assert [e["version-id"] for e in response.json()["metadata"]["version-log"]] == [1, 2]


def test_a_replace_that_drops_a_dialect_is_refused_when_the_view_does_not_allow_it(
    api, ns, warehouse
):
    services.create_view(
        namespace="ns",
        name="app_v",
        sql="SELECT 1 AS id",
        properties={"replace.drop-dialect.allowed": "false"},
    )
    loaded = api.get("/namespaces/ns/views/app_v").json()
    before = metadata_files(warehouse)

    body = spark_replace(loaded["metadata"])
    body["updates"][0]["updates"].pop("replace.drop-dialect.allowed", None)
    response = api.post("/namespaces/ns/views/app_v", body)

    error = assert_error(response, 400, "BadRequestException")
    assert "trino" in error["message"]
    assert metadata_files(warehouse) == before
    assert api.get("/namespaces/ns/views/app_v").json() == loaded


def test_an_app_view_is_replaced_over_rest_when_dropping_dialects_is_allowed(api, ns):
    services.create_view(namespace="ns", name="app_v", sql="SELECT 1 AS id")
    metadata = api.get("/namespaces/ns/views/app_v").json()["metadata"]
    body = spark_replace(metadata)
    body["updates"][0]["updates"]["replace.drop-dialect.allowed"] = "true"

    response = api.post("/namespaces/ns/views/app_v", body)

    assert response.status_code == 200, response.content
    assert [e["version-id"] for e in response.json()["metadata"]["version-log"]] == [1, 2]


def test_an_unsupported_method_is_refused(api, ns):
    response = api.client.put(f"{BASE}/namespaces/ns", headers=api.headers)

    assert response.status_code == 405
    assert response.json()["error"]["code"] == 405


# -- bodies of the wrong shape -------------------------------------------------------------


def wrong_shape(path: str, body: Any):
    wrong = {
        k: v for k, v in body.items() if k not in ("schema", "name") or not isinstance(v, dict)
    }
    if "view-version" in wrong and isinstance(wrong["view-version"], dict):
        del wrong["view-version"]
    return pytest.param(path, body, id=f"{path} {json.dumps(wrong, sort_keys=True)}")


@pytest.mark.parametrize(
    ("path", "body"),
    [
        wrong_shape("/namespaces", {"namespace": "ns2"}),
        wrong_shape("/namespaces", {"namespace": ["ns2"], "properties": ["a"]}),
        wrong_shape("/namespaces/ns/properties", {"updates": ["a"]}),
        wrong_shape("/namespaces/ns/tables", {"name": "t2", "schema": "x"}),
        wrong_shape("/namespaces/ns/tables", {"name": ["t2"], "schema": SCHEMA}),
        wrong_shape(
            "/namespaces/ns/tables",
            {"name": "t2", "schema": SCHEMA, "properties": ["a"]},
        ),
        wrong_shape("/namespaces/ns/tables/t", {"updates": "x"}),
        wrong_shape("/namespaces/ns/tables/t", {"requirements": [1]}),
        wrong_shape("/namespaces/ns/tables/t", {"updates": [{"action": "set-properties"}]}),
        wrong_shape(
            "/namespaces/ns/tables/t",
            {"updates": [{"action": "set-current-schema", "schema-id": 42}]},
        ),
        wrong_shape("/namespaces/ns/views", {**create_view_request("v2"), "view-version": "x"}),
        wrong_shape("/namespaces/ns/views", {**create_view_request("v2"), "properties": ["a"]}),
        wrong_shape("/namespaces/ns/views/v", {"updates": ["x"]}),
        wrong_shape("/namespaces/ns/views/v", {"requirements": ["x"]}),
        wrong_shape(
            "/namespaces/ns/views/v",
            {"updates": [{"action": "set-current-view-version", "view-version-id": 99}]},
        ),
        wrong_shape("/tables/rename", {"source": "ns.t", "destination": identifier("ns", "u")}),
        wrong_shape(
            "/tables/rename",
            {"source": {"namespace": "ns", "name": "t"}, "destination": identifier("ns", "u")},
        ),
        wrong_shape("/namespaces/ns/register", {"name": "r", "metadata-location": "relative/path"}),
        wrong_shape("/transactions/commit", {"table-changes": "x"}),
        wrong_shape("/transactions/commit", {"table-changes": [1]}),
    ],
)
def test_a_body_of_the_wrong_shape_is_a_bad_request_not_a_server_error(
    api, table, path, body, warehouse
):
    create_view(api)
    lenient = Client(raise_request_exception=False)
    before = metadata_files(warehouse)

    response = lenient.post(
        BASE + path, data=json.dumps(body), content_type="application/json", headers=api.headers
    )

    assert_error(response, 400, "BadRequestException")
    assert metadata_files(warehouse) == before


def test_removing_a_missing_table_property_is_not_an_error(api, table):
    body = {"updates": [{"action": "remove-properties", "removals": ["absent"]}]}

    response = api.post("/namespaces/ns/tables/t", body)

    assert response.status_code == 200, response.content
    assert "absent" not in response.json()["metadata"]["properties"]


def test_removing_an_existing_table_property_drops_it(api, table):
    body = {"updates": [{"action": "remove-properties", "removals": ["write.format.default"]}]}

    response = api.post("/namespaces/ns/tables/t", body)

    assert response.status_code == 200, response.content
    assert "write.format.default" not in response.json()["metadata"]["properties"]
