import json
from pathlib import Path

from pyspark.sql import SparkSession


def test_a_local_session_creates_writes_reads_an_iceberg_table_and_a_view(
    spark: SparkSession, spark_warehouse: Path
) -> None:
    spark.sql("CREATE NAMESPACE IF NOT EXISTS smoke")
    spark.sql("CREATE TABLE smoke.orders (id BIGINT, region STRING, amount DOUBLE) USING iceberg")
    spark.sql("INSERT INTO smoke.orders VALUES (1, 'eu', 10.5), (2, 'us', 20.0), (3, 'eu', 4.5)")

    rows = spark.sql("SELECT id, region, amount FROM smoke.orders ORDER BY id").collect()
    assert [tuple(row) for row in rows] == [(1, "eu", 10.5), (2, "us", 20.0), (3, "eu", 4.5)]

    spark.sql(
        "CREATE VIEW smoke.revenue_by_region AS "
        "SELECT region, SUM(amount) AS revenue FROM smoke.orders GROUP BY region"
    )
    revenue = spark.sql("SELECT region, revenue FROM smoke.revenue_by_region ORDER BY region")
    assert [tuple(row) for row in revenue.collect()] == [("eu", 15.0), ("us", 20.0)]
    views = spark.sql("SHOW VIEWS IN smoke").collect()
    assert [row.viewName for row in views] == ["revenue_by_region"]

    # The table's metadata lives as JSON files under the warehouse, readable by any engine.
    metadata_files = sorted(
        (spark_warehouse / "smoke" / "orders" / "metadata").glob("*.metadata.json")
    )
    assert metadata_files, "no table metadata written under the warehouse"
    metadata = json.loads(metadata_files[-1].read_text())
    assert metadata["format-version"] >= 2
    assert [f["name"] for f in metadata["schemas"][-1]["fields"]] == ["id", "region", "amount"]
