"""A full refresh is one Iceberg commit through the app's REST catalog, with exactly the
rows Spark gives for the query; a partition refresh rewrites that partition alone."""

from __future__ import annotations

from pyspark.sql import SparkSession

from refresh.spark.batch import full_refresh


def _files_by_partition(spark: SparkSession, table: str) -> dict[str, set[str]]:
    files: dict[str, set[str]] = {}
    for row in spark.sql(f"SELECT partition.ds AS ds, file_path FROM {table}.files").collect():
        files.setdefault(row["ds"], set()).add(row["file_path"])
    return files


def test_a_full_and_a_partition_refresh_write_what_the_query_gives(lv_spark: SparkSession):
    spark = lv_spark
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lv.mt")
    spark.sql("CREATE TABLE lv.mt.orders (ds STRING, amount DOUBLE) USING iceberg")
    spark.sql(
        "INSERT INTO lv.mt.orders VALUES ('2024-01-01', 1.0), ('2024-01-01', 2.0), "
        "('2024-01-02', 5.0), ('it\\'s', 7.0)"
    )
    spark.sql(
        "CREATE TABLE lv.mt.daily (ds STRING, total DOUBLE) USING iceberg PARTITIONED BY (ds)"
    )
    query = "SELECT ds, sum(amount) AS total FROM lv.mt.orders GROUP BY ds"

    result = full_refresh(spark, target=["lv", "mt", "daily"], query=query)

    expected = sorted(map(tuple, spark.sql(query).collect()))
    assert sorted(map(tuple, spark.sql("SELECT * FROM lv.mt.daily").collect())) == expected
    assert result.snapshot_id is not None and result.rows_written == 3

    before = _files_by_partition(spark, "lv.mt.daily")
    spark.sql("INSERT INTO lv.mt.orders VALUES ('2024-01-01', 10.0), ('2024-01-02', 100.0)")

    full_refresh(spark, target=["lv", "mt", "daily"], query=query, partition={"ds": "2024-01-01"})

    after = _files_by_partition(spark, "lv.mt.daily")
    rows = dict(map(tuple, spark.sql("SELECT * FROM lv.mt.daily").collect()))
    assert rows == {"2024-01-01": 13.0, "2024-01-02": 5.0, "it's": 7.0}, "only that partition"
    assert after["2024-01-02"] == before["2024-01-02"], "other partitions' files untouched"
    assert after["it's"] == before["it's"]
    assert after["2024-01-01"] != before["2024-01-01"]

    # A partition value with quotes and a semicolon is a value, not SQL.
    full_refresh(
        spark, target=["lv", "mt", "daily"], query=query, partition={"ds": "x'; DROP TABLE t; --"}
    )
    assert spark.sql("SELECT count(*) FROM lv.mt.daily").collect()[0][0] == 3
