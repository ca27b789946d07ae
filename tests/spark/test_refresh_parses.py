"""A refresh run parses its query once: the run decides once (one RefreshPlan holding the
parsed query) and every later step works on that parsed form. One run of each kind (full,
incremental, partition, rebuild) runs on the worker's code in a process of its own
(tests/spark/parse_counts.py, against the session's catalog server), which counts the texts
sqlglot parses during each run."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from pyspark.sql import SparkSession

from tests.live_server import REPO_ROOT, CatalogServer
from tests.spark.parse_counts import ALTERED, QUERY

NAMESPACE = "parses"


@pytest.fixture(scope="module")
def counted(lv_spark: SparkSession, catalog_server: CatalogServer) -> dict[str, dict]:
    lv_spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NAMESPACE}")
    lv_spark.sql(
        f"CREATE TABLE {NAMESPACE}.orders (id BIGINT, customer BIGINT NOT NULL, amount BIGINT, "
        "ds STRING NOT NULL) USING iceberg"
    )
    lv_spark.sql(
        f"INSERT INTO {NAMESPACE}.orders VALUES (1, 1, 10, '2024-01-01'), (2, 2, 20, '2024-01-01')"
    )
    done = subprocess.run(
        [sys.executable, "-m", "tests.spark.parse_counts", NAMESPACE],
        cwd=REPO_ROOT,
        env=catalog_server.env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("kind", ["full", "incremental", "partition", "rebuild"])
def test_a_run_of_each_kind_parses_its_query_once_and_nothing_else(counted, kind):
    run = counted[kind]
    assert run["state"] == "SUCCEEDED", run
    expected = {"full": "FULL", "incremental": "INCREMENTAL", "partition": "PARTITION"}
    assert run["action"] == expected.get(kind, "FULL"), run
    query = ALTERED if kind == "rebuild" else QUERY
    assert run["parses"] == {query: 1}, f"the {kind} run parsed {run['parses']}"
