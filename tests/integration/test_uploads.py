"""A file becomes a table: CSV, Parquet and JSON lines uploaded over the API
(`POST /api/namespaces/<ns>/tables/upload`) and on a namespace's pages, written with
pyiceberg through the commit path; every bad file a 4xx that names the row and column at
fault, after which nothing was created or changed."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from pyiceberg.table import StaticTable
from rest_framework.test import APIClient

from catalog import services
from catalog.core import table_writes, uploads
from catalog.models import CatalogEvent, Table

pytestmark = pytest.mark.django_db

URL = "/api/namespaces/shop/tables/upload"
CSV = (
    b"id,name,amount,day\n1,ada,9.50,2024-01-02\n2,alan,20.00,2024-01-03\n3,chen,0.25,2024-01-04\n"
)


@pytest.fixture(autouse=True)
def upload_dir(tmp_path: Path, settings) -> Path:
    folder = tmp_path / "uploads"
    settings.UPLOAD_DIR = str(folder)
    return folder


@pytest.fixture
def shop(editor):
    return services.create_namespace(name="shop", actor=editor)


def api_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def upload(user, content: bytes, filename: str = "orders.csv", **fields):
    data = {"file": SimpleUploadedFile(filename, content), "table": "orders", **fields}
    return api_for(user).post(URL, data, format="multipart")


def parquet(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def scanned(namespace: str, name: str) -> pa.Table:
    table = Table.objects.get(namespace__name=namespace, name=name)
    return StaticTable.from_metadata(table.metadata_location).scan().to_arrow()


def files_in(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


def assert_nothing_written(warehouse: Path, upload_dir: Path) -> None:
    assert not Table.objects.filter(namespace__name="shop").exists()
    assert files_in(warehouse) == []
    assert files_in(upload_dir) == []


# -- the three formats -----------------------------------------------------------------------


def test_a_csv_file_becomes_a_table_with_its_rows_in_one_commit(shop, editor, upload_dir):
    answer = upload(editor, CSV)

    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert (body["namespace"], body["table"], body["mode"], body["format"]) == (
        "shop",
        "orders",
        "create",
        "csv",
    )
    assert body["rows_written"] == 3
    assert body["columns"] == [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "day", "type": "date"},
    ]
    rows = scanned("shop", "orders").sort_by("id").to_pylist()
    assert [(r["id"], r["name"], r["amount"]) for r in rows] == [
        (1, "ada", 9.5),
        (2, "alan", 20.0),
        (3, "chen", 0.25),
    ]
    table = Table.objects.get(namespace__name="shop", name="orders")
    metadata = StaticTable.from_metadata(table.metadata_location).metadata
    # The table and its rows are one commit: its first metadata file has the snapshot.
    assert metadata.metadata_log == [] and metadata.current_snapshot_id == body["snapshot_id"]
    assert metadata.current_snapshot().summary["lakeview.upload.format"] == "csv"
    event = CatalogEvent.objects.get(object_name="shop.orders")
    assert (event.action, event.actor, event.result) == ("upload_table", editor, "ok")
    # The uploaded file was the request's: gone with it.
    assert files_in(upload_dir) == []


def test_a_parquet_file_keeps_its_types(shop, editor):
    data = pa.table(
        {
            "id": pa.array([1, 2], pa.int32()),
            "price": pa.array([1, 2], pa.decimal128(10, 2)),
            "at": pa.array([0, 1_000_000], pa.timestamp("ns", tz="UTC")),
        }
    )
    answer = upload(editor, parquet(data), filename="prices.parquet")

    assert answer.status_code == 201, answer.content
    assert [c["type"] for c in answer.json()["columns"]] == ["int", "decimal(10, 2)", "timestamptz"]
    assert scanned("shop", "orders").num_rows == 2


def test_a_json_lines_file_becomes_a_table(shop, editor):
    lines = b'{"id": 1, "kind": "click", "tags": ["a"]}\n{"id": 2, "kind": "view", "tags": []}\n'
    answer = upload(editor, lines, filename="events.jsonl")

    assert answer.status_code == 201, answer.content
    assert [c["name"] for c in answer.json()["columns"]] == ["id", "kind", "tags"]
    assert scanned("shop", "orders").sort_by("id")["tags"].to_pylist() == [["a"], []]


def test_append_adds_the_files_rows_as_one_more_snapshot(shop, editor):
    assert upload(editor, CSV).status_code == 201
    more = b"day,amount,name,id\n2024-02-01,1.5,uma,4\n"  # columns in another order

    answer = upload(editor, more, mode="append")

    assert answer.status_code == 200, answer.content
    assert answer.json()["rows_written"] == 1
    assert sorted(scanned("shop", "orders")["id"].to_pylist()) == [1, 2, 3, 4]
    table = Table.objects.get(namespace__name="shop", name="orders")
    assert table.snapshots.count() == 2


def test_a_dry_run_shows_columns_types_and_first_rows_and_writes_nothing(
    shop, editor, warehouse, upload_dir
):
    answer = upload(editor, CSV, dry_run="true")

    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["dry_run"] is True
    assert [(c["name"], c["type"]) for c in body["columns"]][:2] == [
        ("id", "long"),
        ("name", "string"),
    ]
    assert body["preview_rows"][0] == ["1", "ada", "9.5", "2024-01-02"]
    assert_nothing_written(warehouse, upload_dir)


# -- bad input: a 4xx naming the problem, and nothing written ------------------------------


@pytest.mark.parametrize(
    ("content", "filename", "message", "row", "column"),
    [
        (CSV, "orders.parquet", "is not a Parquet file", None, None),
        (parquet(pa.table({"a": [1]})), "orders.csv", "not CSV text", None, None),
        (b"", "orders.csv", "The file is empty", None, None),
        (b"id,name\n", "orders.csv", "The file has no rows", None, None),
        (
            b"id,name\n1,a\n2\n3,c\n",
            "orders.csv",
            "Row 2: it has 1 field, the header has 2",
            2,
            None,
        ),
        (b"a,b\n1,2\n", "orders.jsonl", "not JSON lines", None, None),
        (
            b'{"a": 1}\n{"a": "x"}\n',
            "orders.jsonl",
            "a string where the column holds numbers",
            2,
            "a",
        ),
        (b"a,A\n1,2\n", "orders.csv", "both named", None, None),
        (b"\xff\xfeid\n1\n", "orders.csv", "not UTF-8", None, None),
    ],
)
def test_a_bad_file_is_a_400_naming_row_and_column_and_creates_nothing(
    shop, editor, warehouse, upload_dir, content, filename, message, row, column
):
    answer = upload(editor, content, filename=filename)

    assert answer.status_code == 400, answer.content
    body = answer.json()
    assert message in body["error"]
    assert body["field"] == "file"
    assert body.get("row") == row
    assert body.get("column_name") == column
    assert_nothing_written(warehouse, upload_dir)


def test_a_value_that_does_not_fit_far_into_the_file_leaves_no_file_behind(
    shop, editor, warehouse, upload_dir, monkeypatch
):
    # Small blocks and files: types come from the first rows, and several data files are
    # written before row 5000 turns out not to be a number.
    monkeypatch.setattr(uploads, "BLOCK_BYTES", 4096)
    monkeypatch.setattr(table_writes, "WRITE_CHUNK_BYTES", 8192)
    rows = "".join(f"{i},x\n" for i in range(1, 5000)) + "abc,y\n"
    content = ("id,name\n" + rows).encode()

    answer = upload(editor, content)

    assert answer.status_code == 400, answer.content
    body = answer.json()
    assert body["error"] == "Row 5,000, column 'id': 'abc' is not a long"
    assert (body["row"], body["column_name"]) == (5000, "id")
    assert_nothing_written(warehouse, upload_dir)
    failed = CatalogEvent.objects.get(object_name="shop.orders")
    assert (failed.action, failed.result) == ("upload_table", "failed")


def test_an_append_checks_the_files_columns_and_values_against_the_table(shop, editor):
    assert upload(editor, CSV).status_code == 201
    table = Table.objects.get(namespace__name="shop", name="orders")
    before = table.metadata_location

    other_columns = upload(editor, b"id,colour\n5,red\n", mode="append")
    assert other_columns.status_code == 400
    assert "the file has column 'colour', which the table has not" in other_columns.json()["error"]
    assert "the table has columns 'name', 'amount', 'day'" in other_columns.json()["error"]

    bad_value = upload(
        editor, b"id,name,amount,day\n5,x,1.0,2024-01-01\n6,y,lots,2024-01-01\n", mode="append"
    )
    assert bad_value.status_code == 400
    assert bad_value.json()["error"] == "Row 2, column 'amount': 'lots' is not a double"

    narrower = upload(
        editor,
        parquet(pa.table({"id": ["7"], "name": ["z"], "amount": [1.0], "day": ["x"]})),
        filename="more.parquet",
        mode="append",
    )
    assert narrower.status_code == 400
    assert narrower.json()["column_name"] == "id"
    assert "the table's is long" in narrower.json()["error"]

    table.refresh_from_db()
    assert table.metadata_location == before


@pytest.mark.parametrize(
    ("fields", "status", "type_"),
    [
        ({"table": "bad.name"}, 400, "InvalidInput"),
        ({"table": ""}, 400, None),
        ({"mode": "replace"}, 400, None),
        ({"mode": "append", "table": "missing"}, 404, "NoSuchTable"),
    ],
)
def test_bad_targets_are_refused(shop, editor, warehouse, fields, status, type_):
    answer = upload(editor, CSV, **fields)

    assert answer.status_code == status, answer.content
    if type_:
        assert answer.json()["type"] == type_
    assert files_in(warehouse) == []


def test_a_taken_name_is_a_409_and_the_table_is_unchanged(shop, editor):
    assert upload(editor, CSV).status_code == 201
    before = Table.objects.get(name="orders").metadata_location

    answer = upload(editor, CSV)

    assert answer.status_code == 409
    assert answer.json()["error"] == "Table already exists: shop.orders"
    assert Table.objects.get(name="orders").metadata_location == before


def test_a_namespace_that_does_not_exist_is_a_404(editor):
    answer = api_for(editor).post(
        "/api/namespaces/nowhere/tables/upload",
        {"file": SimpleUploadedFile("a.csv", CSV), "table": "t"},
        format="multipart",
    )
    assert answer.status_code == 404
    assert answer.json()["type"] == "NoSuchNamespace"


def test_a_viewer_cannot_upload(shop, viewer, upload_dir):
    answer = upload(viewer, CSV)
    assert answer.status_code == 403
    assert not Table.objects.exists()


def test_a_file_over_the_limit_is_a_413_and_leaves_nothing(
    shop, editor, warehouse, upload_dir, settings
):
    settings.UPLOAD_MAX_BYTES = 100_000
    big = b"id,name\n" + b"".join(b"%d,xxxxxxxxxxxxxxxxxxxxx\n" % i for i in range(20_000))
    assert len(big) > 400_000

    answer = upload(editor, big)

    assert answer.status_code == 413, answer.content
    assert "larger than the upload limit of 97.7 KB" in answer.json()["error"]
    assert_nothing_written(warehouse, upload_dir)


def test_a_file_streamed_past_the_limit_without_a_content_length_is_stopped(
    shop, editor, upload_dir, settings
):
    """The limit holds as the file streams in, not only by the request's Content-Length
    (which a chunked request does not send): the handler counts what it writes."""
    from catalog.uploads import StagingUploadHandler

    settings.UPLOAD_MAX_BYTES = 1000
    handler = StagingUploadHandler()
    handler.request = type("Request", (), {})()
    handler.handle_raw_input(None, {}, None, None)
    handler.new_file("file", "big.csv", "text/csv", None)
    staged = handler.file.temporary_file_path()
    handler.receive_data_chunk(b"x" * 600, 0)
    from django.core.files.uploadhandler import StopUpload

    with pytest.raises(StopUpload):
        handler.receive_data_chunk(b"x" * 600, 600)
    assert handler.request.upload_refused.status == 413
    handler.file.close()  # what Django does after StopUpload
    assert not Path(staged).exists()


def test_the_users_file_name_never_reaches_a_path(shop, editor, upload_dir, tmp_path):
    answer = upload(editor, CSV, filename="../../../escape.csv")

    assert answer.status_code == 201, answer.content
    assert not (tmp_path / "escape.csv").exists()
    assert not any("escape" in str(p) for p in tmp_path.rglob("*"))


# -- the namespace's pages: upload, review, create -----------------------------------------


def test_the_page_uploads_shows_the_columns_then_creates_the_table(
    client, shop, editor, upload_dir
):
    client.force_login(editor)
    namespace_page = client.get(reverse("catalog:namespace-detail", args=["shop"]))
    assert reverse("catalog:upload", args=["shop"]).encode() in namespace_page.content

    staged = client.post(
        reverse("catalog:upload", args=["shop"]),
        {"file": SimpleUploadedFile("orders.csv", CSV), "table": "orders", "mode": "create"},
    )
    assert staged.status_code == 302, staged.content
    review_url = staged["Location"]
    [kept] = [p for p in files_in(upload_dir) if p.suffix == ".upload"]
    assert "orders" not in kept.name
    assert not Table.objects.exists()

    # The review page shows what the first step recorded: it does not read the file again.
    kept.write_bytes(b"not what was uploaded")
    review = client.get(review_url)
    assert review.status_code == 200
    text = review.content.decode()
    assert "<code>amount</code></td><td>double</td>" in text
    assert "<td>alan</td>" in text
    kept.write_bytes(CSV)

    created = client.post(review_url, {"table": "orders", "mode": "create"})
    assert created.status_code == 302, created.content
    assert created["Location"] == reverse("catalog:table-detail", args=["shop", "orders"])
    assert scanned("shop", "orders").num_rows == 3
    assert files_in(upload_dir) == []


def test_the_page_shows_a_bad_file_at_the_first_step_and_keeps_nothing(
    client, shop, editor, upload_dir
):
    client.force_login(editor)
    answer = client.post(
        reverse("catalog:upload", args=["shop"]),
        {"file": SimpleUploadedFile("o.csv", b"id,name\n1,a\n2\n"), "table": "o", "mode": "create"},
    )
    assert answer.status_code == 400
    assert "Row 2: it has 1 field, the header has 2" in answer.content.decode()
    assert files_in(upload_dir) == []


def test_the_review_step_shows_a_taken_name_and_keeps_the_file_for_another_try(
    client, shop, editor, upload_dir
):
    client.force_login(editor)
    staged = client.post(
        reverse("catalog:upload", args=["shop"]),
        {"file": SimpleUploadedFile("o.csv", CSV), "table": "orders", "mode": "create"},
    )
    assert upload(editor, CSV).status_code == 201  # someone takes the name meanwhile

    taken = client.post(staged["Location"], {"table": "orders", "mode": "create"})
    assert taken.status_code == 409
    assert "Table already exists: shop.orders" in taken.content.decode()

    renamed = client.post(staged["Location"], {"table": "orders_2", "mode": "create"})
    assert renamed.status_code == 302
    assert scanned("shop", "orders_2").num_rows == 3


def test_another_user_cannot_see_or_write_someone_elses_upload(
    client, shop, editor, django_user_model
):
    from django.contrib.auth.models import Group

    from catalog.roles import EDITOR

    client.force_login(editor)
    staged = client.post(
        reverse("catalog:upload", args=["shop"]),
        {"file": SimpleUploadedFile("o.csv", CSV), "table": "orders", "mode": "create"},
    )
    other = django_user_model.objects.create_user(username="eve", password="x")
    other.groups.add(Group.objects.get_or_create(name=EDITOR)[0])
    client.force_login(other)
    assert client.get(staged["Location"]).status_code == 404
    assert client.post(staged["Location"], {"table": "x", "mode": "create"}).status_code == 404


def test_a_viewer_gets_no_upload_page(client, shop, viewer):
    client.force_login(viewer)
    assert client.get(reverse("catalog:upload", args=["shop"])).status_code == 403
    page = client.get(reverse("catalog:namespace-detail", args=["shop"]))
    assert reverse("catalog:upload", args=["shop"]).encode() not in page.content


def test_the_upload_page_refuses_a_file_over_the_limit_with_a_413(
    client, shop, editor, upload_dir, settings
):
    settings.UPLOAD_MAX_BYTES = 1000
    client.force_login(editor)
    answer = client.post(
        reverse("catalog:upload", args=["shop"]),
        {
            "file": SimpleUploadedFile("o.csv", b"a\n" + b"1\n" * 2000),
            "table": "o",
            "mode": "create",
        },
    )
    assert answer.status_code == 413
    assert "larger than the upload limit" in answer.content.decode()
    assert files_in(upload_dir) == []


def test_the_openapi_schema_shows_the_upload(editor):
    schema = api_for(editor).get("/api/schema/", {"format": "json"})
    assert schema.status_code == 200
    operation = json.loads(schema.content)["paths"]["/api/namespaces/{namespace}/tables/upload"]
    assert "multipart/form-data" in operation["post"]["requestBody"]["content"]


# -- races: the loser's files are deleted -----------------------------------------------------


def parquet_files(folder: Path) -> set[Path]:
    return {p for p in files_in(folder) if p.suffix in (".parquet", ".avro")}


def test_a_create_that_loses_the_name_to_another_writer_is_a_409_and_leaves_no_file(
    shop, editor, warehouse, monkeypatch
):
    from catalog.services import uploads as service

    real = service.append_batches

    def someone_else_first(*args, **kwargs):
        real(*args, **kwargs)  # this upload's files are written...
        # ...and another writer creates the table before this upload commits.
        services.create_table(
            namespace="shop",
            name="orders",
            schema={"type": "struct", "schema-id": 0, "fields": []},
            actor=editor,
        )

    monkeypatch.setattr(service, "append_batches", someone_else_first)

    answer = upload(editor, CSV)

    assert answer.status_code == 409, answer.content
    assert parquet_files(warehouse) == set()
    assert Table.objects.get(name="orders").snapshots.count() == 0


def test_an_append_that_loses_a_race_is_a_409_and_leaves_no_file(
    shop, editor, warehouse, monkeypatch
):
    from catalog.services import uploads as service

    assert upload(editor, CSV).status_code == 201
    before = parquet_files(warehouse)
    real = service.append_batches
    raced = []

    def someone_else_first(*args, **kwargs):
        real(*args, **kwargs)
        if not raced:
            raced.append(True)
            assert upload(editor, CSV, mode="append").status_code == 200

    monkeypatch.setattr(service, "append_batches", someone_else_first)

    answer = upload(editor, b"id,name,amount,day\n9,x,1.0,2024-01-01\n", mode="append")

    assert answer.status_code == 409, answer.content
    assert answer.json()["type"] == "CommitConflict"
    # Only the winner's files were added.
    assert sorted(scanned("shop", "orders")["id"].to_pylist()) == [1, 1, 2, 2, 3, 3]
    assert len(parquet_files(warehouse) - before) == 3  # its data file, manifest, list


def test_a_file_appends_to_a_partitioned_table_such_as_the_samples_events(editor):
    from django.core.management import call_command

    call_command("load_samples", stdout=io.StringIO())
    lines = (
        b"event_id,event_ts,customer_id,kind,payload\n"
        b'150001,2026-01-01T09:30:00Z,42,login,"{""page"": ""/""}"\n'
        b"150002,2026-01-01T09:31:00Z,,page_view,\n"
    )
    answer = api_for(editor).post(
        "/api/namespaces/samples/tables/upload",
        {"file": SimpleUploadedFile("more.csv", lines), "table": "events", "mode": "append"},
        format="multipart",
    )

    assert answer.status_code == 200, answer.content
    events = Table.objects.get(namespace__name="samples", name="events")
    table = StaticTable.from_metadata(events.metadata_location)
    assert len(table.snapshots()) == 6
    new = table.scan(row_filter="event_id > 150000").to_arrow().sort_by("event_id")
    assert new["customer_id"].to_pylist() == [42, None]
    # Both rows fall on one day: one partition, one data file.
    assert table.current_snapshot().summary["added-data-files"] == "1"
