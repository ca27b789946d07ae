"""Attaching tables that another system writes: read-only, chosen by ClickHouse's rules,
following the writer, and refused when the input is bad (nothing attached then)."""

from __future__ import annotations

import gzip
import json
import os
import uuid
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from catalog import services
from catalog.core.tables import new_table, table_metadata_json
from catalog.models import Attachment, CatalogEvent, Table
from tests.integration.test_iceberg_rest import assert_error

pytestmark = pytest.mark.django_db

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}


@pytest.fixture
def external(tmp_path: Path, settings) -> Path:
    """The folder tables may be attached from, outside the warehouse."""
    folder = tmp_path / "external"
    folder.mkdir()
    settings.ATTACH_LOCATIONS = [str(folder)]
    return folder


def written_table(folder: Path, *, versions: int = 1, table_uuid: str | None = None) -> dict:
    """What a Hadoop-catalog writer leaves: metadata/v1.metadata.json ... vN."""
    document = json.loads(
        table_metadata_json(new_table(schema=SCHEMA, location=f"file://{folder}"))
    )
    if table_uuid:
        document["table-uuid"] = table_uuid
    (folder / "metadata").mkdir(parents=True, exist_ok=True)
    for version in range(1, versions + 1):
        write_version(folder, version, document)
    return document


def write_version(folder: Path, version: int, document: dict, *, name: str | None = None) -> Path:
    document = {
        **document,
        "last-updated-ms": document["last-updated-ms"] + version,
        "properties": {**document.get("properties", {}), "writer-version": str(version)},
    }
    path = folder / "metadata" / (name or f"v{version}.metadata.json")
    raw = json.dumps(document).encode()
    path.write_bytes(gzip.compress(raw) if ".gz" in path.name else raw)
    return path


def files_of(folder: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def ext_ns(editor) -> str:
    services.create_namespace(name="ext", actor=editor)
    return "ext"


def test_an_attached_table_reads_the_newest_metadata_file_and_engines_load_it(
    external, ext_ns, editor, api
):
    folder = external / "orders"
    written_table(folder, versions=3)

    table = services.attach_table(
        namespace="ext", name="orders", location=str(folder), actor=editor
    )

    assert table.metadata_location == f"{folder}/metadata/v3.metadata.json"
    assert table.location == str(folder)
    assert table.properties["writer-version"] == "3"
    loaded = api.get("/namespaces/ext/tables/orders").json()
    assert loaded["metadata-location"] == table.metadata_location
    assert loaded["metadata"]["properties"]["writer-version"] == "3"
    assert CatalogEvent.objects.filter(action="attach_table", object_name="ext.orders").exists()


def test_a_newer_metadata_file_from_the_writer_is_picked_up_on_the_next_read(
    external, ext_ns, editor, api
):
    folder = external / "orders"
    document = written_table(folder, versions=1)
    services.attach_table(namespace="ext", name="orders", location=str(folder), actor=editor)
    before = Attachment.objects.get().checked_at

    write_version(folder, 2, document, name=f"00002-{uuid.uuid4()}.gz.metadata.json")
    loaded = api.get("/namespaces/ext/tables/orders").json()

    assert loaded["metadata-location"].endswith(".gz.metadata.json")
    assert loaded["metadata"]["properties"]["writer-version"] == "2"
    table = Table.objects.get(name="orders")
    assert table.properties["writer-version"] == "2"
    assert Attachment.objects.get().checked_at > before
    assert CatalogEvent.objects.filter(action="follow_attached_table").count() == 1


def test_a_table_recreated_in_place_under_the_same_file_name_is_followed_whole(
    external, ext_ns, editor, api
):
    folder = external / "orders"
    written_table(folder, versions=1)
    table = services.attach_table(namespace="ext", name="orders", location=str(folder))
    old_uuid = table.uuid

    recreated = written_table(folder, versions=1, table_uuid=str(uuid.uuid4()))
    api.get("/namespaces/ext/tables/orders")

    table.refresh_from_db()
    assert str(table.uuid) == recreated["table-uuid"] != str(old_uuid)


def test_writes_to_an_attached_table_are_refused_and_touch_no_file(external, ext_ns, editor, api):
    folder = external / "orders"
    written_table(folder, versions=2)
    services.attach_table(namespace="ext", name="orders", location=str(folder))
    before = files_of(folder)

    commit = api.post(
        "/namespaces/ext/tables/orders",
        {"requirements": [], "updates": [{"action": "set-properties", "updates": {"a": "b"}}]},
    )
    purge = api.delete("/namespaces/ext/tables/orders?purgeRequested=true")
    register = api.post(
        "/namespaces/ext/register",
        {"name": "orders", "metadata-location": f"{folder}/metadata/v1.metadata.json",
         "overwrite": True},
    )  # fmt: skip

    error = assert_error(commit, 403, "ForbiddenException")
    assert "attached read-only" in error["message"]
    assert_error(purge, 403, "ForbiddenException")
    assert register.status_code in (400, 403), register.content
    assert files_of(folder) == before
    assert Table.objects.get(name="orders").metadata_location.endswith("v2.metadata.json")


def test_detaching_forgets_the_table_and_leaves_every_file(external, ext_ns, editor, api):
    folder = external / "orders"
    written_table(folder, versions=2)
    services.attach_table(namespace="ext", name="orders", location=str(folder))
    before = files_of(folder)

    assert api.delete("/namespaces/ext/tables/orders").status_code == 204

    assert not Table.objects.filter(name="orders").exists()
    assert not Attachment.objects.exists()
    assert files_of(folder) == before


def test_a_table_of_ours_cannot_be_created_inside_an_attached_folder(
    external, ext_ns, settings, editor
):
    settings.WAREHOUSE = str(external)
    folder = external / "orders"
    written_table(folder)
    services.attach_table(namespace="ext", name="orders", location=str(folder))

    with pytest.raises(Exception, match="overlaps"):
        services.create_table(
            namespace="ext", name="inside", schema=SCHEMA, location=str(folder / "data" / "x")
        )


# -- bad input over the API: a JSON 4xx naming the field, and nothing attached --------------


@pytest.fixture
def client(editor) -> APIClient:
    client = APIClient()
    client.force_authenticate(editor)
    return client


def attach(client: APIClient, **body):
    return client.post("/api/namespaces/ext/tables/attach", body, format="json")


def test_the_api_attaches_and_detaches_and_shows_how_the_file_was_chosen(external, ext_ns, client):
    folder = external / "orders"
    written_table(folder, versions=2)

    response = attach(client, name="orders", location=str(folder))

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["attachment"]["metadata_location"].endswith("v2.metadata.json")
    assert body["attachment"]["newest_by"] == "version"
    detail = client.get("/api/namespaces/ext/tables/orders/").json()
    assert detail["attachment"]["location"] == str(folder)
    assert client.post("/api/namespaces/ext/tables/orders/detach").status_code == 204
    assert (folder / "metadata" / "v2.metadata.json").exists()


def test_an_explicit_metadata_file_and_a_table_uuid_choose_the_file(external, ext_ns, client):
    folder = external / "orders"
    document = written_table(folder, versions=3)
    other = {**document, "table-uuid": str(uuid.uuid4())}
    write_version(folder, 9, other)

    by_path = attach(
        client, name="by_path", location=str(folder), metadata_file_path="metadata/v1.metadata.json"
    ).json()
    by_uuid = attach(
        client, name="by_uuid", location=str(folder / "."), table_uuid=document["table-uuid"]
    )

    assert by_path["metadata_location"].endswith("/v1.metadata.json")
    assert by_uuid.status_code == 409  # the same folder cannot be attached twice
    client.post("/api/namespaces/ext/tables/by_path/detach")
    by_uuid = attach(
        client, name="by_uuid", location=str(folder), table_uuid=document["table-uuid"]
    )
    assert by_uuid.json()["metadata_location"].endswith("/v3.metadata.json")


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"location": "/etc"}, "location", "outside the locations"),
        ({"location": "{external}/../../etc"}, "location", "'..'"),
        ({"location": "{external}/link-out"}, "location", "outside the locations"),
        ({"location": "{external}"}, "location", ""),
        ({"location": "{external}/not-a-table"}, "location", "not an Iceberg table"),
        ({"location": "{external}/t", "metadata_file_path": "../t/metadata/v1.metadata.json"},
         "metadata_file_path", "'..'"),
        ({"location": "{external}/t", "metadata_file_path": "metadata/v1\x00.metadata.json"},
         "metadata_file_path", "NUL"),
        ({"location": "{external}/t", "metadata_file_path": "/etc/passwd"},
         "metadata_file_path", "relative"),
        ({"location": "{external}/t", "table_uuid": "not-a-uuid"}, "table_uuid", "not a UUID"),
        ({"location": "{external}/t", "table_uuid": str(uuid.uuid4())}, "location",
         "no metadata file with table-uuid"),
        ({"location": "{external}/t", "newest_by": "size"}, "newest_by", ""),
        ({"location": "{external}/t\x00"}, "location", ""),
    ],
)  # fmt: skip
def test_bad_attach_input_is_a_json_400_naming_the_field_and_attaches_nothing(
    external, ext_ns, client, tmp_path, body, field, words
):
    written_table(external / "t")
    (external / "not-a-table").mkdir()
    outside = tmp_path / "outside"
    written_table(outside)
    os.symlink(outside, external / "link-out")
    body = {k: v.replace("{external}", str(external)) for k, v in body.items()}

    response = attach(client, name="bad", **body)

    assert response.status_code == 400, response.content
    text = json.dumps(response.json())
    assert field in text and words in text, text
    assert not Table.objects.exists() and not Attachment.objects.exists()


def test_attaching_under_a_taken_name_is_a_409_and_changes_nothing(external, ext_ns, client):
    written_table(external / "a")
    written_table(external / "b")
    assert attach(client, name="t", location=str(external / "a")).status_code == 201

    response = attach(client, name="t", location=str(external / "b"))

    assert response.status_code == 409
    assert Table.objects.get().location == str(external / "a")


def test_a_look_that_fails_keeps_the_last_file_and_says_why(external, ext_ns, editor, api):
    folder = external / "orders"
    written_table(folder, versions=1)
    services.attach_table(namespace="ext", name="orders", location=str(folder))
    (folder / "metadata" / "v2.metadata.json").write_text("{not json")

    response = api.get("/namespaces/ext/tables/orders")

    assert response.status_code == 200
    assert response.json()["metadata-location"].endswith("v1.metadata.json")
    assert "not valid JSON" in Attachment.objects.get().check_error


@pytest.mark.postgres  # SQLite's in-memory test database locks whole tables across threads
@pytest.mark.django_db(transaction=True)
def test_readers_racing_to_follow_a_new_file_all_see_it_and_it_is_followed_once(external, editor):
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("SQLite's in-memory test database locks whole tables across threads")
    services.create_namespace(name="ext", actor=editor)
    folder = external / "orders"
    document = written_table(folder, versions=1)
    table = services.attach_table(namespace="ext", name="orders", location=str(folder))
    write_version(folder, 2, document)

    followed, errors = _race(
        8, lambda i: services.follow_attached(Table.objects.get(pk=table.pk)).metadata_location
    )
    seen = set(followed)
    assert not errors
    assert seen == {f"{folder}/metadata/v2.metadata.json"} and len(followed) == 8
    assert CatalogEvent.objects.filter(action="follow_attached_table").count() == 1
    assert Attachment.objects.get().check_error == ""


def _race(count: int, work) -> tuple[list, list[BaseException]]:
    """`work(i)` in `count` threads released together; what each returned, what each raised."""
    import threading

    from django.db import connection

    start = threading.Barrier(count)
    results: list = []
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            start.wait()
            results.append(work(i))
        except BaseException as error:  # noqa: BLE001 - inspected by the caller
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results, errors


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_racing_attaches_of_one_folder_or_one_name_attach_it_once(external, editor):
    """Six attaches of one folder under six names, then six of six folders under one name:
    each time one attaches and the others are refused with a conflict, never a 500 or two
    objects over one folder."""
    from django.db import connection

    from catalog.core.errors import CatalogError, http_status

    if connection.vendor != "postgresql":
        pytest.skip("SQLite's in-memory test database locks whole tables across threads")
    services.create_namespace(name="ext", actor=editor)
    folder = external / "orders"
    written_table(folder, versions=1)

    attached, refused = _race(
        6,
        lambda i: services.attach_table(namespace="ext", name=f"orders_{i}", location=str(folder)),
    )
    assert len(attached) == 1 and len(refused) == 5
    assert all(isinstance(e, CatalogError) and http_status(e) == 409 for e in refused), refused
    assert Table.objects.filter(namespace__name="ext").count() == Attachment.objects.count() == 1

    folders = []
    for i in range(6):
        folders.append(external / f"other_{i}")
        written_table(folders[-1], versions=1)
    attached, refused = _race(
        6, lambda i: services.attach_table(namespace="ext", name="one", location=str(folders[i]))
    )
    assert len(attached) == 1 and len(refused) == 5
    assert all(isinstance(e, CatalogError) and http_status(e) == 409 for e in refused), refused
    assert Table.objects.filter(namespace__name="ext", name="one").count() == 1
    assert Attachment.objects.count() == 2
