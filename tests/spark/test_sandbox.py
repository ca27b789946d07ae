"""The Spark sandbox (runtime.spark.sandbox) decides on Spark's own analyzed plan: queries
analysts write pass, and every way out of the catalog's tables is refused with what and
where, whatever the text looks like. Run against the app's REST catalog (`lv`), in the
shared Spark session; nothing here executes a refused statement."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from catalog.core.errors import InvalidInput, SqlError
from refresh.spark import jobs
from runtime.spark import sandbox
from runtime.spark.session import session_with
from tests.live_server import CatalogServer
from tests.spark.conftest import rest_catalog_conf

NS = "sbx"


@pytest.fixture(scope="module")
def secret(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A file the worker can read, as the admin password file of `make run` is."""
    path = tmp_path_factory.mktemp("secret") / "admin-password.txt"
    path.write_text("s3cr3t-admin-password\n")
    return str(path)


def run_session(lv_spark: SparkSession, server: CatalogServer, **settings: str) -> SparkSession:
    """A refresh run's session (runtime.spark.session.session_with, which run_session makes
    after checking a user's settings) whose catalog `lv` is the app's REST catalog, as the
    worker's is; `settings` unchecked, to show that none undoes the sandbox's."""
    conf = {
        **rest_catalog_conf(server),
        "spark.sql.defaultCatalog": "lv",
        # A second Iceberg catalog configured in the same Spark: not the app's.
        "spark.sql.catalog.other": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.other.catalog-impl": "org.apache.iceberg.inmemory.InMemoryCatalog",
        **settings,
    }
    return session_with(lv_spark, catalog="lv", namespace=[NS], conf=conf)


@pytest.fixture(scope="module")
def session(lv_spark: SparkSession, catalog_server: CatalogServer) -> SparkSession:
    """A run session (the sandbox's settings, namespace sbx) over tables, views, views over
    views and a merge-on-read table; namespaces and columns named after keywords."""
    spark = lv_spark
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lv.{NS}")
    spark.sql("CREATE NAMESPACE IF NOT EXISTS lv.`inner`")
    spark.sql(f"CREATE TABLE IF NOT EXISTS lv.{NS}.orders (id BIGINT, ds STRING, amount DOUBLE)")
    spark.sql(f"CREATE TABLE IF NOT EXISTS lv.{NS}.customers (id BIGINT, region STRING)")
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS lv.{NS}.mor (id BIGINT, v STRING) TBLPROPERTIES "
        "('format-version' = '2', 'write.update.mode' = 'merge-on-read', "
        "'write.delete.mode' = 'merge-on-read', 'write.merge.mode' = 'merge-on-read')"
    )
    spark.sql(
        "CREATE TABLE IF NOT EXISTS lv.`inner`.`order` (`select` BIGINT, `group` STRING, "
        "`date` DATE, `timestamp` TIMESTAMP)"
    )
    spark.sql(f"INSERT INTO lv.{NS}.orders VALUES (1, '2024-01-01', 2.0), (2, '2024-01-02', 3.0)")
    spark.sql(f"INSERT INTO lv.{NS}.customers VALUES (1, 'eu'), (2, 'us')")
    spark.sql(f"INSERT INTO lv.{NS}.mor VALUES (1, 'a'), (2, 'b')")
    spark.sql(
        f"CREATE OR REPLACE VIEW lv.{NS}.big AS SELECT id, ds FROM lv.{NS}.orders WHERE amount > 1"
    )
    spark.sql(f"CREATE OR REPLACE VIEW lv.{NS}.big_eu AS SELECT b.* FROM lv.{NS}.big b")
    # Spark itself accepts a view that calls reflect(); reading it must still be refused.
    spark.sql(
        f"CREATE OR REPLACE VIEW lv.{NS}.sneaky AS "
        "SELECT id, reflect('java.lang.System', 'getProperty', 'user.home') AS home "
        f"FROM lv.{NS}.orders"
    )
    run = run_session(spark, catalog_server)
    run.sql("CREATE NAMESPACE IF NOT EXISTS other.vault")
    run.sql("CREATE TABLE IF NOT EXISTS other.vault.keys (k STRING)")
    run.sql("INSERT INTO other.vault.keys VALUES ('s3cr3t-key')")
    return run


def first_snapshot(session: SparkSession) -> int:
    return session.sql(
        f"SELECT snapshot_id FROM lv.{NS}.orders.snapshots ORDER BY committed_at LIMIT 1"
    ).collect()[0][0]


ALLOWED = [
    "SELECT * FROM orders",
    "SELECT o.id, c.region FROM orders o JOIN customers c ON o.id = c.id",
    "SELECT * FROM orders LEFT JOIN customers USING (id)",
    "SELECT ds, sum(amount) AS total, count(*) AS n FROM orders GROUP BY ds HAVING n > 0",
    "SELECT id, row_number() OVER (PARTITION BY ds ORDER BY amount DESC) AS r FROM orders",
    "SELECT id, sum(amount) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) "
    "FROM orders",
    "WITH daily AS (SELECT ds, sum(amount) AS t FROM orders GROUP BY ds) SELECT * FROM daily",
    "SELECT * FROM big",
    "SELECT * FROM big_eu WHERE ds > '2024-01-01'",
    "SELECT * FROM orders VERSION AS OF {snapshot}",
    "SELECT * FROM orders TIMESTAMP AS OF current_timestamp()",
    "SELECT id, (SELECT max(amount) FROM orders) AS top FROM customers",
    "SELECT * FROM customers WHERE id IN (SELECT id FROM orders)",
    "SELECT * FROM customers c WHERE EXISTS (SELECT 1 FROM orders o WHERE o.id = c.id)",
    "SELECT id, x FROM orders LATERAL VIEW explode(array(1, 2)) e AS x",
    "SELECT id FROM orders UNION ALL SELECT id FROM customers",
    "SELECT id FROM orders INTERSECT SELECT id FROM customers",
    "SELECT id FROM orders EXCEPT SELECT id FROM customers",
    "SELECT * FROM range(5)",
    "SELECT * FROM VALUES (1, 'a'), (2, 'b') AS v(id, name)",
    "SELECT /*+ BROADCAST(c) */ * FROM orders o JOIN customers c ON o.id = c.id",
    "SELECT CASE WHEN amount > 2 THEN 'big' ELSE 'small' END, CAST(ds AS DATE), "
    "date_format(to_date(ds), 'yyyy-MM'), regexp_replace(ds, '-', '') FROM orders",
    "SELECT transform(array(amount, amount), x -> x * 2), coalesce(ds, 'none') FROM orders",
    "SELECT snapshot_id, operation FROM lv.sbx.orders.snapshots",
    "SELECT lv.system.bucket(16, id) FROM orders",
    "SELECT ds, id, sum(amount) FROM orders GROUP BY ROLLUP (ds, id)",
    "SELECT * FROM orders TABLESAMPLE (50 PERCENT)",
    "SELECT * FROM (SELECT ds, amount FROM orders) PIVOT (sum(amount) FOR ds IN "
    "('2024-01-01', '2024-01-02'))",
    "SELECT `select`, `group`, `date`, `timestamp` FROM lv.`inner`.`order` WHERE `group` = 'x'",
    "SELECT * FROM orders ORDER BY amount DESC LIMIT 1",
    "SELECT DISTINCT ds FROM orders",
]


@pytest.mark.parametrize("sql", ALLOWED)
def test_queries_analysts_write_pass_the_sandbox(session: SparkSession, sql: str):
    frame = sandbox.query(session, sql.format(snapshot=first_snapshot(session)), catalog="lv")
    frame.limit(1).collect()


REFUSED = [
    # (query, a words of the refusal, line, column); {secret} is a file the worker can read.
    ("SELECT reflect('java.lang.System', 'getProperty', 'user.home')", "reflect()", 1, 8),
    ("SELECT id, upper(x) FROM (SELECT 1 id, java_method('java.lang.System', 'getenv', 'HOME') "
     "x)", "java_method()", 1, 40),
    ("SELECT xpath('<a>1</a>', 'a')", "xpath()", 1, 8),
    ("SELECT * FROM sneaky", "reflect() is not allowed", 1, 15),
    ("SELECT * FROM text.`{secret}`", "cannot be found", 1, 15),
    ("SELECT * FROM TEXT.`{secret}`", "cannot be found", 1, 15),
    ("SELECT * FROM text.`file://{secret}`", "cannot be found", 1, 15),
    ("SELECT * FROM text.`/proc/self/environ`", "cannot be found", 1, 15),
    ("SELECT * FROM csv.`{secret}`", "cannot be found", 1, 15),
    ("SELECT (SELECT concat_ws('|', collect_list(value)) FROM text.`{secret}`) AS s",
     "cannot be found", 1, 57),
    ("SELECT * FROM orders WHERE ds IN (SELECT value FROM text.`{secret}`)",
     "cannot be found", 1, 53),
    ("SELECT * FROM orders WHERE EXISTS (SELECT 1 FROM json.`{secret}`)", "cannot be found",
     1, 50),
    ("WITH s AS (SELECT * FROM text.`{secret}`) SELECT * FROM s", "cannot be found", 1, 26),
    ("SELECT * FROM orders o JOIN text.`{secret}` s ON true", "cannot be found", 1, 29),
    ("SELECT v FROM text.`{secret}` LATERAL VIEW explode(array(value)) e AS v",
     "cannot be found", 1, 15),
    ("SELECT /*+ BROADCAST(s) */ * FROM orders, text.`{secret}` s", "cannot be found", 1, 43),
    ("SELECT * FROM spark_catalog.default.secrets", "cannot be found", 1, 15),
    ("SELECT * FROM other.vault.keys", "other.vault.keys is not a table or view of this "
     "catalog (lv)", 1, 15),
    ("SET spark.sql.runSQLOnFiles=true", "SetCommand is a command", 1, 1),
    ("RESET", "is a command", 1, 1),
    ("SELECT 1; SELECT * FROM text.`{secret}`", "PARSE_SYNTAX_ERROR", 1, 11),
    ("INSERT INTO orders SELECT * FROM orders", "AppendData is a command", 1, 1),
    ("CREATE TEMPORARY FUNCTION f AS 'java.lang.String'", "is a command", 1, 1),
    ("ADD JAR /tmp/evil.jar", "is a command", 1, 1),
    ("CACHE TABLE orders", "is a command", 1, 1),
    ("CREATE TABLE evil AS SELECT * FROM orders", "is a command", 1, 1),
    ("DROP TABLE orders", "is a command", 1, 1),
    ("EXPLAIN SELECT * FROM orders", "is a command", 1, 1),
]  # fmt: skip


@pytest.mark.parametrize(("sql", "words", "line", "column"), REFUSED)
def test_ways_out_of_the_catalog_are_refused_with_what_and_where(
    session: SparkSession, secret: str, sql: str, words: str, line: int, column: int
):
    text = sql.format(secret=secret)
    with pytest.raises(SqlError) as refused:
        sandbox.query(session, text, catalog="lv")
    assert words in refused.value.message
    assert (refused.value.line, refused.value.column) == (line, column)
    assert "s3cr3t" not in refused.value.message
    assert sorted(r.id for r in session.table("orders").collect()) == [1, 2]


def test_user_defined_and_temporary_views_are_refused(session: SparkSession):
    session.udf.register("shout", lambda text: (text or "").upper())
    with pytest.raises(SqlError, match="shout is a user-defined function"):
        sandbox.query(session, "SELECT shout(ds) FROM orders", catalog="lv")
    session.range(3).createOrReplaceTempView("planted")
    with pytest.raises(SqlError, match="planted is not a table or view of this catalog"):
        sandbox.query(session, "SELECT * FROM planted", catalog="lv")
    # The app's own temporary views (a stream's batch) are read when it says so.
    frame = sandbox.query(session, "SELECT * FROM planted", catalog="lv", trusted_views=["planted"])
    assert frame.count() == 3


def test_a_data_change_runs_only_on_the_table_it_names(session: SparkSession, secret: str):
    def change(sql: str, target: str = "mor") -> None:
        jobs.run_statement(session, sql, catalog="lv", target=[NS, target])

    change("UPDATE mor SET v = 'changed' WHERE id = 1")
    change("DELETE FROM mor WHERE id = 2")
    change(
        "MERGE INTO mor t USING (SELECT id, region FROM customers) s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET t.v = s.region WHEN NOT MATCHED THEN INSERT (id, v) "
        "VALUES (s.id, s.region)"
    )
    assert sorted(tuple(r) for r in session.table("mor").collect()) == [(1, "eu"), (2, "us")]
    refusals = [
        ("DELETE FROM orders WHERE id = 1", "only lv.sbx.mor may be changed"),
        ("MERGE INTO customers c USING mor m ON c.id = m.id WHEN MATCHED THEN DELETE",
         "only lv.sbx.mor may be changed"),
        ("UPDATE mor SET v = reflect('java.lang.System', 'getProperty', 'user.home')",
         "reflect()"),
        (f"UPDATE mor SET v = (SELECT max(value) FROM text.`{secret}`)",
         "cannot be found"),
        ("SELECT * FROM mor", "Expected an UPDATE, DELETE or MERGE of lv.sbx.mor"),
        ("SET spark.sql.runSQLOnFiles=true", "Expected an UPDATE, DELETE or MERGE"),
    ]  # fmt: skip
    for sql, words in refusals:
        with pytest.raises(SqlError) as refused:
            change(sql)
        assert words in refused.value.message, sql
    assert sorted(tuple(r) for r in session.table("orders").collect())[0][0] == 1
    assert sorted(tuple(r) for r in session.table("mor").collect()) == [(1, "eu"), (2, "us")]


def test_run_options_cannot_turn_sql_on_files_back_on(
    session: SparkSession, lv_spark: SparkSession, catalog_server: CatalogServer, tmp_path: Path
):
    secret = tmp_path / "key.txt"
    secret.write_text("k3y\n")
    run = run_session(lv_spark, catalog_server, **{"spark.sql.runSQLOnFiles": "true"})
    assert run.conf.get("spark.sql.runSQLOnFiles") == "false"
    # Spark itself refuses, even for SQL that never meets the sandbox's plan check.
    with pytest.raises(Exception, match="TABLE_OR_VIEW_NOT_FOUND"):
        run.sql(f"SELECT * FROM text.`{secret}`").collect()


def test_every_setting_a_run_may_take_is_sparks_own_and_spark_takes_the_values_passed(
    session: SparkSession, lv_spark: SparkSession, catalog_server: CatalogServer
):
    from refresh.core.options import RUN_SETTINGS, check_run_options

    jvm = lv_spark._jvm  # noqa: SLF001 - Spark's own list of its settings
    confs = jvm.org.apache.spark.sql.internal.SQLConf.get().getAllDefinedConfs()
    listed = jvm.scala.collection.JavaConverters.seqAsJavaListConverter(confs).asJava()
    # openCostInBytes is internal, so not listed, but Spark's.
    defined = {str(entry._1()) for entry in listed} | {"spark.sql.files.openCostInBytes"}
    assert not set(RUN_SETTINGS) - defined
    # The extremes each setting takes, as passed: Spark's own converters accept them.
    for key in RUN_SETTINGS:
        for candidate in (
            "true",
            "false",
            "0",
            "1",
            "0.5",
            "0.999",
            "100000",
            "1000000",
            "1m",
            "1t",
        ):
            try:
                value = check_run_options({key: candidate})[key]
            except InvalidInput:
                continue
            run = run_session(lv_spark, catalog_server, **{key: value})
            assert run.conf.get(key) == value, key
