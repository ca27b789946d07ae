"""Console queries in Spark (refresh.spark.query): every kind a user may run (SELECT, WITH,
VALUES, TABLE, time travel, DESCRIBE, SHOW COLUMNS, DESCRIBE QUERY, EXPLAIN) answers through
the sandbox with its columns and what it reads; every hostile input the sandbox's own tests
try fails the same way through SELECT, EXPLAIN and DESCRIBE, before Spark runs a job; and
nothing a query statement says changes data. In the shared Spark session, over the app's
REST catalog (`lv`)."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from catalog.core.errors import SqlError
from refresh.spark import query
from runtime.spark.session import session_with
from tests.live_server import CatalogServer
from tests.spark.conftest import rest_catalog_conf, rest_session
from tests.spark.test_sandbox import REFUSED

NS = "qx"


@pytest.fixture(scope="module")
def secret(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("query-secret") / "admin-password.txt"
    path.write_text("s3cr3t-admin-password\n")
    return str(path)


@pytest.fixture(scope="module")
def session(spark: SparkSession, catalog_server: CatalogServer) -> SparkSession:
    """A worker's run session in namespace qx: a table with a commented column and three
    snapshots, a view, a view whose SQL calls reflect(), and another catalog's table. The
    set-up runs in a session of its own (its own catalog instances), not the shared
    `lv_spark`: in a full run, that one's `lv` answered "Connection refused" here after other
    modules had used it, while this module passed alone."""
    spark = rest_session(spark, catalog_server)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS lv.{NS}")
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS lv.{NS}.orders (id BIGINT COMMENT 'the order', "
        "ds STRING, amount DECIMAL(10, 2))"
    )
    spark.sql(f"CREATE TABLE IF NOT EXISTS lv.{NS}.customers (id BIGINT, region STRING)")
    spark.sql(f"INSERT INTO lv.{NS}.orders VALUES (1, '2024-01-01', 2.50)")
    spark.sql(f"INSERT INTO lv.{NS}.orders VALUES (2, '2024-01-02', 3.00)")
    spark.sql(f"INSERT INTO lv.{NS}.customers VALUES (1, 'eu'), (2, 'us')")
    spark.sql(f"CREATE OR REPLACE VIEW lv.{NS}.big AS SELECT id, ds FROM lv.{NS}.orders")
    spark.sql(
        f"CREATE OR REPLACE VIEW lv.{NS}.sneaky AS SELECT id, "
        "reflect('java.lang.System', 'getProperty', 'user.home') AS home "
        f"FROM lv.{NS}.orders"
    )
    conf = {
        **rest_catalog_conf(catalog_server),
        "spark.sql.defaultCatalog": "lv",
        "spark.sql.catalog.other": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.other.catalog-impl": "org.apache.iceberg.inmemory.InMemoryCatalog",
    }
    run = session_with(spark, catalog="lv", namespace=[NS], conf=conf)
    run.sql("CREATE NAMESPACE IF NOT EXISTS other.vault")
    run.sql("CREATE TABLE IF NOT EXISTS other.vault.keys (k STRING)")
    return run


def snapshots(session: SparkSession) -> list[tuple[int, datetime.datetime]]:
    return [
        (row[0], row[1])
        for row in session.sql(
            f"SELECT snapshot_id, committed_at FROM lv.{NS}.orders.snapshots ORDER BY committed_at"
        ).collect()
    ]


def answer(session: SparkSession, sql: str, max_rows: int = 100) -> tuple[query.Prepared, list]:
    prepared = query.prepare(session, sql, catalog="lv", namespace=[NS])
    table = query.fetch(prepared, max_rows=max_rows)
    # By position: a join's columns may share a name.
    columns = [column.to_pylist() for column in table.columns]
    return prepared, [list(row) for row in zip(*columns, strict=True)]


KINDS = [
    # (statement, kind, columns, rows, reads)
    ("SELECT id, ds FROM orders ORDER BY id", "SELECT",
     [("id", "bigint"), ("ds", "string")], [[1, "2024-01-01"], [2, "2024-01-02"]],
     [(NS, "orders")]),
    ("WITH d AS (SELECT ds, sum(amount) AS t FROM orders GROUP BY ds) SELECT * FROM d "
     "ORDER BY ds", "SELECT", [("ds", "string"), ("t", "decimal(20,2)")], None, [(NS, "orders")]),
    ("VALUES (1, 'a'), (2, 'b')", "SELECT", [("col1", "int"), ("col2", "string")],
     [[1, "a"], [2, "b"]], []),
    ("TABLE customers", "SELECT", [("id", "bigint"), ("region", "string")], None,
     [(NS, "customers")]),
    ("SELECT o.id, c.id FROM orders o JOIN customers c ON o.id = c.id ORDER BY 1", "SELECT",
     [("id", "bigint"), ("id", "bigint")], [[1, 1], [2, 2]], [(NS, "orders"), (NS, "customers")]),
    ("SELECT count(*) AS n FROM orders FOR VERSION AS OF {first}", "SELECT",
     [("n", "bigint")], [[1]], [(NS, "orders")]),
    ("SELECT count(*) AS n FROM orders FOR TIMESTAMP AS OF '{first_at}'", "SELECT",
     [("n", "bigint")], [[1]], [(NS, "orders")]),
    ("SELECT * FROM big ORDER BY id", "SELECT", [("id", "bigint"), ("ds", "string")], None,
     [(NS, "big")]),
    ("SELECT make_interval(1, 2) AS i, INTERVAL '1' YEAR AS y", "SELECT",
     [("i", "interval"), ("y", "interval year")], [["1 years 2 months", "INTERVAL '1' YEAR"]], []),
    ("DESCRIBE orders", "DESCRIBE",
     [("col_name", "string"), ("data_type", "string"), ("comment", "string")],
     [["id", "bigint", "the order"], ["ds", "string", None], ["amount", "decimal(10,2)", None]],
     [(NS, "orders")]),
    # A column's comment goes with it through a view and a query, as in Spark's own DESCRIBE.
    ("DESC TABLE lv.qx.big", "DESCRIBE", None,
     [["id", "bigint", "the order"], ["ds", "string", None]],
     [(NS, "big")]),
    ("DESCRIBE QUERY SELECT id, amount * 2 AS twice FROM orders", "DESCRIBE", None,
     [["id", "bigint", "the order"], ["twice", "decimal(12,2)", None]], [(NS, "orders")]),
    ("SHOW COLUMNS FROM customers", "SHOW COLUMNS", [("col_name", "string")],
     [["id"], ["region"]], [(NS, "customers")]),
    ("SHOW COLUMNS IN customers IN qx", "SHOW COLUMNS", None, [["id"], ["region"]],
     [(NS, "customers")]),
]  # fmt: skip


@pytest.mark.parametrize(("sql", "kind", "columns", "rows", "reads"), KINDS)
def test_each_kind_of_query_answers_with_its_columns_rows_and_what_it_reads(
    session: SparkSession, sql, kind, columns, rows, reads
):
    first, first_at = snapshots(session)[0]
    text = sql.format(first=first, first_at=first_at.isoformat(sep=" "))
    prepared, got = answer(session, text)
    assert prepared.kind == kind
    if columns is not None:
        assert prepared.columns == columns
    if rows is not None:
        assert got == rows
    assert prepared.reads == reads


@pytest.mark.parametrize("mode", ["", "EXTENDED ", "FORMATTED ", "COST "])
def test_explain_gives_sparks_plan_as_text_and_runs_nothing(session: SparkSession, mode: str):
    group = f"explain-{uuid.uuid4().hex}"
    session.sparkContext.setJobGroup(group, "explain")
    prepared, rows = answer(session, f"EXPLAIN {mode}SELECT * FROM orders WHERE id = 1")
    assert (prepared.kind, prepared.columns, prepared.reads) == (
        "EXPLAIN", [("plan", "string")], [(NS, "orders")]
    )  # fmt: skip
    [[plan]] = rows
    assert "BatchScan" in plan and "Physical Plan" in plan
    if mode == "EXTENDED ":
        assert "== Analyzed Logical Plan ==" in plan
    assert list(session.sparkContext.statusTracker().getJobIdsForGroup(group)) == []


def test_a_query_reads_through_its_own_session_whatever_session_is_active_on_the_thread(
    spark: SparkSession, session: SparkSession, catalog_server: CatalogServer
):
    """The JVM keeps an active session per thread, and Spark's catalog manager reads the
    default catalog's name, and loads a catalog, with the settings of that session, not its
    own, when called outside the session's own calls. A thread (an earlier test's, a
    streaming host's) may hold another session: here one whose default catalog is a server
    that is not there."""
    elsewhere = spark.newSession()
    elsewhere.conf.set("spark.sql.catalog.gone", "org.apache.iceberg.spark.SparkCatalog")
    elsewhere.conf.set("spark.sql.catalog.gone.type", "rest")
    elsewhere.conf.set("spark.sql.catalog.gone.uri", "http://127.0.0.1:9/iceberg")
    elsewhere.conf.set("spark.sql.defaultCatalog", "gone")
    jvm = spark._jvm  # noqa: SLF001
    was = jvm.org.apache.spark.sql.SparkSession.getActiveSession()
    conf = {**rest_catalog_conf(catalog_server), "spark.sql.defaultCatalog": "lv"}
    run = session_with(spark, catalog="lv", namespace=[NS], conf=conf)
    jvm.org.apache.spark.sql.SparkSession.setActiveSession(elsewhere._jsparkSession)  # noqa: SLF001
    try:
        prepared, rows = answer(run, "SELECT id FROM big ORDER BY id")
    finally:
        if was.isDefined():
            jvm.org.apache.spark.sql.SparkSession.setActiveSession(was.get())
        else:
            jvm.org.apache.spark.sql.SparkSession.clearActiveSession()
    assert (prepared.reads, rows) == ([(NS, "big")], [[1], [2]])


def test_a_result_is_fetched_one_row_past_its_bound_so_that_a_cut_is_known(session):
    prepared = query.prepare(session, "SELECT id FROM range(10)", catalog="lv", namespace=[NS])
    assert query.fetch(prepared, max_rows=3).num_rows == 4
    empty = query.prepare(
        session, "SELECT id, ds FROM orders WHERE id < 0", catalog="lv", namespace=[NS]
    )
    fetched = query.fetch(empty, max_rows=3)
    assert (fetched.num_rows, fetched.column_names) == (0, ["id", "ds"])


def _hostile(secret: str) -> Iterator[tuple[str, str, int, int]]:
    """test_sandbox's refused statements, less the one this path allows (EXPLAIN of a query)."""
    for sql, words, line, column in REFUSED:
        if sql.startswith("EXPLAIN"):
            continue
        yield sql.format(secret=secret), words, line, column


#: The names DESCRIBE and SHOW COLUMNS may be given: files through every reader, other
#: catalogs, a view whose SQL calls reflect(); each refused as a SELECT * of it is.
HOSTILE_NAMES = [
    ("text.`{secret}`", "cannot be found"),
    ("TEXT.`file://{secret}`", "cannot be found"),
    ("csv.`{secret}`", "cannot be found"),
    ("json.`/proc/self/environ`", "cannot be found"),
    ("parquet.`{secret}`", "cannot be found"),
    ("spark_catalog.default.secrets", "cannot be found"),
    ("other.vault.keys", "other.vault.keys is not a table or view of this catalog (lv)"),
    ("sneaky", "reflect() is not allowed"),
]


def refused(session: SparkSession, sql: str) -> SqlError:
    """The refusal of `sql`, asserting that Spark ran no job for it (nothing was read)."""
    group = f"refused-{uuid.uuid4().hex}"
    session.sparkContext.setJobGroup(group, "refused")
    with pytest.raises(SqlError) as error:
        prepared = query.prepare(session, sql, catalog="lv", namespace=[NS])
        query.fetch(prepared, max_rows=10)
    assert list(session.sparkContext.statusTracker().getJobIdsForGroup(group)) == [], sql
    assert "s3cr3t" not in error.value.message
    return error.value


@pytest.mark.parametrize(
    ("prefix", "form"),
    [("", "SELECT"), ("EXPLAIN ", "EXPLAIN"), ("EXPLAIN EXTENDED ", "EXPLAIN"),
     ("DESCRIBE QUERY ", "DESCRIBE QUERY")],
)  # fmt: skip
def test_every_hostile_statement_fails_the_same_way_through_each_form(
    session: SparkSession, secret: str, prefix: str, form: str
):
    """Each refusal says what test_sandbox's does, at the same place in the user's text."""
    for sql, words, line, column in _hostile(secret):
        if form == "DESCRIBE QUERY" and not sql.lstrip().upper().startswith(("SELECT", "WITH")):
            continue  # DESCRIBE QUERY takes a query only: a command is a parse error there
        error = refused(session, prefix + sql)
        assert words in error.message, (form, sql, error.message)
        shift = len(prefix) if line == 1 else 0
        assert (error.line, error.column) == (line, column + shift), (form, sql)
    assert sorted(r.id for r in session.table("orders").collect()) == [1, 2]


@pytest.mark.parametrize(
    "form", ["DESCRIBE {name}", "DESC TABLE {name}", "SHOW COLUMNS FROM {name}"]
)
def test_describe_and_show_columns_refuse_every_hostile_name_as_a_select_does(
    session: SparkSession, secret: str, form: str
):
    for name, words in HOSTILE_NAMES:
        name = name.format(secret=secret)
        assert words in refused(session, form.format(name=name)).message, (form, name)
        assert words in refused(session, f"SELECT * FROM {name}").message, name


#: What a viewer might try to change data with through the statements a query may be.
WRITES = [
    ("EXPLAIN INSERT INTO orders SELECT * FROM orders", "is a command"),
    ("EXPLAIN DELETE FROM orders", "is a command"),
    ("EXPLAIN UPDATE orders SET ds = 'x'", "is a command"),
    ("EXPLAIN MERGE INTO orders o USING customers c ON o.id = c.id WHEN MATCHED THEN DELETE",
     "is a command"),
    ("EXPLAIN CREATE TABLE evil AS SELECT * FROM orders", "is a command"),
    ("EXPLAIN DROP TABLE orders", "is a command"),
    ("EXPLAIN CACHE TABLE orders", "is a command"),
    ("EXPLAIN SET spark.sql.runSQLOnFiles=true", "is a command"),
    ("WITH x AS (SELECT 1) INSERT INTO orders SELECT id, ds, amount FROM orders",
     "is a command"),
    ("INSERT OVERWRITE orders SELECT * FROM orders", "is a command"),
    ("FROM orders INSERT INTO orders SELECT *", "is a command"),
    ("DELETE FROM orders", "is a command"),
    ("DESCRIBE QUERY INSERT INTO orders SELECT * FROM orders", "PARSE_SYNTAX_ERROR"),
    ("SELECT * FROM orders; DROP TABLE orders", "PARSE_SYNTAX_ERROR"),
    ("CALL lv.system.rollback_to_snapshot('qx.orders', 1)", "is a command"),
    # Spark's parser has no EXPLAIN of a CALL: it refuses it before anything is analyzed.
    ("EXPLAIN CALL lv.system.expire_snapshots('qx.orders')", "PARSE_SYNTAX_ERROR"),
    ("ALTER TABLE orders ADD COLUMN x INT", "is a command"),
    ("DESCRIBE orders PARTITION (ds = '2024-01-01')", "DESCRIBE of a partition"),
]  # fmt: skip


def test_no_query_statement_changes_data(session: SparkSession):
    before = snapshots(session)
    for sql, words in WRITES:
        assert words in refused(session, sql).message, sql
    assert snapshots(session) == before
    assert [c.name for c in session.table("orders").schema.fields] == ["id", "ds", "amount"]
    assert "evil" not in [t.name for t in session.catalog.listTables(f"lv.{NS}")]


#: Plain reads (refresh.core.plain_reads): the previews' in-process reader answers them
#: on a worker without Spark.
PLAIN = [
    "SELECT * FROM orders WHERE id = 2",
    "SELECT id, ds FROM orders WHERE amount >= 2.50 AND ds IS NOT NULL",
    "SELECT id FROM orders WHERE id IN (1, 7) OR ds = '2024-01-02'",
    "SELECT amount, id FROM orders WHERE amount < 3 AND id <> 5",
    "SELECT * FROM customers LIMIT 10",
    "SELECT region FROM customers WHERE region > 'eu'",
]


def test_a_plain_read_gives_the_same_rows_in_process_as_spark_does(
    session: SparkSession, catalog_server: CatalogServer
):
    from pyiceberg.catalog.rest import RestCatalog

    from catalog.core import preview
    from refresh.core import plain_reads, results

    catalog = RestCatalog("q", uri=catalog_server.iceberg_uri, credential=catalog_server.credential)
    for sql in PLAIN:
        read = plain_reads.recognize(sql)
        table = catalog.load_table((NS, read.table[-1]))
        types = {field.name: str(field.field_type) for field in table.schema().fields}
        condition = plain_reads.row_filter(read.condition, types) if read.condition else None
        assert read.condition is None or condition is not None, sql
        found = preview.preview(
            table.metadata,
            table.metadata_location,
            io=table.io,
            table_path=table.location(),
            columns=list(read.columns or types),
            row_filter=condition,
            limit=read.limit if read.limit is not None else 100,
        )
        in_process = results.json_rows(found.arrow)
        in_spark = results.json_rows(
            query.fetch(query.prepare(session, sql, catalog="lv", namespace=[NS]), max_rows=100)
        )
        assert sorted(in_process) == sorted(in_spark), sql
        assert in_spark, sql


# A table its user may not see fails as one that is not there (refresh.queries asks the
# grants, then `query.not_found`): each is the same length as `nobody`, so that the two
# statements differ only in the name.
UNSEEN = [
    "SELECT id FROM orders WHERE id > 0",
    "SELECT c.id\n  FROM customers c JOIN qx.orders o ON c.id = o.id",
    "SELECT * FROM lv.`qx`.orders",
    "EXPLAIN SELECT * FROM orders",
    "DESCRIBE QUERY SELECT id FROM orders",
    "DESCRIBE orders",
    "SHOW COLUMNS IN orders",
]


@pytest.mark.parametrize("sql", UNSEEN)
def test_a_read_its_user_may_not_see_fails_in_sparks_words_for_a_missing_table(
    session: SparkSession, sql: str
):
    prepared = query.prepare(session, sql, catalog="lv", namespace=[NS])
    unseen = query.not_found(prepared, (NS, "orders"))
    with pytest.raises(SqlError) as missing:
        query.prepare(session, sql.replace("orders", "nobody"), catalog="lv", namespace=[NS])

    assert unseen.message == missing.value.message.replace("nobody", "orders")
    assert (unseen.line, unseen.column) == (missing.value.line, missing.value.column)
    assert type(missing.value) is SqlError
