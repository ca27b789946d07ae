"""Tables Spark writes, attached read-only and previewed as ClickHouse's Iceberg engine reads
them (issue 11): the newest metadata file whatever its naming style, rows equal to Spark's
own reads now and back in time (every partition transform, every schema change, position
deletes and deletion vectors, the seed's time-travel scenarios), equality deletes handed
to Spark, pruning figures equal to what the files Spark wrote allow, and a writer's new
commit followed.

The tables are built once for the module (tests/spark/iceberg_tables.py); Spark's reads are
taken at assertion time, in SQL (`VERSION AS OF`, `TIMESTAMP AS OF`, which use the
snapshot's schema). Rows are compared as sorted lists of tuples with exact values:
Spark's naive timestamps (the session and the JVM are in UTC) and the preview's UTC-aware
ones are compared as instants, everything else as Python gives it (ints, floats, Decimal,
str)."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyspark.sql import SparkSession

from catalog import services
from catalog.core import preview as core_preview
from catalog.core.errors import InvalidInput, NotFound
from catalog.core.metadata_cache import MetadataCache
from catalog.core.row_values import typed_rows
from catalog.models import Table
from tests.spark import iceberg_tables as built_tables
from tests.spark.iceberg_tables import BuiltTable, sort_key, spark_frame

pytestmark = pytest.mark.django_db

NAMESPACE = "ext"
CACHE = MetadataCache()


@pytest.fixture(scope="module")
def hadoop_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("attached-hadoop")


@pytest.fixture(scope="module")
def jdbc_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("attached-jdbc")


@pytest.fixture(scope="module")
def tables(
    spark: SparkSession, hadoop_warehouse: Path, jdbc_warehouse: Path
) -> dict[str, BuiltTable]:
    return built_tables.build_all(spark, hadoop_warehouse, jdbc_warehouse)


@pytest.fixture
def attach(
    tables: dict[str, BuiltTable], jdbc_warehouse: Path, hadoop_warehouse: Path, settings, editor
) -> Callable[..., Table]:
    """Attaches a built table under `ext` (by default under its own name) with the
    service, from the two Spark warehouses the settings allow."""
    settings.ATTACH_LOCATIONS = [str(jdbc_warehouse), str(hadoop_warehouse)]
    services.create_namespace(name=NAMESPACE, actor=editor)

    def attach_built(name: str, *, as_name: str | None = None, **options: Any) -> Table:
        return services.attach_table(
            namespace=NAMESPACE,
            name=as_name or name,
            location=str(tables[name].folder),
            actor=editor,
            **options,
        )

    return attach_built


def read(table: Table, **reading: Any) -> core_preview.Preview:
    """The preview of an attached table, as the pages make it: through the metadata cache,
    every row (the pages show 100; the comparison wants them all)."""
    loaded = CACHE.load(table.metadata_location, io=PyArrowFileIO())
    return core_preview.preview(
        loaded.document,
        loaded.metadata_location,
        io=loaded.io,
        table_path=table.location,
        limit=core_preview.MAX_LIMIT,
        **reading,
    )


def comparable(value: Any) -> Any:
    if isinstance(value, datetime):
        # A naive one is Spark's, in the (UTC) local time PySpark converts to.
        return value.astimezone(UTC)
    return value


def rows_of(rows: Any) -> list[tuple]:
    return sorted((tuple(comparable(v) for v in row) for row in rows), key=sort_key)


#: Iceberg's type names as Spark's `dtypes` spells them (the rest are the same).
SPARK_TYPE = {"long": "bigint", "timestamptz": "timestamp", "timestamp": "timestamp_ntz"}


def spark_type(iceberg_type: str) -> str:
    return SPARK_TYPE.get(iceberg_type, iceberg_type.replace(", ", ","))


def assert_reads_as_spark(
    spark: SparkSession, built: BuiltTable, table: Table, *, spark_filter: str | None = None,
    **reading: Any,
) -> core_preview.Preview:  # fmt: skip
    """The preview's columns (names and types) and rows equal Spark's read of the same
    snapshot with the same filter (`spark_filter`, Spark SQL, when the preview's
    `row_filter` is not also valid Spark SQL)."""
    result = read(table, **reading)
    frame = spark_frame(
        spark,
        built.identifier,
        snapshot_id=reading.get("snapshot_id"),
        timestamp_ms=reading.get("timestamp_ms"),
        row_filter=spark_filter or reading.get("row_filter"),
        columns=reading.get("columns"),
    )
    assert [(c.name, spark_type(c.type)) for c in result.columns] == frame.dtypes
    assert rows_of(result.rows) == rows_of(frame.collect())
    assert not result.truncated
    return result


def test_the_newest_metadata_file_is_attached_whatever_its_naming_style(
    spark: SparkSession, tables, attach
):
    styles = {
        "events": r"v4\.metadata\.json",  # Hadoop: v1 ... v4
        "evolving": r"v13\.metadata\.json",  # v13 is newer than v9 (numbers, not text)
        "followed": r"v\d+\.gz\.metadata\.json",  # Hadoop, gzip
        "position_deletes": r"00004-[0-9a-f-]{36}\.metadata\.json",  # JDBC: NNNNN-uuid
        "clicks": r"00002-[0-9a-f-]{36}\.gz\.metadata\.json",  # JDBC, gzip
        "deletion_vectors": r"00004-[0-9a-f-]{36}\.gz\.metadata\.json",
    }
    for name, style in styles.items():
        current = built_tables.current_metadata_file(spark, tables[name].identifier)
        assert re.fullmatch(style, current.name), current.name

        table = attach(name)

        assert table.metadata_location == str(current), name
        assert table.location == str(tables[name].folder)
        assert table.attachment.reported == []
        assert read(table).snapshot_id == tables[name].snapshots[-1]

        # A folder is one table: detached, it attaches again, here by last-updated-ms.
        services.detach_table(namespace=NAMESPACE, name=name)
        by_time = attach(name, as_name=f"{name}_by_time", newest_by="last-updated-ms")
        assert by_time.metadata_location == str(current), name


# -- partition transforms and pruning -------------------------------------------------------


def pruning_expected(
    files: list[dict],
    *,
    partition_skips: Callable[[dict], bool],
    stats_skip: Callable[[dict], bool],
) -> dict[str, int]:
    """The figures the files allow: a file whose partition value rules the filter out is
    skipped by partition; of the rest, one whose bounds rule it out by column statistics;
    the others are scanned."""
    by_partition = [f for f in files if partition_skips(f)]
    rest = [f for f in files if not partition_skips(f)]
    by_stats = [f for f in rest if stats_skip(f)]
    return {
        "data_files": len(files),
        "skipped_by_partition": len(by_partition),
        "skipped_by_stats": len(by_stats),
        "files_scanned": len(rest) - len(by_stats),
    }


def pruning_of(result: core_preview.Preview) -> dict[str, int]:
    p = result.pruning
    return {
        "data_files": p.data_files,
        "skipped_by_partition": p.skipped_by_partition,
        "skipped_by_stats": p.skipped_by_stats,
        "files_scanned": p.files_scanned,
    }


def never(_: dict) -> bool:
    return False


def hour_of(moment: datetime) -> int:
    return int(moment.timestamp()) // 3600


def utc(moment: datetime) -> datetime:
    return moment.astimezone(UTC)


def test_previews_of_every_partition_transform_equal_spark_and_skip_the_files_the_filter_rules_out(
    spark: SparkSession, tables, attach
):
    events, clicks = tables["events"], tables["clicks"]
    attached = {"events": attach("events"), "clicks": attach("clicks")}
    day_two = datetime(2024, 1, 2, tzinfo=UTC)
    eleven = datetime(2024, 3, 1, 11, tzinfo=UTC)
    b3, b1, b2 = (built_tables.bucket(spark, 4, user) for user in (3, 1, 2))
    first, second = events.snapshots[0], events.snapshots[1]
    # (table, preview filter, Spark's filter or None when the same, time travel, partition
    # skips, stats skip): identity, day, bucket, truncate and hour partitions.
    cases = [
        ("events", None, None, {}, never, never),
        ("events", "category = 'b'", None, {},
         lambda f: f["partition"]["category"] != "b", never),
        ("events", "amount >= 200.0", None, {}, never, lambda f: f["upper"]["amount"] < 200),
        ("events", "category = 'a' and amount < 100.0", None, {},
         lambda f: f["partition"]["category"] != "a", lambda f: f["lower"]["amount"] >= 100),
        ("events", "created_at >= '2024-01-02T00:00:00+00:00'",
         "created_at >= TIMESTAMP '2024-01-02 00:00:00'", {},
         lambda f: f["partition"]["created_at_day"] < date(2024, 1, 2),
         lambda f: utc(f["upper"]["created_at"]) < day_two),
        # Back in time: the files of that snapshot only.
        ("events", "category = 'c' and amount >= 15.0", None, {"snapshot_id": first},
         lambda f: f["partition"]["category"] != "c", lambda f: f["upper"]["amount"] < 15),
        ("events", "amount < 50.0", None, {"timestamp_ms": events.moments["after_write_1"]},
         never, lambda f: f["lower"]["amount"] >= 50),
        ("clicks", "user_id = 3", None, {},
         lambda f: f["partition"]["user_id_bucket"] != b3,
         lambda f: not f["lower"]["user_id"] <= 3 <= f["upper"]["user_id"]),
        ("clicks", "user_id in (1, 2) and ms < 1000", None, {},
         lambda f: f["partition"]["user_id_bucket"] not in (b1, b2),
         lambda f: f["lower"]["ms"] >= 1000
         or not any(f["lower"]["user_id"] <= u <= f["upper"]["user_id"] for u in (1, 2))),
        ("clicks", "page = 'help'", None, {},
         lambda f: f["partition"]["page_trunc"] != "he",
         lambda f: not f["lower"]["page"] <= "help" <= f["upper"]["page"]),
        # 'hello' truncates to the partition of 'help': only the bounds rule its files out.
        ("clicks", "page = 'hello'", None, {},
         lambda f: f["partition"]["page_trunc"] != "he",
         lambda f: not f["lower"]["page"] <= "hello" <= f["upper"]["page"]),
        ("clicks", "clicked_at >= '2024-03-01T11:00:00+00:00'",
         "clicked_at >= TIMESTAMP '2024-03-01 11:00:00'", {},
         lambda f: f["partition"]["clicked_at_hour"] < hour_of(eleven),
         lambda f: utc(f["upper"]["clicked_at"]) < eleven),
        ("clicks", "ms >= 10", None, {"snapshot_id": clicks.snapshots[0]},
         never, lambda f: f["upper"]["ms"] < 10),
    ]  # fmt: skip
    totals = {"skipped_by_partition": 0, "skipped_by_stats": 0}
    for name, row_filter, spark_filter, travel, partition_skips, stats_skip in cases:
        built = tables[name]
        snapshot = travel.get("snapshot_id")
        if "timestamp_ms" in travel:
            snapshot = second  # the snapshot current at that moment
        files = built_tables.data_files(spark, built.identifier, snapshot_id=snapshot)

        result = assert_reads_as_spark(
            spark, built, attached[name], row_filter=row_filter, spark_filter=spark_filter,
            **travel,
        )  # fmt: skip

        expected = pruning_expected(files, partition_skips=partition_skips, stats_skip=stats_skip)
        assert pruning_of(result) == expected, (name, row_filter, travel)
        assert result.pruning.delete_files_applied == 0
        for key in totals:
            totals[key] += expected[key]
    # The cases do show both kinds of skipping (the tables' files make them possible).
    assert totals["skipped_by_partition"] > 40 and totals["skipped_by_stats"] > 20, totals


def test_a_column_choice_reads_those_columns_in_that_order(spark: SparkSession, tables, attach):
    table = attach("events")
    assert_reads_as_spark(
        spark, tables["events"], table, columns=["amount", "id"], row_filter="id < 110"
    )


# -- schema evolution and time travel ---------------------------------------------------------


def test_every_schema_change_reads_as_spark_reads_it_now_and_at_the_first_snapshot(
    spark: SparkSession, tables, attach
):
    built = tables["evolving"]
    table = attach("evolving")
    first = built.snapshots[0]

    now = assert_reads_as_spark(spark, built, table)
    then = assert_reads_as_spark(spark, built, table, snapshot_id=first)

    # Now: the current schema over both writes; old rows read through field ids.
    assert [(c.name, c.type, c.required) for c in now.columns] == [
        ("tag", "string", False),  # moved first
        ("id", "long", False),  # int -> long, required -> optional
        ("title", "string", False),  # renamed from name
        ("price", "double", False),  # float -> double
        ("amount", "decimal(9, 2)", False),  # decimal(5, 2) -> decimal(9, 2)
        ("added", "string", False),  # added
        ("note", "string", False),  # dropped, then added again: a new field
    ]
    old_rows = [row for row in now.rows if row[0] == "t0"]
    assert len(old_rows) == 5
    assert all(row[5] is None and row[6] is None for row in old_rows), "added and re-added"
    assert sorted(row[2] for row in old_rows)[0] == "name 1", "renamed column keeps its values"
    assert all(isinstance(row[1], int) for row in old_rows)
    # At the first snapshot: the schema it was written with, the dropped columns included.
    assert [(c.name, c.type, c.required) for c in then.columns] == [
        ("id", "int", True),
        ("name", "string", False),
        ("price", "float", False),
        ("amount", "decimal(5, 2)", False),
        ("gone", "string", False),
        ("note", "string", False),
        ("tag", "string", False),
    ]
    assert {row[5] for row in then.rows} == {f"old note {i}" for i in range(1, 6)}

    # Filters bind to the read's schema: a renamed, a promoted and a re-added column.
    assert_reads_as_spark(spark, built, table, row_filter="title = 'name 3'")
    assert_reads_as_spark(spark, built, table, row_filter="id > 1099511627776")
    assert_reads_as_spark(spark, built, table, row_filter="note is null")
    # A dropped column, at a snapshot that has it. Spark's planner binds such a filter to
    # the current schema and fails (as Trino's does: trinodb/trino#23601), so Spark's rows
    # are filtered here instead.
    dropped = read(table, row_filter="gone = 'gone 2'", snapshot_id=first)
    assert rows_of(dropped.rows) == [
        row for row in rows_of(spark_frame(spark, built.identifier, snapshot_id=first).collect())
        if row[4] == "gone 2"
    ]  # fmt: skip
    assert len(dropped.rows) == 1


def test_the_seeds_three_time_travel_scenarios_read_as_spark_reads_them(
    spark: SparkSession, tables, attach
):
    built = tables["time_travel"]
    ts0, ts1, ts2, ts3 = (built.moments[key] for key in ("ts0", "ts1", "ts2", "ts3"))
    table = attach("time_travel")

    # 1. Schema changes make no snapshot: at ts1 and ts2 the two first columns, at ts3 all
    #    three, price NULL for the first row.
    for moment in (ts1, ts2):
        result = assert_reads_as_spark(spark, built, table, timestamp_ms=moment)
        assert [c.name for c in result.columns] == ["order_number", "product_code"]
        assert result.rows == ((1, "Mars"),)
    result = assert_reads_as_spark(spark, built, table, timestamp_ms=ts3)
    assert rows_of(result.rows) == [(1, "Mars", None), (2, "Venus", 100.0)]

    # 2. Right after the ALTER (the metadata file it wrote, attached by its path): a read
    #    now has the new column, a time-travel read to the same snapshot does not.
    services.detach_table(namespace=NAMESPACE, name="time_travel")
    after_alter = attach(
        "time_travel", as_name="after_alter", metadata_file_path=built.metadata_files["after_alter"]
    )
    now = read(after_alter)
    assert [c.name for c in now.columns] == list(built.truth["after_alter_columns"][0])
    assert rows_of(now.rows) == built.truth["after_alter"] == [(1, "Mars", None)]
    travelled = read(after_alter, snapshot_id=now.snapshot_id)
    assert [c.name for c in travelled.columns] == ["order_number", "product_code"]
    assert rows_of(travelled.rows) == rows_of(
        spark_frame(spark, built.identifier, snapshot_id=now.snapshot_id).collect()
    )

    # 3. No state before the first write: Spark refuses, and so does the preview, as
    #    ClickHouse words it.
    with pytest.raises(Exception, match="Cannot find a snapshot older than"):
        spark_frame(spark, built.identifier, timestamp_ms=ts0).collect()
    with pytest.raises(InvalidInput) as refused:
        read(table, timestamp_ms=ts0)
    assert refused.value.message == (
        "No snapshot found in snapshot log before requested timestamp for iceberg table "
        f"{table.location}"
    )


def test_time_travel_with_both_a_snapshot_and_a_timestamp_or_an_unknown_snapshot_is_refused_in_clickhouses_words(  # noqa: E501
    tables, attach
):
    built = tables["time_travel"]
    table = attach("time_travel")

    with pytest.raises(InvalidInput) as both:
        read(table, snapshot_id=built.snapshots[0], timestamp_ms=built.moments["ts3"])
    with pytest.raises(NotFound) as unknown:
        read(table, snapshot_id=12345)

    assert both.value.message == (
        f"Time travel with timestamp and snapshot id for iceberg table by path {table.location} "
        "cannot be changed simultaneously"
    )
    assert unknown.value.message == "No snapshot found for id `12345`"


# -- deletes --------------------------------------------------------------------------------


def deletes_applied(files: list[dict], scanned: list[dict]) -> int:
    """The position delete files and deletion vectors that apply to the scanned data files:
    those naming one of them (`referenced_data_file`, or the range of paths they hold) in
    its partition (every delete here is newer than every data file)."""
    count = 0
    for delete in (f for f in files if f["content"] == 1):
        low, high = delete["paths"]
        for data in scanned:
            if data["partition"] != delete["partition"]:
                continue
            named = delete["referenced_data_file"]
            if named is not None:
                hit = str(built_tables.local_path(named)) == data["path"]
            else:
                hit = low is None or low <= data["path"] <= (high or low)
            if hit:
                count += 1
                break
    return count


def test_position_deletes_and_deletion_vectors_are_applied_at_every_snapshot(
    spark: SparkSession, tables, attach
):
    attached = {}
    for name, kind in (("position_deletes", "PARQUET"), ("deletion_vectors", "PUFFIN")):
        built = tables[name]
        table = attached[name] = attach(name)
        counts = []
        for snapshot in built.snapshots:
            files = built_tables.content_files(spark, built.identifier, snapshot_id=snapshot)
            data = [f for f in files if f["content"] == 0]

            result = assert_reads_as_spark(spark, built, table, snapshot_id=snapshot)

            assert {f["format"] for f in files if f["content"] == 1} <= {kind}
            if name == "position_deletes":  # deletion vectors: see the next test
                assert result.pruning.delete_files_applied == deletes_applied(files, data)
            counts.append(len(result.rows))
        # Two appends of 30 rows, then two deletes that each removed rows (the second
        # rewrote the first's deletes of the files it touched, merged).
        assert counts[:2] == [30, 60] and counts[1] > counts[2] > counts[3], (name, counts)

    # A filter on the partition column: only the deletes of the files scanned apply.
    built = tables["position_deletes"]
    files = built_tables.content_files(spark, built.identifier)
    result = assert_reads_as_spark(
        spark, built, attached["position_deletes"], row_filter="grp = 'x'"
    )
    scanned = [f for f in files if f["content"] == 0 and f["partition"]["grp"] == "x"]
    assert result.pruning.files_scanned == len(scanned)
    assert result.pruning.delete_files_applied == deletes_applied(files, scanned) > 0


def test_each_deletion_vector_that_applies_counts_as_a_delete_file(
    spark: SparkSession, tables, attach
):
    built = tables["deletion_vectors"]
    table = attach("deletion_vectors")
    files = built_tables.content_files(spark, built.identifier)
    vectors = [f for f in files if f["content"] == 1]
    assert len(vectors) == 2 and len({f["path"] for f in vectors}) == 1

    result = read(table)

    assert (
        result.pruning.delete_files_applied
        == deletes_applied(files, [f for f in files if f["content"] == 0])
        == 2
    )


def test_equality_deletes_make_the_preview_ask_for_spark(spark: SparkSession, tables, attach):
    built = tables["equality_deletes"]
    table = attach("equality_deletes")

    with pytest.raises(core_preview.NeedsSpark, match="equality deletes"):
        read(table)
    with pytest.raises(core_preview.NeedsSpark):
        read(table, row_filter="id < 10")
    # Before the delete commit there is nothing to apply.
    before = assert_reads_as_spark(spark, built, table, snapshot_id=built.snapshots[0])
    assert len(before.rows) == 20
    ids = {row[0] for row in spark_frame(spark, built.identifier).collect()}
    assert ids == set(range(20)) - {3, 5, 7}


def test_the_spark_fallback_reads_a_table_with_equality_deletes_as_spark_does(
    spark: SparkSession, tables
):
    spark_preview = pytest.importorskip("refresh.spark.preview")
    built = tables["equality_deletes"]
    identifier = built.identifier.split(".")
    readings = (
        {},
        {"row_filter": "id < 10", "columns": ["v", "id"]},
        {"snapshot_id": built.snapshots[0], "row_filter": "id >= 3 and id <= 7"},
    )
    for reading in readings:
        frame = spark_preview.read(spark, identifier=identifier, **reading)
        rows = typed_rows(spark_preview.arrow_rows(frame), core_preview.MAX_LIMIT)

        expected = spark_frame(spark, built.identifier, **reading).collect()
        assert rows_of(rows) == rows_of(expected), reading
        assert frame.columns == reading.get("columns", ["id", "grp", "v"])
    assert len(rows) == 5  # at the first snapshot, before the deletes


def test_the_spark_fallback_reads_an_old_snapshot_with_that_snapshots_schema(
    spark: SparkSession, tables
):
    spark_preview = pytest.importorskip("refresh.spark.preview")
    built = tables["evolving"]
    first = built.snapshots[0]

    frame = spark_preview.read(spark, identifier=built.identifier.split("."), snapshot_id=first)

    expected = spark_frame(spark, built.identifier, snapshot_id=first)
    assert frame.columns == expected.columns == [
        "id", "name", "price", "amount", "gone", "note", "tag"
    ]  # fmt: skip
    rows = typed_rows(spark_preview.arrow_rows(frame), core_preview.MAX_LIMIT)
    assert rows_of(rows) == rows_of(expected.collect())


# -- following the writer ------------------------------------------------------------------------


def test_a_writer_appending_after_attach_is_followed_new_file_new_rows(
    spark: SparkSession, tables, attach
):
    built = tables["followed"]
    table = attach("followed")
    before = read(table)
    assert before.pruning.data_files == 1 and len(before.rows) == 10

    built_tables.append(
        spark,
        built.identifier,
        [(i, f"second {i}") for i in range(10, 15)],
        built_tables.FOLLOWED_SCHEMA,
    )
    unchanged = Table.objects.get(pk=table.pk).metadata_location
    table = services.follow_attached(table)

    current = built_tables.current_metadata_file(spark, built.identifier)
    assert unchanged.endswith("v2.gz.metadata.json")
    assert table.metadata_location == str(current) and current.name == "v3.gz.metadata.json"
    after = assert_reads_as_spark(spark, built, table)
    files = built_tables.data_files(spark, built.identifier)
    assert after.pruning.data_files == len(files) == 2
    assert len(after.rows) == 15
    assert after.snapshot_id == built_tables.snapshot_ids(spark, built.identifier)[-1]
    # Nothing new: following again keeps the same file.
    assert services.follow_attached(table).metadata_location == str(current)
