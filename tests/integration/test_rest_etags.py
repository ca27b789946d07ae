"""Freshness-aware loading over the Iceberg REST protocol (OpenAPI since 1.8): table load,
create, register and commit answers carry an ETag; a load whose If-None-Match names the
current tag is a 304 with no body, decided from the pointer row after the same sign-in
checks as a full load; nothing any cache answers is older than the database's pointer."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from catalog import services
from catalog.core import metadata_io
from catalog.core.errors import NoSuchTable
from catalog.iceberg_rest import table_loads
from catalog.models import AccessToken, CatalogClient, Table
from catalog.services import credentials as auth
from catalog.services.credentials import create_client
from tests.integration.test_attached_tables import write_version, written_table
from tests.integration.test_iceberg_rest import (
    BASE,
    Iceberg,
    assert_error,
    create_table,
    request_token,
    spark_view_version,
    token_for,
)
from tests.live_server import REPO_ROOT, catalog_server

pytestmark = pytest.mark.django_db

TAG = re.compile(r'^"[0-9a-f]{64}"$')
TABLE = "/namespaces/ns/tables/t"


def load(api: Iceberg, path: str = TABLE, *, if_none_match: str | None = None, **params: Any):
    headers = dict(api.headers)
    if if_none_match is not None:
        headers["If-None-Match"] = if_none_match
    return api.client.get(BASE + path, params, headers=headers)


def set_property(api: Iceberg, value: str, path: str = TABLE):
    response = api.post(path, {"updates": [{"action": "set-properties", "updates": {"n": value}}]})
    assert response.status_code == 200, response.content
    return response


@pytest.fixture
def table(api, ns) -> dict:
    return create_table(api)


@pytest.fixture(autouse=True)
def fresh_body_cache() -> None:
    """Each test starts with this process's cache of load bodies empty."""
    table_loads.bodies.clear()


# -- tags and 304s -------------------------------------------------------------------------


def test_a_load_carries_a_strong_quoted_tag_and_the_same_tag_back_is_a_304_with_no_body(api, table):
    loaded = load(api)
    tag = loaded["ETag"]
    assert loaded.status_code == 200
    assert TAG.match(tag)

    again = load(api, if_none_match=tag)

    assert again.status_code == 304
    assert again.content == b""
    assert again["ETag"] == tag


def test_the_body_of_a_200_is_the_metadata_file_as_it_is_on_disk(api, table):
    for _ in range(2):  # from the file, then from the process's cache
        loaded = load(api)
        document = json.loads(loaded.content)
        assert loaded["Content-Type"] == "application/json"
        assert document["metadata"] == metadata_io.read_json(table["metadata-location"])
        assert document["metadata-location"] == table["metadata-location"]
        assert document["config"] == {}


def test_the_tag_changes_with_every_commit_and_each_commit_answers_with_the_tag_a_load_has(
    api, table
):
    tags = [load(api)["ETag"]]
    for n in range(3):
        committed = set_property(api, str(n))
        tags.append(committed["ETag"])
        assert load(api)["ETag"] == committed["ETag"]
        assert load(api, if_none_match=committed["ETag"]).status_code == 304

    assert len(set(tags)) == 4


def test_create_and_register_answers_carry_the_tag_a_load_then_has(api, ns):
    created = api.post("/namespaces/ns/tables", {"name": "t", "schema": table_schema()})
    assert created.status_code == 200
    assert load(api)["ETag"] == created["ETag"]
    location = created.json()["metadata-location"]
    assert api.delete(TABLE).status_code == 204

    registered = api.post("/namespaces/ns/register", {"name": "r", "metadata-location": location})

    assert registered.status_code == 200, registered.content
    assert TAG.match(registered["ETag"])
    assert load(api, "/namespaces/ns/tables/r", if_none_match=registered["ETag"]).status_code == 304


def test_a_staged_create_has_no_tag_since_nothing_is_committed(api, ns):
    staged = api.post(
        "/namespaces/ns/tables", {"name": "t", "schema": table_schema(), "stage-create": True}
    )

    assert staged.status_code == 200
    assert "ETag" not in staged


def test_a_stale_tag_gets_a_200_with_the_new_metadata_and_the_new_tag(api, table):
    old = load(api)["ETag"]
    committed = set_property(api, "new")

    response = load(api, if_none_match=old)

    assert response.status_code == 200
    document = response.json()
    assert document["metadata-location"] == committed.json()["metadata-location"]
    assert document["metadata"]["properties"]["n"] == "new"
    assert response["ETag"] == committed["ETag"] != old


def test_snapshots_refs_and_all_get_different_tags_and_all_is_the_default(api, table):
    default, every, refs = load(api), load(api, snapshots="all"), load(api, snapshots="refs")

    assert default["ETag"] == every["ETag"] != refs["ETag"]
    assert load(api, snapshots="refs", if_none_match=refs["ETag"]).status_code == 304
    assert load(api, snapshots="all", if_none_match=refs["ETag"]).status_code == 200
    assert load(api, snapshots="refs", if_none_match=every["ETag"]).status_code == 200


def test_an_unknown_snapshots_mode_is_a_json_400(api, table):
    assert_error(load(api, snapshots="some"), 400, "BadRequestException")


@pytest.mark.parametrize(
    "header",
    [
        "{tag}",
        "W/{tag}",
        '"0000", {tag}',
        '"a,b",{tag} ,"c"',
        '"broken, {tag}',  # the broken member ends at the comma; the tag after it counts
        "*",
        " * ",
    ],
)
def test_if_none_match_as_rfc_9110_writes_it_matches_the_current_tag(api, table, header):
    tag = load(api)["ETag"]

    response = load(api, if_none_match=header.format(tag=tag))

    assert response.status_code == 304
    assert response["ETag"] == tag


@pytest.mark.parametrize(
    "header",
    ["", '"0000"', "{bare}", "W/{bare}", '"{bare}x"', '{tag}"', "**", "*, {tag}x"],
)
def test_if_none_match_naming_no_current_tag_gets_the_table(api, table, header):
    tag = load(api)["ETag"]

    response = load(api, if_none_match=header.format(tag=tag, bare=tag.strip('"')))

    assert response.status_code == 200
    assert response.json()["metadata-location"] == table["metadata-location"]


def test_a_missing_table_is_a_404_whatever_if_none_match_says(api, ns):
    for header in ("*", '"0000"'):
        assert_error(
            load(api, "/namespaces/ns/tables/nope", if_none_match=header),
            404,
            "NoSuchTableException",
            "Table does not exist: ns.nope",
        )


def test_views_have_no_etag_in_the_spec_and_keep_answering_200(api, ns):
    created = api.post(
        "/namespaces/ns/views",
        {
            "name": "v",
            "schema": {"type": "struct", "schema-id": 0, "fields": []},
            "view-version": spark_view_version(1, "SELECT 1 AS one"),
            "properties": {},
        },
    )
    assert created.status_code == 200, created.content
    assert "ETag" not in created

    response = load(api, "/namespaces/ns/views/v", if_none_match="*")

    assert response.status_code == 200
    assert "ETag" not in response


# -- the same sign-in checks as a full load --------------------------------------------------


def test_a_revoked_client_gets_a_401_and_never_a_304_even_while_its_token_was_trusted(
    editor, api, table
):
    client, secret = create_client(name="spark", user=editor)
    spark = Iceberg(request_token(client.client_id, secret).json()["access_token"])
    tag = load(spark)["ETag"]  # the token is now verified and trusted for a while
    CatalogClient.objects.filter(pk=client.pk).update(active=False)

    for header in (tag, "*", None):
        assert_error(load(spark, if_none_match=header), 401, "NotAuthorizedException")
    # Nor can it learn whether a table exists.
    assert_error(load(spark, "/namespaces/ns/tables/nope"), 401, "NotAuthorizedException")
    assert load(api, if_none_match=tag).status_code == 304  # other clients are unaffected


def test_a_deactivated_user_or_an_expired_token_gets_a_401_never_a_304(editor, api, table):
    token = token_for(editor)
    engine = Iceberg(token)
    tag = load(engine)["ETag"]
    type(editor).objects.filter(pk=editor.pk).update(is_active=False)
    assert_error(load(engine, if_none_match=tag), 401, "NotAuthorizedException")

    type(editor).objects.filter(pk=editor.pk).update(is_active=True)
    auth.forget(auth.digest_of(token))
    engine = Iceberg(token)
    assert load(engine, if_none_match=tag).status_code == 304
    AccessToken.objects.filter(digest=auth.digest_of(token)).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert_error(load(engine, if_none_match=tag), 401, "NotAuthorizedException")


def test_no_token_a_wrong_token_or_no_role_gets_401_or_403_never_a_304(
    api, table, django_user_model
):
    tag = load(api)["ETag"]
    assert_error(
        Iceberg("").client.get(BASE + TABLE, headers={"If-None-Match": tag}),
        401,
        "NotAuthorizedException",
    )
    assert_error(load(Iceberg("not-a-token"), if_none_match=tag), 401, "NotAuthorizedException")
    nobody = django_user_model.objects.create_user(username="nora", password="nora-password")

    response = load(Iceberg(token_for(nobody)), if_none_match=tag)

    assert_error(response, 403, "ForbiddenException")


def test_a_viewer_may_get_a_304(api, table, viewer):
    tag = load(api)["ETag"]

    assert load(Iceberg(token_for(viewer)), if_none_match=tag).status_code == 304


# -- the 304 from the pointer row alone ------------------------------------------------------


def test_a_304_reads_no_metadata_file_and_runs_only_the_pointer_query(api, table, monkeypatch):
    tag = load(api)["ETag"]  # signs in: the token is verified and trusted from now on
    table_loads.bodies.clear()

    def no_reads(path: str) -> dict:
        raise AssertionError(f"a 304 read {path}")

    monkeypatch.setattr(metadata_io, "read_json", no_reads)
    with CaptureQueriesContext(connection) as queries:
        response = load(api, if_none_match=tag)

    assert response.status_code == 304
    [query] = queries.captured_queries
    sql = query["sql"].lower()
    assert "catalog_accesstoken" in sql  # the token is checked again, in the same query
    for mirror_table in ("snapshot", "schemafield", "metadatalog", "partition"):
        assert mirror_table not in sql


def test_a_200_from_the_process_cache_also_runs_only_the_pointer_query(api, table, monkeypatch):
    load(api)
    monkeypatch.setattr(metadata_io, "read_json", lambda path: pytest.fail(f"read {path}"))

    with CaptureQueriesContext(connection) as queries:
        response = load(api)

    assert response.status_code == 200
    assert response.json()["metadata-location"] == table["metadata-location"]
    assert len(queries.captured_queries) == 1


def test_the_pointer_query_answers_the_same_on_the_driver_as_through_djangos_cursor(
    api, table, editor
):
    # The direct path (outside Django's cursor wrapper) and the observed one (a debug
    # cursor, as under CaptureQueriesContext) run the same SQL with the same values.
    load(api)
    digest = auth.digest_of(api.headers["Authorization"].removeprefix("Bearer "))
    who = {"user_id": editor.pk, "client_id": CatalogClient.objects.get().pk}
    direct = table_loads.pointer("ns", "t", token_digest=digest, **who)
    with CaptureQueriesContext(connection) as queries:
        observed = table_loads.pointer("ns", "t", token_digest=digest, **who)

    assert len(queries.captured_queries) == 1
    assert direct == observed
    assert direct.state.metadata_location == table["metadata-location"]
    assert direct.state.uuid == table["metadata"]["table-uuid"]
    assert direct.attached is False
    assert direct.read_ok is True  # the editor group's grant on the catalog
    assert table_loads.state_of(Table.objects.get(name="t")) == direct.state


def test_the_direct_pointer_query_still_refuses_a_revoked_token_and_misses(api, table, editor):
    load(api)
    digest = auth.digest_of(api.headers["Authorization"].removeprefix("Bearer "))
    who = {"user_id": editor.pk, "client_id": CatalogClient.objects.get().pk}
    with pytest.raises(NoSuchTable):
        table_loads.pointer("ns", "missing", token_digest=digest, **who)
    CatalogClient.objects.update(active=False)
    for name in ("t", "missing"):
        with pytest.raises(auth.InvalidCredentials):
            table_loads.pointer("ns", name, token_digest=digest, **who)


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's numbered parameters")
def test_on_sqlite_the_direct_pointer_query_binds_each_distinct_value_once(api, table, editor):
    # The ORM's form repeats the request's values and its constants; the numbered form
    # binds each once, and answers as the ORM's form does.
    load(api)
    prepared = table_loads._prepare(connection)
    assert len(prepared.raw_template) < len(prepared.template) / 2
    client = CatalogClient.objects.get().pk
    digest = auth.digest_of(api.headers["Authorization"].removeprefix("Bearer "))
    values = ("ns", "t", digest, editor.pk, client)
    ordered = prepared.params(connection, *values)
    numbered = prepared._fill(prepared.raw_template, prepared.raw_slots, connection, *values)
    raw = connection.connection
    assert (
        raw.execute(prepared.raw_sql, numbered).fetchall()
        == raw.execute(prepared.sql.replace("%s", "?"), ordered).fetchall()
    )
    assert raw.execute(prepared.raw_sql, numbered).fetchone()[:3] == (
        table["metadata-location"],
        table["metadata"]["table-uuid"].replace("-", ""),
        table["metadata"]["last-updated-ms"],
    )
    # Values unlike any constant of the query: each is bound once.
    unique = ("ns-9", "t-9", "digest-9", -41, -42)
    numbered = prepared._fill(prepared.raw_template, prepared.raw_slots, connection, *unique)
    assert [numbered.count(value) for value in unique] == [1, 1, 1, 1, 1]


@pytest.mark.parametrize(
    "micros", [0, 981_173_106_000_007, 981_173_106_000_000, 4_102_444_799_999_999, 1_234_567]
)
def test_the_time_a_load_checks_the_token_against_is_written_as_djangos_sqlite_writes_it(
    micros,
):
    whole, micro = divmod(micros, 1_000_000)
    written = datetime.fromtimestamp(whole, UTC).replace(microsecond=micro)
    assert table_loads._utc_text(whole, micro) == str(written.replace(tzinfo=None))
    # The same second again (its text is kept) with other microseconds.
    assert table_loads._utc_text(whole, 5) == str(written.replace(microsecond=5, tzinfo=None))


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's prepared statements")
def test_on_postgresql_the_pointer_query_is_prepared_once_per_connection(api, table):
    for _ in range(3):
        assert load(api).status_code == 200

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s",
            ["%catalog_accesstoken%"],
        )
        [(prepared,)] = cursor.fetchall()
    assert prepared == 1


def test_the_cache_of_bodies_is_bounded_in_bytes_and_never_answers_an_older_pointer(
    api, table, monkeypatch
):
    monkeypatch.setattr(table_loads.bodies, "max_bytes", 3 * len(load(api).content))
    for n in range(8):
        committed = set_property(api, str(n))
        loaded = load(api)
        assert loaded.json()["metadata-location"] == committed.json()["metadata-location"]
        assert loaded.json()["metadata"]["properties"]["n"] == str(n)
        assert table_loads.bodies.size <= table_loads.bodies.max_bytes
    assert len(table_loads.bodies) <= 3


def test_a_load_whose_metadata_file_is_gone_is_a_json_error_not_a_500(api, table):
    Path(table["metadata-location"].removeprefix("file://")).unlink()

    response = load(api)

    assert 400 <= response.status_code < 500
    assert response.json()["error"]["type"]


# -- attached tables follow their writer -------------------------------------------------------


@pytest.fixture
def external(tmp_path: Path, settings) -> Path:
    folder = tmp_path / "external"
    folder.mkdir()
    settings.ATTACH_LOCATIONS = [str(folder)]
    return folder


def test_an_attached_tables_tag_follows_its_writer(external, editor, api):
    services.create_namespace(name="ext", actor=editor)
    folder = external / "orders"
    document = written_table(folder, versions=1)
    services.attach_table(namespace="ext", name="orders", location=str(folder), actor=editor)
    path = "/namespaces/ext/tables/orders"
    first = load(api, path)["ETag"]
    assert load(api, path, if_none_match=first).status_code == 304

    write_version(folder, 2, document)
    followed = load(api, path, if_none_match=first)

    assert followed.status_code == 200
    assert followed.json()["metadata"]["properties"]["writer-version"] == "2"
    second = followed["ETag"]
    assert second != first
    assert load(api, path, if_none_match=second).status_code == 304

    # A writer that rewrites the newest file in place (same name, new content) moves the tag
    # too: it names the file's table-uuid and last-updated-ms, not only its location.
    write_version(folder, 3, document, name="v2.metadata.json")
    rewritten = load(api, path, if_none_match=second)
    assert rewritten.status_code == 200
    assert rewritten.json()["metadata"]["properties"]["writer-version"] == "3"
    assert rewritten["ETag"] not in (first, second)
    assert Table.objects.get(name="orders").metadata_location.endswith("/v2.metadata.json")


# -- engines ---------------------------------------------------------------------------------


def table_schema() -> dict:
    return {
        "type": "struct",
        "schema-id": 0,
        "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
    }


@pytest.mark.django_db(transaction=True)
def test_pyiceberg_creates_appends_scans_and_reloads_through_the_tagged_endpoints(
    live_server, editor
):
    import pyarrow as pa
    import requests
    from pyiceberg.catalog.rest import RestCatalog

    client, secret = create_client(name="py", user=editor)
    uri, credential = f"{live_server.url}/iceberg", f"{client.client_id}:{secret}"
    # Each catalog is closed at the end of its block: a kept-alive connection would hold a
    # live server thread (and its database connection) into the next test.
    with RestCatalog("lv", uri=uri, credential=credential) as catalog:
        catalog.create_namespace("py")
        rows = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": pa.array(["a", "b", "c"])})
        created = catalog.create_table("py.t", schema=rows.schema)
        created.append(rows)
        created.append(rows)
        location = created.refresh().metadata_location

    for mode in ("all", "refs"):
        options = {"snapshot-loading-mode": mode}
        with RestCatalog("lv", uri=uri, credential=credential, **options) as reader:
            scanned = reader.load_table("py.t").scan().to_arrow()
        assert sorted(scanned.column("id").to_pylist()) == [1, 1, 2, 2, 3, 3]

    url = f"{live_server.url}/iceberg/v1/namespaces/py/tables/t"
    headers = {"Authorization": f"Bearer {token_for(editor)}"}
    loaded = requests.get(url, headers=headers, timeout=30)
    assert loaded.json()["metadata-location"] == location
    unchanged = requests.get(
        url, headers={**headers, "If-None-Match": loaded.headers["ETag"]}, timeout=30
    )
    assert unchanged.status_code == 304
    assert unchanged.content == b""


# -- nothing stale, from several processes ----------------------------------------------------

READERS = 3
COMMITTERS = 2
SECONDS = 6.0


def _hammer(role: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.integration.load_hammer", role, *args],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_loads_from_several_processes_while_commits_land_never_answer_an_older_pointer(
    tmp_path,
):
    """The app under gunicorn (2 processes of 4 threads, each with its own cache of bodies);
    readers in processes of their own load one table while two committers race to change it.
    Before each request a reader reads the pointer from the database; the answer (a 200's
    metadata location, or the location of the tag a 304 confirmed) must be at least that new,
    so a commit acknowledged before a load was sent is always seen."""
    import requests

    with catalog_server(tmp_path / "app", workers=2, threads=4) as server:
        http = server.iceberg_session()
        token = http.headers["Authorization"].removeprefix("Bearer ")
        base = f"{server.iceberg_uri}/v1"
        assert http.post(f"{base}/namespaces", json={"namespace": ["ns"]}).status_code == 200
        created = http.post(
            f"{base}/namespaces/ns/tables", json={"name": "t", "schema": table_schema()}
        )
        assert created.status_code == 200, created.text
        # `--token=`: a token may begin with "-", which argparse takes for an option.
        common = ["--url", server.base_url, f"--token={token}", "--namespace", "ns", "--table", "t"]
        common += ["--seconds", str(SECONDS)]
        processes = [
            _hammer("reader", *common, "--db", str(server.db_path), "--snapshots", mode)
            for mode in ("", "refs", "all")[:READERS]
        ] + [
            _hammer("committer", *common, "--name", f"c{n}", "--pause", "0.05")
            for n in range(COMMITTERS)
        ]
        results = []
        for process in processes:
            out, err = process.communicate(timeout=SECONDS + 120)
            assert process.returncode == 0, err
            results.append(json.loads(out))
        final = requests.get(
            f"{base}/namespaces/ns/tables/t", headers=http.headers, timeout=30
        ).json()
        log = server.log_tail()

    readers, committers = results[:READERS], results[READERS:]
    for result in readers:
        assert result["stale"] == [], result
        assert set(result["statuses"]) <= {"200", "304"}, result
    # Both answers were exercised while the pointer moved (a quiet machine gives hundreds of
    # each and dozens of commits; the bounds leave room for a busy one).
    answered = {s: sum(r["statuses"].get(s, 0) for r in readers) for s in ("200", "304")}
    assert answered["200"] >= 20 and answered["304"] >= 5, readers
    acknowledged = [loc for result in committers for loc in result["acknowledged"]]
    assert len(acknowledged) >= 5, committers
    for result in committers:
        assert set(result["statuses"]) <= {"200", "409"}, result
    # The last acknowledged commit is what a load after them all answers.
    newest = max(acknowledged, key=lambda loc: int(loc.rsplit("/", 1)[1].split("-")[0]))
    assert final["metadata-location"] == newest
    assert " 500 " not in log
