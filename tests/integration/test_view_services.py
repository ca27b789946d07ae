"""The view services against a real database: each change writes one metadata file and
swaps the pointer; bad input writes nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from django.core.management import call_command

from catalog import services
from catalog.core.errors import (
    AlreadyExists,
    CommitConflict,
    InvalidInput,
    InvalidMetadata,
    NamespaceNotEmpty,
    NoSuchNamespace,
    SqlError,
)
from catalog.core.view_metadata import read_view_metadata
from catalog.models import CatalogEvent, View

pytestmark = pytest.mark.django_db


@pytest.fixture
def namespace():
    return services.create_namespace(name="sales")


def metadata_files(warehouse: Path) -> list[Path]:
    return sorted(warehouse.rglob("*.metadata.json"))


def log_of(view: View) -> list[int]:
    return list(view.log_entries.values_list("version_id", flat=True))


def test_create_replace_and_rollback_write_a_file_per_change_and_mirror_it(namespace, warehouse):
    view = services.create_view(
        namespace="sales", name="orders_v", sql="SELECT 1 AS id", comment="All orders"
    )
    services.replace_view(namespace="sales", name="orders_v", sql="SELECT 2 AS id")
    view = services.rollback_view(namespace="sales", name="orders_v", version_id=1)

    files = metadata_files(warehouse)
    assert [f.name[:6] for f in files] == ["00001-", "00002-", "00003-"]
    assert view.metadata_location == str(files[-1])
    metadata = read_view_metadata(view.metadata_location)
    assert [e.version_id for e in metadata.version_log] == [1, 2, 1]
    assert log_of(view) == [1, 2, 1]
    assert view.current_version_id == 1
    assert metadata.properties["comment"] == "All orders"
    assert list(view.versions.values_list("version_id", flat=True)) == [1, 2]


def test_every_version_carries_the_configured_dialects_and_marks_the_original(namespace):
    view = services.create_view(
        namespace="sales",
        name="v",
        sql="SELECT DATE_ADD(d, 1) AS d FROM t",
        dialect="spark",
        allow_unknown_sources=True,
    )
    version = view.current_version()
    by_dialect = {r.dialect: r for r in version.representations.all()}
    assert set(by_dialect) == {"spark", "trino"}
    assert by_dialect["spark"].is_original and not by_dialect["trino"].is_original
    assert "DATE_ADD('DAY'" in by_dialect["trino"].sql
    assert "FROM sales.t" in by_dialect["spark"].sql


def test_the_schema_comes_from_aliases_comments_and_the_types_of_known_views(namespace):
    services.create_view(namespace="sales", name="base", sql="SELECT 1 AS id, 'a' AS label")
    view = services.create_view(
        namespace="sales",
        name="derived",
        sql="SELECT id, label FROM base",
        column_aliases=["order_id", "order_label"],
        column_comments=["The order", ""],
    )
    fields = list(view.schema_fields(view.current_version().schema_id))
    assert [(f.name, f.type, f.doc) for f in fields] == [
        ("order_id", "int", "The order"),
        ("order_label", "string", None),
    ]
    assert view.dependencies == [["", "sales", "base"]]


def test_an_identical_replace_reuses_the_version_and_writes_no_file(namespace, warehouse):
    services.create_view(namespace="sales", name="v", sql="SELECT 1 AS id")
    view = services.replace_view(namespace="sales", name="v", sql="SELECT 1 AS id")
    assert view.current_version_id == 1
    assert len(metadata_files(warehouse)) == 1


def test_adding_a_representation_for_a_new_dialect_makes_a_new_version(namespace):
    services.create_view(namespace="sales", name="v", sql="SELECT 1 AS id")
    view = services.add_view_representation(
        namespace="sales", name="v", dialect="duckdb", sql="SELECT 1 AS id"
    )
    assert view.current_version_id == 2
    dialects = set(view.current_version().representations.values_list("dialect", flat=True))
    assert dialects == {"spark", "trino", "duckdb"}
    with pytest.raises(AlreadyExists, match="already has a duckdb representation"):
        services.add_view_representation(
            namespace="sales", name="v", dialect="duckdb", sql="SELECT 1"
        )


def test_properties_are_set_and_removed_with_a_new_metadata_file(namespace, warehouse):
    services.create_view(namespace="sales", name="v", sql="SELECT 1 AS id")
    services.set_view_properties(namespace="sales", name="v", updates={"owner": "ana"})
    view = services.remove_view_properties(namespace="sales", name="v", keys=["owner"])
    assert "owner" not in view.properties
    assert len(metadata_files(warehouse)) == 3
    with pytest.raises(InvalidInput, match="version.history.num-entries must be a whole number"):
        services.set_view_properties(
            namespace="sales", name="v", updates={"version.history.num-entries": "many"}
        )


def test_version_history_setting_limits_the_versions_kept(namespace):
    services.create_view(
        namespace="sales",
        name="v",
        sql="SELECT 0 AS n",
        properties={"version.history.num-entries": "2"},
    )
    for n in range(1, 4):
        view = services.replace_view(namespace="sales", name="v", sql=f"SELECT {n} AS n")
    assert list(view.versions.values_list("version_id", flat=True)) == [3, 4]
    assert log_of(view) == [3, 4]


def test_rename_and_drop(namespace):
    services.create_namespace(name="archive")
    services.create_view(namespace="sales", name="v", sql="SELECT 1 AS id")
    view = services.rename_view(namespace="sales", name="v", new_namespace="archive", new_name="w")
    assert str(view) == "archive.w"
    services.drop_view(namespace="archive", name="w")
    assert not View.objects.exists()
    actions = list(CatalogEvent.objects.order_by("id").values_list("action", flat=True))
    assert actions[-3:] == ["create_view", "rename_view", "drop_view"]


@pytest.mark.parametrize(
    ("arguments", "error", "field"),
    [
        ({"sql": "SELECT id,\nFROM t WHERE"}, SqlError, "sql"),
        ({"sql": "SELECT 1", "dialect": "klingon"}, InvalidInput, "dialect"),
        ({"sql": "SELECT 1", "name": "bad/name"}, InvalidInput, "name"),
        ({"sql": "SELECT 1", "namespace": "nowhere"}, NoSuchNamespace, "namespace"),
        ({"sql": "SELECT 1", "location": "/etc/views/v"}, InvalidInput, "location"),
        ({"sql": "SELECT 1 AS a", "column_aliases": ["x", "y"]}, InvalidInput, "column_aliases"),
    ],
)
def test_bad_input_is_refused_with_the_field_named_and_nothing_written(
    namespace, warehouse, arguments, error, field
):
    with pytest.raises(error) as caught:
        services.create_view(**{"namespace": "sales", "name": "v", **arguments})
    assert caught.value.field == field
    assert not View.objects.exists()
    assert metadata_files(warehouse) == []


def test_a_name_taken_by_a_view_or_a_table_is_refused(namespace):
    services.create_view(namespace="sales", name="v", sql="SELECT 1 AS id")
    with pytest.raises(AlreadyExists, match="View already exists: sales.v"):
        services.create_view(namespace="sales", name="v", sql="SELECT 1 AS id")
    services.create_table(
        namespace="sales",
        name="orders",
        schema={"type": "struct", "schema-id": 0, "fields": []},
    )
    with pytest.raises(AlreadyExists, match="Table with same name already exists: sales.orders"):
        services.create_view(namespace="sales", name="orders", sql="SELECT 1 AS id")


def test_a_stale_writer_gets_a_conflict_and_its_file_is_removed(namespace, warehouse):
    view = services.create_view(namespace="sales", name="v", sql="SELECT 1 AS id")
    seen = view.metadata_location
    services.replace_view(namespace="sales", name="v", sql="SELECT 2 AS id")
    with pytest.raises(CommitConflict):
        services.replace_view(
            namespace="sales", name="v", sql="SELECT 3 AS id", expected_metadata_location=seen
        )
    assert len(metadata_files(warehouse)) == 2, "refused before writing a file"
    [conflict] = CatalogEvent.objects.filter(result="conflict")
    assert conflict.object_uuid == view.uuid
    assert "has changed since it was loaded" in conflict.message


def test_a_view_whose_metadata_file_changed_uuid_is_a_conflict_as_for_tables(namespace):
    view = services.create_view(namespace="sales", name="v", sql="SELECT 1 AS id")
    path = Path(view.metadata_location)
    document = json.loads(path.read_text())
    document["view-uuid"] = "00000000-0000-4000-8000-000000000000"
    path.chmod(0o644)
    path.write_text(json.dumps(document))
    with pytest.raises(CommitConflict, match="was replaced"):
        services.replace_view(namespace="sales", name="v", sql="SELECT 2 AS id")


def test_a_namespace_with_views_cannot_be_dropped(namespace):
    services.create_view(namespace="sales", name="v", sql="SELECT 1 AS id")
    with pytest.raises(NamespaceNotEmpty):
        services.drop_namespace(name="sales")


def test_the_mirror_is_rebuilt_from_the_metadata_files_alone(namespace):
    services.create_view(namespace="sales", name="v", sql="SELECT 1 AS id")
    services.replace_view(namespace="sales", name="v", sql="SELECT 2 AS id")
    view = services.rollback_view(namespace="sales", name="v", version_id=1)
    view.versions.all().delete()
    view.log_entries.all().delete()
    view.fields.all().delete()

    call_command("rebuild_catalog_mirror")

    view.refresh_from_db()
    assert log_of(view) == [1, 2, 1]
    assert list(view.versions.values_list("version_id", flat=True)) == [1, 2]
    assert view.fields.exists()


def test_registering_an_existing_metadata_file_adopts_its_versions(namespace, warehouse):
    original = services.create_view(namespace="sales", name="v", sql="SELECT 1 AS id")
    services.replace_view(namespace="sales", name="v", sql="SELECT 2 AS id")
    source = Path(View.objects.get().metadata_location)
    copy = warehouse / "copied" / "metadata" / source.name
    copy.parent.mkdir(parents=True)
    shutil.copy(source, copy)
    with pytest.raises(AlreadyExists, match="overlaps the location of view sales.v"):
        services.register_view(namespace="sales", name="again", metadata_location=str(copy))
    services.drop_view(namespace="sales", name="v")
    view = services.register_view(namespace="sales", name="again", metadata_location=str(copy))
    assert log_of(view) == [1, 2]
    assert str(view.uuid) == str(original.uuid)


@pytest.mark.parametrize(
    ("content", "message"),
    [("{broken", "not valid JSON"), ('{"format-version": 2}', "format-version must be 1")],
)
def test_registering_a_malformed_metadata_file_is_refused(namespace, warehouse, content, message):
    path = warehouse / "bad.metadata.json"
    path.write_text(content)
    with pytest.raises(InvalidMetadata, match=message):
        services.register_view(namespace="sales", name="v", metadata_location=str(path))
    assert not View.objects.exists()


def test_registering_a_file_whose_view_location_is_outside_the_warehouse_is_refused(
    namespace, warehouse
):
    view = services.create_view(namespace="sales", name="v", sql="SELECT 1 AS id")
    document = json.loads(Path(view.metadata_location).read_text())
    document["location"] = "s3://bucket/warehouse/default.db/event_agg"
    path = warehouse / "foreign.metadata.json"
    path.write_text(json.dumps(document))
    with pytest.raises(InvalidInput, match="outside the warehouse") as caught:
        services.register_view(namespace="sales", name="w", metadata_location=str(path))
    assert caught.value.field == "metadata_location"


def test_properties_set_and_removed_together_make_one_commit(namespace, warehouse):
    services.create_view(
        namespace="sales", name="v", sql="SELECT 1 AS id", properties={"owner": "ana"}
    )
    view = services.update_view_properties(
        namespace="sales", name="v", updates={"team": "core"}, removals=["owner"]
    )
    assert view.properties == {"team": "core", "replace.drop-dialect.allowed": "true"}
    assert len(metadata_files(warehouse)) == 2


def test_column_types_come_from_the_tables_the_query_reads(namespace):
    services.create_table(
        namespace="sales",
        name="orders",
        schema={
            "type": "struct",
            "schema-id": 0,
            "fields": [
                {"id": 1, "name": "region", "type": "string", "required": False},
                {"id": 2, "name": "amount", "type": "double", "required": False},
            ],
        },
    )
    view = services.create_view(
        namespace="sales",
        name="revenue",
        sql="SELECT region, SUM(amount) AS revenue FROM orders GROUP BY region",
    )
    fields = view.schema_fields(view.current_version().schema_id)
    assert [(f.name, f.type) for f in fields] == [("region", "string"), ("revenue", "double")]


def test_the_dependencies_follow_the_current_version_through_a_rollback(namespace):
    before_sources = {"allow_unknown_sources": True}
    services.create_view(namespace="sales", name="v", sql="SELECT id FROM orders", **before_sources)
    view = services.replace_view(
        namespace="sales", name="v", sql="SELECT id FROM refunds", **before_sources
    )
    assert view.dependencies == [["", "sales", "refunds"]]
    view = services.rollback_view(namespace="sales", name="v", version_id=1)
    assert view.dependencies == [["", "sales", "orders"]]
