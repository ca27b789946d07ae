"""Register view with Spark (issue 49). Iceberg's Java client 1.10 has no registerView (it
came in 1.11), so the view is registered over HTTP and then read by Spark; pyiceberg 0.12's
register_view registers it too."""

from __future__ import annotations

from pathlib import Path

import requests
from pyiceberg.catalog.rest import RestCatalog
from pyspark.sql import SparkSession

from tests.live_server import CatalogServer


def test_a_view_spark_created_and_dropped_is_registered_again_and_spark_reads_it(
    lv_spark: SparkSession, catalog_server: CatalogServer, iceberg_http: requests.Session
) -> None:
    spark, base = lv_spark, f"{catalog_server.iceberg_uri}/v1/namespaces/regview"
    spark.sql("CREATE NAMESPACE lv.regview")
    spark.sql("CREATE TABLE lv.regview.orders (id BIGINT, amount DOUBLE) USING iceberg")
    spark.sql("INSERT INTO lv.regview.orders VALUES (1, 5.0), (2, 50.0), (3, 500.0)")
    spark.sql("CREATE VIEW lv.regview.big AS SELECT id FROM regview.orders WHERE amount > 10")
    created = iceberg_http.get(f"{base}/views/big", timeout=30).json()
    location = created["metadata-location"]

    # Spark's DROP VIEW forgets the view; its metadata file stays in the warehouse.
    spark.sql("DROP VIEW lv.regview.big")
    assert iceberg_http.head(f"{base}/views/big", timeout=30).status_code == 404
    assert Path(location).is_file()

    response = iceberg_http.post(
        f"{base}/register-view",
        json={"name": "big_again", "metadata-location": location},
        timeout=30,
    )

    assert response.status_code == 200, response.text
    assert response.json()["metadata"] == created["metadata"]
    assert ("regview", "big_again", False) in [
        tuple(row) for row in spark.sql("SHOW VIEWS IN lv.regview").collect()
    ]
    ids = [row.id for row in spark.sql("SELECT id FROM lv.regview.big_again ORDER BY id").collect()]
    assert ids == [2, 3]

    # pyiceberg's client for the same endpoint (it asks whether a table has the name first).
    spark.sql("DROP VIEW lv.regview.big_again")
    catalog = RestCatalog(
        "lv",
        uri=catalog_server.iceberg_uri,
        credential=catalog_server.credential,
        **{"oauth2-server-uri": f"{catalog_server.iceberg_uri}/v1/oauth/tokens"},
    )
    view = catalog.register_view("regview.big_py", location)
    assert str(view.metadata.view_uuid) == created["metadata"]["view-uuid"]
    assert spark.sql("SELECT count(*) FROM lv.regview.big_py").collect()[0][0] == 2
