"""The catalog kernel: one mirror writer that the rebuild shares, history that follows an
object by identity (through renames and drops, failures included), and a name that is one
object, enforced by the database."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.forms.models import model_to_dict
from django.urls import reverse

from catalog import selectors, services
from catalog.core.errors import AlreadyExists, SqlError
from catalog.models import (
    CatalogEvent,
    CatalogObject,
    Table,
    TableMetadataLogEntry,
    TableSchemaField,
    TableSnapshot,
    View,
    ViewRepresentation,
    ViewSchemaField,
    ViewVersion,
    ViewVersionLogEntry,
)
from catalog.services import kernel

pytestmark = pytest.mark.django_db

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": True},
        {"id": 2, "name": "amount", "type": "double", "required": False},
    ],
}

CHILD_ROWS = [
    ViewVersion,
    ViewRepresentation,
    ViewSchemaField,
    ViewVersionLogEntry,
    TableSchemaField,
    TableSnapshot,
    TableMetadataLogEntry,
]
# Columns that mirror a view's or a table's metadata file (the pointer and the name are not
# mirror: they are the database's own).
MIRROR_COLUMNS = {
    View: {"uuid": None, "location": "", "properties": {}, "current_version_id": 0,
           "dependencies": []},
    Table: {"uuid": None, "location": "", "properties": {}, "format_version": 0,
            "current_schema_id": 0, "current_snapshot_id": None, "default_spec_id": 0,
            "last_updated_ms": 0, "partition_specs": [], "sort_orders": []},
}  # fmt: skip


def _natural(row: Any) -> dict[str, Any]:
    """A row as a dict without surrogate keys: foreign keys become the object they name."""
    values = model_to_dict(row)
    for key in ("id", "catalogobject_ptr"):
        values.pop(key, None)
    for key in ("view", "table"):
        if key in values:
            values[key] = str(getattr(row, key))
    if "version" in values:
        values["version"] = str(row.version)
    return values


def mirror_state() -> dict[str, list[dict[str, Any]]]:
    state = {}
    for model in [View, Table, *CHILD_ROWS]:
        rows = [_natural(row) for row in model.objects.all()]
        state[model.__name__] = sorted(rows, key=repr)
    return state


@pytest.fixture
def namespace():
    return services.create_namespace(name="sales")


@pytest.fixture
def catalog_with_history(namespace) -> None:
    """Views with replaced and rolled-back versions and dependencies, and tables with
    schemas, a partition spec, a snapshot and a metadata log."""
    services.create_table(namespace="sales", name="orders", schema=SCHEMA)
    services.create_view(
        namespace="sales", name="big", sql="SELECT id FROM orders WHERE amount > 10"
    )
    services.replace_view(namespace="sales", name="big", sql="SELECT id, amount FROM orders")
    services.rollback_view(namespace="sales", name="big", version_id=1)
    services.create_view(namespace="sales", name="biggest", sql="SELECT max(id) AS m FROM big")
    services.update_view_properties(namespace="sales", name="biggest", updates={"owner": "bo"})
    loaded = services.create_table(
        namespace="sales",
        name="events",
        schema=SCHEMA,
        partition_spec={
            "spec-id": 0,
            "fields": [{"source-id": 1, "field-id": 1000, "name": "b", "transform": "bucket[4]"}],
        },
    )
    services.commit_table(
        namespace="sales",
        name="events",
        requirements=[{"type": "assert-table-uuid", "uuid": str(loaded.metadata.table_uuid)}],
        updates=[
            {
                "action": "add-snapshot",
                "snapshot": {
                    "snapshot-id": 7,
                    "sequence-number": 1,
                    "timestamp-ms": 1_700_000_000_000,
                    "manifest-list": "/nowhere/snap-7.avro",
                    "summary": {"operation": "append"},
                    "schema-id": 0,
                },
            },
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 7},
            {"action": "set-properties", "updates": {"owner": "ann"}},
        ],
    )


def test_the_rebuild_restores_every_mirror_row_of_views_and_tables_from_the_files(
    catalog_with_history,
):
    before = mirror_state()
    assert before["View"] and before["Table"] and before["TableSnapshot"]
    assert [["", "sales", "big"]] in [v["dependencies"] for v in before["View"]]

    for model in CHILD_ROWS:
        model.objects.all().delete()
    for model, blank in MIRROR_COLUMNS.items():
        for obj in model.objects.all():
            for column, value in blank.items():
                setattr(obj, column, value if column != "uuid" else obj.uuid)
            obj.save()
    emptied = mirror_state()
    assert emptied != before
    assert not any(emptied[model.__name__] for model in CHILD_ROWS)

    call_command("rebuild_catalog_mirror", stdout=open("/dev/null", "w"))  # noqa: SIM115

    after = mirror_state()
    for model_name, rows in before.items():
        assert after[model_name] == rows, f"{model_name} differs after the rebuild"


def test_a_renamed_view_keeps_its_history_on_its_page(client, viewer, namespace):
    services.create_view(namespace="sales", name="old_name", sql="SELECT 1 AS id")
    services.replace_view(namespace="sales", name="old_name", sql="SELECT 2 AS id")
    services.rename_view(
        namespace="sales", name="old_name", new_namespace="sales", new_name="new_name"
    )
    client.force_login(viewer)

    page = client.get(reverse("catalog:view-detail", args=["sales", "new_name"]))

    actions = [event.action for event in page.context["events"]]
    assert actions == ["rename_view", "replace_view", "create_view"]
    assert b"renamed from sales.old_name" in page.content


def test_a_renamed_table_keeps_its_history_on_its_page(client, viewer, namespace):
    services.create_table(namespace="sales", name="t", schema=SCHEMA)
    services.rename_table(namespace="sales", name="t", new_namespace="sales", new_name="t2")
    client.force_login(viewer)

    page = client.get(reverse("catalog:table-detail", args=["sales", "t2"]))

    assert [event.action for event in page.context["history"]] == [
        "rename_table",
        "create_table",
    ]


def test_a_new_view_with_a_dropped_views_name_starts_a_history_of_its_own(
    client, viewer, namespace
):
    services.create_view(namespace="sales", name="v", sql="SELECT 1 AS id")
    services.replace_view(namespace="sales", name="v", sql="SELECT 2 AS id")
    services.drop_view(namespace="sales", name="v")
    services.create_view(namespace="sales", name="v", sql="SELECT 3 AS id")
    client.force_login(viewer)

    page = client.get(reverse("catalog:view-detail", args=["sales", "v"]))

    assert [event.action for event in page.context["events"]] == ["create_view"]
    # The dropped view's events are kept, under its own identity.
    assert CatalogEvent.objects.filter(object_name="sales.v").count() == 4


def test_a_failed_commit_appears_in_the_history_with_its_error(client, viewer, editor, namespace):
    view = services.create_view(namespace="sales", name="v", sql="SELECT 1 AS id")
    with pytest.raises(SqlError):
        services.replace_view(namespace="sales", name="v", sql="SELECT FROM WHERE", actor=editor)
    client.force_login(viewer)

    page = client.get(reverse("catalog:view-detail", args=["sales", "v"]))

    failed = page.context["events"][0]
    assert (failed.action, failed.result, failed.actor) == ("replace_view", "failed", editor)
    assert failed.object_uuid == view.uuid
    assert "(line 1, column 17)" in failed.message
    assert b"(line 1, column 17)" in page.content


def test_a_failed_table_commit_is_recorded_against_the_table(editor, namespace):
    loaded = services.create_table(namespace="sales", name="t", schema=SCHEMA)
    with pytest.raises(Exception, match="UUID"):
        services.commit_table(
            namespace="sales",
            name="t",
            requirements=[{"type": "assert-table-uuid", "uuid": "00000000-0000-4000-8000-0"}],
            updates=[],
            actor=editor,
        )
    event = CatalogEvent.objects.first()
    assert event.result in ("conflict", "failed")
    assert event.object_uuid == loaded.obj.uuid


def test_the_database_enforces_one_object_per_name_across_kinds(namespace, warehouse, monkeypatch):
    services.create_table(namespace="sales", name="orders", schema=SCHEMA)
    # Two writers that both passed the early check: the database has the last word.
    monkeypatch.setattr(kernel, "check_name_free", lambda *args, **kwargs: None)
    files_before = sorted(Path(warehouse).rglob("*.json"))

    with pytest.raises(AlreadyExists, match="Table with same name already exists: sales.orders"):
        services.create_view(
            namespace="sales",
            name="orders",
            sql="SELECT 1 AS id",
            location=str(warehouse / "elsewhere"),
        )

    assert CatalogObject.objects.count() == 1
    assert sorted(Path(warehouse).rglob("*.json")) == files_before, "its file is deleted"


def test_a_commit_moves_updated_at(namespace):
    view = services.create_view(namespace="sales", name="v", sql="SELECT 1 AS id")
    replaced = services.replace_view(namespace="sales", name="v", sql="SELECT 2 AS id")
    assert replaced.updated_at > view.updated_at
    assert selectors.get_view("sales", "v").updated_at == replaced.updated_at


def test_a_rename_that_loses_the_race_for_a_name_is_a_conflict(namespace, monkeypatch):
    services.create_table(namespace="sales", name="orders", schema=SCHEMA)
    services.create_view(namespace="sales", name="v", sql="SELECT 1 AS id")
    # A rename that passed the early check while another writer took the name.
    monkeypatch.setattr(kernel, "check_name_free", lambda *args, **kwargs: None)

    with pytest.raises(AlreadyExists, match="Table with same name already exists: sales.orders"):
        services.rename_view(namespace="sales", name="v", new_namespace="sales", new_name="orders")

    assert selectors.get_view("sales", "v").name == "v"
    failed = CatalogEvent.objects.filter(action="rename_view").get()
    assert failed.result == "failed"
