"""Expectations applied by incremental refreshes and by a continuous table's micro-batches
(refresh.spark.changes and refresh.spark.stream_queries, as the worker and the streaming process
call them): only the rows each plan computes are checked and counted (an append plan's new
rows, a merge plan's touched keys), DROP ROW leaves rows out (a key whose row now violates
it is deleted), FAIL UPDATE aborts before any commit, and every snapshot the table gets
still verifies exactly against the query with DROP ROW's rows left out."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from refresh.core.expectations import DROP_ROW, FAIL_UPDATE, Expectation, ExpectationFailed
from refresh.core.refresh_state import read, refresh_state
from refresh.core.streaming import plan_stream
from refresh.spark import changes, stream_loads, stream_queries, verify
from tests.live_server import CatalogServer
from tests.spark.conftest import REST_CATALOG, rest_session

CATALOG = REST_CATALOG
_namespaces = itertools.count(1)


@pytest.fixture(scope="module")
def session(spark: SparkSession, catalog_server: CatalogServer) -> Iterator[SparkSession]:
    session = rest_session(spark, catalog_server)
    # Iceberg's stream source finds its catalog through the active session.
    active = session._jvm.org.apache.spark.sql.SparkSession  # noqa: SLF001
    active.setActiveSession(session._jsparkSession)  # noqa: SLF001
    yield session
    active.setActiveSession(spark._jsparkSession)  # noqa: SLF001


class Tables:
    """A namespace with `orders` (id, customer, amount) and a materialized table `mt` of
    `query`, refreshed and verified as the worker does it."""

    def __init__(self, spark: SparkSession, query: str, key: tuple[str, ...] = ()) -> None:
        self.spark, self.query = spark, query
        self.namespace = f"expectinc{next(_namespaces)}"
        spark.sql(f"CREATE NAMESPACE {CATALOG}.{self.namespace}")
        spark.sql(f"USE {CATALOG}.{self.namespace}")
        spark.sql("CREATE TABLE orders (id BIGINT, customer BIGINT, amount BIGINT)")
        spark.sql(f"CREATE TABLE mt USING iceberg AS SELECT * FROM ({query}) WHERE false")
        self.plan = plan_stream(query, namespace=[self.namespace], catalog=CATALOG, primary_key=key)
        self.source = (self.namespace, "orders")
        self.target = [CATALOG, self.namespace, "mt"]

    def insert(self, values: str) -> int:
        self.spark.sql(f"INSERT INTO {CATALOG}.{self.namespace}.orders VALUES {values}")
        return self.snapshots("orders")[-1]

    def snapshots(self, table: str = "mt") -> list[int]:
        return [
            r["snapshot_id"]
            for r in self.spark.sql(
                f"SELECT snapshot_id FROM {CATALOG}.{self.namespace}.{table}.snapshots "
                "ORDER BY committed_at"
            ).collect()
        ]

    def rows(self) -> list[tuple]:
        found = self.spark.table(f"{CATALOG}.{self.namespace}.mt").collect()
        return sorted((tuple(r) for r in found), key=repr)

    def state(self, snapshot: int) -> dict[str, str]:
        sources = {f"{self.namespace}.orders": ("", snapshot)}
        return refresh_state(version=1, sources=sources, started_ms=0).summary()

    def full(self, at: int, expectations: tuple[Expectation, ...]) -> dict[str, int]:
        counted: dict[str, int] = {}
        changes.recompute(
            self.spark,
            query=self.query,
            target=self.target,
            catalog=CATALOG,
            namespace=[self.namespace],
            pins={self.source: at},
            properties=self.state(at),
            expectations=expectations,
            violations=counted,
        )
        return counted

    def incremental(
        self, since: int, until: int, expectations: tuple[Expectation, ...]
    ) -> dict[str, int]:
        counted: dict[str, int] = {}
        changes.incremental_refresh(
            self.spark,
            plan=self.plan,
            query=self.query,
            target=self.target,
            catalog=CATALOG,
            namespace=[self.namespace],
            deltas={self.source: (since, until)},
            pins={self.source: until},
            properties=self.state(until),
            expectations=expectations,
            violations=counted,
        )
        return counted

    def load_and_stream(
        self,
        checkpoint: Path,
        expectations: tuple[Expectation, ...],
        *,
        loaded: dict[str, int] | None = None,
        on_failed: Callable[[ExpectationFailed, dict[str, int]], None] | None = None,
    ) -> tuple[Any, list[stream_queries.BatchResult]]:
        """A continuous table's start, as the streaming process makes it: a load at the
        source's snapshot now (its counts into `loaded`), then the stream just after it.
        The running query and the list its micro-batches' results go to."""
        sources = [(CATALOG, *self.source)]
        pins = stream_loads.pinned_snapshots(self.spark, sources)
        stream_loads.load(
            self.spark,
            query=self.query,
            target=self.target,
            sources=sources,
            pins=pins,
            namespace=[self.namespace],
            catalog=CATALOG,
            snapshot_properties=self.state(pins[f"{self.namespace}.orders"][0]),
            expectations=expectations,
            violations=loaded,
        )
        batches: list[stream_queries.BatchResult] = []
        running = stream_queries.start(
            self.spark,
            plan=self.plan,
            query=self.query,
            target=self.target,
            catalog=CATALOG,
            namespace=[self.namespace],
            checkpoint=str(checkpoint),
            key=f"expect-{self.namespace}",
            trigger_seconds=0.5,
            start_after={k: tuple(v) for k, v in pins.items() if v},
            on_batch=batches.append,
            version=1,
            uuids={},
            expectations=expectations,
            **({"on_failed": on_failed} if on_failed is not None else {}),
        )
        return running, batches

    def verify_every_snapshot(self, expectations: tuple[Expectation, ...]) -> int:
        """Every snapshot of `mt` with a refresh state answers it exactly; how many."""
        found = self.spark.sql(
            f"SELECT snapshot_id, summary FROM {CATALOG}.{self.namespace}.mt.snapshots"
        ).collect()
        verified = 0
        for row in found:
            state = read(row["summary"])
            if state is None:
                continue
            verdict = verify.verify_snapshot(
                self.spark,
                query=self.query,
                target=self.target,
                snapshot_id=row["snapshot_id"],
                pins={(*s.namespace, s.name): s.snapshot_id for s in state.tables},
                namespace=[self.namespace],
                catalog=CATALOG,
                expectations=expectations,
            )
            assert verdict.exact, (row["snapshot_id"], verdict)
            verified += 1
        return verified


APPEND_EXPECTATIONS = (
    Expectation("positive", "amount > 0", DROP_ROW),
    Expectation("has_customer", "customer IS NOT NULL"),
    Expectation("small", "amount < 1000", FAIL_UPDATE),
)


def test_an_incremental_refresh_checks_only_the_appended_rows_and_its_snapshots_verify(
    session: SparkSession,
):
    tables = Tables(session, "SELECT id, customer, amount FROM orders")
    first = tables.insert("(1, 1, 10), (2, 1, -5), (3, NULL, 7)")
    assert tables.full(first, APPEND_EXPECTATIONS) == {"positive": 1, "has_customer": 1, "small": 0}

    second = tables.insert("(4, 2, 20), (5, 2, 0), (6, NULL, -1), (7, NULL, 8)")
    counted = tables.incremental(first, second, APPEND_EXPECTATIONS)

    # The appended rows only: 0 and -1 are not positive; two appended rows lack a customer.
    assert counted == {"positive": 2, "has_customer": 2, "small": 0}
    assert [r[0] for r in tables.rows()] == [1, 3, 4, 7]

    # FAIL UPDATE: nothing committed, the error names the expectation and its count.
    before = tables.snapshots()
    third = tables.insert("(8, 3, 5000), (9, 3, 3)")
    with pytest.raises(ExpectationFailed) as failed:
        tables.incremental(second, third, APPEND_EXPECTATIONS)
    assert failed.value.name == "small" and failed.value.count == 1
    assert "'small' (ON VIOLATION FAIL UPDATE) failed: 1 row violate" in failed.value.message
    assert tables.snapshots() == before

    assert tables.verify_every_snapshot(APPEND_EXPECTATIONS) == 2


def test_an_incremental_merge_checks_the_touched_keys_and_deletes_a_key_drop_row_leaves_out(
    session: SparkSession,
):
    # COUNT and SUM combine, but with expectations the touched keys are recomputed.
    tables = Tables(
        session,
        "SELECT customer, count(*) AS n, sum(amount) AS total FROM orders GROUP BY customer",
        key=("customer",),
    )
    expectations = (
        Expectation("positive_total", "total > 0", DROP_ROW),
        Expectation("several", "n > 1"),
    )
    first = tables.insert("(1, 1, 10), (2, 1, 5), (3, 2, 4), (4, 3, -2)")
    assert tables.full(first, expectations) == {"positive_total": 1, "several": 2}
    assert tables.rows() == [(1, 2, 15), (2, 1, 4)]

    # Customer 2 goes negative (its row deleted), customer 3 positive (its row added);
    # customer 1 is not touched, so not counted.
    second = tables.insert("(5, 2, -10), (6, 3, 9)")
    assert tables.incremental(first, second, expectations) == {"positive_total": 1, "several": 0}
    assert tables.rows() == [(1, 2, 15), (3, 2, 7)]

    third = tables.insert("(7, 2, 20)")
    assert tables.incremental(second, third, expectations) == {"positive_total": 0, "several": 0}
    assert tables.rows() == [(1, 2, 15), (2, 3, 14), (3, 2, 7)]

    assert tables.verify_every_snapshot(expectations) == 3


def test_a_continuous_tables_micro_batches_apply_expectations_and_a_fail_update_stops_the_stream(
    session: SparkSession, tmp_path: Path
):
    tables = Tables(session, "SELECT id, customer, amount FROM orders WHERE id > 0")
    tables.insert("(1, 1, 10), (2, 1, -5)")
    loaded: dict[str, int] = {}
    failures: list[tuple[ExpectationFailed, dict[str, int]]] = []
    running, batches = tables.load_and_stream(
        tmp_path / "checkpoint",
        APPEND_EXPECTATIONS,
        loaded=loaded,
        on_failed=lambda error, counts: failures.append((error, counts)),
    )
    assert loaded == {"positive": 1, "has_customer": 0, "small": 0}
    try:
        tables.insert("(3, 2, 20), (4, NULL, -1), (5, NULL, 8)")
        running.processAllAvailable()
        [batch] = batches
        assert batch.expectations == {"positive": 1, "has_customer": 2, "small": 0}
        assert [r[0] for r in tables.rows()] == [1, 3, 5]

        before = tables.snapshots()
        tables.insert("(6, 3, 5000)")
        with pytest.raises(Exception, match="small"):
            running.processAllAvailable()
        [(error, counts)] = failures
        assert (error.name, error.count) == ("small", 1)
        assert counts == {"positive": 0, "has_customer": 0, "small": 1}
        assert tables.snapshots() == before, "the failed micro-batch committed nothing"
        assert len(batches) == 1
    finally:
        if running.isActive:
            running.stop()

    assert tables.verify_every_snapshot(APPEND_EXPECTATIONS) == 2


def test_a_continuous_aggregations_micro_batch_checks_its_touched_keys_and_deletes_a_dropped_one(
    session: SparkSession, tmp_path: Path
):
    tables = Tables(
        session,
        "SELECT customer, count(*) AS n, sum(amount) AS total FROM orders GROUP BY customer",
        key=("customer",),
    )
    expectations = (Expectation("positive_total", "total > 0", DROP_ROW),)
    tables.insert("(1, 1, 10), (2, 2, 4)")
    running, batches = tables.load_and_stream(tmp_path / "checkpoint", expectations)
    try:
        tables.insert("(3, 2, -10), (4, 3, 6)")  # customer 2 goes negative; 1 untouched
        running.processAllAvailable()
    finally:
        running.stop()

    [batch] = batches
    assert batch.expectations == {"positive_total": 1}
    assert tables.rows() == [(1, 1, 10), (3, 1, 6)]
    assert tables.verify_every_snapshot(expectations) == 2
