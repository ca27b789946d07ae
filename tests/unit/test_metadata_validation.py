"""Metadata engines cannot read is refused as Iceberg's Java builders refuse it, with a
ValidationException (400) that names the problem; malformed JSON in updates, requirements
and documents is a 400 naming the field, never an exception that escapes as a 500. What
Spark and pyiceberg really send still passes."""

from __future__ import annotations

import json

import pytest
from pyiceberg.schema import Schema

from catalog.core import tables, validation, view_metadata
from catalog.core.errors import InvalidInput, InvalidMetadata, ValidationFailed

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
# After new_table: id 1, ts 2, tags 3 (element 5), attrs 4 (key 6, value 7).
LOCATION = "/wh/ns/t"


def field(field_id: int, name: str, field_type: object = "long") -> dict:
    return {"id": field_id, "name": name, "type": field_type, "required": False}


def commit(*updates: object, requirements: tuple = (), properties: dict | None = None):
    base = tables.new_table(schema=SCHEMA, location=LOCATION, properties=properties)
    parsed_requirements, parsed = tables.parse_changes(list(requirements), list(updates))
    return tables.apply_changes(
        base, f"{LOCATION}/metadata/00001-a.metadata.json", parsed_requirements, parsed
    )


def add_schema(schema_id: int, *fields: dict, last_column_id: int = 10) -> dict:
    schema = {"type": "struct", "schema-id": schema_id, "fields": list(fields)}
    return {"action": "add-schema", "schema": schema, "last-column-id": last_column_id}


def current_columns(*extra: dict) -> list[dict]:
    """The table's columns after new_table, as a client sends them back in a new schema."""
    return [
        {"id": 1, "name": "id", "type": "long", "required": True},
        field(2, "ts", "timestamptz"),
        field(3, "tags", {"type": "list", "element-id": 5, "element": "string",
                          "element-required": False}),
        field(4, "attrs", {"type": "map", "key-id": 6, "key": "string", "value-id": 7,
                           "value": "long", "value-required": False}),
        *extra,
    ]  # fmt: skip


def partition(source_id: int, name: str, transform: str, field_id: int = 1000) -> dict:
    return {"source-id": source_id, "field-id": field_id, "name": name, "transform": transform}


def add_spec(*fields: dict, spec_id: int = 1) -> dict:
    return {"action": "add-spec", "spec": {"spec-id": spec_id, "fields": list(fields)}}


def sort_field(source_id: int, transform: str = "identity") -> dict:
    return {
        "source-id": source_id,
        "transform": transform,
        "direction": "asc",
        "null-order": "nulls-first",
    }


def add_sort_order(*fields: dict, order_id: int = 1) -> dict:
    return {
        "action": "add-sort-order",
        "sort-order": {"order-id": order_id, "fields": list(fields)},
    }


# -- what engines send passes ----------------------------------------------------------------


def test_a_schema_with_nested_lists_and_maps_is_accepted():
    metadata = tables.new_table(schema=SCHEMA, location=LOCATION)
    assert metadata.last_column_id == 7


def test_sparks_create_table_with_days_bucket_truncate_and_identity_partitions_is_accepted():
    schema = {
        "type": "struct",
        "schema-id": 0,
        "fields": [
            {"id": 0, "name": "id", "type": "long", "required": False},
            {"id": 1, "name": "ts", "type": "timestamptz", "required": False},
            {"id": 2, "name": "s", "type": "string", "required": False},
            {"id": 3, "name": "cat", "type": "string", "required": False},
        ],
    }
    spec = {
        "spec-id": 0,
        "fields": [
            partition(1, "ts_day", "day", 1000),
            partition(0, "id_bucket", "bucket[16]", 1001),
            partition(2, "s_trunc", "truncate[4]", 1002),
            partition(3, "cat", "identity", 1003),
        ],
    }
    metadata = tables.new_table(
        schema=schema,
        location=LOCATION,
        partition_spec=spec,
        write_order={"order-id": 0, "fields": []},
        properties={"owner": "spark"},
    )
    assert [str(f.transform) for f in metadata.spec().fields] == [
        "day",
        "bucket[16]",
        "truncate[4]",
        "identity",
    ]
    assert metadata.last_partition_id == 1003


def test_sparks_staged_create_is_accepted():
    staged = tables.new_table(
        schema=SCHEMA,
        location=LOCATION,
        partition_spec={"spec-id": 0, "fields": [partition(2, "ts_day", "day")]},
    )
    schema = json.loads(staged.schema().model_dump_json(by_alias=True))
    requirements, updates = tables.parse_changes(
        [{"type": "assert-create"}],
        [
            {"action": "assign-uuid", "uuid": str(staged.table_uuid)},
            {"action": "upgrade-format-version", "format-version": 2},
            {"action": "add-schema", "schema": schema, "last-column-id": 7},
            {"action": "set-current-schema", "schema-id": -1},
            add_spec(partition(2, "ts_day", "day"), spec_id=0),
            {"action": "set-default-spec", "spec-id": -1},
            add_sort_order(order_id=0),
            {"action": "set-default-sort-order", "sort-order-id": -1},
            {"action": "set-location", "location": LOCATION},
            {"action": "set-properties", "updates": {"owner": "spark"}},
        ],
    )
    metadata = tables.apply_changes(None, None, requirements, updates)
    assert metadata.spec().fields[0].name == "ts_day"


def test_what_spark_sends_to_add_a_column_and_evolve_partitions_and_order_is_accepted():
    metadata = commit(
        add_schema(1, *current_columns(field(8, "note", "string")), last_column_id=8),
        {"action": "set-current-schema", "schema-id": -1},
        add_spec(partition(2, "ts_day", "day"), partition(1, "id_bucket", "bucket[16]", 1001)),
        {"action": "set-default-spec", "spec-id": -1},
        add_sort_order(sort_field(1), sort_field(8, "truncate[4]")),
        {"action": "set-default-sort-order", "sort-order-id": -1},
        requirements=(
            {"type": "assert-current-schema-id", "current-schema-id": 0},
            {"type": "assert-last-assigned-field-id", "last-assigned-field-id": 7},
            {"type": "assert-default-spec-id", "default-spec-id": 0},
        ),
    )
    assert metadata.current_schema_id == 1
    assert metadata.last_column_id == 8
    assert metadata.default_spec_id == 1
    assert metadata.default_sort_order_id == 1


def test_a_nested_struct_column_may_be_a_partition_source():
    point = {"type": "struct", "fields": [field(9, "x", "double")]}
    metadata = commit(
        add_schema(1, *current_columns(field(8, "point", point)), last_column_id=9),
        {"action": "set-current-schema", "schema-id": -1},
        add_spec(partition(9, "point.x", "identity")),
    )
    assert metadata.partition_specs[1].fields[0].source_id == 9


def test_a_void_partition_of_a_v1_table_needs_no_column():
    metadata = commit(
        add_spec(partition(99, "gone", "void")),
        {"action": "set-default-spec", "spec-id": -1},
        properties={"format-version": "1"},
    )
    assert str(metadata.spec().fields[0].transform) == "void"


def test_adding_a_schema_the_table_already_has_changes_nothing():
    base = tables.new_table(schema=SCHEMA, location=LOCATION)
    schema = json.loads(base.schema().model_dump_json(by_alias=True))
    metadata = commit({"action": "add-schema", "schema": schema})
    assert [s.schema_id for s in metadata.schemas] == [0]


# -- metadata engines cannot read is refused ------------------------------------------------


@pytest.mark.parametrize(
    ("update", "message"),
    [
        (add_schema(1, field(8, "a"), field(8, "b")),
         r"Invalid schema 1: duplicate field id 8 \(a, b\)"),
        (add_schema(1, field(8, "s", {"type": "struct", "fields": [field(8, "x")]})),
         r"duplicate field id 8 \(s, x\)"),
        (add_schema(1, field(8, "l", {"type": "list", "element-id": 8, "element": "long",
                                      "element-required": False})), "duplicate field id 8"),
        (add_schema(0, field(8, "a")), "schema id 0 is used twice"),
        (add_schema(1, field(-1, "a")), "field id -1 is out of range"),
        (add_schema(-3, field(8, "a")), "the schema id is out of range"),
        (add_schema(1, field(8, "t", "timestamp_ns")), "needs format version 3"),
        (add_schema(1, {**field(8, "n"), "initial-default": 5}),
         "initial-default, which needs format version 3"),
        (add_spec(partition(1, "p", "frobnicate")), "unknown transform frobnicate"),
        (add_spec(partition(1, "p", "bucket[0]")), "invalid number of buckets 0"),
        (add_spec(partition(1, "p", "truncate[0]")), "invalid truncate width 0"),
        (add_spec(partition(99, "p", "identity")), "cannot find source column 99"),
        (add_spec(partition(1, "p", "day")), "day cannot transform id"),
        (add_spec(partition(3, "p", "identity")), "source column tags is not a primitive"),
        (add_spec(partition(5, "p", "identity")), "is inside a list or a map"),
        (add_spec(partition(2, "a", "day"), partition(1, "b", "bucket[2]")),
         "duplicate partition field id 1000"),
        (add_spec(partition(2, "a", "day"), partition(1, "a", "bucket[2]", 1001)),
         "duplicate partition field name a"),
        (add_spec(partition(2, "", "day")), "empty name"),
        (add_spec(partition(2, "id", "day")), "the name is that of another column"),
        (add_spec(spec_id=-2), "the spec id is out of range"),
        (add_spec(partition(2, "p", "day", -1)), "field id -1 is out of range"),
        (add_sort_order(sort_field(77)), "cannot find source column 77"),
        (add_sort_order(sort_field(3)), "source column tags is not a primitive"),
        (add_sort_order(sort_field(1, "month")), "month cannot transform id"),
        (add_sort_order(sort_field(1, "zorder")), "unknown transform zorder"),
        (add_sort_order(sort_field(1), order_id=0),
         "order id 0 is reserved for the unsorted order"),
        (add_sort_order(order_id=3), "the unsorted order's id must be 0"),
    ],
)  # fmt: skip
def test_metadata_engines_cannot_read_is_refused_naming_the_problem(update, message):
    with pytest.raises(ValidationFailed, match=message):
        commit(update)


def test_a_partition_over_a_struct_inside_a_list_is_refused():
    points = {"type": "list", "element-id": 9, "element-required": False,
              "element": {"type": "struct", "fields": [field(10, "x", "double")]}}  # fmt: skip
    with pytest.raises(ValidationFailed, match="source column x is inside a list or a map"):
        commit(
            add_schema(1, *current_columns(field(8, "points", points))),
            {"action": "set-current-schema", "schema-id": -1},
            add_spec(partition(10, "x_ident", "identity")),
        )


def test_a_format_version_this_catalog_cannot_write_is_refused():
    with pytest.raises(InvalidInput, match="Unsupported format version: v3"):
        tables.new_table(schema=SCHEMA, location=LOCATION, properties={"format-version": "3"})


def test_a_v1_tables_spec_needs_sequential_field_ids():
    with pytest.raises(ValidationFailed, match="sequential partition field ids"):
        commit(add_spec(partition(2, "p", "day", 1005)), properties={"format-version": "1"})


def test_a_default_spec_over_a_missing_column_is_refused_as_a_validation_error():
    with pytest.raises(ValidationFailed, match="Cannot find source column"):
        commit(
            add_spec(partition(99, "p", "identity")), {"action": "set-default-spec", "spec-id": -1}
        )


def test_a_new_tables_schema_with_duplicate_field_ids_is_refused():
    schema = {"type": "struct", "fields": [field(1, "a"), field(1, "b")]}
    with pytest.raises(ValidationFailed, match=r"duplicate field id 1 \(a, b\)"):
        tables.new_table(schema=schema, location=LOCATION)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"spec-id": 0, "fields": [partition(1, "p", "frobnicate")]}, "unknown transform"),
        ({"spec-id": 0, "fields": [partition(3, "p", "bucket[4]")]}, "is not a primitive"),
        ({"spec-id": 0, "fields": [partition(2, "p", "truncate[4]")]}, "cannot transform ts"),
    ],
)
def test_a_new_tables_partition_spec_is_checked_against_its_schema(spec, message):
    with pytest.raises(ValidationFailed, match=message):
        tables.new_table(schema=SCHEMA, location=LOCATION, partition_spec=spec)


def test_a_new_tables_write_order_over_a_missing_column_is_refused():
    order = {"order-id": 1, "fields": [sort_field(42)]}
    with pytest.raises(ValidationFailed, match="cannot find source column 42"):
        tables.new_table(schema=SCHEMA, location=LOCATION, write_order=order)


@pytest.mark.parametrize(
    ("update", "message"),
    [
        (add_schema(1, field(2**31, "a")), r"0\.schema\.fields\.0\.id must be a whole number "
         "that fits Java's int, not 2147483648"),
        (add_schema(2**31, field(8, "a")), r"0\.schema\.schema-id .* Java's int"),
        (add_spec(spec_id=2**31), r"0\.spec\.spec-id .* Java's int"),
        (add_spec(partition(2, "p", "day", 2**31)), r"0\.spec\.fields\.0\.field-id .* int"),
        (add_sort_order(sort_field(-(2**31) - 1)), r"source-id .* Java's int"),
        ({"action": "set-current-schema", "schema-id": 2**31}, r"0\.schema-id .* Java's int"),
        ({"action": "remove-snapshots", "snapshot-ids": [1, 2**63]},
         r"0\.snapshot-ids\.1 must be a whole number that fits Java's long"),
        ({"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
          "snapshot-id": 2**64}, r"0\.snapshot-id .* Java's long"),
        ({"action": "add-snapshot", "snapshot": {
            "snapshot-id": 2**63, "sequence-number": 1, "timestamp-ms": 1,
            "manifest-list": f"{LOCATION}/metadata/snap.avro", "summary": {"operation": "append"}}},
         r"0\.snapshot\.snapshot-id .* Java's long, not 9223372036854775808"),
        ({"action": "add-snapshot", "snapshot": {
            "snapshot-id": 3, "sequence-number": 1, "timestamp-ms": -(2**63) - 1,
            "manifest-list": f"{LOCATION}/metadata/snap.avro", "summary": {"operation": "append"}}},
         r"0\.snapshot\.timestamp-ms .* Java's long"),
        (add_schema(1, {**field(8, "a"), "id": "8"}), r"0\.schema\.fields\.0\.id .*, not '8'"),
        (add_spec(partition(2, "p", "day", True)), r"field-id .*, not True"),
    ],
)  # fmt: skip
def test_ids_past_javas_int_or_long_or_not_numbers_at_all_are_refused(update, message):
    with pytest.raises(InvalidInput, match=message):
        commit(update)


def test_a_requirement_id_past_javas_int_is_refused():
    with pytest.raises(InvalidInput, match="last-assigned-field-id .* Java's int"):
        tables.parse_changes(
            [{"type": "assert-last-assigned-field-id", "last-assigned-field-id": 2**31}], []
        )


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"last-column-id": 2**31}, r"last-column-id 2147483648 is out of range \(an int\)"),
        ({"snapshots": [{"snapshot-id": 2**63}]}, r"snapshots\.0\.snapshot-id .* \(a long\)"),
        ({"statistics": [{"blob-metadata": [{"fields": [2**31]}]}]},
         r"statistics\.0\.blob-metadata\.0\.fields\.0 .* \(an int\)"),
        ({"refs": {"main": {"max-ref-age-ms": -(2**63) - 1}}}, r"refs\.main\.max-ref-age-ms"),
    ],
)  # fmt: skip
def test_metadata_numbers_past_the_java_type_the_spec_gives_them_are_refused(document, message):
    with pytest.raises(ValidationFailed, match=message):
        validation.validate_number_ranges(document)


def test_metadata_numbers_within_their_java_types_pass():
    metadata = tables.new_table(schema=SCHEMA, location=LOCATION)
    document = json.loads(tables.table_metadata_json(metadata))
    document["snapshots"] = [{"snapshot-id": 2**63 - 1, "timestamp-ms": -(2**63)}]
    document["properties"] = {"schema-id": "not a number"}
    validation.validate_number_ranges(document)


# -- malformed JSON is a bad request, never a crash -----------------------------------------


@pytest.mark.parametrize(
    ("update", "message"),
    [
        ([1, 2], "Input should be an object"),
        (None, "Input should be an object"),
        (1, "Input should be an object"),
        ({"action": "set-current-schema", "schema-id": "x"}, "schema-id"),
        ({"action": "set-current-schema", "schema-id": "1"}, "schema-id"),
        ({"action": "set-current-schema", "schema-id": True}, "schema-id"),
        ({"action": "set-current-schema", "schema-id": 1.5}, "schema-id"),
        ({"action": "set-properties", "updates": [1]}, "updates must be an object"),
        ({"action": "set-properties", "updates": {"a": 1}}, "updates must map strings to strings"),
        ({"action": "set-properties", "updates": {"a": {"b": 1}}}, "strings to strings"),
        ({"action": "set-properties", "updates": {"a": None}}, "strings to strings"),
        ({"action": "remove-properties", "removals": "abc"}, "removals"),
        ({"action": "remove-properties", "removals": [1]}, "removals"),
        ({"action": "add-schema", "schema": []}, "schema"),
        ({"action": "add-spec", "spec": {"spec-id": 1, "fields": {"a": 1}}}, "fields"),
        ({"action": "teleport"}, "table update"),
        (add_schema(1, {**field(8, "s", {"type": "struct", "fields": []}),
                        "initial-default": {"a": 1}}), "Invalid table update"),
        (add_schema(1, field(8, "l", {"type": "list", "element-id": 9})), "element_type"),
        (add_schema(1, field(8, "d", "decimal(99, 2)")), "precision"),
        (add_schema(1, field(8, "v", "varchar")), "varchar"),
        ({"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
          "snapshot-id": 12}, "unknown snapshot 12"),
        ({"action": "set-default-spec", "spec-id": 7}, "spec with id 7"),
        (add_spec(partition(2, "p", "day"), spec_id=0), "spec with id 0 already exists"),
        ({"action": "remove-schemas", "schema-ids": [0]}, "current schema"),
        ({"action": "upgrade-format-version", "format-version": 99}, "format version"),
    ],
)  # fmt: skip
def test_malformed_updates_are_a_bad_request_naming_the_field(update, message):
    with pytest.raises(InvalidInput, match=message):
        commit(update)


@pytest.mark.parametrize(
    "requirement",
    [
        {"type": "assert-current-schema-id", "current-schema-id": "0"},
        {"type": "assert-table-uuid", "uuid": 5},
        {"type": 7},
        [],
    ],
)
def test_malformed_requirements_are_a_bad_request(requirement):
    with pytest.raises(InvalidInput, match="table requirement"):
        tables.parse_changes([requirement], [])


def test_updates_that_are_not_a_list_are_a_bad_request():
    with pytest.raises(InvalidInput, match="expected a list"):
        tables.parse_changes([], {"action": "set-properties"})


def test_a_long_value_is_not_echoed_whole():
    with pytest.raises(InvalidInput) as caught:
        commit(add_schema(1, field(8, "x", "y" * 10_000)))
    assert len(caught.value.message) < 400


def test_a_staged_create_without_a_schema_is_a_bad_request():
    requirements, updates = tables.parse_changes(
        [{"type": "assert-create"}], [{"action": "set-properties", "updates": {"a": "b"}}]
    )
    with pytest.raises(InvalidInput, match="no current schema, partition spec or sort order"):
        tables.apply_changes(None, None, requirements, updates)


@pytest.mark.parametrize(
    "properties",
    [{"retries": 3}, {"a": None}, {"a": ["b"]}, ["a"]],
)
def test_a_new_tables_properties_must_map_strings_to_strings(properties):
    with pytest.raises(InvalidInput, match="properties must"):
        tables.new_table(schema=SCHEMA, location=LOCATION, properties=properties)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "struct", "fields": [{**field(1, "a"), "id": "1"}]},
        {"type": "struct", "fields": [field(1, "a", {"type": "list"})]},
        {"type": "struct", "fields": [field(1, "a", "decimal(99, 2)")]},
        {"type": "struct", "fields": "a"},
    ],
)
def test_a_malformed_new_table_schema_is_a_bad_request(schema):
    with pytest.raises(InvalidInput, match="Invalid table definition"):
        tables.new_table(schema=schema, location=LOCATION)


@pytest.mark.parametrize(
    "document",
    [
        {"format-version": 2, "junk": "x" * 10_000},
        {"format-version": "x" * 10_000},
        [1, 2],
        {"format-version": 2, "schemas": [{"type": "struct", "fields": 5}]},
    ],
)
def test_a_document_that_is_not_table_metadata_is_named_briefly(document):
    with pytest.raises(InvalidMetadata) as caught:
        tables.parse_table_metadata(document, source="f.json")
    assert caught.value.message.startswith("f.json: ")
    assert len(caught.value.message) < 400


# -- views -----------------------------------------------------------------------------------


def spark_view_version(sql: str = "SELECT id FROM ns.t", dialect: str = "spark") -> dict:
    """A view version as Spark's Iceberg runtime sends it over REST."""
    return {
        "version-id": 1,
        "schema-id": 0,
        "timestamp-ms": 1_700_000_000_000,
        "summary": {"engine-name": "spark", "engine-version": "3.5.1",
                    "iceberg-version": "Apache Iceberg 1.6.1", "app-id": "local-1"},
        "representations": [{"type": "sql", "sql": sql, "dialect": dialect}],
        "default-catalog": "lakeview",
        "default-namespace": ["ns"],
    }  # fmt: skip


def create_view(*, sql: str = "SELECT id FROM ns.t", dialect: str = "spark", schema=None):
    """What the catalog does with a REST CreateViewRequest (services.create_view_from_parts)."""
    schema = schema or {"type": "struct", "schema-id": 0, "fields": [field(0, "id")]}
    updates = [
        {"action": "set-properties", "updates": {"create_engine_version": "Spark 3.5.1"}},
        {"action": "add-schema", "schema": schema},
        {"action": "add-view-version",
         "view-version": {**spark_view_version(sql, dialect), "schema-id": -1}},
        {"action": "set-current-view-version", "view-version-id": -1},
    ]  # fmt: skip
    return view_metadata.apply_view_updates(None, updates, location="/wh/ns/v")


def commit_view(*updates: object):
    builder = view_metadata.ViewMetadataBuilder(create_view())
    view_metadata.apply_updates_to_builder(builder, list(updates))
    return builder.build()


def view_version(sql: str, dialect: str = "spark") -> dict:
    return {**spark_view_version(sql, dialect), "version-id": 2, "timestamp-ms": 2}


def test_a_rest_view_create_in_spark_sql_is_accepted():
    metadata = create_view()
    assert metadata.current_version_id == 1
    assert metadata.schemas[0].fields[0].field_id == 0


def test_view_sql_sqlglot_cannot_read_is_stored_as_the_engine_sent_it():
    # Spark parsed and analyzed this (a namespace named `inner`) before sending it; the
    # catalog is never stricter than the engine.
    sql = "SELECT * FROM lake.ns.inner.t"
    metadata = commit_view({"action": "add-view-version", "view-version": view_version(sql)})
    added = metadata.versions[-1]
    assert [r.sql for r in view_metadata.sql_representations(added)] == [sql]
    assert create_view(sql="SELECT FROM WHERE", dialect="trino").current_version_id == 1


def test_view_sql_in_a_dialect_sqlglot_does_not_know_is_taken_on_trust():
    builder = view_metadata.ViewMetadataBuilder(create_view())
    builder.set_properties({view_metadata.REPLACE_DROP_DIALECT_ALLOWED: "true"})
    view_metadata.apply_updates_to_builder(
        builder,
        [
            {"action": "add-view-version", "view-version": view_version("SELEC ~", "weird")},
            {"action": "set-current-view-version", "view-version-id": -1},
        ],
    )
    assert builder.build().current_version_id == 2


def test_a_view_schema_with_duplicate_field_ids_is_refused_on_every_path():
    schema = {"type": "struct", "schema-id": 0, "fields": [field(1, "a"), field(1, "b")]}
    with pytest.raises(ValidationFailed, match=r"Invalid view schema 0: duplicate field id 1"):
        create_view(schema=schema)
    builder = view_metadata.ViewMetadataBuilder(create_view())
    parsed = Schema.model_validate(schema)
    with pytest.raises(ValidationFailed, match="duplicate field id 1"):
        builder.add_schema(parsed)


@pytest.mark.parametrize(
    ("update", "message"),
    [
        ({"action": "set-current-view-version", "view-version-id": "x"}, "view-version-id"),
        ({"action": "set-current-view-version", "view-version-id": 2**70}, "view-version-id"),
        ({"action": "set-properties", "updates": [1]}, "updates must be"),
        ({"action": "set-properties", "updates": {"a": {"b": 1}}}, "updates must be"),
        ({"action": "remove-properties", "removals": None}, "missing field removals"),
        ({"action": "remove-properties", "removals": "abc"}, "removals must be"),
        ({"action": "upgrade-format-version", "format-version": "x"}, "format-version"),
        ({"action": "set-location", "location": ["a"]}, "location must be"),
        ({"action": "assign-uuid", "uuid": "x"}, "Invalid view UUID"),
        ({"action": "add-schema", "schema": {"type": "struct", "schema-id": 1,
                                            "fields": [field(1, "a", "decimal(99,1)")]}},
         "precision"),
        ({"action": "add-schema", "schema": {"type": "struct", "schema-id": 1,
                                            "fields": [{**field(1, "a"), "id": "1"}]}}, "id"),
        ({"action": "add-schema", "schema": {"type": "struct", "schema-id": 1,
                                            "fields": [field(1, "l", {"type": "list"})]}},
         "add-schema"),
        ({"action": "add-view-version",
          "view-version": {**view_version("SELECT 2 AS id"), "timestamp-ms": "5"}},
         "timestamp-ms"),
        ({"action": "add-view-version",
          "view-version": {**view_version("SELECT 2 AS id"), "timestamp-ms": 2**63}},
         "timestamp-ms"),
        ({"action": "add-view-version",
          "view-version": {**view_version("SELECT 2 AS id"), "summary": {"a": 1}}}, "summary"),
        ({"action": "add-view-version", "view-version": [1]}, "view-version must be"),
        ({"action": 5}, "Unknown view update action"),
        ("add-schema", "must be a JSON object"),
    ],
)  # fmt: skip
def test_malformed_view_updates_are_a_bad_request_naming_the_field(update, message):
    with pytest.raises(InvalidInput, match=message):
        commit_view(update)


@pytest.mark.parametrize("updates", [{"action": "set-location"}, "abc", 5])
def test_view_updates_that_are_not_a_list_are_a_bad_request(updates):
    builder = view_metadata.ViewMetadataBuilder(create_view())
    with pytest.raises(InvalidInput, match="must be a list"):
        view_metadata.apply_updates_to_builder(builder, updates)


@pytest.mark.parametrize(
    "change",
    [
        {"schemas": [{"type": "struct", "fields": 5}]},
        {"schemas": [{"type": "struct", "fields": [field(1, "l", {"type": "list"})]}]},
        {"versions": 5},
        {"format-version": "x" * 10_000},
    ],
)
def test_a_document_that_is_not_view_metadata_is_named_briefly(change):
    document = json.loads(view_metadata.view_metadata_json(create_view()))
    document.update(change)
    with pytest.raises(InvalidMetadata) as caught:
        view_metadata.parse_view_metadata(document, source="v.json")
    assert len(caught.value.message) < 400
