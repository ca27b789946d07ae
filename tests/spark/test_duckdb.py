"""DuckDB reads the catalog as DuckDB users do: its Iceberg extension (from PyPI), client
credentials sent only as HTTP Basic to the token endpoint, ATTACH by endpoint, then plain
SQL over a table Spark wrote through the same catalog."""

from __future__ import annotations

from pathlib import Path

import duckdb
import duckdb_extension_avro
import duckdb_extension_httpfs
import duckdb_extension_iceberg
from pyspark.sql import SparkSession

from tests.live_server import CatalogServer


def _extension(package: object, name: str) -> str:
    (path,) = Path(package.__file__).parent.glob(f"extensions/*/{name}.duckdb_extension")
    return str(path)


def test_duckdb_logs_in_with_http_basic_attaches_the_catalog_and_reads_a_table(
    lv_spark: SparkSession, catalog_server: CatalogServer
) -> None:
    lv_spark.sql("CREATE NAMESPACE IF NOT EXISTS lv.duck")
    lv_spark.sql("CREATE TABLE lv.duck.orders (id BIGINT, amount DOUBLE) USING iceberg")
    lv_spark.sql("INSERT INTO lv.duck.orders VALUES (1, 9.5), (2, 20.0), (3, 0.25)")
    client_id, _, secret = catalog_server.credential.partition(":")

    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    for package, name in (
        (duckdb_extension_httpfs, "httpfs"),
        (duckdb_extension_avro, "avro"),
        (duckdb_extension_iceberg, "iceberg"),
    ):
        con.execute(f"LOAD '{_extension(package, name)}'")
    con.execute(
        "CREATE SECRET lv_secret (TYPE iceberg, CLIENT_ID ?, CLIENT_SECRET ?, OAUTH2_SERVER_URI ?)",
        [client_id, secret, f"{catalog_server.iceberg_uri}/v1/oauth/tokens"],
    )
    con.execute(
        f"ATTACH '{catalog_server.warehouse}' AS lv "
        f"(TYPE iceberg, ENDPOINT '{catalog_server.iceberg_uri}', SECRET lv_secret)"
    )

    rows = con.execute("SELECT id, amount FROM lv.duck.orders ORDER BY id").fetchall()

    assert rows == [(1, 9.5), (2, 20.0), (3, 0.25)]
