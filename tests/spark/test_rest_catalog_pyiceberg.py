"""pyiceberg uses the app as its Iceberg REST catalog, next to Spark (which makes the view)."""

from __future__ import annotations

import pyarrow as pa
from pyiceberg.catalog.rest import RestCatalog
from pyspark.sql import SparkSession

from tests.live_server import CatalogServer


def test_pyiceberg_lists_creates_appends_scans_and_loads_a_spark_view(
    lv_spark: SparkSession, catalog_server: CatalogServer
) -> None:
    lv_spark.sql("CREATE NAMESPACE lv.py")
    lv_spark.sql("CREATE VIEW lv.py.constants AS SELECT 1 AS one, 'a' AS letter")

    catalog = RestCatalog(
        "lv",
        uri=catalog_server.iceberg_uri,
        credential=catalog_server.credential,
        **{"oauth2-server-uri": f"{catalog_server.iceberg_uri}/v1/oauth/tokens"},
    )
    assert ("py",) in catalog.list_namespaces()

    readings = pa.table(
        {
            "sensor": pa.array(["s1", "s2", "s1"], pa.string()),
            "value": pa.array([0.5, 1.5, 2.5], pa.float64()),
        }
    )
    table = catalog.create_table("py.readings", schema=readings.schema)
    assert ("py", "readings") in catalog.list_tables("py")
    table.append(readings)

    scanned = catalog.load_table("py.readings").scan().to_arrow().sort_by("value")
    assert scanned.to_pylist() == readings.to_pylist()
    # Spark sees pyiceberg's commit through the same catalog.
    assert lv_spark.sql("SELECT sum(value) FROM lv.py.readings").collect()[0][0] == 4.5

    assert catalog.list_views("py") == [("py", "constants")]
    view = catalog.load_view("py.constants")
    assert [(f.name, str(f.field_type)) for f in view.schema().fields] == [
        ("one", "int"),
        ("letter", "string"),
    ]
    [representation] = [r.root for r in view.current_version().representations]
    assert representation.dialect == "spark"
    assert "'a' AS letter" in representation.sql

    catalog.drop_view("py.constants")
    assert not catalog.view_exists("py.constants")
    assert lv_spark.sql("SHOW VIEWS IN lv.py").collect() == []
    catalog.drop_table("py.readings")
    assert not catalog.table_exists("py.readings")
    catalog.drop_namespace("py")
    assert ("py",) not in catalog.list_namespaces()
