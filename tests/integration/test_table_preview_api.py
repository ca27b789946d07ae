"""Previews, files and time travel of tables over the API: an attached table written by
pyiceberg into a folder (several files, partitions and snapshots), read as users read it."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from catalog import previews, services
from tests.unit.test_preview import BY_REGION, SCHEMA, START, row
from tests.unit.test_preview_tables import create_table, write

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(editor) -> APIClient:
    client = APIClient()
    client.force_authenticate(editor)
    return client


@pytest.fixture
def sales(tmp_path: Path, settings, editor):
    """ext.sales attached from a folder: snapshot 1 holds ids 1-3 (eu, us), snapshot 2 adds
    ids 4-6 (eu, ap); four files in three partitions."""
    settings.ATTACH_LOCATIONS = [str(tmp_path / "external")]
    table = create_table(tmp_path / "external" / "sales", SCHEMA, BY_REGION)
    write(table, [row(1, "eu"), row(2, "eu")], [row(3, "us")])
    first = table.metadata.current_snapshot_id
    write(table, [row(4, "eu"), row(5, "eu")], [row(6, "ap", START + datetime.timedelta(days=1))])
    services.create_namespace(name="ext", actor=editor)
    services.attach_table(
        namespace="ext", name="sales", location=str(tmp_path / "external" / "sales")
    )
    return {"first": first, "table": table}


def preview(client: APIClient, **params):
    return client.get("/api/namespaces/ext/tables/sales/preview", params)


def ids(body: dict) -> list[int]:
    position = [c["name"] for c in body["columns"]].index("id")
    return sorted(r[position] for r in body["rows"])


def test_a_preview_shows_the_rows_and_what_a_partition_filter_skipped(sales, client):
    response = preview(client, filter="region = 'eu'")

    assert response.status_code == 200, response.content
    body = response.json()
    assert ids(body) == [1, 2, 4, 5]
    assert body["read_by"] == "pyiceberg"
    assert body["pruning"]["data_files"] == 4
    assert body["pruning"]["files_scanned"] == 2
    assert body["pruning"]["skipped_by_partition"] == 2
    assert body["columns"][0] == {"name": "id", "type": "long"}


def test_a_preview_at_an_older_snapshot_shows_the_rows_of_then(sales, client):
    body = preview(client, snapshot_id=sales["first"]).json()

    assert ids(body) == [1, 2, 3]
    assert body["snapshot_id"] == sales["first"]
    assert body["pruning"]["data_files"] == 2


def test_chosen_columns_and_a_limit_are_honoured(sales, client):
    body = preview(client, columns=["region", "id"], limit=2).json()

    assert [c["name"] for c in body["columns"]] == ["region", "id"]
    assert len(body["rows"]) == 2 and body["truncated"] is True
    assert {tuple(r) for r in body["rows"]} <= {
        ("eu", 1), ("eu", 2), ("us", 3), ("eu", 4), ("eu", 5), ("ap", 6)
    }  # fmt: skip


@pytest.mark.parametrize(
    ("params", "status", "field", "words"),
    [
        ({"filter": "region = "}, 400, "row_filter", ""),
        ({"filter": "nope = 1"}, 400, "row_filter", "nope"),
        ({"columns": ["nope"]}, 400, "columns", "nope"),
        ({"snapshot_id": "12", "timestamp_ms": "1"}, 400, "snapshot_id",
         "Time travel with timestamp and snapshot id for iceberg table by path"),
        ({"timestamp_ms": "1"}, 400, "timestamp_ms",
         "No snapshot found in snapshot log before requested timestamp"),
        ({"snapshot_id": "12"}, 404, "snapshot_id", "No snapshot found for id `12`"),
        ({"snapshot_id": "twelve"}, 400, "snapshot_id", "whole number"),
        ({"limit": "0"}, 400, "limit", ""),
        ({"limit": "x"}, 400, "limit", ""),
    ],
)  # fmt: skip
def test_bad_preview_input_is_a_json_4xx_naming_the_problem(
    sales, client, params, status, field, words
):
    response = preview(client, **params)

    assert response.status_code == status, response.content
    body = response.json()
    assert body.get("field") == field, body
    assert words in body["error"], body


def test_the_files_of_a_snapshot_are_listed_with_sizes_and_totals(sales, client):
    body = client.get("/api/namespaces/ext/tables/sales/files").json()

    assert body["totals"]["data"]["files"] == 4
    assert body["totals"]["data"]["records"] == 6
    assert all(f["size_bytes"] > 0 and f["kind"] == "data" for f in body["files"])
    assert {f["partition"]["region"] for f in body["files"]} == {"eu", "us", "ap"}
    older = client.get(
        "/api/namespaces/ext/tables/sales/files", {"snapshot_id": sales["first"]}
    ).json()
    assert older["totals"]["data"]["files"] == 2


def test_a_second_preview_is_served_from_the_metadata_cache(sales, client):
    preview(client, filter="region = 'us'")
    before = previews.metadata_cache().stats()

    preview(client, filter="region = 'us'")

    after = previews.metadata_cache().stats()
    assert after.hits > before.hits and after.misses == before.misses


def test_a_commit_by_the_writer_is_previewed_at_once(sales, client):
    write(sales["table"], [row(7, "us")])

    body = preview(client, filter="region = 'us'").json()

    assert ids(body) == [3, 7]
