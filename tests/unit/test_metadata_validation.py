"""Metadata engines cannot read is refused as Iceberg's Java builders refuse it, with a
ValidationException (400) that names the problem; malformed JSON in updates is a 400 too,
never an exception that escapes as a 500."""

from __future__ import annotations

import pytest

from catalog.core import tables, view_metadata
from catalog.core.errors import InvalidInput, SqlError, ValidationFailed

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": True},
        {"id": 2, "name": "ts", "type": "timestamptz", "required": False},
        {"id": 3, "name": "tags", "type": {"type": "list", "element-id": 4,
         "element": "string", "element-required": False}, "required": False},
        {"id": 5, "name": "attrs", "type": {"type": "map", "key-id": 6, "key": "string",
         "value-id": 7, "value": "long", "value-required": False}, "required": False},
    ],
}  # fmt: skip


def field(field_id: int, name: str, field_type: object = "long") -> dict:
    return {"id": field_id, "name": name, "type": field_type, "required": False}


def commit(*updates: dict):
    base = tables.new_table(schema=SCHEMA, location="/wh/ns/t")
    requirements, parsed = tables.parse_changes([], list(updates))
    return tables.apply_changes(
        base, "/wh/ns/t/metadata/00001-a.metadata.json", requirements, parsed
    )


def add_schema(schema_id: int, *fields: dict, last_column_id: int = 10) -> dict:
    schema = {"type": "struct", "schema-id": schema_id, "fields": list(fields)}
    return {"action": "add-schema", "schema": schema, "last-column-id": last_column_id}


def add_spec(*fields: dict) -> dict:
    return {"action": "add-spec", "spec": {"spec-id": 1, "fields": list(fields)}}


def test_a_schema_with_nested_lists_and_maps_is_accepted():
    metadata = tables.new_table(schema=SCHEMA, location="/wh/ns/t")
    assert metadata.last_column_id == 7


def test_what_spark_sends_for_partitioned_tables_is_accepted():
    metadata = commit(
        add_spec(
            {"source-id": 2, "field-id": 1000, "name": "ts_day", "transform": "day"},
            {"source-id": 1, "field-id": 1001, "name": "id_bucket", "transform": "bucket[16]"},
        ),
        {"action": "set-default-spec", "spec-id": -1},
        add_schema(1, field(1, "id"), field(2, "ts", "timestamptz"), field(8, "note", "string")),
        {"action": "set-current-schema", "schema-id": -1},
    )
    assert metadata.default_spec_id == 1
    assert metadata.current_schema_id == 1


@pytest.mark.parametrize(
    ("update", "message"),
    [
        (add_schema(1, field(8, "a"), field(8, "b")), r"duplicate field id 8 \(a, b\)"),
        (add_schema(0, field(8, "a")), "schema id 0 is used twice"),
        (
            add_spec({"source-id": 1, "field-id": 1000, "name": "p", "transform": "frobnicate"}),
            "unknown transform",
        ),
        (
            add_spec({"source-id": 99, "field-id": 1000, "name": "p", "transform": "identity"}),
            "unknown source column 99",
        ),
        (
            add_spec({"source-id": 3, "field-id": 1000, "name": "p", "transform": "day"}),
            "cannot transform tags",
        ),
        (
            {
                "action": "add-sort-order",
                "sort-order": {
                    "order-id": 1,
                    "fields": [
                        {
                            "source-id": 77,
                            "transform": "identity",
                            "direction": "asc",
                            "null-order": "nulls-first",
                        }
                    ],
                },
            },
            "unknown source column 77",
        ),  # fmt: skip
    ],
)
def test_metadata_engines_cannot_read_is_refused_naming_the_problem(update, message):
    with pytest.raises(ValidationFailed, match=message):
        commit(update)


@pytest.mark.parametrize(
    "update",
    [
        [1, 2],
        None,
        {"action": "set-current-schema", "schema-id": "x"},
        {"action": "set-properties", "updates": [1]},
        {"action": "remove-properties", "removals": "abc"},
        add_schema(1, {"id": 8, "name": "s", "type": {"type": "struct", "fields": []},
                       "required": False, "initial-default": {"a": 1}}),
        add_schema(1, field(8, "l", {"type": "list", "element-id": 9})),
        add_schema(1, field(8, "d", "decimal(99, 2)")),
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
         "snapshot-id": 2**64},
    ],
)  # fmt: skip
def test_malformed_updates_are_a_bad_request_not_a_crash(update):
    with pytest.raises(InvalidInput):
        commit(update)


def test_a_snapshot_id_past_a_long_is_refused():
    snapshot = {
        "snapshot-id": 2**63,
        "timestamp-ms": 1,
        "manifest-list": "/wh/ns/t/metadata/snap.avro",
        "summary": {"operation": "append"},
    }
    with pytest.raises(InvalidInput):
        commit({"action": "add-snapshot", "snapshot": snapshot})


def test_a_document_that_is_not_table_metadata_is_named_briefly():
    document = {"format-version": 2, "junk": "x" * 10_000}
    with pytest.raises(InvalidInput) as caught:
        tables.parse_table_metadata(document, source="f.json")
    assert len(caught.value.message) < 600


def view_base():
    schema = {"type": "struct", "schema-id": 0, "fields": [field(0, "id")]}
    version = {
        "version-id": 1, "schema-id": -1, "timestamp-ms": 1, "summary": {},
        "representations": [{"type": "sql", "sql": "SELECT 1 AS id", "dialect": "spark"}],
        "default-namespace": ["ns"],
    }  # fmt: skip
    updates = [
        {"action": "add-schema", "schema": schema},
        {"action": "add-view-version", "view-version": version},
        {"action": "set-current-view-version", "view-version-id": -1},
    ]
    return view_metadata.apply_view_updates(None, updates, location="/wh/ns/v")


def view_version(sql: str, dialect: str = "spark") -> dict:
    return {
        "version-id": 2, "schema-id": 0, "timestamp-ms": 2, "summary": {},
        "representations": [{"type": "sql", "sql": sql, "dialect": dialect}],
        "default-namespace": ["ns"],
    }  # fmt: skip


def commit_view(*updates: dict):
    builder = view_metadata.ViewMetadataBuilder(view_base())
    view_metadata.apply_updates_to_builder(builder, list(updates))
    return builder.build()


def test_view_sql_that_does_not_parse_in_its_dialect_is_refused_with_line_and_column():
    with pytest.raises(SqlError, match=r"spark SQL of the view does not parse.*line 1"):
        commit_view({"action": "add-view-version", "view-version": view_version("SELEC FROM")})


def test_view_sql_in_a_dialect_sqlglot_does_not_know_is_taken_on_trust():
    builder = view_metadata.ViewMetadataBuilder(view_base())
    builder.set_properties({view_metadata.REPLACE_DROP_DIALECT_ALLOWED: "true"})
    view_metadata.apply_updates_to_builder(
        builder,
        [
            {"action": "add-view-version", "view-version": view_version("SELEC ~", "weird")},
            {"action": "set-current-view-version", "view-version-id": -1},
        ],
    )
    assert builder.build().current_version_id == 2


@pytest.mark.parametrize(
    "update",
    [
        {"action": "set-current-view-version", "view-version-id": "x"},
        {"action": "set-current-view-version", "view-version-id": 2**70},
        {"action": "set-properties", "updates": [1]},
        {"action": "set-properties", "updates": {"a": {"b": 1}}},
        {"action": "remove-properties", "removals": None},
        {"action": "upgrade-format-version", "format-version": "x"},
        {"action": "set-location", "location": ["a"]},
        {"action": "add-schema", "schema": {"type": "struct", "schema-id": 1,
                                            "fields": [field(1, "a", "decimal(99,1)")]}},
        {"action": "add-schema", "schema": {"type": "struct", "schema-id": 1,
                                            "fields": [field(1, "a"), field(1, "b")]}},
    ],
)  # fmt: skip
def test_malformed_view_updates_are_a_bad_request_not_a_crash(update):
    with pytest.raises(InvalidInput):
        commit_view(update)
