"""One Spark session for all Spark tests: starting one takes several seconds.

The session uses the jars that scripts/bootstrap.sh builds in var/jars and a local Iceberg
catalog in a temporary warehouse, so tests never touch var/warehouse.
"""

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from refresh.spark.session import build_spark_session

REPO_ROOT = Path(__file__).resolve().parents[2]
JARS_DIR = REPO_ROOT / "var" / "jars"
CATALOG_NAME = "lakeview"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Everything under tests/spark needs the JVM, so `-m "not spark"` skips the lot.
    spark_dir = Path(__file__).parent
    for item in items:
        if spark_dir in Path(item.fspath).parents:
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("spark-warehouse")


@pytest.fixture(scope="session")
def spark(spark_warehouse: Path) -> Iterator[SparkSession]:
    if not any(JARS_DIR.glob("*.jar")):
        pytest.fail(f"No Spark jars in {JARS_DIR}: run `make bootstrap` first.")
    session = build_spark_session(
        master="local[2]",
        jars_dir=str(JARS_DIR),
        warehouse=str(spark_warehouse),
        catalog_name=CATALOG_NAME,
        app_name="lakeview-tests",
    )
    try:
        yield session
    finally:
        session.stop()
