"""Spark uses the app as its Iceberg REST catalog (`lv`): tables, views, the management API
and concurrent writers, all against the real app served by gunicorn."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import requests
from pyspark.sql import SparkSession

from tests.live_server import CatalogServer


def rows(spark: SparkSession, sql: str) -> list[tuple]:
    return [tuple(row) for row in spark.sql(sql).collect()]


def load(http: requests.Session, server: CatalogServer, kind: str, ns: str, name: str) -> dict:
    response = http.get(f"{server.iceberg_uri}/v1/namespaces/{ns}/{kind}/{name}", timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def local_path(location: str) -> Path:
    return Path(location.removeprefix("file://").removeprefix("file:"))


def test_spark_runs_the_table_and_view_lifecycle_against_the_app(
    lv_spark: SparkSession, catalog_server: CatalogServer, iceberg_http: requests.Session
) -> None:
    spark = lv_spark
    spark.sql("CREATE NAMESPACE lv.life")
    assert ("life",) in rows(spark, "SHOW NAMESPACES IN lv")

    # A partitioned table, written and read back.
    spark.sql(
        "CREATE TABLE lv.life.events (id BIGINT, ts TIMESTAMP, kind STRING) USING iceberg "
        "PARTITIONED BY (days(ts))"
    )
    spark.sql(
        "INSERT INTO lv.life.events VALUES "
        "(1, TIMESTAMP '2024-01-01 10:00:00', 'click'), "
        "(2, TIMESTAMP '2024-01-01 11:00:00', 'view'), "
        "(3, TIMESTAMP '2024-01-02 09:00:00', 'click')"
    )
    assert rows(spark, "SELECT id, kind FROM lv.life.events ORDER BY id") == [
        (1, "click"),
        (2, "view"),
        (3, "click"),
    ]
    assert rows(
        spark, "SELECT partition.ts_day, record_count FROM lv.life.events.partitions ORDER BY 1"
    ) == [(date(2024, 1, 1), 2), (date(2024, 1, 2), 1)]

    # Schema evolution: the new column is there, empty for the old rows.
    spark.sql("ALTER TABLE lv.life.events ADD COLUMN amount DOUBLE")
    assert "amount" in [r.col_name for r in spark.sql("DESCRIBE TABLE lv.life.events").collect()]
    spark.sql("INSERT INTO lv.life.events VALUES (4, TIMESTAMP '2024-01-02 12:00:00', 'buy', 9.5)")
    assert rows(spark, "SELECT id, amount FROM lv.life.events ORDER BY id") == [
        (1, None),
        (2, None),
        (3, None),
        (4, 9.5),
    ]

    # A merge-on-read DELETE writes a delete file instead of rewriting the data file.
    spark.sql("ALTER TABLE lv.life.events SET TBLPROPERTIES ('write.delete.mode'='merge-on-read')")
    table = load(iceberg_http, catalog_server, "tables", "life", "events")
    assert table["metadata"]["properties"]["write.delete.mode"] == "merge-on-read"
    spark.sql("DELETE FROM lv.life.events WHERE id = 2")
    assert [r[0] for r in rows(spark, "SELECT id FROM lv.life.events ORDER BY id")] == [1, 3, 4]
    [summary] = rows(
        spark, "SELECT summary FROM lv.life.events.snapshots ORDER BY committed_at DESC LIMIT 1"
    )[0]
    assert summary.get("added-delete-files") == "1", summary
    assert summary.get("added-position-deletes") == "1", summary
    assert rows(spark, "SELECT count(*) FROM lv.life.events.delete_files") == [(1,)]

    # A view with column aliases and comments.
    spark.sql(
        "CREATE VIEW lv.life.clicks (event_id COMMENT 'the event', what COMMENT 'its kind') "
        "COMMENT 'events, renamed' AS SELECT id, kind FROM life.events"
    )
    view_rows = spark.sql("SELECT * FROM lv.life.clicks ORDER BY event_id")
    assert view_rows.columns == ["event_id", "what"]
    assert [tuple(r) for r in view_rows.collect()] == [(1, "click"), (3, "click"), (4, "buy")]
    described = {r.col_name: r.comment for r in spark.sql("DESCRIBE lv.life.clicks").collect()}
    assert described["event_id"] == "the event"
    assert described["what"] == "its kind"

    loaded = load(iceberg_http, catalog_server, "views", "life", "clicks")["metadata"]
    assert loaded["properties"]["comment"] == "events, renamed"
    [schema] = loaded["schemas"]
    assert [(f["name"], f.get("doc")) for f in schema["fields"]] == [
        ("event_id", "the event"),
        ("what", "its kind"),
    ]
    [version] = loaded["versions"]
    [representation] = version["representations"]
    assert representation["dialect"] == "spark"
    assert "life.events" in representation["sql"]

    # CREATE OR REPLACE VIEW: a second version becomes current.
    spark.sql(
        "CREATE OR REPLACE VIEW lv.life.clicks (event_id COMMENT 'the event', what) "
        "COMMENT 'clicks only' AS SELECT id, kind FROM life.events WHERE kind = 'click'"
    )
    assert rows(spark, "SELECT event_id, what FROM lv.life.clicks ORDER BY event_id") == [
        (1, "click"),
        (3, "click"),
    ]
    loaded = load(iceberg_http, catalog_server, "views", "life", "clicks")["metadata"]
    assert len(loaded["versions"]) == 2
    assert len(loaded["version-log"]) == 2
    assert loaded["current-version-id"] == loaded["version-log"][-1]["version-id"]
    assert loaded["properties"]["comment"] == "clicks only"

    spark.sql("ALTER VIEW lv.life.clicks SET TBLPROPERTIES ('team'='growth')")
    properties = dict(rows(spark, "SHOW TBLPROPERTIES lv.life.clicks"))
    assert properties["team"] == "growth"
    loaded = load(iceberg_http, catalog_server, "views", "life", "clicks")["metadata"]
    assert loaded["properties"]["team"] == "growth"
    assert len(loaded["version-log"]) == 2  # properties are not a new version

    assert [r.viewName for r in spark.sql("SHOW VIEWS IN lv.life").collect()] == ["clicks"]
    spark.sql("DROP VIEW lv.life.clicks")
    assert spark.sql("SHOW VIEWS IN lv.life").collect() == []
    gone = iceberg_http.get(f"{catalog_server.iceberg_uri}/v1/namespaces/life/views/clicks")
    assert gone.status_code == 404
    assert gone.json()["error"]["type"] == "NoSuchViewException"

    # DROP TABLE PURGE forgets the table and deletes its files. Spark's Iceberg catalog
    # purges by itself (it drops without `purgeRequested`, then deletes every reachable
    # file through its FileIO), so on a local warehouse the emptied folders stay.
    metadata = load(iceberg_http, catalog_server, "tables", "life", "events")["metadata"]
    table_dir = local_path(metadata["location"])
    assert catalog_server.warehouse in table_dir.parents
    assert list(table_dir.rglob("*.parquet"))
    spark.sql("DROP TABLE lv.life.events PURGE")
    assert spark.sql("SHOW TABLES IN lv.life").collect() == []
    assert [p for p in table_dir.rglob("*") if p.is_file()] == []
    gone = iceberg_http.get(f"{catalog_server.iceberg_uri}/v1/namespaces/life/tables/events")
    assert gone.status_code == 404
    spark.sql("DROP NAMESPACE lv.life")
    assert ("life",) not in rows(spark, "SHOW NAMESPACES IN lv")


def test_a_view_created_in_the_browser_is_queried_from_spark_and_its_rollback_too(
    lv_spark: SparkSession, catalog_server: CatalogServer
) -> None:
    spark = lv_spark
    spark.sql("CREATE NAMESPACE lv.shop")
    spark.sql("CREATE TABLE lv.shop.orders (id BIGINT, region STRING, amount DOUBLE) USING iceberg")
    spark.sql("INSERT INTO lv.shop.orders VALUES (1, 'eu', 10.0), (2, 'us', 20.0), (3, 'eu', 5.0)")

    # Created in the browser's way: the "New view" form, submitted with its CSRF token.
    browser = catalog_server.browser_session()
    submitted = catalog_server.submit_form(
        browser,
        "/namespaces/shop/views/new",
        {
            "name": "revenue",
            "sql": "SELECT region, SUM(amount) AS revenue FROM shop.orders GROUP BY region",
            "dialect": "spark",
            "comment": "revenue by region",
        },
    )
    assert submitted.status_code == 200, submitted.text
    assert submitted.url.endswith("/namespaces/shop/views/revenue/"), submitted.url

    api = catalog_server.api_session()
    views_url = f"{catalog_server.base_url}/api/namespaces/shop/views/"
    created = api.get(f"{views_url}revenue/", timeout=60)
    assert created.status_code == 200, created.text
    # The app types the view from the table's schema, so Spark reads doubles, not strings.
    schema = created.json()["schema"]["fields"]
    assert [(f["name"], f["type"]) for f in schema] == [("region", "string"), ("revenue", "double")]
    first_version = created.json()["current_version_id"]
    revenue = "SELECT region, revenue FROM lv.shop.revenue ORDER BY region"
    assert rows(spark, revenue) == [("eu", 15.0), ("us", 20.0)]

    replaced = api.put(
        f"{views_url}revenue/",
        json={
            "sql": "SELECT region, SUM(amount) AS revenue FROM shop.orders "
            "WHERE amount > 6 GROUP BY region",
            "dialect": "spark",
        },
        timeout=60,
    )
    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["current_version_id"] != first_version
    assert rows(spark, revenue) == [("eu", 10.0), ("us", 20.0)]

    # The rollback is made in the browser's way: the confirmation page, then its form.
    confirmed = catalog_server.submit_form(
        browser, f"/namespaces/shop/views/revenue/rollback/{first_version}"
    )
    assert confirmed.status_code == 200, confirmed.text
    assert f"rolled back to version {first_version}" in confirmed.text
    current = api.get(f"{views_url}revenue/", timeout=60).json()
    assert current["current_version_id"] == first_version
    assert rows(spark, revenue) == [("eu", 15.0), ("us", 20.0)]


def _events(api: requests.Session, server: CatalogServer) -> list[dict[str, Any]]:
    response = api.get(f"{server.base_url}/api/history/", params={"page_size": 500}, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()["results"]


def test_two_spark_sessions_appending_at_once_lose_no_rows(
    lv_spark: SparkSession,
    new_lv_session: Callable[[], SparkSession],
    catalog_server: CatalogServer,
) -> None:
    lv_spark.sql("CREATE NAMESPACE lv.race")
    lv_spark.sql(
        "CREATE TABLE lv.race.hits (id INT, writer STRING) USING iceberg TBLPROPERTIES ("
        "'commit.retry.num-retries'='50', 'commit.retry.min-wait-ms'='10', "
        "'commit.retry.max-wait-ms'='200')"
    )
    commits_per_writer = 20
    # Each session has its own catalog instance (its own token, its own view of the table).
    sessions = {"a": new_lv_session(), "b": new_lv_session()}
    start = threading.Barrier(len(sessions))
    errors: list[BaseException] = []

    def append(writer: str, session: SparkSession, offset: int) -> None:
        try:
            start.wait()
            for i in range(commits_per_writer):
                session.sql(f"INSERT INTO lv.race.hits VALUES ({offset + i}, '{writer}')")
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    threads = [
        threading.Thread(target=append, args=(writer, session, n * commits_per_writer))
        for n, (writer, session) in enumerate(sessions.items())
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors, errors
    assert not any(thread.is_alive() for thread in threads)

    total = commits_per_writer * len(sessions)
    assert rows(lv_spark, "SELECT count(*) FROM lv.race.hits") == [(total,)]
    ids = {r[0] for r in rows(lv_spark, "SELECT id FROM lv.race.hits")}
    assert ids == set(range(total))
    appends = rows(
        lv_spark,
        "SELECT count(*), sum(CAST(summary['added-records'] AS INT)) "
        "FROM lv.race.hits.snapshots WHERE operation = 'append'",
    )
    assert appends == [(total, total)]

    events = _events(catalog_server.api_session(), catalog_server)
    commits = [
        e for e in events if e["action"] == "commit_table" and e["object_name"] == "race.hits"
    ]
    ok = [e for e in commits if e["result"] == "ok"]
    conflicts = [e for e in commits if e["result"] == "conflict"]
    assert len(ok) == total
    print(f"{len(conflicts)} of {len(commits)} commits to race.hits ended as a conflict")
    # Two writers racing on two cores collide: the losers got 409, refreshed and retried.
    assert conflicts, "no commit conflicted: the writers did not overlap"


def test_spark_views_over_keyword_names_are_stored_as_spark_sent_them(
    lv_spark: SparkSession, catalog_server: CatalogServer, iceberg_http: requests.Session
) -> None:
    # Spark parses and analyzes these names (sqlglot cannot read `inner` or `select` as
    # namespaces): the catalog is never stricter than the engine.
    spark = lv_spark
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lv.kw")
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lv.kw.inner")
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lv.select")
    spark.sql(
        "CREATE TABLE lv.kw.inner.t (left BIGINT, right STRING, order INT, group STRING, "
        "select INT, date DATE, timestamp TIMESTAMP)"
    )
    spark.sql(
        "INSERT INTO lv.kw.inner.t VALUES (1, 'r', 2, 'g', 3, DATE'2024-01-01', "
        "TIMESTAMP'2024-01-01 00:00:00')"
    )
    columns = "left, right, order, group, select, date, timestamp"
    spark.sql(f"CREATE VIEW lv.kw.inner.v AS SELECT {columns} FROM lv.kw.inner.t")
    spark.sql("CREATE VIEW lv.select.v AS SELECT left AS inner FROM lv.kw.inner.v")
    assert rows(spark, "SELECT inner FROM lv.select.v") == [(1,)]
    assert rows(spark, "SELECT order, group FROM lv.kw.inner.v") == [(2, "g")]

    metadata = load(iceberg_http, catalog_server, "views", "kw%1Finner", "v")["metadata"]
    [version] = metadata["versions"]
    assert version["representations"] == [
        {"type": "sql", "sql": f"SELECT {columns} FROM lv.kw.inner.t", "dialect": "spark"}
    ]
    api = catalog_server.api_session()
    [stored] = api.get(
        f"{catalog_server.base_url}/api/namespaces/kw.inner/views/v/versions/", timeout=30
    ).json()
    assert stored["transpiled"] is False and stored["sql_error"]
    spark.sql("DROP VIEW lv.select.v")
    spark.sql("DROP VIEW lv.kw.inner.v")


def test_a_table_spark_dropped_comes_back_with_its_rows_and_a_purged_one_does_not(
    lv_spark: SparkSession, catalog_server: CatalogServer
):
    lv_spark.sql("CREATE NAMESPACE IF NOT EXISTS lv.undrop")
    lv_spark.sql("CREATE TABLE lv.undrop.orders (id BIGINT, region STRING)")
    lv_spark.sql("INSERT INTO lv.undrop.orders VALUES (1, 'eu'), (2, 'us')")
    lv_spark.sql("CREATE TABLE lv.undrop.scratch (id BIGINT)")
    lv_spark.sql("INSERT INTO lv.undrop.scratch VALUES (1)")
    lv_spark.sql("DROP TABLE lv.undrop.orders")  # Spark's drop: purgeRequested=false
    lv_spark.sql("DROP TABLE lv.undrop.scratch PURGE")

    api = catalog_server.api_session()
    base = f"{catalog_server.base_url}/api/namespaces/undrop/dropped/"
    listed = api.get(base, timeout=30).json()
    assert [(d["name"], d["kind"]) for d in listed] == [("orders", "table")]
    restored = api.post(f"{base}{listed[0]['uuid']}/restore", json={}, timeout=30)
    assert restored.status_code == 201, restored.text
    lv_spark.sql("REFRESH TABLE lv.undrop.orders")
    assert sorted(rows(lv_spark, "SELECT id, region FROM lv.undrop.orders")) == [
        (1, "eu"),
        (2, "us"),
    ]
    # Written to again, like any table.
    lv_spark.sql("INSERT INTO lv.undrop.orders VALUES (3, 'eu')")
    assert rows(lv_spark, "SELECT count(*) FROM lv.undrop.orders") == [(3,)]


def test_a_ctas_reports_its_commit_metrics_without_an_error(
    lv_spark: SparkSession, catalog_server: CatalogServer
) -> None:
    """Spark reports a CTAS's commit while its create is still staged (no table yet): the
    report is accepted (204) like every other, so Spark logs no RESTException for it."""
    spark = lv_spark
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lv.reports")
    before = catalog_server.log_path.read_text(errors="replace").count("\n")

    spark.sql("CREATE TABLE lv.reports.copied USING iceberg AS SELECT 1 AS id, 'a' AS kind")
    assert rows(spark, "SELECT id, kind FROM lv.reports.copied") == [(1, "a")]

    log = catalog_server.log_path.read_text(errors="replace").splitlines()[before:]
    reports = [line for line in log if "/tables/copied/metrics" in line]
    assert reports, "Spark sent the CTAS's commit report"
    assert all('" 204 ' in line for line in reports), reports
