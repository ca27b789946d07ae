"""catalog.core.tables without a database: new table metadata, parsing the REST protocol's
requirements and updates, and applying them."""

from __future__ import annotations

import uuid

import pytest

from catalog.core import tables
from catalog.core.errors import CommitConflict, InvalidInput

LOCATION = "/warehouse/ns/t"

# Field ids as a client may send them: not 1..n; the catalog assigns fresh ones.
SCHEMA = {
    "type": "struct",
    "schema-id": 7,
    "fields": [
        {"id": 10, "name": "id", "type": "long", "required": True},
        {"id": 20, "name": "ts", "type": "timestamp", "required": False},
        {
            "id": 30,
            "name": "point",
            "type": {
                "type": "struct",
                "fields": [
                    {"id": 31, "name": "x", "type": "double", "required": False},
                    {"id": 32, "name": "y", "type": "double", "required": False},
                ],
            },
            "required": False,
        },
    ],
}
SPEC = {
    "spec-id": 0,
    "fields": [{"source-id": 20, "field-id": 1000, "name": "ts_day", "transform": "day"}],
}
ORDER = {
    "order-id": 1,
    "fields": [
        {"source-id": 10, "transform": "identity", "direction": "asc", "null-order": "nulls-first"}
    ],
}


def new_table(**overrides):
    arguments = {"schema": SCHEMA, "location": LOCATION, **overrides}
    return tables.new_table(**arguments)


def apply(base, updates, requirements=(), base_location=None):
    parsed_requirements, parsed_updates = tables.parse_changes(list(requirements), updates)
    return tables.apply_changes(base, base_location, parsed_requirements, parsed_updates)


def schema_with_amount(schema_id: int = 1) -> dict:
    return {
        "type": "struct",
        "schema-id": schema_id,
        "fields": [
            {"id": 1, "name": "id", "type": "long", "required": True},
            {"id": 2, "name": "ts", "type": "timestamp", "required": False},
            {"id": 6, "name": "amount", "type": "decimal(10, 2)", "required": False},
        ],
    }


# -- new_table -----------------------------------------------------------------------------


def test_a_new_table_is_format_version_2_with_a_fresh_uuid_at_its_location():
    metadata = new_table()

    assert metadata.format_version == 2
    assert metadata.location == LOCATION
    assert uuid.UUID(str(metadata.table_uuid))
    assert metadata.current_snapshot_id is None
    assert metadata.snapshots == []
    assert metadata.metadata_log == []


def test_two_new_tables_get_different_uuids():
    assert new_table().table_uuid != new_table().table_uuid


def test_a_new_table_assigns_fresh_field_ids_in_order():
    metadata = new_table()

    schema = metadata.schema()
    assert schema.schema_id == 0
    assert metadata.current_schema_id == 0
    assert [f.field_id for f in schema.fields] == [1, 2, 3]
    assert [f.name for f in schema.fields] == ["id", "ts", "point"]
    nested = schema.find_field("point").field_type
    assert [f.field_id for f in nested.fields] == [4, 5]
    assert metadata.last_column_id == 5


def test_a_new_tables_partition_spec_follows_the_fresh_field_ids():
    metadata = new_table(partition_spec=SPEC)

    [field] = metadata.spec().fields
    assert field.source_id == 2
    assert field.field_id == 1000
    assert str(field.transform) == "day"
    assert metadata.last_partition_id == 1000


def test_a_new_tables_sort_order_follows_the_fresh_field_ids():
    metadata = new_table(write_order=ORDER)

    order = next(o for o in metadata.sort_orders if o.order_id == metadata.default_sort_order_id)
    assert metadata.default_sort_order_id == 1
    assert [f.source_id for f in order.fields] == [1]


def test_a_new_table_without_spec_or_order_is_unpartitioned_and_unsorted():
    metadata = new_table()

    assert metadata.spec().fields == ()
    assert metadata.default_sort_order_id == 0


def test_a_new_tables_properties_are_kept_as_given():
    metadata = new_table(properties={"owner": "erin", "retries": "3"})

    assert metadata.properties["owner"] == "erin"
    assert metadata.properties["retries"] == "3"


def test_a_new_tables_property_that_is_not_a_string_is_invalid_input():
    with pytest.raises(InvalidInput, match="properties must map strings to strings") as caught:
        new_table(properties={"owner": "erin", "retries": 3})

    assert caught.value.field == "properties"


def test_a_schema_with_an_unknown_type_is_invalid_input():
    schema = {
        "type": "struct",
        "fields": [{"id": 1, "name": "id", "type": "varchar", "required": False}],
    }

    with pytest.raises(InvalidInput):
        new_table(schema=schema)


def test_a_schema_that_is_not_an_object_is_invalid_input():
    with pytest.raises(InvalidInput):
        new_table(schema="struct<id: long>")


def test_a_partition_spec_on_a_missing_column_is_invalid_input():
    spec = {
        "spec-id": 0,
        "fields": [{"source-id": 99, "field-id": 1000, "name": "p", "transform": "identity"}],
    }

    with pytest.raises(InvalidInput):
        new_table(partition_spec=spec)


# -- parse_changes -------------------------------------------------------------------------


def test_requirements_and_updates_are_parsed_into_pyiceberg_models():
    requirements, updates = tables.parse_changes(
        [{"type": "assert-current-schema-id", "current-schema-id": 0}, {"type": "assert-create"}],
        [{"action": "set-properties", "updates": {"a": "1"}}],
    )

    assert [type(r).__name__ for r in requirements] == ["AssertCurrentSchemaId", "AssertCreate"]
    assert [u.action for u in updates] == ["set-properties"]
    assert tables.is_create(requirements)
    assert not tables.is_create(requirements[:1])


def test_an_unknown_update_action_is_invalid_input():
    with pytest.raises(InvalidInput, match="table update"):
        tables.parse_changes([], [{"action": "teleport"}])


def test_an_unknown_requirement_type_is_invalid_input():
    with pytest.raises(InvalidInput, match="table requirement"):
        tables.parse_changes([{"type": "assert-sunny-weather"}], [])


def test_an_update_missing_a_field_is_invalid_input():
    with pytest.raises(InvalidInput):
        tables.parse_changes([], [{"action": "set-properties"}])


# -- apply_changes -------------------------------------------------------------------------


def test_a_failing_requirement_is_a_commit_conflict():
    base = new_table()

    with pytest.raises(CommitConflict):
        apply(
            base,
            [{"action": "set-properties", "updates": {"a": "1"}}],
            [{"type": "assert-current-schema-id", "current-schema-id": 3}],
        )


def test_asserting_another_table_uuid_is_a_commit_conflict():
    base = new_table()

    with pytest.raises(CommitConflict):
        apply(base, [], [{"type": "assert-table-uuid", "uuid": str(uuid.uuid4())}])


def test_asserting_create_on_an_existing_table_is_a_commit_conflict():
    with pytest.raises(CommitConflict):
        apply(new_table(), [], [{"type": "assert-create"}])


def test_asserting_the_last_assigned_field_id_that_moved_is_a_commit_conflict():
    with pytest.raises(CommitConflict):
        apply(
            new_table(),
            [],
            [{"type": "assert-last-assigned-field-id", "last-assigned-field-id": 2}],
        )


def test_requirements_that_hold_let_the_updates_apply():
    base = new_table()

    metadata = apply(
        base,
        [{"action": "set-properties", "updates": {"owner": "erin"}}],
        [
            {"type": "assert-table-uuid", "uuid": str(base.table_uuid)},
            {"type": "assert-current-schema-id", "current-schema-id": 0},
            {"type": "assert-last-assigned-field-id", "last-assigned-field-id": 5},
        ],
    )

    assert metadata.properties["owner"] == "erin"
    assert metadata.table_uuid == base.table_uuid
    assert "owner" not in base.properties


def test_add_schema_and_set_current_schema_add_a_column():
    base = new_table()

    metadata = apply(
        base,
        [
            {"action": "add-schema", "schema": schema_with_amount(), "last-column-id": 6},
            {"action": "set-current-schema", "schema-id": -1},
        ],
    )

    assert metadata.current_schema_id == 1
    assert [s.schema_id for s in metadata.schemas] == [0, 1]
    assert [f.name for f in metadata.schema().fields] == ["id", "ts", "amount"]
    assert metadata.last_column_id == 6
    assert base.current_schema_id == 0


def test_set_current_schema_to_an_unknown_id_is_invalid_input():
    with pytest.raises(InvalidInput):
        apply(new_table(), [{"action": "set-current-schema", "schema-id": 42}])


def test_the_metadata_log_gains_the_previous_file_when_a_base_location_is_given():
    base = new_table()
    previous = f"{LOCATION}/metadata/00001-{uuid.uuid4()}.metadata.json"

    metadata = apply(
        base, [{"action": "set-properties", "updates": {"a": "1"}}], base_location=previous
    )

    assert [entry.metadata_file for entry in metadata.metadata_log] == [previous]
    assert metadata.metadata_log[0].timestamp_ms == base.last_updated_ms


def test_the_metadata_log_stays_empty_without_a_base_location():
    metadata = apply(new_table(), [{"action": "set-properties", "updates": {"a": "1"}}])

    assert metadata.metadata_log == []


def test_a_staged_create_is_built_from_nothing_by_its_updates():
    staged = new_table(partition_spec=SPEC, write_order=ORDER, properties={"owner": "erin"})
    schema = staged.schema().model_dump(by_alias=True)
    spec = staged.spec().model_dump(by_alias=True)
    order = next(o for o in staged.sort_orders if o.order_id == 1).model_dump(by_alias=True)

    metadata = apply(
        None,
        [
            {"action": "assign-uuid", "uuid": str(staged.table_uuid)},
            {"action": "upgrade-format-version", "format-version": 2},
            {"action": "add-schema", "schema": schema, "last-column-id": staged.last_column_id},
            {"action": "set-current-schema", "schema-id": -1},
            {"action": "add-spec", "spec": spec},
            {"action": "set-default-spec", "spec-id": -1},
            {"action": "add-sort-order", "sort-order": order},
            {"action": "set-default-sort-order", "sort-order-id": -1},
            {"action": "set-location", "location": LOCATION},
            {"action": "set-properties", "updates": {"owner": "erin"}},
        ],
        [{"type": "assert-create"}],
    )

    assert metadata.table_uuid == staged.table_uuid
    assert metadata.format_version == 2
    assert metadata.location == LOCATION
    assert [f.name for f in metadata.schema().fields] == ["id", "ts", "point"]
    assert [f.source_id for f in metadata.spec().fields] == [2]
    assert metadata.default_sort_order_id == 1
    assert metadata.properties["owner"] == "erin"
    assert metadata.metadata_log == []


def test_written_metadata_reads_back_equal(tmp_path):
    metadata = new_table(location=str(tmp_path / "t"), partition_spec=SPEC)

    path = tables.write_table_metadata(metadata, None)

    assert path.startswith(str(tmp_path / "t" / "metadata" / "00001-"))
    assert tables.read_table_metadata(path) == metadata
    second = tables.write_table_metadata(metadata, path)
    assert second.startswith(str(tmp_path / "t" / "metadata" / "00002-"))
