"""The table page shows what engines made: schema and its history, partition spec,
properties, snapshots with their summaries, and the metadata log."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from catalog import selectors, services

pytestmark = pytest.mark.django_db

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": False},
        {"id": 2, "name": "ts", "type": "timestamptz", "required": False},
    ],
}
SPEC = {
    "spec-id": 0,
    "fields": [{"source-id": 2, "field-id": 1000, "name": "ts_day", "transform": "day"}],
}


@pytest.fixture
def events_table():
    services.create_namespace(name="lake")
    loaded = services.create_table(
        namespace="lake",
        name="events",
        schema=SCHEMA,
        partition_spec=SPEC,
        properties={"write.delete.mode": "merge-on-read"},
    )
    uuid = str(loaded.metadata.table_uuid)
    new_schema = {
        **SCHEMA,
        "schema-id": 1,
        "fields": [
            *SCHEMA["fields"],
            {"id": 3, "name": "note", "type": "string", "required": False},
        ],
    }
    services.commit_table(
        namespace="lake",
        name="events",
        requirements=[{"type": "assert-table-uuid", "uuid": uuid}],
        updates=[
            {"action": "add-schema", "schema": new_schema, "last-column-id": 3},
            {"action": "set-current-schema", "schema-id": -1},
        ],
    )
    snapshot = {
        "snapshot-id": 4242,
        "sequence-number": 1,
        "timestamp-ms": 1_700_000_000_000,
        "manifest-list": "/nowhere/snap-4242.avro",
        "summary": {"operation": "append", "added-records": "3"},
        "schema-id": 1,
    }
    services.commit_table(
        namespace="lake",
        name="events",
        requirements=[{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None}],
        updates=[
            {"action": "add-snapshot", "snapshot": snapshot},
            {
                "action": "set-snapshot-ref",
                "ref-name": "main",
                "type": "branch",
                "snapshot-id": 4242,
            },
        ],
    )
    return selectors.get_table("lake", "events")


def test_the_namespace_page_lists_its_tables(client, viewer, events_table):
    client.force_login(viewer)
    page = client.get(reverse("catalog:namespace-detail", args=["lake"])).content.decode()
    assert reverse("catalog:table-detail", args=["lake", "events"]) in page


def test_the_table_page_shows_schema_history_spec_snapshots_and_metadata_log(
    client, viewer, events_table
):
    client.force_login(viewer)
    response = client.get(reverse("catalog:table-detail", args=["lake", "events"]))

    assert response.status_code == 200
    page = response.content.decode()
    assert "note" in page and "timestamptz" in page
    assert "Schema 0" in page and "Schema 1" in page
    assert "ts_day" in page and "day" in page
    assert "4242" in page  # in the snapshot lists of the forms, and the chart
    assert response.context["snapshots"][0]["figures"][0] == 3
    # The snapshots' summaries arrive once the page has loaded.
    later = reverse("catalog:table-snapshots", args=["lake", "events"])
    assert f'data-later="{later}"' in page
    summaries = client.get(later).content.decode()
    assert "4242" in summaries and "Rows added" in summaries
    missing = reverse("catalog:table-snapshots", args=["lake", "missing"])
    assert client.get(missing).status_code == 404
    assert "write.delete.mode" in page
    assert response.context["metadata_log"], "two commits leave earlier files in the log"
    assert len(response.context["metadata_log"]) == 2


def test_an_unknown_table_is_404(client, viewer, events_table):
    client.force_login(viewer)
    assert client.get(reverse("catalog:table-detail", args=["lake", "nope"])).status_code == 404


def test_a_snapshots_row_shows_its_figures_and_summary_with_every_value_escaped(
    client, viewer, events_table
):
    """The rows of the table of snapshots are written in Python (tables.snapshot_rows_html):
    what an engine put in a summary is text, never markup."""
    services.commit_table(
        namespace="lake",
        name="events",
        requirements=[],
        updates=[
            {
                "action": "add-snapshot",
                "snapshot": {
                    "snapshot-id": 4343,
                    "parent-snapshot-id": 4242,
                    "sequence-number": 2,
                    "timestamp-ms": 1_700_000_060_000,
                    "manifest-list": "/nowhere/snap-4343.avro",
                    "summary": {
                        "operation": "overwrite",
                        "added-records": "7",
                        "total-records": "10",
                        "<script>alert(1)</script>": '"><img src=x onerror=alert(2)>',
                    },
                    "schema-id": 1,
                },
            },
            {
                "action": "set-snapshot-ref",
                "ref-name": "main",
                "type": "branch",
                "snapshot-id": 4343,
            },
        ],
    )
    client.force_login(viewer)
    page = client.get(reverse("catalog:table-snapshots", args=["lake", "events"])).content.decode()
    rows = re.search(r'id="snapshot-summaries">.*?<tbody>(.*?)</tbody>', page, re.S).group(1)
    assert "<script>" not in rows and "<img" not in rows
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in rows
    assert "&quot;&gt;&lt;img src=x onerror=alert(2)&gt;" in rows
    current = re.search(r'<tr class="current" data-snapshot-id="4343">(.*?)</tr>', rows).group(1)
    assert '<span class="badge">current</span>' in current
    assert "<td>2023-11-14 22:14:20</td><td>overwrite</td><td>1</td>" in current
    cells = re.findall(r'<td class="num">(.*?)</td>', current)
    dash = '<span class="muted">—</span>'
    assert cells == ["7", dash, "10", dash, dash, dash, dash, dash]
    assert '<a href="?at=4343&amp;files=1#files">files</a>' in current
    assert '<tr data-snapshot-id="4242">' in rows
    assert 'colspan="11"' in rows
