"""The view metadata rules of the Iceberg View Spec, without a database."""

from __future__ import annotations

import json

import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from catalog.core.errors import CommitConflict, InvalidInput, InvalidMetadata
from catalog.core.view_metadata import (
    ViewMetadataBuilder,
    apply_view_updates,
    check_view_requirements,
    make_version,
    parse_view_metadata,
)

SCHEMA = Schema(NestedField(1, "n", LongType(), required=False))
OTHER_SCHEMA = Schema(NestedField(1, "s", StringType(), required=False))


def build_view(*sqls: str, history: int | None = None):
    """A view whose versions are `sqls`, each replacing the one before."""
    builder = ViewMetadataBuilder.new(location="/warehouse/ns/v")
    if history:
        builder.set_properties({"version.history.num-entries": str(history)})
    metadata = None
    for sql in sqls:
        builder = builder if metadata is None else ViewMetadataBuilder(metadata)
        builder.add_schema(SCHEMA)
        builder.add_version(
            make_version(representations={"spark": sql}, schema_id=-1, default_namespace=["ns"])
        )
        builder.set_current_version(-1)
        metadata = builder.build()
    return metadata


def test_a_new_view_has_every_required_field_and_one_version_in_its_log():
    metadata = build_view("SELECT 1 AS n")
    document = json.loads(metadata.model_dump_json(by_alias=True, exclude_none=True))
    assert document["format-version"] == 1
    for field in ("view-uuid", "location", "schemas", "current-version-id", "versions"):
        assert field in document
    assert document["current-version-id"] == 1
    assert [e["version-id"] for e in document["version-log"]] == [1]
    version = document["versions"][0]
    assert version["default-namespace"] == ["ns"]
    assert version["representations"] == [
        {"type": "sql", "sql": "SELECT 1 AS n", "dialect": "spark"}
    ]


def test_replacing_with_an_identical_definition_reuses_the_version_and_logs_nothing():
    metadata = build_view("SELECT 1 AS n", "SELECT 1 AS n")
    assert [v.version_id for v in metadata.versions] == [1]
    assert [e.version_id for e in metadata.version_log] == [1]


def test_replacing_with_an_earlier_definition_reuses_that_version_id():
    metadata = build_view("SELECT 1 AS n", "SELECT 2 AS n", "SELECT 1 AS n")
    assert [v.version_id for v in metadata.versions] == [1, 2]
    assert [e.version_id for e in metadata.version_log] == [1, 2, 1]


def test_an_identical_schema_is_reused_and_a_new_one_gets_the_next_id():
    builder = ViewMetadataBuilder.new(location="/w/v")
    assert builder.add_schema(SCHEMA) == 0
    assert builder.add_schema(SCHEMA) == 0
    assert builder.add_schema(OTHER_SCHEMA) == 1


def test_a_rollback_adds_a_log_entry_pointing_at_the_old_version():
    metadata = build_view("SELECT 1 AS n", "SELECT 2 AS n")
    builder = ViewMetadataBuilder(metadata)
    builder.set_current_version(1)
    rolled_back = builder.build()
    assert rolled_back.current_version_id == 1
    assert [e.version_id for e in rolled_back.version_log] == [1, 2, 1]
    assert len(rolled_back.versions) == 2


def test_the_version_history_setting_caps_the_versions_kept_and_trims_the_log():
    metadata = build_view(*(f"SELECT {i} AS n" for i in range(1, 6)), history=3)
    assert [v.version_id for v in metadata.versions] == [3, 4, 5]
    assert [e.version_id for e in metadata.version_log] == [3, 4, 5]


def test_the_current_version_is_always_kept_even_when_it_is_the_oldest():
    metadata = build_view("SELECT 1 AS n", "SELECT 2 AS n", "SELECT 3 AS n", history=2)
    builder = ViewMetadataBuilder(metadata)
    builder.set_current_version(2)
    builder.add_schema(SCHEMA)
    builder.add_version(
        make_version(
            representations={"spark": "SELECT 4 AS n"}, schema_id=-1, default_namespace=["ns"]
        )
    )
    kept = builder.build()
    assert 2 in [v.version_id for v in kept.versions]


def test_two_representations_of_one_dialect_are_refused():
    builder = ViewMetadataBuilder.new(location="/w/v")
    builder.add_schema(SCHEMA)
    version = make_version(
        representations={"spark": "SELECT 1"}, schema_id=-1, default_namespace=["ns"]
    )
    twice = version.model_copy(update={"representations": version.representations * 2})
    with pytest.raises(InvalidMetadata, match="multiple queries for dialect spark"):
        builder.add_version(twice)


def test_last_added_ids_are_refused_when_nothing_was_added():
    metadata = build_view("SELECT 1 AS n")
    builder = ViewMetadataBuilder(metadata)
    with pytest.raises(InvalidInput, match="no version has been added"):
        builder.set_current_version(-1)


def test_a_replace_that_drops_a_dialect_is_refused_unless_allowed():
    builder = ViewMetadataBuilder.new(location="/w/v")
    builder.add_schema(SCHEMA)
    builder.add_version(
        make_version(
            representations={"spark": "SELECT 1", "trino": "SELECT 1"},
            schema_id=-1,
            default_namespace=["ns"],
        )
    )
    builder.set_current_version(-1)
    metadata = builder.build()
    updates = [
        {
            "action": "add-view-version",
            "view-version": {
                "version-id": -1,
                "schema-id": 0,
                "timestamp-ms": 1,
                "summary": {},
                "representations": [{"type": "sql", "sql": "SELECT 2", "dialect": "spark"}],
                "default-namespace": ["ns"],
            },
        },
        {"action": "set-current-view-version", "view-version-id": -1},
    ]
    with pytest.raises(InvalidInput, match="loss of view dialects"):
        apply_view_updates(metadata, updates)
    allowed = [
        {"action": "set-properties", "updates": {"replace.drop-dialect.allowed": "true"}},
        *updates,
    ]
    assert apply_view_updates(metadata, allowed).current_version_id == 2


def test_rest_updates_resolve_minus_one_to_the_last_added_schema_and_version():
    created = apply_view_updates(
        None,
        [
            {"action": "assign-uuid", "uuid": "fa6506c3-7681-40c8-86dc-e36561f83385"},
            {"action": "add-schema", "schema": SCHEMA.model_dump(by_alias=True)},
            {
                "action": "add-view-version",
                "view-version": {
                    "version-id": 1,
                    "schema-id": -1,
                    "timestamp-ms": 5,
                    "summary": {"engine-name": "Spark"},
                    "representations": [{"type": "sql", "sql": "SELECT 1", "dialect": "spark"}],
                    "default-namespace": ["ns"],
                },
            },
            {"action": "set-current-view-version", "view-version-id": -1},
        ],
        location="/w/v",
    )
    assert created.view_uuid == "fa6506c3-7681-40c8-86dc-e36561f83385"
    assert created.versions[0].schema_id == 0
    assert created.current_version_id == 1


def test_a_changed_view_uuid_fails_the_requirement():
    metadata = build_view("SELECT 1 AS n")
    with pytest.raises(CommitConflict, match="UUID does not match"):
        check_view_requirements(
            metadata, [{"type": "assert-view-uuid", "uuid": "00000000-0000-0000-0000-000000000000"}]
        )
    check_view_requirements(metadata, [{"type": "assert-view-uuid", "uuid": metadata.view_uuid}])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format-version": 2}, "format-version must be 1"),
        ({"view-uuid": "not-a-uuid"}, "view-uuid"),
        ({"current-version-id": 7}, "Cannot find current version 7"),
        ({"versions": None}, "versions"),
        ({"location": None}, "location"),
    ],
)
def test_metadata_that_breaks_the_spec_is_refused_with_a_reason(change, message):
    document = json.loads(build_view("SELECT 1 AS n").model_dump_json(by_alias=True))
    document.update(change)
    document = {k: v for k, v in document.items() if v is not None}
    with pytest.raises(InvalidMetadata, match=message):
        parse_view_metadata(document, source="test.metadata.json")


def test_a_version_without_default_namespace_is_refused():
    document = json.loads(build_view("SELECT 1 AS n").model_dump_json(by_alias=True))
    del document["versions"][0]["default-namespace"]
    with pytest.raises(InvalidMetadata, match="default-namespace is missing"):
        parse_view_metadata(document, source="test.metadata.json")


def test_setting_a_property_to_its_value_or_removing_an_absent_one_changes_nothing():
    metadata = build_view("SELECT 1 AS n")
    builder = ViewMetadataBuilder(metadata)
    builder.set_properties({"comment": "x"})
    changed = builder.build()
    builder = ViewMetadataBuilder(changed)
    builder.set_properties({"comment": "x"})
    builder.remove_properties(["absent"])
    assert builder.changes == []
