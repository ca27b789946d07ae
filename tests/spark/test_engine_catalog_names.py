"""Views that engines made under their own name for the catalog, used by the app.

Spark configured with the app's catalog as `lake` (and its default catalog left as
`spark_catalog`, as most users leave it) writes `lake.shop.orders` into a view's SQL; a
Trino user's catalog is often `iceberg`. The catalog stores the SQL as sent. The app reads
those names as its own (catalog.selectors.catalogs_meaning_this): its console, previews,
lineage, materialized tables (refreshes and the continuous mode) use such views, and a name
that resolves to nothing stays an error that names it. One stack for the module (the app, a
worker, beat and the streaming process); the views are made by real Spark through /iceberg.
"""

from __future__ import annotations

import json

import pytest
from pyspark.sql import SparkSession

from tests.refresh_stack import RefreshStack
from tests.spark.conftest import rest_catalog_conf, rest_session, stack_fixture
from tests.spark.test_mt_end_to_end import current_summary, runs

NS = "shop"

stack = stack_fixture("engine-names-stack")


def rows(spark: SparkSession, sql: str) -> list[tuple]:
    return sorted(tuple(row) for row in spark.sql(sql).collect())


def statement(stack: RefreshStack, sql: str) -> list[dict]:
    response = stack.statements(sql, namespace=NS)
    assert response.status_code == 200, response.text
    return response.json()["results"]


def console_rows(stack: RefreshStack, sql: str) -> list[tuple]:
    """The rows of a console query (kept as a query result, read through its rows URL)."""
    [result] = statement(stack, sql)
    response = stack.api.get(f"{stack.server.base_url}{result['query']['rows_url']}", timeout=30)
    assert response.status_code == 200, response.text
    page = response.json()
    assert page["state"] == "SUCCEEDED" and page["complete"], page
    return sorted(tuple(row) for row in page["rows"])


@pytest.fixture(scope="module")
def lake(spark: SparkSession, stack: RefreshStack) -> SparkSession:
    """A user's Spark: the app's catalog is `lake`, the default catalog Spark's own."""
    session = spark.newSession()
    for key, value in rest_catalog_conf(stack.server, "lake").items():
        session.conf.set(key, value)
    session.conf.set("spark.sql.defaultCatalog", "spark_catalog")
    return session


@pytest.fixture(scope="module")
def made(lake: SparkSession, spark: SparkSession, stack: RefreshStack) -> SparkSession:
    """The source table and the engines' views: `big_orders` names `lake.shop.orders` (its
    default catalog spark_catalog), `small_orders` was made after `USE lake.shop` (no
    default catalog, unqualified names), `big_ids` reads `big_orders` (a view over such a
    view), and `ice_orders` reads `orders` in its default catalog `iceberg` (a Trino-like
    name: Spark records the current catalog when it is not the view's)."""
    lake.sql("CREATE NAMESPACE lake.shop")
    lake.sql("CREATE TABLE lake.shop.orders (id BIGINT, k STRING, v DOUBLE) USING iceberg")
    lake.sql(
        "INSERT INTO lake.shop.orders VALUES (1, 'a', 0.5), (2, 'b', 0.1), (3, 'a', 0.9), "
        "(4, 'c', 0.4), (5, 'b', 0.7)"
    )
    lake.sql(
        "CREATE VIEW lake.shop.big_orders AS SELECT id, k, v FROM lake.shop.orders WHERE v > 0.3"
    )
    used = lake.newSession()
    for key, value in rest_catalog_conf(stack.server, "lake").items():
        used.conf.set(key, value)
    used.sql("USE lake.shop")
    used.sql("CREATE VIEW small_orders AS SELECT id, k FROM orders WHERE v <= 0.3")
    used.sql("CREATE VIEW lake.shop.big_ids AS SELECT id FROM big_orders")
    both = rest_session(spark, stack.server, name="iceberg")
    for key, value in rest_catalog_conf(stack.server, "lake").items():
        both.conf.set(key, value)
    both.sql("USE iceberg.shop")
    both.sql("CREATE VIEW lake.shop.ice_orders AS SELECT k, v FROM orders WHERE k = 'a'")
    return lake


def view_metadata(stack: RefreshStack, name: str) -> dict:
    http = stack.server.iceberg_session()
    response = http.get(f"{stack.server.iceberg_uri}/v1/namespaces/{NS}/views/{name}", timeout=30)
    assert response.status_code == 200, response.text
    return response.json()["metadata"]


def test_the_views_are_stored_as_the_engine_sent_them(stack, made):
    version = view_metadata(stack, "big_orders")["versions"][-1]
    assert version["default-catalog"] == "spark_catalog"
    [representation] = version["representations"]
    assert representation["sql"] == ("SELECT id, k, v FROM lake.shop.orders WHERE v > 0.3")
    version = view_metadata(stack, "ice_orders")["versions"][-1]
    assert (version["default-catalog"], version["default-namespace"]) == ("iceberg", [NS])


def test_the_console_reads_views_that_name_the_catalog_by_an_engines_name(stack, made):
    orders = "SELECT id, k, v FROM lake.shop.orders"
    expected = rows(made, f"{orders} WHERE v > 0.3")
    assert console_rows(stack, "SELECT id, k, v FROM shop.big_orders") == expected
    # Named through the engine's name itself, as a user who copies it from Spark would.
    assert console_rows(stack, "SELECT id, k, v FROM lake.shop.big_orders") == expected
    assert console_rows(stack, "SELECT * FROM small_orders") == rows(
        made, "SELECT id, k FROM lake.shop.orders WHERE v <= 0.3"
    )
    assert console_rows(stack, "SELECT count(*) FROM big_ids") == [(len(expected),)]
    assert console_rows(stack, "SELECT k, v FROM ice_orders") == rows(
        made, "SELECT k, v FROM lake.shop.orders WHERE k = 'a'"
    )


def test_a_view_over_such_a_view_is_previewed_by_the_workers_spark(stack, made):
    asked = stack.api.get(
        f"{stack.server.base_url}/api/namespaces/{NS}/views/big_ids/preview", timeout=30
    )
    response = stack.follow(asked)
    assert response.status_code == 200, response.text
    assert sorted(row[0] for row in response.json()["rows"]) == [
        row[0] for row in rows(made, "SELECT id FROM lake.shop.orders WHERE v > 0.3")
    ]


def test_lineage_draws_the_engines_views_over_the_table(stack, made):
    response = stack.api.get(
        f"{stack.server.base_url}/api/lineage/",
        params={"namespace": NS, "name": "orders", "depth": 3},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    edges = {(edge["source"], edge["target"]) for edge in body["edges"]}
    assert {
        (f"{NS}.orders", f"{NS}.big_orders"),
        (f"{NS}.orders", f"{NS}.small_orders"),
        (f"{NS}.big_orders", f"{NS}.big_ids"),
        (f"{NS}.orders", f"{NS}.ice_orders"),
    } <= edges, body


def test_a_materialized_table_over_such_views_refreshes_and_records_their_tables(stack, made):
    query = (
        "SELECT coalesce(k, '-') AS k, count(*) AS n, sum(v) AS total FROM big_orders "
        "GROUP BY coalesce(k, '-')"
    )
    [created] = statement(
        stack,
        "CREATE MATERIALIZED TABLE big_by_k (PRIMARY KEY (k) NOT ENFORCED) "
        # strict: the small source's MERGE changes most of it, which `auto` recomputes.
        "WITH ('refresh.incremental' = 'strict') "
        f"FRESHNESS = INTERVAL '1' DAY REFRESH_MODE = FULL AS {query}",
    )
    stack.wait_for(
        lambda: stack.run(created["run_id"])["state"] in ("SUCCEEDED", "FAILED"),
        timeout=180,
        what="the first refresh",
    )
    run = stack.run(created["run_id"])
    assert run["state"] == "SUCCEEDED", run
    expected = (
        "SELECT coalesce(k, '-'), count(*), sum(v) FROM lake.shop.orders WHERE v > 0.3 "
        "GROUP BY coalesce(k, '-')"
    )
    assert rows(made, "SELECT * FROM lake.shop.big_by_k") == rows(made, expected)
    state = json.loads(current_summary(stack, f"{NS}.big_by_k")["refresh-state"])
    assert {(s["type"], s["name"]) for s in state["source-states"]} == {
        ("view", "big_orders"),
        ("table", "orders"),
    }

    # A MERGE into the table under the view: the next refresh takes it incrementally.
    made.sql(
        "MERGE INTO lake.shop.orders t USING (SELECT * FROM VALUES (2L, 'b', 0.8D), "
        "(6L, 'c', 0.6D) AS s(id, k, v)) s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET t.v = s.v WHEN NOT MATCHED THEN INSERT *"
    )
    response = stack.api.post(
        f"{stack.server.base_url}/api/namespaces/{NS}/materialized-tables/big_by_k/refresh",
        json={},
        timeout=30,
    )
    assert response.status_code == 202, response.text
    run_id = response.json()["jobId"]
    stack.wait_for(
        lambda: stack.run(run_id)["state"] in ("SUCCEEDED", "FAILED", "SKIPPED"),
        timeout=120,
        what="the refresh after the MERGE",
    )
    run = stack.run(run_id)
    assert (run["state"], run["action"]) == ("SUCCEEDED", "INCREMENTAL"), (
        run["reason"],
        run["error"],
    )
    assert rows(made, "SELECT * FROM lake.shop.big_by_k") == rows(made, expected)


def test_a_continuous_table_over_such_a_view_streams_its_tables_and_follows_a_new_version(
    stack, made
):
    """The view is merged into the stream's query (a view is not a stream, its table is); a
    new version of the view recomputes the table with it, the history saying why."""
    statement(
        stack,
        "CREATE MATERIALIZED TABLE live_small FRESHNESS = INTERVAL '3' SECOND "
        "REFRESH_MODE = CONTINUOUS AS SELECT id, k FROM small_orders",
    )

    def follows(expected: str, what: str) -> None:
        stack.wait_for(
            lambda: rows(made, "SELECT * FROM lake.shop.live_small") == rows(made, expected),
            timeout=180,
            what=what,
            every=2,
        )

    follows("SELECT id, k FROM lake.shop.orders WHERE v <= 0.3", "the continuous table's load")
    made.sql("INSERT INTO lake.shop.orders VALUES (7, 'd', 0.2), (8, 'e', 0.9)")
    follows("SELECT id, k FROM lake.shop.orders WHERE v <= 0.3", "it to follow an append")
    assert (7, "d") in rows(made, "SELECT * FROM lake.shop.live_small")

    made.sql(
        "CREATE OR REPLACE VIEW lake.shop.small_orders AS "
        "SELECT id, k FROM lake.shop.orders WHERE v <= 0.5"
    )
    follows("SELECT id, k FROM lake.shop.orders WHERE v <= 0.5", "a new version of the view")
    reasons = [run["reason"] for run in runs(stack, f"{NS}.live_small")]
    assert any(f"the view {NS}.small_orders is at version 2" in r for r in reasons), reasons
    statement(stack, "ALTER MATERIALIZED TABLE live_small SUSPEND")


def test_a_name_that_is_neither_ours_nor_resolvable_is_an_error_naming_it(stack, made):
    made.sql("CREATE TABLE lake.shop.gone (id BIGINT) USING iceberg")
    made.sql("CREATE VIEW lake.shop.reads_gone AS SELECT id FROM lake.shop.gone")
    made.sql("DROP TABLE lake.shop.gone")
    response = stack.statements("SELECT * FROM reads_gone", namespace=NS)
    assert response.status_code == 400, response.text
    assert "lake`.`shop`.`gone" in response.text or "lake.shop.gone" in response.text, response.text
