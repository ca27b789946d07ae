"""Iceberg tables that Spark writes into folders, for the attached-table tests (no tests
here): the tables users attach are written by Spark jobs, so Spark writes these, with the
shared session of tests/spark/conftest.py (one JVM; never another session).

Two catalogs name the metadata files as the writers users have do:
- a Hadoop catalog (added to the running session, with a warehouse of its own) writes
  `metadata/vN.metadata.json`;
- a JDBC catalog of their own (`attached_jdbc`, its own SQLite file) writes
  `metadata/NNNNN-<uuid>.metadata.json`;
- either writes gzip-compressed files, named `....gz.metadata.json`, for a table with
  `write.metadata.compression-codec=gzip`.

Every table is small (tens of rows) but spread over several files, each write in a range of
its own, so that a filter can skip files by partition value and by column bounds. Spark's
own reads of a table (at any snapshot, with SQL's `VERSION AS OF` and `TIMESTAMP AS OF`)
are the truth the previews are compared with; the builders keep what cannot be read back
later: the ids of the snapshots in commit order, moments between commits (epoch
milliseconds), a metadata file of an intermediate state, and Spark's read of that state.

Equality deletes: Spark's DELETE never writes them (it writes position deletes, or deletion
vectors in format v3), so `add_equality_deletes` writes the Parquet file with pyarrow
(Iceberg field ids in the Parquet schema) and commits it with Iceberg's Java API
(`FileMetadata.deleteFileBuilder(...).ofEqualityDeletes(...)`, `newRowDelta()`) through
py4j, as Flink's upserts and other writers leave them."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

#: The Hadoop catalog added to the shared session (its warehouse is the caller's folder).
HADOOP_CATALOG = "attached_hadoop"
HADOOP_NAMESPACE = "db"
#: The shared session's JDBC catalog (tests/spark/conftest.py) and a namespace of ours.
#: A JDBC catalog of these tables' own (its own SQLite file): the shared session's `lakeview`
#: catalog is left to the tests that use it, so no two sets of tests write one SQLite file.
JDBC_CATALOG = "attached_jdbc"
JDBC_NAMESPACE = "attached"

GZIP = "'write.metadata.compression-codec'='gzip'"
MERGE_ON_READ = "'write.delete.mode'='merge-on-read'"


@dataclass
class BuiltTable:
    """A table Spark wrote, with what the tests need to know about how it was written."""

    #: Spark's name of the table: `catalog.namespace.table`.
    identifier: str
    #: The table's folder (the one to attach).
    folder: Path
    #: Snapshot ids in commit order.
    snapshots: list[int] = field(default_factory=list)
    #: Named moments (epoch ms) between commits, for reads by timestamp.
    moments: dict[str, int] = field(default_factory=dict)
    #: Named metadata files of intermediate states, relative to the folder.
    metadata_files: dict[str, str] = field(default_factory=dict)
    #: Spark's reads of states that are gone once the builder went on (sorted rows).
    truth: dict[str, list[tuple]] = field(default_factory=dict)


# -- catalogs and Java ------------------------------------------------------------------------


def add_hadoop_catalog(spark: SparkSession, warehouse: Path) -> None:
    """A Hadoop catalog (`vN.metadata.json` names) on the running session. Catalogs are
    SQL settings read when first used, so this works on a session already started; the
    warehouse of a catalog already used cannot change (Spark keeps the instance)."""
    prefix = f"spark.sql.catalog.{HADOOP_CATALOG}"
    if spark.conf.get(prefix, None) is not None:
        if spark.conf.get(f"{prefix}.warehouse") != str(warehouse):
            raise RuntimeError(f"{HADOOP_CATALOG} already uses another warehouse")
        return
    warehouse.mkdir(parents=True, exist_ok=True)
    spark.conf.set(prefix, "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set(f"{prefix}.type", "hadoop")
    spark.conf.set(f"{prefix}.warehouse", str(warehouse))


def add_jdbc_catalog(spark: SparkSession, warehouse: Path) -> None:
    """A JDBC catalog over SQLite (`NNNNN-uuid.metadata.json` names), as the shared session's
    own, but with a database file and warehouse of its own."""
    prefix = f"spark.sql.catalog.{JDBC_CATALOG}"
    if spark.conf.get(prefix, None) is not None:
        if spark.conf.get(f"{prefix}.warehouse") != str(warehouse):
            raise RuntimeError(f"{JDBC_CATALOG} already uses another warehouse")
        return
    warehouse.mkdir(parents=True, exist_ok=True)
    spark.conf.set(prefix, "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set(f"{prefix}.catalog-impl", "org.apache.iceberg.jdbc.JdbcCatalog")
    spark.conf.set(f"{prefix}.uri", f"jdbc:sqlite:{warehouse / '.catalog.sqlite'}")
    spark.conf.set(f"{prefix}.jdbc.schema-version", "V1")
    spark.conf.set(f"{prefix}.warehouse", str(warehouse))


def java_table(spark: SparkSession, identifier: str) -> Any:
    """Iceberg's Java `Table` behind a Spark name, loaded afresh."""
    jvm = spark.sparkContext._jvm
    return jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession, identifier
    )


def local_path(location: str) -> Path:
    """A Java location (`file:/x`, `file:///x` or `/x`) as a local path."""
    for prefix in ("file://", "file:"):
        if location.startswith(prefix):
            return Path(location.removeprefix(prefix))
    return Path(location)


def current_metadata_file(spark: SparkSession, identifier: str) -> Path:
    """The metadata file the writer's own catalog says is the table now."""
    operations = java_table(spark, identifier).operations()
    return local_path(operations.current().metadataFileLocation())


def snapshot_ids(spark: SparkSession, identifier: str) -> list[int]:
    """The table's snapshots, oldest first (as the writer's catalog lists them)."""
    rows = spark.sql(
        f"SELECT snapshot_id FROM {identifier}.snapshots ORDER BY committed_at"
    ).collect()
    return [row[0] for row in rows]


def moment() -> int:
    """Now in epoch milliseconds, strictly after the last commit and strictly before the
    next one (commits read the same clock)."""
    time.sleep(0.01)
    now = int(time.time() * 1000)
    time.sleep(0.01)
    return now


def sorted_rows(frame: Any) -> list[tuple]:
    """A DataFrame's rows as tuples, sorted (None first) so that reads compare as lists."""
    return sorted((tuple(row) for row in frame.collect()), key=sort_key)


def sort_key(row: tuple) -> tuple:
    return tuple((value is not None, value) for value in row)


def _time_travel(snapshot_id: int | None, timestamp_ms: int | None) -> str:
    if snapshot_id is not None:
        return f" VERSION AS OF {int(snapshot_id)}"
    if timestamp_ms is not None:
        return f" TIMESTAMP AS OF timestamp_millis({int(timestamp_ms)})"
    return ""


def spark_frame(
    spark: SparkSession,
    identifier: str,
    *,
    snapshot_id: int | None = None,
    timestamp_ms: int | None = None,
    row_filter: str | None = None,
    columns: list[str] | None = None,
) -> Any:
    """Spark's own read, in SQL: at a snapshot id (`VERSION AS OF`) or a timestamp
    (`TIMESTAMP AS OF`), where Spark uses the snapshot's schema (the `snapshot-id` option
    of DataFrameReader would use the table's current one), with a Spark SQL filter and a
    column choice."""
    selected = ", ".join(f"`{name}`" for name in columns) if columns else "*"
    where = f" WHERE {row_filter}" if row_filter else ""
    return spark.sql(
        f"SELECT {selected} FROM {identifier}{_time_travel(snapshot_id, timestamp_ms)}{where}"
    )


def spark_read(spark: SparkSession, identifier: str, **read: Any) -> list[tuple]:
    """`spark_frame`'s rows, sorted."""
    return sorted_rows(spark_frame(spark, identifier, **read))


def content_files(
    spark: SparkSession, identifier: str, *, snapshot_id: int | None = None
) -> list[dict[str, Any]]:
    """The data and delete files of the table (at a snapshot), from Spark's `files`
    metadata table: content (0 data, 1 position deletes or DV, 2 equality deletes), path,
    format, records, partition (a dict by partition field name), per column the lower and
    upper bounds (`readable_metrics`, by column name), and for a position delete file the
    data file it names (`referenced_data_file`) or the bounds of the paths it holds."""
    frame = spark.sql(f"SELECT * FROM {identifier}.files{_time_travel(snapshot_id, None)}")
    has_partition = "partition" in frame.columns
    files = []
    for row in frame.collect():
        metrics = row["readable_metrics"].asDict(recursive=True) if row["readable_metrics"] else {}
        files.append(
            {
                "content": row["content"],
                "path": str(local_path(row["file_path"])),
                "format": row["file_format"],
                "records": row["record_count"],
                "partition": row["partition"].asDict() if has_partition else {},
                "lower": {name: m["lower_bound"] for name, m in metrics.items()},
                "upper": {name: m["upper_bound"] for name, m in metrics.items()},
                "referenced_data_file": row["referenced_data_file"],
                "paths": (_path_bound(row["lower_bounds"]), _path_bound(row["upper_bounds"])),
            }
        )
    return files


#: The reserved field id of a position delete file's `file_path` column.
DELETE_FILE_PATH_ID = 2147483546


def _path_bound(bounds: dict | None) -> str | None:
    value = (bounds or {}).get(DELETE_FILE_PATH_ID)
    return str(local_path(bytes(value).decode())) if value is not None else None


def data_files(
    spark: SparkSession, identifier: str, *, snapshot_id: int | None = None
) -> list[dict[str, Any]]:
    return [
        f for f in content_files(spark, identifier, snapshot_id=snapshot_id) if f["content"] == 0
    ]


def bucket(spark: SparkSession, width: int, value: Any) -> int:
    """Iceberg's bucket transform of a value, as Iceberg's own function computes it."""
    literal = f"'{value}'" if isinstance(value, str) else str(value)
    return spark.sql(f"SELECT {JDBC_CATALOG}.system.bucket({width}, {literal})").collect()[0][0]


def append(spark: SparkSession, identifier: str, rows: list[tuple], schema: str) -> None:
    """One append commit of `rows` (a DDL schema string gives the types), through Spark's
    DataFrameWriterV2: Iceberg asks for its distribution, so each partition of one write
    lands in one file."""
    spark.createDataFrame(rows, schema).coalesce(1).writeTo(identifier).append()


def add_equality_deletes(spark: SparkSession, identifier: str, column: str, values: list) -> Path:
    """One commit adding an equality delete file (on `column`, a long column, of an
    unpartitioned table) deleting the rows whose `column` is one of `values`, as writers
    other than Spark write them (see the module)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = java_table(spark, identifier)
    field_id = table.schema().findField(column).fieldId()
    path = local_path(table.location()) / "data" / f"eq-deletes-{time.time_ns()}.parquet"
    arrow_schema = pa.schema(
        [
            pa.field(
                column, pa.int64(), nullable=False, metadata={b"PARQUET:field_id": str(field_id)}
            )
        ]
    )
    pq.write_table(pa.table({column: values}, schema=arrow_schema), path)
    jvm = spark.sparkContext._jvm
    ids = spark.sparkContext._gateway.new_array(jvm.int, 1)
    ids[0] = field_id
    delete_file = (
        jvm.org.apache.iceberg.FileMetadata.deleteFileBuilder(table.spec())
        .ofEqualityDeletes(ids)
        .withPath(str(path))
        .withFormat("parquet")
        .withFileSizeInBytes(path.stat().st_size)
        .withRecordCount(len(values))
        .build()
    )
    table.newRowDelta().addDeletes(delete_file).commit()
    return path


def _built(spark: SparkSession, identifier: str, **extra: Any) -> BuiltTable:
    folder = local_path(java_table(spark, identifier).location())
    return BuiltTable(identifier, folder, snapshot_ids(spark, identifier), **extra)


def _hadoop(name: str) -> str:
    return f"{HADOOP_CATALOG}.{HADOOP_NAMESPACE}.{name}"


def _jdbc(name: str) -> str:
    return f"{JDBC_CATALOG}.{JDBC_NAMESPACE}.{name}"


# -- the tables ----------------------------------------------------------------------------------

EVENTS_SCHEMA = "id long, category string, created_at timestamp, amount double, note string"
DAY_ONE = datetime(2024, 1, 1, tzinfo=UTC)


def events_rows(write: int, count: int = 30) -> list[tuple]:
    """Write `write`'s rows: ids and amounts in a range of the write's own (100 per write),
    three categories over two days, some notes NULL."""
    rows = []
    for i in range(count):
        ident = write * 100 + i
        rows.append(
            (
                ident,
                "abc"[i % 3],
                DAY_ONE + timedelta(days=i % 2, hours=i % 24, minutes=write),
                ident + 0.5,
                None if i % 5 == 0 else f"note {ident}",
            )
        )
    return rows


def build_events(spark: SparkSession) -> BuiltTable:
    """Hadoop catalog (`vN.metadata.json`), partitioned by identity and day: three appends,
    each one file per (category, day), so 6 files per snapshot, ids and amounts in a range
    per append (bounds prune what partitions cannot)."""
    identifier = _hadoop("events")
    spark.sql(
        f"CREATE TABLE {identifier} ({EVENTS_SCHEMA}) USING iceberg "
        "PARTITIONED BY (category, days(created_at)) TBLPROPERTIES ('format-version'='2')"
    )
    moments = {"before_first_snapshot": moment()}
    for write in range(3):
        append(spark, identifier, events_rows(write), EVENTS_SCHEMA)
        moments[f"after_write_{write}"] = moment()
    return _built(spark, identifier, moments=moments)


CLICKS_SCHEMA = "user_id int, page string, clicked_at timestamp, ms int"
PAGES = ("home", "help", "pricing")


def clicks_rows(write: int, count: int = 24) -> list[tuple]:
    rows = []
    for j in range(count):
        rows.append(
            (
                j % 6 + 1,
                PAGES[j % 3],
                datetime(2024, 3, 1, 10, tzinfo=UTC) + timedelta(hours=j % 2, minutes=j + write),
                write * 1000 + j,
            )
        )
    return rows


def build_clicks(spark: SparkSession) -> BuiltTable:
    """JDBC catalog with gzip-compressed metadata (`NNNNN-uuid.gz.metadata.json`),
    partitioned by bucket, truncate and hour: two appends."""
    identifier = _jdbc("clicks")
    spark.sql(
        f"CREATE TABLE {identifier} ({CLICKS_SCHEMA}) USING iceberg "
        "PARTITIONED BY (bucket(4, user_id), truncate(2, page), hours(clicked_at)) "
        f"TBLPROPERTIES ('format-version'='2', {GZIP})"
    )
    for write in range(2):
        append(spark, identifier, clicks_rows(write), CLICKS_SCHEMA)
    return _built(spark, identifier)


DELETES_SCHEMA = "id long, grp string, v double"


def _deletes_rows(start: int, count: int) -> list[tuple]:
    return [(i, "xy"[i % 2], i / 4) for i in range(start, start + count)]


def build_position_deletes(spark: SparkSession) -> BuiltTable:
    """Format v2, merge-on-read DELETE: position delete files (one per partition touched).
    Snapshots: two appends, then a delete of every fourth id, then of ids under 10."""
    identifier = _jdbc("position_deletes")
    spark.sql(
        f"CREATE TABLE {identifier} ({DELETES_SCHEMA}) USING iceberg PARTITIONED BY (grp) "
        f"TBLPROPERTIES ('format-version'='2', {MERGE_ON_READ})"
    )
    append(spark, identifier, _deletes_rows(0, 30), DELETES_SCHEMA)
    append(spark, identifier, _deletes_rows(30, 30), DELETES_SCHEMA)
    spark.sql(f"DELETE FROM {identifier} WHERE id % 4 = 0")
    spark.sql(f"DELETE FROM {identifier} WHERE id < 10")
    return _built(spark, identifier)


def build_deletion_vectors(spark: SparkSession) -> BuiltTable:
    """Format v3, merge-on-read DELETE: Iceberg 1.10 writes deletion vectors (Puffin); a
    second DELETE on the same files replaces their vectors with merged ones. gzip metadata."""
    identifier = _jdbc("deletion_vectors")
    spark.sql(
        f"CREATE TABLE {identifier} ({DELETES_SCHEMA}) USING iceberg "
        f"TBLPROPERTIES ('format-version'='3', {MERGE_ON_READ}, {GZIP})"
    )
    append(spark, identifier, _deletes_rows(0, 30), DELETES_SCHEMA)
    append(spark, identifier, _deletes_rows(30, 30), DELETES_SCHEMA)
    spark.sql(f"DELETE FROM {identifier} WHERE id % 5 = 0")
    spark.sql(f"DELETE FROM {identifier} WHERE id < 10 OR id > 55")
    return _built(spark, identifier)


def build_equality_deletes(spark: SparkSession) -> BuiltTable:
    """Format v2, unpartitioned, one append of 20 rows, then an equality delete file on
    `id` (3, 5 and 7) committed with the Java API."""
    identifier = _jdbc("equality_deletes")
    spark.sql(
        f"CREATE TABLE {identifier} ({DELETES_SCHEMA}) USING iceberg "
        "TBLPROPERTIES ('format-version'='2')"
    )
    append(spark, identifier, _deletes_rows(0, 20), DELETES_SCHEMA)
    add_equality_deletes(spark, identifier, "id", [3, 5, 7])
    return _built(spark, identifier)


#: Every schema change the seed lists, in the order applied (each is one metadata file).
SCHEMA_CHANGES = (
    "ADD COLUMN added string",
    "DROP COLUMN gone",
    "RENAME COLUMN name TO title",
    "ALTER COLUMN tag FIRST",
    "ALTER COLUMN id DROP NOT NULL",
    "ALTER COLUMN id TYPE bigint",
    "ALTER COLUMN price TYPE double",
    "ALTER COLUMN amount TYPE decimal(9, 2)",
    "DROP COLUMN note",
    "ADD COLUMN note string",
)


def build_evolving(spark: SparkSession) -> BuiltTable:
    """Hadoop catalog, every schema change of SCHEMA_CHANGES between two appends: a
    required int id (then optional, then long), a float price (then double), a
    decimal(5, 2) amount (then decimal(9, 2)), a renamed, a dropped, a moved and a dropped
    then re-added column, and a new one. 13 metadata files (v13 > v9, as numbers)."""
    identifier = _hadoop("evolving")
    spark.sql(
        f"CREATE TABLE {identifier} (id int NOT NULL, name string, price float, "
        "amount decimal(5, 2), gone string, note string, tag string) USING iceberg "
        "TBLPROPERTIES ('format-version'='2')"
    )
    first = [
        (i, f"name {i}", i * 1.25, Decimal(f"{i * 11}.25"), f"gone {i}", f"old note {i}", "t0")
        for i in range(1, 6)
    ]
    spark.createDataFrame(
        first,
        "id int not null, name string, price float, amount decimal(5, 2), gone string, "
        "note string, tag string",
    ).coalesce(1).writeTo(identifier).append()
    for change in SCHEMA_CHANGES:
        spark.sql(f"ALTER TABLE {identifier} {change}")
    second = [
        ("t1", 2**40 + i, f"title {i}", 1e300 * i, Decimal(f"{i * 1111111}.75"), f"a{i}", f"n{i}")
        for i in range(6, 9)
    ]
    spark.createDataFrame(
        second,
        "tag string, id long, title string, price double, amount decimal(9, 2), "
        "added string, note string",
    ).coalesce(1).writeTo(identifier).append()
    return _built(spark, identifier)


def build_time_travel(spark: SparkSession) -> BuiltTable:
    """The seed's time-travel scenarios, as its Spark statements run them: a table of
    (order_number, product_code); moment ts0; insert (1, 'Mars'); ts1; ADD COLUMN price;
    ts2; insert (2, 'Venus', 100); ts3. The metadata file written by the ALTER (the
    second scenario's "now": the new schema, the old snapshot) and Spark's read of the
    table then are kept."""
    identifier = _jdbc("time_travel")
    spark.sql(
        f"CREATE TABLE {identifier} (order_number int, product_code string) USING iceberg "
        "TBLPROPERTIES ('format-version'='2')"
    )
    moments = {"ts0": moment()}
    spark.sql(f"INSERT INTO {identifier} VALUES (1, 'Mars')")
    moments["ts1"] = moment()
    spark.sql(f"ALTER TABLE {identifier} ADD COLUMN price double")
    after_alter = current_metadata_file(spark, identifier)
    truth = {"after_alter": sorted_rows(spark.table(identifier))}
    truth["after_alter_columns"] = [tuple(spark.table(identifier).columns)]
    moments["ts2"] = moment()
    spark.sql(f"INSERT INTO {identifier} VALUES (2, 'Venus', 100)")
    moments["ts3"] = moment()
    built = _built(spark, identifier, moments=moments, truth=truth)
    built.metadata_files["after_alter"] = str(after_alter.relative_to(built.folder))
    return built


FOLLOWED_SCHEMA = "id long, label string"


def build_followed(spark: SparkSession) -> BuiltTable:
    """Hadoop catalog with gzip-compressed metadata (`vN.gz.metadata.json`), one append;
    the test appends more after attaching it."""
    identifier = _hadoop("followed")
    spark.sql(
        f"CREATE TABLE {identifier} ({FOLLOWED_SCHEMA}) USING iceberg "
        f"TBLPROPERTIES ('format-version'='2', {GZIP})"
    )
    append(spark, identifier, [(i, f"first {i}") for i in range(10)], FOLLOWED_SCHEMA)
    return _built(spark, identifier)


BUILDERS = {
    "events": build_events,
    "clicks": build_clicks,
    "position_deletes": build_position_deletes,
    "deletion_vectors": build_deletion_vectors,
    "equality_deletes": build_equality_deletes,
    "evolving": build_evolving,
    "time_travel": build_time_travel,
    "followed": build_followed,
}


def build_all(
    spark: SparkSession, hadoop_warehouse: Path, jdbc_warehouse: Path
) -> dict[str, BuiltTable]:
    """Every table above, by name. The Hadoop tables are in `hadoop_warehouse`, the JDBC
    ones in `jdbc_warehouse` (under `attached/`)."""
    add_hadoop_catalog(spark, hadoop_warehouse)
    add_jdbc_catalog(spark, jdbc_warehouse)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {JDBC_CATALOG}.{JDBC_NAMESPACE}")
    return {name: build(spark) for name, build in BUILDERS.items()}
