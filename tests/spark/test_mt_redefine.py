"""ALTER MATERIALIZED TABLE ... AS is one step for readers (issue 25), on the whole stack (the
app, a Celery worker with its Spark, the streaming process).

While a definition changes (an ALTER that changes a column's type, adds a NOT NULL column and
drops one; a rollback; a FULL table switched to CONTINUOUS), readers poll the table through
pyiceberg and Spark: every read succeeds and gives exactly the rows of one definition, never
the new schema without its rows; afterwards every snapshot in the table's history reads the
same way. A rebuild forced to fail at run time (`assert_true`) leaves the table as every
engine saw it, and says why.

DuckDB (its Iceberg extension, through the same catalog) reads each definition's rows too.

The tests run in order on one stack (a module fixture)."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyspark.sql import SparkSession

from tests.refresh_stack import RefreshStack
from tests.spark.conftest import rest_session, stack_fixture
from tests.spark.test_duckdb import _extension

NS = "redef"
V1 = "SELECT g, sum(x) AS total FROM src GROUP BY g"
# Slow enough that readers poll for seconds while it runs: every group meets 40 million rows.
ROWS = 40_000_000
V2 = (
    "SELECT CAST(g AS STRING) AS g, count(*) AS n FROM src CROSS JOIN range("
    f"{ROWS // 10}) r GROUP BY g"
)
FAILING = (
    "SELECT g, sum(x) AS total, max(CAST(assert_true(x < 0) AS STRING)) AS c FROM src GROUP BY g"
)


stack = stack_fixture("redefine-stack")


@pytest.fixture(scope="module")
def rs(spark: SparkSession, stack: RefreshStack) -> SparkSession:
    session = rest_session(spark, stack.server, name="rs")
    session.sql(f"CREATE NAMESPACE IF NOT EXISTS rs.{NS}")
    session.sql(f"CREATE TABLE rs.{NS}.src (id BIGINT, g BIGINT, x BIGINT)")
    values = ", ".join(f"({i}, {i % 10}, {i})" for i in range(1, 101))
    session.sql(f"INSERT INTO rs.{NS}.src VALUES {values}")
    return session


@pytest.fixture(scope="module")
def catalog(stack: RefreshStack) -> RestCatalog:
    return RestCatalog("rs", uri=stack.server.iceberg_uri, credential=stack.server.credential)


def ok(stack: RefreshStack, sql: str) -> dict:
    response = stack.statements(sql, namespace=NS)
    assert response.status_code == 200, response.text
    return response.json()["results"][0]


def v1_rows(spark: SparkSession) -> set[tuple]:
    return {tuple(r) for r in spark.sql(V1.replace("FROM src", f"FROM rs.{NS}.src")).collect()}


def v2_rows(spark: SparkSession) -> set[tuple]:
    counts = spark.sql(f"SELECT g, count(*) FROM rs.{NS}.src GROUP BY g").collect()
    return {(str(g), n * (ROWS // 10)) for g, n in counts}


def by_pyiceberg(catalog: RestCatalog, name: str, snapshot_id: int | None = None) -> tuple:
    """(column names, rows) of the table, or of one of its snapshots with that snapshot's
    schema."""
    table = catalog.load_table(f"{NS}.{name}")
    arrow = table.scan(snapshot_id=snapshot_id).to_arrow()
    names = tuple(arrow.column_names)
    return names, {tuple(row.values()) for row in arrow.to_pylist()}


@pytest.fixture(scope="module")
def duck(stack: RefreshStack) -> Callable[[str], tuple]:
    """(column names, rows) of a table as DuckDB reads it through the catalog."""
    import duckdb
    import duckdb_extension_avro
    import duckdb_extension_httpfs
    import duckdb_extension_iceberg

    server = stack.server
    client_id, _, secret = server.credential.partition(":")
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    for package, extension in (
        (duckdb_extension_httpfs, "httpfs"),
        (duckdb_extension_avro, "avro"),
        (duckdb_extension_iceberg, "iceberg"),
    ):
        con.execute(f"LOAD '{_extension(package, extension)}'")
    con.execute(
        "CREATE SECRET rd (TYPE iceberg, CLIENT_ID ?, CLIENT_SECRET ?, OAUTH2_SERVER_URI ?)",
        [client_id, secret, f"{server.iceberg_uri}/v1/oauth/tokens"],
    )
    con.execute(
        f"ATTACH '{server.warehouse}' AS rd (TYPE iceberg, ENDPOINT '{server.iceberg_uri}', "
        "SECRET rd)"
    )

    def read(name: str) -> tuple:
        cursor = con.execute(f"SELECT * FROM rd.{NS}.{name}")
        columns = tuple(d[0] for d in cursor.description)
        return columns, {tuple(row) for row in cursor.fetchall()}

    return read


def by_spark(spark: SparkSession, name: str) -> tuple:
    frame = spark.table(f"rs.{NS}.{name}")
    return tuple(frame.columns), {tuple(r) for r in frame.collect()}


class Readers:
    """Readers polling the table through pyiceberg (a thread) and Spark (another), each
    read kept as (reader, column names, rows) or (reader, the error)."""

    def __init__(self, catalog: RestCatalog, spark: SparkSession, name: str) -> None:
        self.reads: list[tuple] = []
        self.errors: list[tuple] = []
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(
                target=self._poll, args=("pyiceberg", lambda: by_pyiceberg(catalog, name))
            ),
            threading.Thread(target=self._poll, args=("spark", lambda: by_spark(spark, name))),
        ]

    def _poll(self, reader: str, read: Callable[[], tuple]) -> None:
        while not self.stop.is_set():
            try:
                self.reads.append((reader, *read()))
            except Exception as error:  # noqa: BLE001 - a failed read is what we look for
                self.errors.append((reader, f"{error!r} {error}"[:3000]))

    def __enter__(self) -> Readers:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=120)


#: Spark's own race, not a snapshot read: with `cache-enabled=false` Spark analyzes a query
#: against the table as loaded then, and plans its scan against the table loaded again; a
#: query analyzed before the swap that changes a column's type fails to plan (run again, it
#: reads the new definition). pyiceberg reads one metadata file per scan and never meets it.
SPARK_PLANNED_ACROSS_THE_SWAP = re.compile(r"Cannot project \w+ to incompatible type")


def assert_each_read_is_one_definition(reads: list[tuple], errors: list, allowed: dict) -> None:
    """Every read gives the columns and rows of one of `allowed` ({columns: rows})."""
    unexpected = [
        (reader, error)
        for reader, error in errors
        if not (reader == "spark" and SPARK_PLANNED_ACROSS_THE_SWAP.search(error))
    ]
    assert not unexpected, unexpected[:3]
    assert len(errors) <= 2, errors
    for reader, columns, rows in reads:
        assert columns in allowed, f"{reader} read columns {columns}"
        assert rows == allowed[columns], f"{reader} read {columns} with other rows: {rows}"


def rebuild(stack: RefreshStack, result: dict) -> dict:
    run_id = result["run_id"]
    assert run_id, result
    return stack.wait_for(
        lambda: (run := stack.run(run_id))["state"] in ("SUCCEEDED", "FAILED") and run,
        timeout=300,
        what=f"rebuild run {run_id}",
    )


def test_readers_see_the_old_or_the_new_definition_during_an_alter(stack, rs, catalog, duck):
    created = ok(
        stack,
        f"CREATE MATERIALIZED TABLE big FRESHNESS = INTERVAL '1' HOUR REFRESH_MODE = FULL AS {V1}",
    )
    assert rebuild(stack, created)["state"] == "SUCCEEDED"
    old = {("g", "total"): v1_rows(rs)}
    assert by_pyiceberg(catalog, "big") == (("g", "total"), old[("g", "total")])

    with Readers(catalog, rs, "big") as readers:
        result = ok(stack, f"ALTER MATERIALIZED TABLE big AS {V2}")
        assert "is being built by job" in result["message"]
        run = rebuild(stack, result)
        readers.stop.wait(1.0)  # a few reads of the new definition too

    assert run["state"] == "SUCCEEDED", run
    assert run["trigger"] == "REBUILD" and run["definition_version"] == 2
    new = {("g", "n"): v2_rows(rs)}
    assert_each_read_is_one_definition(readers.reads, readers.errors, {**old, **new})
    seen = {columns for _, columns, _ in readers.reads}
    assert ("g", "total") in seen and ("g", "n") in seen, "readers polled through the swap"
    table = catalog.load_table(f"{NS}.big")
    assert str(table.schema().find_field("n").field_type) == "long"
    assert str(table.schema().find_field("g").field_type) == "string"
    assert table.properties["lakeview.materialized-table.version"] == "2"
    assert duck("big") == (("g", "n"), new[("g", "n")])
    # Every snapshot the table ever had reads as one definition, with its own schema.
    for snapshot in table.snapshots():
        columns, rows = by_pyiceberg(catalog, "big", snapshot.snapshot_id)
        assert rows == {**old, **new}[columns], snapshot.snapshot_id


def test_a_rebuild_that_fails_at_run_time_changes_nothing_engines_see(stack, rs, catalog, duck):
    before = catalog.load_table(f"{NS}.big").metadata_location
    rows_before = by_pyiceberg(catalog, "big")

    result = ok(stack, f"ALTER MATERIALIZED TABLE big AS {FAILING}")
    run = rebuild(stack, result)

    assert run["state"] == "FAILED" and "is not true" in run["error"], run["error"]
    assert "\tat org.apache" not in run["error"], "the cause, not the stack trace"
    assert catalog.load_table(f"{NS}.big").metadata_location == before
    assert by_pyiceberg(catalog, "big") == rows_before
    assert by_spark(rs, "big") == rows_before
    assert duck("big") == rows_before
    detail = stack.api.get(
        f"{stack.server.base_url}/api/namespaces/{NS}/materialized-tables/big/", timeout=30
    ).json()
    assert detail["current_version"] == 2 and detail["state"] == "ACTIVATED"
    assert detail["pending_change"] is None
    versions = stack.api.get(
        f"{stack.server.base_url}/api/namespaces/{NS}/materialized-tables/big/versions/",
        timeout=30,
    ).json()
    latest = versions["log"][0]
    assert (latest["version_id"], latest["outcome"]) == (3, "FAILED")
    assert latest["error"], latest


def test_a_rollback_is_one_step_for_readers_too(stack, rs, catalog):
    old = {("g", "n"): v2_rows(rs)}
    with Readers(catalog, rs, "big") as readers:
        response = stack.follow(
            stack.api.post(
                f"{stack.server.base_url}/api/namespaces/{NS}/materialized-tables/big/rollback",
                json={"version_id": 1},
                timeout=30,
            )
        )
        assert response.status_code == 200, response.text
        run = rebuild(stack, {"run_id": response.json()["pending_change"]["run_id"]})
        readers.stop.wait(1.0)

    assert run["state"] == "SUCCEEDED", run
    new = {("g", "total"): v1_rows(rs)}
    assert_each_read_is_one_definition(readers.reads, readers.errors, {**old, **new})
    assert by_pyiceberg(catalog, "big") == (("g", "total"), new[("g", "total")])


def test_a_switch_from_full_to_continuous_is_one_step_for_readers(stack, rs, catalog):
    query = "SELECT id, g, x FROM src WHERE x > 50"
    created = ok(
        stack, f"CREATE MATERIALIZED TABLE switched FRESHNESS = INTERVAL '1' HOUR AS {query}"
    )
    assert rebuild(stack, created)["state"] == "SUCCEEDED"
    expected = query.replace("FROM src", f"FROM rs.{NS}.src")
    before = {tuple(r) for r in rs.sql(expected).collect()}
    rs.sql(f"INSERT INTO rs.{NS}.src VALUES (101, 1, 101), (102, 2, 102)")
    after = {tuple(r) for r in rs.sql(expected).collect()}
    columns = ("id", "g", "x")

    with Readers(catalog, rs, "switched") as readers:
        ok(stack, "ALTER MATERIALIZED TABLE switched SET FRESHNESS = INTERVAL '5' SECOND")
        stack.wait_for(
            lambda: by_pyiceberg(catalog, "switched")[1] == after,
            timeout=180,
            what="the streaming process to load the table",
        )

    assert not readers.errors, readers.errors[:3]
    assert readers.reads
    for reader, cols, rows in readers.reads:
        assert cols == columns and rows in (before, after), (reader, cols, rows)


# -- pipelines as code (issue 22), on the same stack --------------------------------------------

PIPELINE = """CREATE OR ALTER MATERIALIZED TABLE totals (
  g STRING COMMENT 'the group',
  total DOUBLE,
  n BIGINT NOT NULL
)
DISTRIBUTED BY HASH (g) INTO 4 BUCKETS
FRESHNESS = INTERVAL '1' HOUR
AS SELECT g, sum(x) AS total, count(*) AS n FROM pipes_src GROUP BY g"""


def plan(stack: RefreshStack, sql: str) -> list[str]:
    response = stack.api.post(
        f"{stack.server.base_url}/api/statements/",
        json={"sql": sql, "namespace": NS, "dry_run": True},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    return [result["plan"]["action"] for result in response.json()["results"]]


def layout(catalog: RestCatalog) -> tuple[list, dict]:
    """(partition fields as (name, transform, source column), {column: doc}) as pyiceberg
    reads the table through the catalog."""
    table = catalog.load_table(f"{NS}.totals")
    schema = table.schema()
    spec = [
        (f.name, str(f.transform), schema.find_column_name(f.source_id))
        for f in table.spec().fields
    ]
    return spec, {f.name: f.doc for f in schema.fields}


def show_create(stack: RefreshStack) -> str:
    return ok(stack, "SHOW CREATE MATERIALIZED TABLE totals")["rows"][0][0]


def test_a_definition_with_a_schema_part_and_buckets_round_trips_through_spark(stack, rs, catalog):
    """CREATE OR ALTER with a schema part and DISTRIBUTED BY, checked against the schema
    Spark derives (a mismatch names the column), makes bucket partition fields and column
    docs engines read; SHOW CREATE's text applied back changes nothing; a new query rebuilds
    the table with its buckets and docs kept."""
    rs.sql(f"CREATE TABLE rs.{NS}.pipes_src (id BIGINT, g STRING, x DOUBLE)")
    values = ", ".join(f"({i}, 'g{i % 5}', {i}.0)" for i in range(1, 51))
    rs.sql(f"INSERT INTO rs.{NS}.pipes_src VALUES {values}")

    refused = stack.statements(PIPELINE.replace("n BIGINT NOT NULL", "n INT"), namespace=NS)
    assert refused.status_code == 400
    assert refused.json()["error"]["message"].startswith(
        "Incompatible types for sink column 'n' at position 3. The source column has type "
        "'BIGINT NOT NULL', while the target column has type 'INT'."
    )

    assert rebuild(stack, ok(stack, PIPELINE))["state"] == "SUCCEEDED"
    spec, docs = layout(catalog)
    assert spec == [("g_bucket", "bucket[4]", "g")]
    assert docs == {"g": "the group", "total": None, "n": None}
    rows = rs.sql(f"SELECT g, total, n FROM rs.{NS}.totals").collect()
    assert sorted(tuple(r) for r in rows) == [
        (f"g{k}", float(sum(i for i in range(1, 51) if i % 5 == k)), 10) for k in range(5)
    ]

    text = show_create(stack)
    assert "`n` BIGINT NOT NULL" in text and "INTO 4 BUCKETS" in text
    assert plan(stack, text) == ["nothing"]
    assert ok(stack, text)["plan"]["action"] == "nothing"

    # A new query with comments on a column it keeps and on the column it adds: one apply.
    wider = (
        PIPELINE.replace("count(*) AS n", "count(*) AS n, max(x) AS top")
        .replace("n BIGINT NOT NULL\n", "n BIGINT NOT NULL,\n  top DOUBLE COMMENT 'the top'\n")
        .replace("total DOUBLE,", "total DOUBLE COMMENT 'the sum',")
    )
    assert plan(stack, wider) == ["alter"]
    assert rebuild(stack, ok(stack, wider))["state"] == "SUCCEEDED"
    spec, docs = layout(catalog)
    assert spec == [("g_bucket", "bucket[4]", "g")]  # the rebuild kept the buckets
    assert docs["g"] == "the group"  # and the column's comment
    assert docs["total"] == "the sum" and docs["top"] == "the top"  # and set the new ones
    assert plan(stack, wider) == ["nothing"]  # NOT NULL kept as declared, too
    again = show_create(stack)
    assert "`top` DOUBLE COMMENT 'the top'" in again
    assert plan(stack, again) == ["nothing"]


def test_apply_sql_runs_its_own_spark_and_a_second_run_changes_nothing(stack, rs, tmp_path):
    """`manage.py apply_sql` in a process of its own (its own Spark, as a worker's): a
    reader's file sorted before its source's is applied after it; applied again, every
    statement plans as nothing; a refusal exits 1 with its file, line and column."""
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "1_reader.sql").write_text(
        "CREATE OR ALTER MATERIALIZED TABLE pipe_reader FRESHNESS = INTERVAL '1' HOUR\n"
        "AS SELECT g, total FROM pipe_source WHERE total > 100"
    )
    (tmp_path / "2_source.sql").write_text(
        "CREATE OR ALTER MATERIALIZED TABLE pipe_source FRESHNESS = INTERVAL '1' HOUR\n"
        "AS SELECT g, sum(x) AS total FROM src GROUP BY g"
    )
    command = [sys.executable, "manage.py", "apply_sql", str(tmp_path), "--namespace", NS,
               "--user", stack.server.username]  # fmt: skip
    root = Path(__file__).resolve().parents[2]

    def apply() -> subprocess.CompletedProcess:
        return subprocess.run(
            command, env=stack.server.env, capture_output=True, text=True, cwd=root
        )

    first = apply()
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stdout.index("2_source.sql") < first.stdout.index("1_reader.sql")
    assert "2 create" in first.stdout
    second = apply()
    assert second.returncode == 0, second.stderr[-3000:]
    assert "2 nothing" in second.stdout

    (tmp_path / "3_broken.sql").write_text(
        "CREATE OR ALTER MATERIALIZED TABLE pipe_broken FRESHNESS = INTERVAL '1' HOUR\n"
        "AS SELECT nope FROM missing_table"
    )
    third = apply()
    assert third.returncode == 1
    assert "3_broken.sql:2:21: refused: Table or view not found: redef.missing_table" in (
        third.stderr
    )
