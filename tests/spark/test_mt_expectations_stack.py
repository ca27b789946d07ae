"""A continuous table with expectations end to end: the app, a Celery worker, celery-beat and
the streaming process (`manage.py run_streams`). Created in the console with Databricks'
CONSTRAINT ... EXPECT clauses, its load and its micro-batches leave DROP ROW's rows out,
record each expectation's count on their runs, and verify exactly through the app's
verifier; a micro-batch that violates a FAIL UPDATE expectation commits nothing and is the
stream's failed run, naming the expectation and its count; CREATE OR ALTER without it
rebuilds the table, and the stream runs again."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from tests.refresh_stack import RefreshStack, refresh_stack
from tests.spark.conftest import rest_catalog_conf
from tests.spark.test_mt_continuous import mt_row, ok, rows
from tests.spark.test_mt_end_to_end import verify

NS = "live"
CREATE = """CREATE MATERIALIZED TABLE checked (
  CONSTRAINT positive EXPECT (v > 0) ON VIOLATION DROP ROW,
  CONSTRAINT not_k0 EXPECT (k <> 'k0'),
  CONSTRAINT small EXPECT (v < 1000) ON VIOLATION FAIL UPDATE
)
FRESHNESS = INTERVAL '5' SECOND
AS SELECT id, k, v FROM events"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefreshStack]:
    with refresh_stack(tmp_path_factory.mktemp("expectations-stack")) as running:
        yield running


@pytest.fixture(scope="module")
def st(spark: SparkSession, stack: RefreshStack) -> SparkSession:
    session = spark.newSession()
    for key, value in rest_catalog_conf(stack.server, name="st").items():
        session.conf.set(key, value)
    session.conf.set("spark.sql.defaultCatalog", "st")
    return session


def runs(stack: RefreshStack) -> list[dict]:
    response = stack.api.get(
        f"{stack.server.base_url}/api/namespaces/{NS}/materialized-tables/checked/runs/",
        timeout=30,
    )
    response.raise_for_status()
    return response.json()["results"]


def ids(st: SparkSession) -> list[int]:
    return [row[0] for row in rows(st, f"SELECT id FROM st.{NS}.checked")]


def test_a_continuous_tables_load_micro_batches_and_rebuild_apply_its_expectations(stack, st):
    st.sql(f"CREATE NAMESPACE IF NOT EXISTS st.{NS}")
    st.sql(f"CREATE TABLE st.{NS}.events (id BIGINT NOT NULL, k STRING NOT NULL, v DOUBLE)")
    st.sql(f"INSERT INTO st.{NS}.events VALUES (1, 'k1', 2.5), (2, 'k0', -1.0), (3, 'k0', 3.0)")
    ok(stack, CREATE)
    assert mt_row(stack, "checked")["refresh_mode"] == "CONTINUOUS"
    stack.wait_for(lambda: ids(st) == [1, 3], timeout=180, what="the load, without row 2")
    [load] = stack.wait_for(
        lambda: [r for r in runs(stack) if r["action"] == "FULL" and r["finished_at"]],
        timeout=30,
        what="the load's run",
    )
    assert load["expectations"] == {"positive": 1, "not_k0": 2, "small": 0}

    st.sql(f"INSERT INTO st.{NS}.events VALUES (4, 'k0', 5.0), (5, 'k1', -2.0), (6, 'k2', 1.0)")
    stack.wait_for(lambda: ids(st) == [1, 3, 4, 6], timeout=120, what="a micro-batch")
    batches = stack.wait_for(
        lambda: [
            r
            for r in runs(stack)
            if (r["trigger"], r["action"], r["state"]) == ("CONTINUOUS", "INCREMENTAL", "SUCCEEDED")
        ],
        timeout=30,
        what="the micro-batch's run",
    )
    counted: dict[str, int] = {}
    for batch in batches:
        for name, count in batch["expectations"].items():
            counted[name] = counted.get(name, 0) + count
    assert counted == {"positive": 1, "not_k0": 1, "small": 0}

    verdicts = verify(stack, "checked", snapshots=5, namespace=NS)
    assert len(verdicts) >= 2
    assert {v["verdict"] for v in verdicts} == {"EXACT"}, verdicts

    st.sql(f"INSERT INTO st.{NS}.events VALUES (7, 'k1', 5000.0), (8, 'k1', 2.0)")
    stack.wait_for(
        lambda: mt_row(stack, "checked")["stream_status"] == "FAILED",
        timeout=120,
        what="the stream to fail on FAIL UPDATE",
    )
    error = mt_row(stack, "checked")["stream_error"]
    assert error.startswith("Expectation 'small' (ON VIOLATION FAIL UPDATE) failed: 1 row"), error
    [failed] = [r for r in runs(stack) if r["state"] == "FAILED"]
    assert failed["error"] == error
    assert failed["expectations"] == {"positive": 0, "not_k0": 0, "small": 1}
    assert ids(st) == [1, 3, 4, 6], "the failed micro-batch committed nothing"

    # Changing the expectations is a new definition: the streaming process loads the table
    # anew (its rebuild run counts them) and streams on from there.
    altered = CREATE.replace("CREATE MATERIALIZED", "CREATE OR ALTER MATERIALIZED").replace(
        ",\n  CONSTRAINT small EXPECT (v < 1000) ON VIOLATION FAIL UPDATE", ""
    )
    assert "small" not in altered
    ok(stack, altered)
    stack.wait_for(lambda: ids(st) == [1, 3, 4, 6, 7, 8], timeout=180, what="the rebuild")
    # The run row is finished just after the commit that made the rows visible.
    [rebuilt] = stack.wait_for(
        lambda: [r for r in runs(stack) if r["trigger"] == "REBUILD" and r["finished_at"]],
        timeout=30,
        what="the rebuild's run",
    )
    assert rebuilt["state"] == "SUCCEEDED", rebuilt
    assert rebuilt["expectations"] == {"positive": 2, "not_k0": 3}
    stack.wait_for(
        lambda: mt_row(stack, "checked")["stream_status"] == "RUNNING",
        timeout=120,
        what="the stream to run again",
    )
