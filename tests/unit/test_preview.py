"""Previews of tables written by pyiceberg into a folder: rows, column choice, row filters,
time travel with ClickHouse's rules, deletes, and pruning figures checked against the files
each test wrote (which files a filter can rule out is worked out here from their rows, not
by the code under test). Spark-written tables (v3 deletion vectors as Spark writes them,
equality deletes read through Spark, every partition transform) are the Spark tests'."""

from __future__ import annotations

import datetime
import json
import uuid
from decimal import Decimal
from pathlib import Path

import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import BucketTransform, DayTransform, IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

from catalog.core.errors import InvalidInput, NotFound
from catalog.core.preview import NeedsSpark, preview
from catalog.core.read_state import schema_at
from catalog.core.row_filters import parse_row_filter
from catalog.core.table_files import (
    DATA,
    DELETION_VECTOR,
    EQUALITY_DELETES,
    POSITION_DELETES,
    files_at,
)
from tests.unit.test_preview_tables import (
    IO,
    add_deletion_vector,
    add_equality_deletes,
    add_position_deletes,
    create_table,
    write,
)

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "region", StringType(), required=False),
    NestedField(3, "ts", TimestampType(), required=False),
    NestedField(4, "amount", DoubleType(), required=False),
)
START = datetime.datetime(2024, 1, 1)
BY_REGION = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "region"))


def row(id: int, region: str = "eu", ts: datetime.datetime = START, amount: float = 1.0):
    return {"id": id, "region": region, "ts": ts, "amount": amount}


def read(table, **options):
    options.setdefault("limit", 1000)
    return preview(
        table.metadata, table.metadata_location, io=IO, table_path=table.location(), **options
    )


def ids(result) -> list[int]:
    position = [column.name for column in result.columns].index("id")
    return sorted(values[position] for values in result.rows)


def figures(result) -> tuple[int, int, int, int]:
    pruning = result.pruning
    return (
        pruning.data_files,
        pruning.files_scanned,
        pruning.skipped_by_partition,
        pruning.skipped_by_stats,
    )


# -- pruning --------------------------------------------------------------------------------


def test_an_identity_partition_filter_skips_the_files_of_other_partitions(tmp_path: Path):
    table = create_table(tmp_path / "t", SCHEMA, BY_REGION)
    files = {
        "eu-1": [row(1, "eu"), row(2, "eu")],
        "eu-2": [row(3, "eu")],
        "us-1": [row(4, "us"), row(5, "us")],
        "ap-1": [row(6, "ap")],
    }
    write(table, *files.values())

    result = read(table, row_filter="region = 'eu'")

    other_partitions = sum(1 for rows in files.values() if rows[0]["region"] != "eu")
    assert figures(result) == (4, 4 - other_partitions, other_partitions, 0)
    assert ids(result) == [r["id"] for rows in files.values() for r in rows if r["region"] == "eu"]
    assert result.pruning.files_read == 2


def test_a_day_partition_filter_skips_earlier_days_and_column_stats_skip_the_morning_file(
    tmp_path: Path,
):
    table = create_table(
        tmp_path / "t", SCHEMA, PartitionSpec(PartitionField(3, 1000, DayTransform(), "ts_day"))
    )
    hour = datetime.timedelta(hours=1)
    day = datetime.timedelta(days=1)
    files = [
        [row(1, ts=START), row(2, ts=START + 5 * hour)],  # Jan 1
        [row(3, ts=START + day + hour)],  # Jan 2
        [row(4, ts=START + 2 * day + hour), row(5, ts=START + 2 * day + 9 * hour)],  # Jan 3 am
        [row(6, ts=START + 2 * day + 15 * hour)],  # Jan 3 pm
        [row(7, ts=START + 3 * day)],  # Jan 4
    ]
    write(table, *files)
    since = START + 2 * day + 12 * hour

    result = read(table, row_filter=f"ts > '{since.isoformat()}'")

    # A file's day can match when the day is not before the filter's; then its rows' range
    # (the column statistics) must reach past the moment.
    by_partition = sum(1 for rows in files if rows[0]["ts"].date() < since.date())
    by_stats = sum(
        1
        for rows in files
        if rows[0]["ts"].date() >= since.date() and max(r["ts"] for r in rows) <= since
    )
    assert (by_partition, by_stats) == (2, 1)
    assert figures(result) == (5, 5 - by_partition - by_stats, by_partition, by_stats)
    assert ids(result) == [r["id"] for rows in files for r in rows if r["ts"] > since]


def test_a_bucket_partition_filter_reads_only_the_bucket_of_the_value(tmp_path: Path):
    spec = PartitionSpec(PartitionField(1, 1000, BucketTransform(4), "id_bucket"))
    table = create_table(tmp_path / "t", SCHEMA, spec)
    # pyiceberg's Murmur3 bucket (Iceberg's), to group the rows into one file per bucket.
    bucket = BucketTransform(4).transform(LongType())
    by_bucket: dict[int, list[dict]] = {}
    for id in range(40):
        by_bucket.setdefault(bucket(id), []).append(row(id))
    files = list(by_bucket.values())
    write(table, *files)

    result = read(table, row_filter="id = 17")

    assert figures(result) == (len(files), 1, len(files) - 1, 0)
    assert ids(result) == [17]
    assert result.pruning.manifests == 1 and result.pruning.manifests_skipped == 0


def test_column_statistics_skip_the_sorted_files_of_an_unpartitioned_table(tmp_path: Path):
    table = create_table(tmp_path / "t", SCHEMA)
    files = [[row(id) for id in range(start, start + 100)] for start in range(0, 500, 100)]
    write(table, *files)

    result = read(table, row_filter="id between 250 and 320")

    overlapping = sum(1 for rows in files if rows[0]["id"] <= 320 and rows[-1]["id"] >= 250)
    assert figures(result) == (5, overlapping, 0, 5 - overlapping)
    assert ids(result) == list(range(250, 321))


def test_manifests_whose_partition_summaries_cannot_match_are_not_read(tmp_path: Path):
    table = create_table(tmp_path / "t", SCHEMA, BY_REGION)
    write(table, [row(1, "eu")], [row(2, "eu")])  # one manifest: eu only
    write(table, [row(3, "us")])  # another: us only

    result = read(table, row_filter="region = 'us'")

    assert result.pruning.manifests == 2 and result.pruning.manifests_skipped == 1
    assert figures(result) == (3, 1, 2, 0)
    assert ids(result) == [3]


def test_without_a_filter_every_file_is_scanned_and_reading_stops_at_the_limit(tmp_path: Path):
    table = create_table(tmp_path / "t", SCHEMA)
    write(table, *[[row(start + i) for i in range(10)] for start in range(0, 50, 10)])

    result = read(table, limit=15)

    assert figures(result) == (5, 5, 0, 0)
    assert len(result.rows) == 15 and result.truncated
    assert result.pruning.files_read == 2


def test_a_limit_that_takes_every_row_is_not_truncated(tmp_path: Path):
    table = create_table(tmp_path / "t", SCHEMA)
    write(table, [row(1), row(2)])

    assert not read(table, limit=2).truncated
    assert read(table, limit=1).truncated


# -- columns and filters ----------------------------------------------------------------------


def test_chosen_columns_come_in_the_order_chosen(tmp_path: Path):
    table = create_table(tmp_path / "t", SCHEMA)
    write(table, [row(1, "eu", amount=2.5)])

    result = read(table, columns=["amount", "id", "amount"])

    assert [(c.name, c.type, c.field_id) for c in result.columns] == [
        ("amount", "double", 4),
        ("id", "long", 1),
    ]
    assert result.rows == ((2.5, 1),)


def test_a_filter_on_a_column_not_chosen_still_filters(tmp_path: Path):
    table = create_table(tmp_path / "t", SCHEMA)
    write(table, [row(1, "eu"), row(2, "us")])

    result = read(table, columns=["id"], row_filter="region = 'us'")

    assert result.rows == ((2,),)


def test_an_unknown_column_is_refused_by_name(tmp_path: Path):
    table = create_table(tmp_path / "t", SCHEMA)

    with pytest.raises(InvalidInput) as refused:
        read(table, columns=["id", "nope"])

    assert refused.value.field == "columns"
    assert "nope" in refused.value.message and "region" in refused.value.message


def test_an_unknown_column_in_a_different_case_is_refused_with_a_suggestion(tmp_path: Path):
    table = create_table(tmp_path / "t", SCHEMA)

    with pytest.raises(InvalidInput, match="did you mean region"):
        read(table, columns=["Region"])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("id >", "at column 5: expected a value"),
        ("id = 1 and", "at column 11: expected a condition after 'and'"),
        ("(id = 1", "at column 1: '(' is never closed"),
        ("id = 1)", "at column 7: ')' closes no '('"),
        ("id = = 2", "at column 6: expected a value"),
        ("id 5", "at column 4: expected an operator after id"),
        ("id = 1 region = 'eu'", "at column 8: expected 'and', 'or' or the end"),
        ("region = 'eu", "at column 10: the quote ' is never closed"),
        ("id = 1 or\nid >", "at line 2, column 5"),
        ("region like 'a%b%'", "wildcard"),
    ],
)
def test_a_malformed_filter_is_refused_saying_where(text: str, expected: str):
    with pytest.raises(InvalidInput) as refused:
        parse_row_filter(text, SCHEMA)

    assert refused.value.field == "row_filter"
    assert expected in refused.value.message


def test_a_filter_on_an_unknown_column_is_refused_naming_it():
    with pytest.raises(InvalidInput) as refused:
        parse_row_filter("id > 1 and colour = 'red'", SCHEMA)

    assert refused.value.field == "row_filter"
    assert "Unknown column in the row filter: colour" in refused.value.message


def test_a_filter_value_that_does_not_fit_its_column_is_refused():
    with pytest.raises(InvalidInput) as refused:
        parse_row_filter("ts > 'yesterday'", SCHEMA)

    assert refused.value.field == "row_filter"


def test_an_overlong_or_deeply_nested_filter_is_refused_before_parsing():
    with pytest.raises(InvalidInput, match="too long"):
        parse_row_filter("id = 1 or " * 1000 + "id = 2", SCHEMA)
    with pytest.raises(InvalidInput, match="nest deeper than 32"):
        parse_row_filter("(" * 500 + "id = 1" + ")" * 500, SCHEMA)


def test_a_filter_with_quotes_and_parentheses_in_values_parses():
    expression = parse_row_filter("(region = 'it''s (odd' or id in (1, 2)) and not id = 3", SCHEMA)

    assert "it's (odd" in str(expression)


def test_no_filter_and_an_empty_filter_read_everything():
    assert str(parse_row_filter(None, SCHEMA)) == "AlwaysTrue()"
    assert str(parse_row_filter("  ", SCHEMA)) == "AlwaysTrue()"


@pytest.mark.parametrize("limit", [-1, 10_001, "100", True, 1.5])
def test_a_limit_out_of_range_is_refused(tmp_path: Path, limit):
    table = create_table(tmp_path / "t", SCHEMA)

    with pytest.raises(InvalidInput) as refused:
        read(table, limit=limit)

    assert refused.value.field == "limit"


# -- time travel ------------------------------------------------------------------------------


@pytest.fixture
def evolved(tmp_path: Path):
    """Snapshot 1 with (id, region, note); then `note` dropped, `score` added; snapshot 2."""
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "region", StringType(), required=False),
        NestedField(3, "note", StringType(), required=False),
    )
    table = create_table(tmp_path / "t", schema)
    write(table, [{"id": 1, "region": "eu", "note": "old"}, {"id": 2, "region": "us", "note": "x"}])
    first = table.current_snapshot()
    with table.update_schema() as update:
        update.delete_column("note")
        update.add_column("score", IntegerType())
    write(table, [{"id": 3, "region": "eu", "score": 30}])
    return table, first


def test_an_older_snapshot_is_read_with_its_own_rows_and_schema(evolved):
    table, first = evolved

    old = read(table, snapshot_id=first.snapshot_id)
    now = read(table)

    assert [c.name for c in old.columns] == ["id", "region", "note"]
    assert old.rows == ((1, "eu", "old"), (2, "us", "x"))
    assert old.snapshot_id == first.snapshot_id and old.schema_id == first.schema_id
    assert [c.name for c in now.columns] == ["id", "region", "score"]
    assert sorted(now.rows) == [(1, "eu", None), (2, "us", None), (3, "eu", 30)]
    assert now.schema_id == table.metadata.current_schema_id != old.schema_id


def test_a_timestamp_reads_the_snapshot_current_then(evolved):
    table, first = evolved
    second = table.current_snapshot()

    at_first = read(table, timestamp_ms=first.timestamp_ms)
    between = read(table, timestamp_ms=second.timestamp_ms - 1)
    at_second = read(table, timestamp_ms=second.timestamp_ms + 1000)

    assert at_first.snapshot_id == first.snapshot_id
    assert between.snapshot_id == (
        first.snapshot_id if second.timestamp_ms > first.timestamp_ms else second.snapshot_id
    )
    assert at_second.snapshot_id == second.snapshot_id
    assert [c.name for c in at_first.columns] == ["id", "region", "note"]


def test_columns_and_filters_are_checked_against_the_schema_of_the_snapshot_read(evolved):
    table, first = evolved

    old = read(table, snapshot_id=first.snapshot_id, columns=["note"], row_filter="note = 'x'")

    assert old.rows == (("x",),)
    with pytest.raises(InvalidInput, match="note"):
        read(table, row_filter="note = 'x'")
    with pytest.raises(InvalidInput, match="score"):
        read(table, snapshot_id=first.snapshot_id, columns=["score"])


def test_the_schema_as_of_a_snapshot_lists_its_fields(evolved):
    table, first = evolved

    old = schema_at(table.metadata, table_path=table.location(), snapshot_id=first.snapshot_id)
    now = schema_at(table.metadata, table_path=table.location())

    assert [(f.field_id, f.name, f.type) for f in old.fields] == [
        (1, "id", "long"),
        (2, "region", "string"),
        (3, "note", "string"),
    ]
    assert [(f.field_id, f.name) for f in now.fields] == [(1, "id"), (2, "region"), (4, "score")]
    assert old.snapshot_id == first.snapshot_id and now.snapshot_id != first.snapshot_id


def test_nested_fields_follow_their_parent_in_the_schema():
    schema = Schema(
        NestedField(
            1,
            "address",
            StructType(NestedField(2, "city", StringType(), required=True)),
            required=False,
        ),
        NestedField(3, "tags", ListType(4, StringType()), required=False),
    )
    metadata = create_table_metadata(schema)

    fields = schema_at(metadata, table_path="/t").fields

    assert [(f.name, f.depth, f.required) for f in fields] == [
        ("address", 0, False),
        ("address.city", 1, True),
        ("tags", 0, False),
        ("tags.element", 1, True),
    ]


def create_table_metadata(schema: Schema):
    from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
    from pyiceberg.table.metadata import new_table_metadata
    from pyiceberg.table.sorting import UNSORTED_SORT_ORDER

    return new_table_metadata(schema, UNPARTITIONED_PARTITION_SPEC, UNSORTED_SORT_ORDER, "/t")


def test_time_travel_refusals_are_worded_as_clickhouse_words_them(evolved):
    table, first = evolved
    path = table.location()

    with pytest.raises(InvalidInput) as both:
        read(table, snapshot_id=first.snapshot_id, timestamp_ms=first.timestamp_ms)
    with pytest.raises(InvalidInput) as too_early:
        read(table, timestamp_ms=first.timestamp_ms - 1)
    with pytest.raises(NotFound) as unknown:
        read(table, snapshot_id=12345)

    assert both.value.message == (
        f"Time travel with timestamp and snapshot id for iceberg table by path {path} "
        "cannot be changed simultaneously"
    )
    assert too_early.value.message == (
        f"No snapshot found in snapshot log before requested timestamp for iceberg table {path}"
    )
    assert unknown.value.message == "No snapshot found for id `12345`"


def test_a_table_with_no_snapshot_previews_as_no_rows_with_its_columns(tmp_path: Path):
    table = create_table(tmp_path / "t", SCHEMA)

    result = read(table)

    assert [c.name for c in result.columns] == ["id", "region", "ts", "amount"]
    assert result.rows == () and result.snapshot_id is None and not result.truncated
    assert result.pruning.data_files == 0


def test_the_metadata_json_is_accepted_as_well_as_pyiceberg_metadata(evolved):
    table, first = evolved
    document = json.loads(Path(table.metadata_location).read_text())

    result = preview(
        document,
        table.metadata_location,
        io=IO,
        table_path=table.location(),
        snapshot_id=first.snapshot_id,
    )

    assert result.rows == ((1, "eu", "old"), (2, "us", "x"))


# -- deletes ----------------------------------------------------------------------------------


@pytest.fixture
def by_region(tmp_path: Path):
    table = create_table(tmp_path / "t", SCHEMA, BY_REGION)
    eu, us = write(table, [row(i, "eu") for i in range(5)], [row(i, "us") for i in range(5, 8)])
    return table, eu, us


def test_position_deletes_are_applied_and_counted(by_region):
    table, eu, _ = by_region
    before = table.current_snapshot()
    add_position_deletes(table, {eu: [0, 2]}, partition=Record("eu"))

    result = read(table)
    other_partition = read(table, row_filter="region = 'us'")
    earlier = read(table, snapshot_id=before.snapshot_id)

    assert ids(result) == [1, 3, 4, 5, 6, 7]
    assert result.pruning.delete_files_applied == 1
    assert ids(other_partition) == [5, 6, 7]
    assert other_partition.pruning.delete_files_applied == 0
    assert ids(earlier) == list(range(8)) and earlier.pruning.delete_files_applied == 0


def test_a_deletion_vector_applies_to_its_one_data_file_only(tmp_path: Path):
    table = create_table(tmp_path / "t", SCHEMA, BY_REGION)
    low, high = write(table, [row(i) for i in range(5)], [row(i) for i in range(10, 13)])
    vector = add_deletion_vector(table, low, [1, 3], partition=Record("eu"))

    everything = read(table)
    high_only = read(table, row_filter="id >= 10")
    listing = files_at(table.metadata, io=IO)

    assert ids(everything) == [0, 2, 4, 10, 11, 12]
    assert everything.pruning.delete_files_applied == 1
    # Same partition, but the vector names the other file.
    assert ids(high_only) == [10, 11, 12] and high_only.pruning.delete_files_applied == 0
    assert [(f.kind, f.path, f.referenced_data_file) for f in listing.files][-1] == (
        DELETION_VECTOR,
        vector,
        low,
    )
    assert listing.totals[DELETION_VECTOR].files == 1


def test_equality_deletes_that_apply_send_the_read_to_spark(by_region):
    table, _, _ = by_region
    before = table.current_snapshot()
    add_equality_deletes(table, "id", [1], partition=Record("eu"))

    with pytest.raises(NeedsSpark) as refused:
        read(table)

    assert "equality deletes" in refused.value.message and "Spark" in refused.value.message
    # Pruned away, or older than the delete: pyiceberg reads it.
    assert ids(read(table, row_filter="region = 'us'")) == [5, 6, 7]
    assert ids(read(table, snapshot_id=before.snapshot_id)) == list(range(8))


def test_equality_deletes_older_than_the_data_do_not_apply(by_region):
    table, _, _ = by_region
    add_equality_deletes(table, "id", [1], partition=Record("eu"))
    write(table, [row(20, "eu")])

    result = read(table, row_filter="id >= 20")

    assert ids(result) == [20]


# -- files ------------------------------------------------------------------------------------


def test_the_files_of_a_snapshot_are_listed_with_totals_per_kind(by_region):
    table, eu, us = by_region
    deletes = add_position_deletes(table, {eu: [0]}, partition=Record("eu"))
    equality = add_equality_deletes(table, "id", [6], partition=Record("us"))

    listing = files_at(table.metadata, io=IO)
    cut = files_at(table.metadata, io=IO, limit=1)

    assert [(f.kind, f.path, f.partition) for f in listing.files] == [
        (DATA, eu, (("region", "eu"),)),
        (DATA, us, (("region", "us"),)),
        (POSITION_DELETES, deletes, (("region", "eu"),)),
        (EQUALITY_DELETES, equality, (("region", "us"),)),
    ]
    assert listing.files[0].record_count == 5
    assert listing.files[0].size_bytes == Path(eu).stat().st_size
    assert listing.files[0].partition_text == "region=eu"
    assert listing.totals[DATA].files == 2 and listing.totals[DATA].records == 8
    assert listing.totals[DATA].bytes == Path(eu).stat().st_size + Path(us).stat().st_size
    assert listing.totals[POSITION_DELETES].files == 1
    assert not listing.truncated
    assert len(cut.files) == 1 and cut.truncated and cut.totals == listing.totals


def test_day_partitions_are_listed_as_dates(tmp_path: Path):
    table = create_table(
        tmp_path / "t", SCHEMA, PartitionSpec(PartitionField(3, 1000, DayTransform(), "ts_day"))
    )
    write(table, [row(1, ts=START + datetime.timedelta(days=3, hours=5))])

    listing = files_at(table.metadata, io=IO)

    assert listing.files[0].partition == (("ts_day", "2024-01-04"),)


def test_the_files_of_an_older_snapshot_and_of_an_empty_table(evolved, tmp_path: Path):
    table, first = evolved
    empty = create_table(tmp_path / "empty", SCHEMA)

    assert files_at(table.metadata, io=IO, snapshot_id=first.snapshot_id).totals[DATA].files == 1
    assert files_at(table.metadata, io=IO).totals[DATA].files == 2
    assert files_at(empty.metadata, io=IO).files == ()
    with pytest.raises(NotFound, match="No snapshot found for id `7`"):
        files_at(table.metadata, io=IO, snapshot_id=7)


# -- values -----------------------------------------------------------------------------------


def test_values_are_typed_for_pages_and_json_safe_for_the_api(tmp_path: Path):
    schema = Schema(
        NestedField(1, "flag", BooleanType(), required=False),
        NestedField(2, "price", DecimalType(10, 4), required=False),
        NestedField(3, "day", DateType(), required=False),
        NestedField(4, "at", TimeType(), required=False),
        NestedField(5, "local", TimestampType(), required=False),
        NestedField(6, "instant", TimestamptzType(), required=False),
        NestedField(7, "raw", BinaryType(), required=False),
        NestedField(8, "code", FixedType(2), required=False),
        NestedField(9, "key", UUIDType(), required=False),
        NestedField(10, "ratio", DoubleType(), required=False),
        NestedField(
            11,
            "point",
            StructType(NestedField(12, "x", LongType(), required=False)),
            required=False,
        ),
        NestedField(13, "tags", ListType(14, StringType(), element_required=False), required=False),
        NestedField(
            15,
            "counts",
            MapType(16, StringType(), 17, LongType(), value_required=False),
            required=False,
        ),
        NestedField(18, "big", LongType(), required=False),
    )
    table = create_table(tmp_path / "t", schema)
    key = uuid.UUID("12345678-1234-5678-1234-567812345678")
    instant = datetime.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=datetime.UTC)
    values = {
        "flag": True,
        "price": Decimal("12.5000"),
        "day": datetime.date(2024, 5, 6),
        "at": datetime.time(7, 8, 9),
        "local": datetime.datetime(2024, 5, 6, 7, 8, 9),
        "instant": instant,
        "raw": b"\x00\xff",
        "code": b"ab",
        "key": key.bytes,
        "ratio": float("nan"),
        "point": {"x": 3},
        "tags": ["a", None],
        "counts": [("a", 1), ("b", None)],
        "big": 2**62,
    }
    write(table, [values, {name: None for name in values}])

    result = read(table)
    typed = dict(zip([c.name for c in result.columns], result.rows[0], strict=True))
    document = json.loads(json.dumps(result.json_rows(), allow_nan=False))

    assert typed["price"] == Decimal("12.5000") and typed["instant"] == instant
    assert typed["key"] == key and typed["counts"] == {"a": 1, "b": None}
    assert document[0] == [
        True,
        "12.5000",
        "2024-05-06",
        "07:08:09",
        "2024-05-06T07:08:09",
        "2024-05-06T07:08:09.123456+00:00",
        "AP8=",
        "YWI=",
        "12345678-1234-5678-1234-567812345678",
        "NaN",
        {"x": 3},
        ["a", None],
        {"a": 1, "b": None},
        2**62,
    ]
    assert document[1] == [None] * len(values)


def test_nanosecond_timestamps_keep_their_nanoseconds_in_json():
    import pyarrow as pa

    from catalog.core.row_values import _typed_values, json_value

    nanos = 1_700_000_000_123_456_789
    local, zoned = (
        _typed_values(pa.chunked_array([pa.array([nanos, None], pa.timestamp("ns", tz=tz))]))
        for tz in (None, "UTC")
    )

    assert local[0] == datetime.datetime(2023, 11, 14, 22, 13, 20, 123456) and local[1] is None
    assert json_value(local[0]) == "2023-11-14T22:13:20.123456789"
    assert json_value(zoned[0]) == "2023-11-14T22:13:20.123456789+00:00"
