import json
from pathlib import Path

from pyspark.sql import SparkSession


def test_a_local_session_creates_writes_reads_an_iceberg_table_and_a_view(
    spark: SparkSession, tmp_path: Path
) -> None:
    # The session factory's local catalog (JDBC over SQLite, views enabled), over a warehouse
    # and SQLite file of this test's own, on the shared JVM: other Spark tests' catalogs
    # on the shared session's SQLite file cannot lock it under this one.
    from runtime.spark.session import ICEBERG_SPARK_CATALOG, SparkSessionConfig

    spark_warehouse = tmp_path / "warehouse"
    config = SparkSessionConfig(
        master="local[2]",
        jars_dir="var/jars",
        warehouse=str(spark_warehouse),
        catalog_name="smoke_lv",
    )
    spark = spark.newSession()
    spark.conf.set("spark.sql.catalog.smoke_lv", ICEBERG_SPARK_CATALOG)
    for key, value in config.catalog_properties().items():
        spark.conf.set(f"spark.sql.catalog.smoke_lv.{key}", value)
    spark.conf.set("spark.sql.defaultCatalog", "smoke_lv")
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


def test_a_session_starts_without_sparks_log_banner_so_a_commands_last_words_are_its_own(
    tmp_path: Path,
) -> None:
    # In a process of its own, as `manage.py verify_materialized_table` starts its Spark:
    # the JVM's standard error is the command's.
    import subprocess
    import sys

    script = (
        "from runtime.spark.session import SparkSessionConfig\n"
        f"config = SparkSessionConfig(master='local[1]', jars_dir='var/jars',"
        f" warehouse={str(tmp_path / 'warehouse')!r}, catalog_name='quiet')\n"
        "spark = config.build()\n"
        "print('rows:', spark.range(3).count())\n"
        "print('verdict: EXACT')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["rows: 3", "verdict: EXACT"]
    for banner in ("setLogLevel", "Setting default log level", "default log4j profile"):
        assert banner not in done.stderr, done.stderr
    assert "NativeCodeLoader" not in done.stderr, done.stderr
