"""Tables the app writes itself, an uploaded file's and the samples', are tables like any
other: Spark, pyiceberg and DuckDB read them through the app's REST catalog."""

from __future__ import annotations

import io
from decimal import Decimal

import duckdb
import duckdb_extension_avro
import duckdb_extension_httpfs
import duckdb_extension_iceberg
import pyarrow as pa
import pyarrow.parquet as pq
import requests
from pyiceberg.catalog.rest import RestCatalog
from pyspark.sql import SparkSession

from tests.live_server import CatalogServer
from tests.spark.test_duckdb import _extension

CSV = (
    b"id,name,amount,day\n1,ada,9.50,2024-01-02\n2,alan,20.00,2024-01-03\n3,chen,0.25,2024-01-04\n"
)


def duck(server: CatalogServer) -> duckdb.DuckDBPyConnection:
    client_id, _, secret = server.credential.partition(":")
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    for package, name in (
        (duckdb_extension_httpfs, "httpfs"),
        (duckdb_extension_avro, "avro"),
        (duckdb_extension_iceberg, "iceberg"),
    ):
        con.execute(f"LOAD '{_extension(package, name)}'")
    con.execute(
        "CREATE SECRET lv_secret (TYPE iceberg, CLIENT_ID ?, CLIENT_SECRET ?, OAUTH2_SERVER_URI ?)",
        [client_id, secret, f"{server.iceberg_uri}/v1/oauth/tokens"],
    )
    con.execute(
        f"ATTACH '{server.warehouse}' AS lv "
        f"(TYPE iceberg, ENDPOINT '{server.iceberg_uri}', SECRET lv_secret)"
    )
    return con


def rest_catalog(server: CatalogServer) -> RestCatalog:
    return RestCatalog(
        "lv",
        uri=server.iceberg_uri,
        credential=server.credential,
        **{"oauth2-server-uri": f"{server.iceberg_uri}/v1/oauth/tokens"},
    )


def upload(
    http: requests.Session, server: CatalogServer, content: bytes, filename: str, **fields: str
) -> requests.Response:
    return http.post(
        f"{server.base_url}/api/namespaces/uploads/tables/upload",
        files={"file": (filename, content)},
        data={"table": "orders", **fields},
        timeout=120,
    )


def test_an_uploaded_csv_and_an_appended_parquet_file_read_alike_in_every_engine(
    lv_spark: SparkSession, catalog_server: CatalogServer
) -> None:
    http = catalog_server.api_session()
    assert http.post(
        f"{catalog_server.base_url}/api/namespaces/", json={"name": "uploads"}, timeout=30
    ).ok
    created = upload(http, catalog_server, CSV, "orders.csv")
    assert created.status_code == 201, created.text
    more = pa.table(
        {
            "id": pa.array([4], pa.int32()),  # an int, written into the table's long
            "name": ["dana"],
            "amount": [100.0],
            "day": pa.array([19_800], pa.date32()),
        }
    )
    sink = io.BytesIO()
    pq.write_table(more, sink)
    appended = upload(http, catalog_server, sink.getvalue(), "more.parquet", mode="append")
    assert appended.status_code == 200, appended.text

    spark_rows = lv_spark.sql(
        "SELECT id, name, amount FROM lv.uploads.orders ORDER BY id"
    ).collect()
    assert [tuple(r) for r in spark_rows] == [
        (1, "ada", 9.5),
        (2, "alan", 20.0),
        (3, "chen", 0.25),
        (4, "dana", 100.0),
    ]
    assert lv_spark.sql("SELECT count(*) FROM lv.uploads.orders.snapshots").collect()[0][0] == 2

    with rest_catalog(catalog_server) as catalog:
        scanned = catalog.load_table("uploads.orders").scan().to_arrow()
    assert sorted(scanned["id"].to_pylist()) == [1, 2, 3, 4]

    con = duck(catalog_server)
    assert con.execute("SELECT count(*), sum(amount) FROM lv.uploads.orders").fetchall() == [
        (4, 129.75)
    ]


def test_the_samples_read_in_spark_and_duckdb_with_their_partitions_and_snapshots(
    lv_spark: SparkSession, catalog_server: CatalogServer
) -> None:
    catalog_server.manage("load_samples", timeout=300)

    [(count, total)] = lv_spark.sql("SELECT count(*), sum(amount) FROM lv.samples.orders").collect()
    assert (count, total) == (800_000, Decimal("202254977.21"))
    months = lv_spark.sql("SELECT count(*) FROM lv.samples.orders.partitions").collect()[0][0]
    assert months == 24
    # Partition pruning works on the month transform: one month's files only.
    january = lv_spark.sql(
        "SELECT count(*) FROM lv.samples.orders WHERE order_date < DATE '2024-02-01'"
    ).collect()[0][0]
    assert 0 < january < 40_000
    assert lv_spark.sql("SELECT count(*) FROM lv.samples.events.snapshots").collect()[0][0] == 5
    joined = lv_spark.sql(
        "SELECT c.country, count(*) AS n FROM lv.samples.orders o "
        "JOIN lv.samples.customers c USING (customer_id) GROUP BY c.country ORDER BY n DESC"
    ).collect()
    assert joined[0].country == "US" and sum(r.n for r in joined) == 800_000
    described = {
        r.col_name: r.data_type for r in lv_spark.sql("DESCRIBE lv.samples.orders").collect()
    }
    assert described["amount"] == "decimal(10,2)"

    con = duck(catalog_server)
    assert con.execute("SELECT count(*) FROM lv.samples.events").fetchall() == [(150_000,)]
    assert con.execute("SELECT count(*) FROM lv.samples.customers").fetchall() == [(30_000,)]
