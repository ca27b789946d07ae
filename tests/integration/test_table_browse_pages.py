"""Attaching a table on its page, detaching it, and browsing a table's page: the attached
box, the schema as of a snapshot, the snapshot timeline's data, the readable partition
spec, the files at a snapshot and the preview (columns, filter, snapshot or timestamp) with
its pruning figures; bad input beside its field, as a 400, never a 500.

The tables are written into a folder with pyiceberg (tests/unit/test_preview_tables.py), as
Iceberg's Hadoop tables name their metadata (`metadata/vN.metadata.json`)."""

from __future__ import annotations

import datetime
import html as html_module
import re
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

from catalog import services
from catalog.models import Attachment, CatalogEvent, Table
from tests.integration.test_mt_api import dispatched, sales, spark  # noqa: F401 - fixtures
from tests.integration.test_mt_pages import daily  # noqa: F401 - fixture
from tests.unit.test_preview_tables import create_table, write

pytestmark = pytest.mark.django_db

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "region", StringType(), required=False),
    NestedField(3, "amount", DoubleType(), required=False),
)
BY_REGION = PartitionSpec(
    PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region")
)


@dataclass
class Written:
    """A table written into a folder: its snapshots' ids, oldest first, and its folder."""

    folder: Path
    snapshots: list[int]
    timestamps: list[int]
    table: Any  # pyiceberg's Table, to write more


@pytest.fixture
def external(tmp_path: Path, settings) -> Path:
    folder = tmp_path / "external"
    folder.mkdir()
    settings.ATTACH_LOCATIONS = [str(folder)]
    return folder


def write_orders(folder: Path) -> Written:
    """Three snapshots: two regions in two files; one more eu file; then a `note` column
    added and a file written with it."""
    table = create_table(folder, SCHEMA, BY_REGION)
    write(
        table,
        [{"id": 1, "region": "eu", "amount": 5.0}, {"id": 2, "region": "eu", "amount": 20.0}],
        [{"id": 3, "region": "us", "amount": 30.0}],
    )
    write(table, [{"id": 4, "region": "eu", "amount": 40.0}])
    with table.update_schema() as update:
        update.add_column("note", StringType())
    write(table, [{"id": 5, "region": "us", "amount": 50.0, "note": "late"}])
    snapshots = sorted(table.metadata.snapshots, key=lambda s: s.timestamp_ms)
    return Written(
        folder, [s.snapshot_id for s in snapshots], [s.timestamp_ms for s in snapshots], table
    )


@pytest.fixture
def orders(external) -> Written:
    return write_orders(external / "orders")


@pytest.fixture
def shop(editor) -> str:
    services.create_namespace(name="shop", actor=editor)
    return "shop"


@pytest.fixture
def attached(orders, shop, editor) -> Table:
    return services.attach_table(
        namespace="shop", name="orders", location=str(orders.folder), actor=editor
    )


def attach_url() -> str:
    return reverse("catalog:table-attach", args=["shop"])


def table_url() -> str:
    return reverse("catalog:table-detail", args=["shop", "orders"])


def field_errors(html: str, field: str) -> str:
    """The text of the errors shown beside `field` (templates/catalog/_field.html)."""
    found = re.search(rf'id="{field}-errors">(.*?)</ul>', html, re.S)
    return html_module.unescape(re.sub(r"<[^>]+>", "", found.group(1))).strip() if found else ""


# -- attaching and detaching ----------------------------------------------------------------


def test_an_editor_attaches_a_folder_and_lands_on_the_table_page(client, editor, orders, shop):
    client.force_login(editor)
    form = client.get(attach_url()).content.decode()
    assert "ATTACH_LOCATIONS" in form and str(orders.folder.parent) in form
    assert "iceberg_metadata_file_path" in form  # the rules are explained where they apply

    response = client.post(attach_url(), {"name": "orders", "location": str(orders.folder),
                                          "newest_by": "version"})  # fmt: skip

    assert response.status_code == 302
    assert response["Location"] == table_url()
    table = Table.objects.get(name="orders")
    assert table.metadata_location == f"{orders.folder}/metadata/v5.metadata.json"
    assert Attachment.objects.get(table=table).newest_by == "version"
    page = client.get(response["Location"]).content.decode()
    assert "attached read-only from" in page


def test_the_namespace_page_offers_attaching_to_editors_only(client, editor, viewer, shop):
    namespace_page = reverse("catalog:namespace-detail", args=["shop"])
    client.force_login(editor)
    assert attach_url() in client.get(namespace_page).content.decode()
    client.force_login(viewer)
    assert attach_url() not in client.get(namespace_page).content.decode()
    assert client.get(attach_url()).status_code == 403
    assert client.post(attach_url(), {"name": "x", "location": "/tmp"}).status_code == 403


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"location": "/etc"}, "location", "outside the locations tables may be attached from"),
        ({"location": "{external}/missing"}, "location", "is not an Iceberg table"),
        ({"metadata_file_path": "../orders/metadata/v1.metadata.json"}, "metadata_file_path",
         "must not contain '..'"),
        ({"metadata_file_path": "metadata/v9.metadata.json"}, "metadata_file_path",
         "Cannot read metadata file"),
        ({"table_uuid": "not-a-uuid"}, "table_uuid", "is not a UUID"),
        ({"table_uuid": "00000000-0000-0000-0000-000000000000"}, "location",
         "no metadata file with table-uuid"),
        ({"name": "bad/name"}, "name", ""),
        ({"newest_by": "size"}, "newest_by", "Select a valid choice"),
    ],
)  # fmt: skip
def test_bad_input_is_shown_beside_its_field_and_attaches_nothing(
    client, editor, orders, shop, external, change, field, message
):
    client.force_login(editor)
    data = {"name": "orders", "location": str(orders.folder), "newest_by": "version"}
    data.update({k: v.replace("{external}", str(external)) for k, v in change.items()})

    response = client.post(attach_url(), data)

    assert response.status_code == 400
    shown = field_errors(response.content.decode(), field)
    assert shown, f"no error beside {field}"
    assert message in shown
    assert not Table.objects.filter(namespace__name="shop").exists()
    assert not Attachment.objects.exists()


def test_an_advanced_option_in_error_opens_the_advanced_options(client, editor, orders, shop):
    client.force_login(editor)
    response = client.post(
        attach_url(),
        {"name": "orders", "location": str(orders.folder), "table_uuid": "nope",
         "newest_by": "version"},
    )  # fmt: skip
    html = response.content.decode()
    assert '<details class="advanced" id="attach-advanced" open>' in html


def test_a_name_already_taken_is_refused_beside_the_name(client, editor, orders, shop, attached):
    client.force_login(editor)
    response = client.post(
        attach_url(), {"name": "orders", "location": str(orders.folder), "newest_by": "version"}
    )
    assert response.status_code == 400
    assert "already exists" in field_errors(response.content.decode(), "name")
    assert Table.objects.count() == 1


def test_detaching_asks_first_then_forgets_the_table_and_leaves_its_files(
    client, editor, orders, attached
):
    files = {p: p.read_bytes() for p in orders.folder.rglob("*") if p.is_file()}
    client.force_login(editor)
    page = client.get(table_url()).content.decode()
    detach_url = reverse("catalog:table-detach", args=["shop", "orders"])
    assert detach_url in page

    confirm = client.get(detach_url)
    assert confirm.status_code == 200
    assert "files are not touched" in confirm.content.decode()
    assert Table.objects.filter(name="orders").exists()

    response = client.post(detach_url, follow=True)

    assert response.redirect_chain[-1][0] == reverse("catalog:namespace-detail", args=["shop"])
    assert "were not touched" in response.content.decode()
    assert not Table.objects.filter(name="orders").exists()
    assert {p: p.read_bytes() for p in orders.folder.rglob("*") if p.is_file()} == files
    assert CatalogEvent.objects.filter(action="detach_table").exists()


def test_viewers_cannot_detach_and_tables_of_our_own_have_no_detach(
    client, viewer, editor, attached, warehouse
):
    detach_url = reverse("catalog:table-detach", args=["shop", "orders"])
    client.force_login(viewer)
    assert detach_url not in client.get(table_url()).content.decode()
    assert client.post(detach_url).status_code == 403
    assert Table.objects.filter(name="orders").exists()

    services.create_table(namespace="shop", name="own", schema=SCHEMA.model_dump(by_alias=True))
    client.force_login(editor)
    own = client.get(reverse("catalog:table-detail", args=["shop", "own"])).content.decode()
    assert "table-detach" not in own and "/detach" not in own
    assert client.get(reverse("catalog:table-detach", args=["shop", "own"])).status_code == 404


# -- the table page -------------------------------------------------------------------------


def test_an_attached_tables_page_says_where_it_is_read_from_and_follows_the_writer(
    client, viewer, orders, attached
):
    client.force_login(viewer)
    before = Attachment.objects.get().checked_at

    # The writer commits again (a v6 metadata file) after the table was attached.
    write(orders.table, [{"id": 6, "region": "eu", "amount": 60.0, "note": None}])
    (orders.folder / "metadata" / "notes.metadata.json").write_text("{}")

    response = client.get(table_url())

    assert response.status_code == 200
    html = response.content.decode()
    box = re.search(r'class="card attached-box" id="attachment">(.*?)</section>', html, re.S)
    assert box, "the attached box"
    assert str(orders.folder) in box.group(1)
    assert "v6.metadata.json" in box.group(1)
    assert "notes.metadata.json" in box.group(1)  # left out, and why
    assert "no known version pattern" in box.group(1)
    assert Attachment.objects.get().checked_at > before
    assert Table.objects.get(name="orders").metadata_location.endswith("v6.metadata.json")


def test_a_failed_look_is_shown_and_the_table_stays_readable(client, viewer, orders, attached):
    client.force_login(viewer)
    for path in (orders.folder / "metadata").glob("*.metadata.json"):
        path.rename(path.with_suffix(".bak"))

    response = client.get(table_url())

    assert response.status_code == 200
    error = re.search(r'id="attached-check-error">(.*?)</div>', response.content.decode(), re.S)
    assert error and "is not an Iceberg table" in error.group(1)


def test_the_schema_is_shown_as_of_a_chosen_snapshot(client, viewer, orders, attached):
    client.force_login(viewer)

    current = client.get(table_url())
    first = client.get(table_url(), {"at": orders.snapshots[0]})

    assert current.context["shown_schema_id"] == 1
    assert [f.name for f in current.context["shown_fields"]] == ["id", "region", "amount", "note"]
    assert first.status_code == 200
    assert first.context["shown_schema_id"] == 0
    assert [f.name for f in first.context["shown_fields"]] == ["id", "region", "amount"]
    assert f"as of snapshot <code>{orders.snapshots[0]}</code>" in first.content.decode()


def test_an_unknown_snapshot_for_the_schema_is_a_400_beside_the_choice(client, viewer, attached):
    client.force_login(viewer)
    response = client.get(table_url(), {"at": "12345"})
    assert response.status_code == 400
    assert "No snapshot found for id `12345`" in field_errors(response.content.decode(), "at")
    assert client.get(table_url(), {"at": "abc"}).status_code == 400


def test_the_partition_spec_reads_with_source_column_names(client, viewer, attached):
    client.force_login(viewer)
    html = client.get(table_url()).content.decode()
    spec = re.search(r'id="partition-spec">(.*?)</section>', html, re.S).group(1)
    assert "Partitioned by <code>region</code>" in spec
    assert "the value itself of region" in spec


def test_the_snapshot_timeline_has_each_snapshots_rows_files_and_operation(
    client, viewer, orders, attached
):
    client.force_login(viewer)
    response = client.get(table_url())
    points = response.context["chart_data"]["points"]
    assert [p["id"] for p in points] == [str(s) for s in orders.snapshots]
    assert [p["records"] for p in points] == [3, 4, 5]
    assert [p["files"] for p in points] == [2, 3, 4]
    assert {p["op"] for p in points} == {"append"}
    html = response.content.decode()
    assert 'id="snapshot-chart-data"' in html and "table_browse.js" in html
    assert "uPlot.iife.min.js" in html and "cdn" not in html.lower()


# -- the preview ------------------------------------------------------------------------------


def preview(client, **params):
    return client.get(table_url(), {"preview": "1", **params})


def ids(response) -> list[int]:
    names = [name for name, _ in response.context["preview"]["columns"]]
    return sorted(int(row[names.index("id")]) for row in response.context["preview"]["rows"])


def shown(html: str, element_id: str) -> str:
    """The text of the element with this id, tags dropped and spaces folded."""
    found = re.search(rf'id="{element_id}">(.*?)</(?:p|div|section)>', html, re.S)
    assert found, f"no #{element_id}"
    text = html_module.unescape(re.sub(r"<[^>]+>", "", found.group(1)))
    return re.sub(r"\s+", " ", text).strip()


def test_a_preview_shows_the_first_rows_and_what_pruning_did(client, viewer, attached):
    client.force_login(viewer)
    response = preview(client)

    assert response.status_code == 200
    assert ids(response) == [1, 2, 3, 4, 5]
    html = response.content.decode()
    assert shown(html, "pruning").startswith(
        "4 data files in the table, 4 scanned, 0 skipped by partition, "
        "0 skipped by column statistics, 0 delete files applied"
    )
    assert "read by pyiceberg" in shown(html, "read-by")
    assert "Metadata cache:" in shown(html, "read-by")


def test_a_partition_filter_skips_the_other_partitions_files(client, viewer, attached):
    client.force_login(viewer)
    response = preview(client, row_filter="region = 'eu'")

    assert response.status_code == 200
    assert ids(response) == [1, 2, 4]
    assert shown(response.content.decode(), "pruning").startswith(
        "4 data files in the table, 2 scanned, 2 skipped by partition, "
        "0 skipped by column statistics"
    )


def test_a_filter_on_a_column_skips_files_by_their_statistics(client, viewer, attached):
    client.force_login(viewer)
    response = preview(client, row_filter="region = 'eu' and amount > 25")

    assert ids(response) == [4]
    pruning = response.context["preview"]["result"].pruning
    assert (pruning.files_scanned, pruning.skipped_by_partition, pruning.skipped_by_stats) == (
        1,
        2,
        1,
    )


def test_chosen_columns_are_the_only_ones_shown_in_the_order_chosen(client, viewer, attached):
    client.force_login(viewer)
    response = client.get(table_url() + "?preview=1&columns=amount&columns=id")

    assert [name for name, _ in response.context["preview"]["columns"]] == ["amount", "id"]
    assert sorted(response.context["preview"]["rows"]) == [
        ["20.0", "2"], ["30.0", "3"], ["40.0", "4"], ["5.0", "1"], ["50.0", "5"]
    ]  # fmt: skip
    selected = re.findall(r'<option value="(\w+)" selected>', response.content.decode())
    assert set(selected) >= {"amount", "id"}


def test_a_preview_at_an_older_snapshot_has_its_rows_and_its_schema(
    client, viewer, orders, attached
):
    client.force_login(viewer)
    response = preview(client, snapshot_id=orders.snapshots[0])

    assert response.status_code == 200
    assert ids(response) == [1, 2, 3]
    assert [name for name, _ in response.context["preview"]["columns"]] == [
        "id",
        "region",
        "amount",
    ]
    assert response.context["preview"]["result"].pruning.data_files == 2
    html = response.content.decode()
    assert f'<code id="preview-snapshot">{orders.snapshots[0]}</code>' in html
    # The column choice offers that snapshot's columns.
    assert '<option value="note"' not in html


def test_a_preview_as_of_a_moment_reads_the_snapshot_current_then(client, viewer, orders, attached):
    client.force_login(viewer)
    moment = datetime.datetime.fromtimestamp(orders.timestamps[1] / 1000, datetime.UTC)
    as_text = moment.replace(tzinfo=None).isoformat(timespec="milliseconds")

    by_text = preview(client, timestamp=as_text)
    by_ms = preview(client, timestamp=str(orders.timestamps[1]))

    assert ids(by_text) == ids(by_ms) == [1, 2, 3, 4]
    assert by_text.context["preview"]["result"].snapshot_id == orders.snapshots[1]


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({"row_filter": "region = "}, "row_filter", "Malformed row filter at column 9"),
        ({"row_filter": "nope = 1"}, "row_filter", "Unknown column in the row filter: nope"),
        ({"row_filter": "id = 'abc'"}, "row_filter", "Invalid row filter"),
        ({"columns": "nope"}, "columns", "Unknown column: nope"),
        ({"snapshot_id": "123"}, "snapshot_id", "No snapshot found for id `123`"),
        ({"snapshot_id": "x1"}, "snapshot_id", "must be a whole number"),
        ({"snapshot_id": "{first}", "timestamp": "{first_ms}"}, "snapshot_id",
         "Time travel with timestamp and snapshot id for iceberg table by path"),
        ({"timestamp": "2001-01-01T00:00:00"}, "timestamp",
         "No snapshot found in snapshot log before requested timestamp"),
        ({"timestamp": "yesterday"}, "timestamp", "is not a date and time"),
    ],
)  # fmt: skip
def test_bad_preview_input_is_a_400_with_the_message_beside_its_field(
    client, viewer, orders, attached, params, field, message
):
    client.force_login(viewer)
    values = {
        key: value.replace("{first}", str(orders.snapshots[0])).replace(
            "{first_ms}", str(orders.timestamps[0])
        )
        for key, value in params.items()
    }
    response = preview(client, **values)

    assert response.status_code == 400
    beside = field_errors(response.content.decode(), field)
    assert beside and message in beside, beside
    assert response.context["preview"] is None or "result" not in response.context["preview"]


def test_the_files_at_a_snapshot_are_listed_with_sizes_records_and_totals(
    client, viewer, orders, attached
):
    client.force_login(viewer)
    plain = client.get(table_url())
    assert plain.context["files"] is None  # listed only when asked
    assert "?files=1#files" in plain.content.decode()

    current = client.get(table_url(), {"files": "1"})
    first = client.get(table_url(), {"files": "1", "at": orders.snapshots[0]})

    rows = current.context["files"]["rows"]
    assert len(rows) == 4 and {r["kind"] for r in rows} == {"data"}
    assert sorted(r["record_count"] for r in rows) == [1, 1, 1, 2]
    assert all(r["size_bytes"] > 0 and r["short_path"].startswith("data/") for r in rows)
    totals = {k["key"]: k["total"] for k in current.context["files"]["kinds"]}
    assert (totals["data"].files, totals["data"].records) == (4, 5)
    assert "region=eu" in current.content.decode()
    assert len(first.context["files"]["rows"]) == 2


def test_the_plain_page_reads_no_manifest(client, viewer, attached, monkeypatch):
    from catalog import previews

    def refuse(*args, **kwargs):
        raise AssertionError("the plain page must not read the table's files")

    monkeypatch.setattr(previews, "load", refuse)
    client.force_login(viewer)
    assert client.get(table_url()).status_code == 200
    assert client.get(table_url(), {"at": attached.current_snapshot_id}).status_code == 200


def test_a_table_of_our_own_without_data_previews_as_empty(client, viewer, shop):
    services.create_table(namespace="shop", name="empty", schema=SCHEMA.model_dump(by_alias=True))
    client.force_login(viewer)
    url = reverse("catalog:table-detail", args=["shop", "empty"])

    response = client.get(url, {"preview": "1"})

    assert response.status_code == 200
    assert response.context["preview"]["rows"] == []
    html = response.content.decode()
    assert "the table has no data yet" in html
    assert 'id="attachment"' not in html and 'id="detach-link"' not in html


# -- a view's preview, read by Spark ------------------------------------------------------------


@pytest.fixture
def revenue_view(shop, editor):
    return services.create_view(
        namespace="shop",
        name="revenue",
        sql="SELECT 'eu' AS region, CAST(1.5 AS DOUBLE) AS amount",
        actor=editor,
    )


def view_url() -> str:
    return reverse("catalog:view-detail", args=["shop", "revenue"])


def run_the_preview_job(monkeypatch, rows: dict) -> dict:
    """Run the one waiting preview job as a worker would, its Spark read answering `rows`;
    what the read was asked is returned."""
    from catalog import jobs, previews
    from catalog.models import SparkJob
    from runtime import engine

    asked: dict = {}

    def spark_read(**kwargs):
        asked.update(kwargs)
        return rows

    monkeypatch.setattr(previews, "SPARK_READER", spark_read)
    monkeypatch.setattr(engine, "job_group", lambda group, description: nullcontext())
    job = SparkJob.objects.get(state=SparkJob.State.QUEUED)
    assert jobs.run(job.pk) == "SUCCEEDED"
    return asked


@pytest.fixture
def worker_alive():
    from catalog import workers

    workers.beat("host:1")


def test_a_views_preview_is_a_job_whose_rows_fill_in_the_page(
    client, viewer, revenue_view, worker_alive, monkeypatch
):
    client.force_login(viewer)
    params = {"preview": "1", "columns": "region", "row_filter": "amount > 1"}

    waiting = client.get(view_url(), params)
    asked = run_the_preview_job(monkeypatch, {"columns": [["region", "string"]], "rows": [["eu"]]})
    answered = client.get(view_url(), params)

    assert waiting.status_code == 200
    assert waiting.context["preview"]["job"]["job"].state == "QUEUED"
    assert "data-job-url" in waiting.content.decode()
    assert asked["identifier"] == ["shop", "revenue"]
    assert asked["columns"] == ["region"] and asked["row_filter"] == "amount > 1"
    assert answered.status_code == 200
    assert answered.context["preview"]["rows"] == [["eu"]]
    assert "Read by Spark" in shown(answered.content.decode(), "read-by")


def test_a_views_preview_without_a_worker_says_so_on_the_page(client, viewer, revenue_view):
    from catalog.models import SparkJob

    client.force_login(viewer)
    response = client.get(view_url(), {"preview": "1"})

    assert response.status_code == 200
    assert "No refresh worker is running" in shown(response.content.decode(), "preview-unavailable")
    assert not SparkJob.objects.exists()


def test_a_views_preview_with_a_bad_filter_is_a_400_beside_the_filter(
    client, viewer, revenue_view, worker_alive, monkeypatch
):
    from refresh import analysis

    monkeypatch.setattr(analysis, "preview_with_spark", lambda **kwargs: pytest.fail("no read"))
    client.force_login(viewer)
    response = client.get(view_url(), {"preview": "1", "row_filter": "price > 1"})

    assert response.status_code == 400
    assert "Unknown column in the row filter: price" in field_errors(
        response.content.decode(), "row_filter"
    )


def test_the_view_page_without_a_preview_asks_no_worker(client, viewer, revenue_view, monkeypatch):
    from refresh import analysis

    monkeypatch.setattr(analysis, "preview_with_spark", lambda **kwargs: pytest.fail("asked"))
    client.force_login(viewer)
    response = client.get(view_url())
    assert response.status_code == 200
    assert 'id="preview-form"' in response.content.decode()


# -- deletes, Spark reads, and a materialized table ---------------------------------------------


def test_position_deletes_are_applied_counted_and_listed(client, viewer, orders, shop, editor):
    from pyiceberg.typedef import Record

    from tests.unit.test_preview_tables import add_position_deletes

    first_eu = next(
        f.file_path
        for f in orders.table.scan(row_filter="region = 'eu'").plan_files()
        for f in [f.file]
        if f.record_count == 2
    )
    add_position_deletes(orders.table, {first_eu: [0]}, partition=Record("eu"))
    services.attach_table(namespace="shop", name="orders", location=str(orders.folder))
    client.force_login(viewer)

    previewed = preview(client, row_filter="region = 'eu'")
    files = client.get(table_url(), {"files": "1"})

    assert ids(previewed) == [2, 4]  # id 1 was deleted
    assert "1 delete file applied" in shown(previewed.content.decode(), "pruning")
    kinds = {k["key"]: k["total"].files for k in files.context["files"]["kinds"]}
    assert kinds == {"data": 4, "position_deletes": 1}
    assert "Position delete files" in files.content.decode()


@pytest.fixture
def with_equality_deletes(orders, shop) -> Table:
    from pyiceberg.typedef import Record

    from tests.unit.test_preview_tables import add_equality_deletes

    add_equality_deletes(orders.table, "id", [1], partition=Record("eu"))
    return services.attach_table(namespace="shop", name="orders", location=str(orders.folder))


def test_equality_deletes_are_read_by_spark_and_the_page_says_why(
    client, viewer, with_equality_deletes, worker_alive, monkeypatch
):
    client.force_login(viewer)

    waiting = preview(client, columns="id")
    run_the_preview_job(monkeypatch, {"columns": [["id", "long"]], "rows": [[2], [3], [4], [5]]})
    response = preview(client, columns="id")

    assert "data-job-url" in waiting.content.decode()
    assert response.status_code == 200
    assert ids(response) == [2, 3, 4, 5]
    html = response.content.decode()
    assert "No pruning figures: Spark read this preview" in shown(html, "pruning")
    read_by = shown(html, "read-by")
    assert "read by Spark" in read_by and "equality deletes" in read_by


def test_equality_deletes_without_a_worker_say_so_instead_of_failing(
    client, viewer, with_equality_deletes
):
    client.force_login(viewer)
    response = preview(client)

    assert response.status_code == 200
    assert "No refresh worker is running" in shown(response.content.decode(), "preview-unavailable")


def test_a_materialized_tables_page_links_to_browsing_its_data(client, viewer, daily):  # noqa: F811
    client.force_login(viewer)
    page = client.get(reverse("refresh:mt-detail", args=["sales", "daily"])).content.decode()
    link = re.search(r'<a href="([^"]+)" id="browse-data-link">Browse data and preview</a>', page)
    assert link and link.group(1).startswith(
        reverse("catalog:table-detail", args=["sales", "daily"])
    )
    table_page = client.get(link.group(1).split("#")[0], {"preview": "1"})
    assert table_page.status_code == 200
    assert 'id="materialized-table-link"' in table_page.content.decode()


def test_the_page_costs_the_same_queries_however_many_snapshots(
    client, viewer, external, shop, editor
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    small = create_table(external / "small", SCHEMA, BY_REGION)
    write(small, [{"id": 1, "region": "eu", "amount": 1.0}])
    services.attach_table(namespace="shop", name="small", location=str(external / "small"))
    big = write_orders(external / "big")
    for n in range(5):
        write(big.table, [{"id": 10 + n, "region": "eu", "amount": 1.0, "note": None}])
    services.attach_table(namespace="shop", name="big", location=str(external / "big"))
    client.force_login(viewer)

    counts = []
    for name in ("small", "big"):
        url = reverse("catalog:table-detail", args=["shop", name])
        client.get(url)  # the first look after attaching
        with CaptureQueriesContext(connection) as queries:
            assert client.get(url).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1], counts


@pytest.mark.parametrize(
    "params",
    [
        {"preview": "1", "timestamp": "999999999999999"},
        {"preview": "1", "timestamp": "9" * 60},
        {"preview": "1", "timestamp": "2024-13-45T99:00:00"},
        {"preview": "1", "snapshot_id": "9" * 5000},
        {"preview": "1", "columns": ["id"] * 500},
        {"preview": "1", "row_filter": "(" * 3000},
        {"at": "9" * 5000, "files": "1"},
        {"files": "1", "at": "-1"},
    ],
    ids=lambda params: ",".join(f"{k}={str(v)[:12]}" for k, v in params.items()),
)
def test_hostile_query_strings_are_answered_without_a_500(client, viewer, attached, params):
    client.force_login(viewer)
    response = client.get(table_url(), params)
    assert response.status_code in (200, 400)


def test_browsing_an_older_snapshot_offers_its_columns_for_the_preview(
    client, viewer, orders, attached
):
    client.force_login(viewer)
    response = client.get(table_url(), {"at": orders.snapshots[0]})
    form = response.context["preview_form"]
    assert [value for value, _ in form.fields["columns"].choices] == ["id", "region", "amount"]
    assert form["snapshot_id"].value() == str(orders.snapshots[0])
