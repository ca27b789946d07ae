"""Expectations applied by a full refresh (refresh.spark.batch through changes.recompute, as
the runner calls it): DROP ROW leaves the violating rows out and counts them, a kept
expectation only counts, FAIL UPDATE aborts before any commit and names itself and its
count, a partition refresh counts its partition's rows, and the verifier, which leaves out
what DROP ROW left out, still finds the snapshot exact. NULL is a violation."""

from __future__ import annotations

import itertools

import pytest
from pyspark.sql import SparkSession

from refresh.core.expectations import DROP_ROW, FAIL_UPDATE, Expectation, ExpectationFailed
from refresh.spark import changes, verify
from tests.live_server import CatalogServer
from tests.spark.conftest import REST_CATALOG, rest_session

CATALOG = REST_CATALOG
QUERY = "SELECT id, ds, amount FROM orders"
_namespaces = itertools.count(1)


@pytest.fixture(scope="module")
def session(spark: SparkSession, catalog_server: CatalogServer) -> SparkSession:
    return rest_session(spark, catalog_server)


def snapshots(session: SparkSession, table: str) -> list[int]:
    return [r["snapshot_id"] for r in session.sql(f"SELECT * FROM {table}.snapshots").collect()]


def setup(session: SparkSession) -> tuple[str, str]:
    namespace = f"expect{next(_namespaces)}"
    session.sql(f"CREATE NAMESPACE {CATALOG}.{namespace}")
    session.sql(f"USE {CATALOG}.{namespace}")
    session.sql("CREATE TABLE orders (id BIGINT, ds STRING, amount BIGINT)")
    session.sql(
        "INSERT INTO orders VALUES (1, 'a', 10), (2, 'a', -5), (3, 'b', NULL), "
        "(4, 'b', 7), (NULL, 'b', 3)"
    )
    session.sql("CREATE TABLE mt (id BIGINT, ds STRING, amount BIGINT) PARTITIONED BY (ds)")
    return namespace, f"{CATALOG}.{namespace}.mt"


def refresh(session, namespace, expectations, violations, partition=None) -> None:
    changes.recompute(
        session,
        query=QUERY,
        target=[CATALOG, namespace, "mt"],
        catalog=CATALOG,
        namespace=[namespace],
        pins={},
        partition=partition,
        expectations=expectations,
        violations=violations,
    )


def test_drop_row_leaves_violators_out_and_counts_them_and_the_snapshot_still_verifies(
    session: SparkSession,
):
    namespace, table = setup(session)
    expectations = (
        Expectation("positive", "amount > 0", DROP_ROW),  # -5 and NULL violate it
        Expectation("has_id", "id IS NOT NULL"),  # kept and counted
    )
    violations: dict[str, int] = {}

    refresh(session, namespace, expectations, violations)

    assert violations == {"positive": 2, "has_id": 1}
    rows = [tuple(r) for r in session.table(table).collect()]
    assert sorted(rows, key=repr) == sorted([(1, "a", 10), (4, "b", 7), (None, "b", 3)], key=repr)
    assert "__lakeview_violates_0" not in session.table(table).columns

    verdict = verify.verify_snapshot(
        session,
        query=QUERY,
        target=[CATALOG, namespace, "mt"],
        snapshot_id=snapshots(session, table)[-1],
        pins={},
        namespace=[namespace],
        catalog=CATALOG,
        expectations=expectations,
    )
    assert verdict.exact, verdict
    # Without the expectations the recomputation has the dropped rows: the check can fail.
    unfiltered = verify.verify_snapshot(
        session,
        query=QUERY,
        target=[CATALOG, namespace, "mt"],
        snapshot_id=snapshots(session, table)[-1],
        pins={},
        namespace=[namespace],
        catalog=CATALOG,
    )
    assert unfiltered.missing == 2

    # A partition refresh counts its own partition's rows.
    partition_counts: dict[str, int] = {}
    refresh(session, namespace, expectations, partition_counts, partition={"ds": "a"})
    assert partition_counts == {"positive": 1, "has_id": 0}


def test_fail_update_aborts_without_a_commit_and_names_the_expectation_and_its_count(
    session: SparkSession,
):
    namespace, table = setup(session)
    refresh(session, namespace, (), {})
    before = snapshots(session, table)
    violations: dict[str, int] = {}
    expectations = (
        Expectation("dropped", "ds = 'a'", DROP_ROW),
        Expectation("no_negatives", "amount >= 0", FAIL_UPDATE),
    )

    with pytest.raises(ExpectationFailed) as failed:
        refresh(session, namespace, expectations, violations)

    assert failed.value.message.startswith(
        "Expectation 'no_negatives' (ON VIOLATION FAIL UPDATE) failed: 2 rows violate it"
    )
    assert violations == {"dropped": 3, "no_negatives": 2}
    assert snapshots(session, table) == before, "nothing committed"
    assert session.table(table).count() == 5


def test_a_condition_calling_a_function_outside_the_sandboxs_list_is_refused_and_writes_nothing(
    session: SparkSession,
):
    namespace, table = setup(session)
    hostile = (Expectation("probe", "java_method('java.lang.System', 'getenv', 'HOME') IS NULL"),)

    with pytest.raises(Exception, match="not allowed"):
        refresh(session, namespace, hostile, {})

    assert snapshots(session, table) == []
