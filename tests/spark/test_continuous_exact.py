"""Every snapshot a continuous table's stream commits is an exact answer to what it records:
random histories of appends, deletes and overwrites on its source, micro-batches, and manual
refreshes (the stream stopped between micro-batches, the table recomputed at pinned source
snapshots, the stream restarted just after them, as refresh.streams does), for an append
plan (a filter) and a merge plan (a GROUP BY with a primary key). A delete or an overwrite
stops the stream (Iceberg's stream source refuses it), and the table is recomputed as the
streaming process recomputes it. Afterwards each snapshot of the table with a refresh state
passes the verifier (refresh.spark.verify), and the table equals its query over the source.
A second materialized table over the first (a cascade, refreshed FULL at random moments with
refresh.spark.changes.recompute at the snapshot of the first it records) verifies against
the snapshots of the first it read.

The stream runs with the streaming process's Django-free code (refresh.spark.streaming) in
this test's Spark session; micro-batches are waited for with `processAllAvailable`."""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, seed, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from refresh.core.definition import MERGE_ON_READ
from refresh.core.refresh_state import read, refresh_state
from refresh.core.streaming import StreamPlan, plan_stream
from refresh.spark import changes, streaming, verify
from tests.live_server import CatalogServer
from tests.spark.conftest import REST_CATALOG, rest_session

CATALOG = REST_CATALOG
SHAPES = {
    "filter": ("SELECT id, customer, amount FROM orders WHERE amount > 40", ()),
    "group by": (
        "SELECT customer, count(*) AS n, sum(amount) AS total, max(amount) AS top "
        "FROM orders GROUP BY customer",
        ("customer",),
    ),
}

rows = st.lists(st.tuples(st.integers(1, 4), st.integers(0, 100)), min_size=1, max_size=3)
operation = st.one_of(
    st.tuples(st.just("append"), rows),
    st.tuples(st.just("append"), rows),
    st.tuples(st.just("batch"), st.none()),
    st.tuples(st.just("batch"), st.none()),
    st.tuples(st.just("manual refresh"), rows),
    st.tuples(st.just("delete"), st.integers(0, 2)),
    st.tuples(st.just("overwrite"), st.integers(0, 2)),
    st.tuples(st.just("cascade refresh"), st.none()),
)
histories = st.lists(operation, min_size=3, max_size=8)
#: A manual refresh while a writer keeps appending, then a delete the stream cannot follow.
TYPICAL = [
    ("append", [(1, 50), (2, 70)]),
    ("batch", None),
    ("manual refresh", [(3, 45)]),
    ("append", [(1, 90)]),
    ("batch", None),
    ("cascade refresh", None),
    ("delete", 0),
    ("append", [(4, 60)]),
    ("batch", None),
    ("cascade refresh", None),
]
#: The cascade: a FULL materialized table over the continuous one.
ROLLUP = "SELECT count(*) AS keys, count(DISTINCT customer) AS customers FROM mt"
_namespaces = itertools.count(1)


@dataclass
class Stream:
    """One continuous table and its stream, driven as the streaming process drives it."""

    spark: SparkSession
    query: str
    plan: StreamPlan
    namespace: str
    folder: Path
    next_id: itertools.count = field(default_factory=lambda: itertools.count(1))
    running: Any = None
    checkpoints: itertools.count = field(default_factory=lambda: itertools.count(1))

    def name(self, table: str) -> str:
        return f"{CATALOG}.{self.namespace}.{table}"

    def append(self, values: list[tuple[int, int]]) -> None:
        text = ", ".join(f"({next(self.next_id)}, {c}, {a})" for c, a in values)
        self.spark.sql(f"INSERT INTO {self.name('orders')} VALUES {text}")

    def change(self, kind: str, remainder: int) -> None:
        orders = self.name("orders")
        if kind == "delete":
            self.spark.sql(f"DELETE FROM {orders} WHERE amount % 3 = {remainder}")
        else:
            self.spark.sql(
                f"INSERT OVERWRITE {orders} SELECT id, customer, amount + 1 FROM {orders} "
                f"WHERE amount % 3 <> {remainder}"
            )

    def load_and_start(self) -> None:
        """A load at the source's snapshot now, then the stream just after it (a start
        without a checkpoint, a manual refresh, a recompute)."""
        sources = [(CATALOG, self.namespace, "orders")]
        pins = streaming.pinned_snapshots(self.spark, sources)
        state = refresh_state(
            version=1,
            sources={name: ("", pin[0] if pin else None) for name, pin in pins.items()},
            started_ms=0,
        )
        streaming.load(
            self.spark,
            query=self.query,
            target=[CATALOG, self.namespace, "mt"],
            sources=sources,
            pins=pins,
            namespace=[self.namespace],
            catalog=CATALOG,
            snapshot_properties=state.summary(),
        )
        checkpoint = self.folder / f"checkpoint-{next(self.checkpoints)}"
        self.running = streaming.start(
            self.spark,
            plan=self.plan,
            query=self.query,
            target=[CATALOG, self.namespace, "mt"],
            catalog=CATALOG,
            namespace=[self.namespace],
            checkpoint=str(checkpoint),
            key=f"exact-{self.namespace}-{checkpoint.name}",
            trigger_seconds=0.5,
            start_after={k: tuple(v) for k, v in pins.items() if v},
            on_batch=lambda result: None,
            version=1,
            uuids={},
        )

    def batches(self) -> None:
        """Wait for the stream to take in what the source has; a stream the source's delete
        or overwrite stopped is recomputed, as the streaming process does."""
        try:
            self.running.processAllAvailable()
        except Exception:  # noqa: BLE001 - Iceberg's stream refuses a rewritten source
            self.running.stop()
            self.load_and_start()
            self.running.processAllAvailable()

    def manual_refresh(self) -> None:
        streaming.stop_between_batches(self.running)
        self.load_and_start()

    def stop(self) -> None:
        if self.running is not None and self.running.isActive:
            self.running.stop()

    def cascade_refresh(self) -> None:
        """The rollup recomputed over the continuous table at its snapshot now, recorded."""
        table = self.spark.table(f"{self.name('mt')}.refs").where("name = 'main'").collect()
        snapshot = table[0]["snapshot_id"] if table else None
        state = refresh_state(
            version=1, sources={f"{self.namespace}.mt": ("", snapshot)}, started_ms=0
        )
        changes.recompute(
            self.spark,
            query=ROLLUP,
            target=[CATALOG, self.namespace, "rollup"],
            catalog=CATALOG,
            namespace=[self.namespace],
            pins={(self.namespace, "mt"): snapshot},
            properties=state.summary(),
        )

    def verify_every_snapshot(self, table: str = "mt", query: str | None = None) -> int:
        query = query or self.query
        rows_ = self.spark.sql(f"SELECT snapshot_id, summary FROM {self.name(table)}.snapshots")
        verified = 0
        for row in rows_.collect():
            state = read(row["summary"])
            if state is None:
                continue
            verdict = verify.verify_snapshot(
                self.spark,
                query=query,
                target=[CATALOG, self.namespace, table],
                snapshot_id=row["snapshot_id"],
                pins={(*s.namespace, s.name): s.snapshot_id for s in state.source_states},
                namespace=[self.namespace],
                catalog=CATALOG,
            )
            assert verdict.exact, (query, row["snapshot_id"], verdict)
            verified += 1
        return verified


@pytest.fixture(scope="module")
def session(spark: SparkSession, catalog_server: CatalogServer) -> Iterator[SparkSession]:
    session = rest_session(spark, catalog_server)
    # Iceberg's stream source finds its catalog through the active session: this one, whose
    # catalog is the app's (the streaming process's root session has it already).
    active = session._jvm.org.apache.spark.sql.SparkSession  # noqa: SLF001
    active.setActiveSession(session._jsparkSession)  # noqa: SLF001
    yield session
    active.setActiveSession(spark._jsparkSession)  # noqa: SLF001


def _stream(session: SparkSession, shape: str, folder: Path) -> Stream:
    query, key = SHAPES[shape]
    namespace = f"exact{next(_namespaces)}"
    session.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{namespace}")
    session.sql(f"USE {CATALOG}.{namespace}")
    session.sql(
        f"CREATE TABLE {CATALOG}.{namespace}.orders (id BIGINT, customer BIGINT, amount BIGINT) "
        "USING iceberg"
    )
    properties = ", ".join(f"'{k}' = '{v}'" for k, v in MERGE_ON_READ.items())
    session.sql(
        f"CREATE TABLE {CATALOG}.{namespace}.mt USING iceberg TBLPROPERTIES ({properties}) "
        f"AS SELECT * FROM ({query}) WHERE false"
    )
    session.sql(
        f"CREATE TABLE {CATALOG}.{namespace}.rollup (keys BIGINT, customers BIGINT) USING iceberg"
    )
    plan = plan_stream(query, namespace=[namespace], catalog=CATALOG, primary_key=key)
    return Stream(session, query, plan, namespace, folder / namespace)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_snapshot_of_a_continuous_table_answers_what_it_records(
    session: SparkSession, shape: str, tmp_path: Path
):
    @settings(
        max_examples=2,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @seed(zlib.crc32(shape.encode()))
    @example(history=TYPICAL)
    @given(history=histories)
    def check(history: list) -> None:
        stream = _stream(session, shape, tmp_path)
        try:
            stream.append([(1, 10)])
            stream.load_and_start()
            for kind, argument in history:
                if kind == "append":
                    stream.append(argument)
                elif kind == "batch":
                    stream.batches()
                elif kind == "cascade refresh":
                    stream.cascade_refresh()
                elif kind == "manual refresh":
                    stream.append(argument)  # a writer keeps appending meanwhile
                    stream.manual_refresh()
                else:
                    stream.change(kind, argument)
            stream.append([(2, 99)])
            stream.batches()
            stream.cascade_refresh()
            assert stream.verify_every_snapshot() >= 2
            assert stream.verify_every_snapshot("rollup", ROLLUP) >= 1
            table = session.sql(f"SELECT * FROM {stream.name('mt')}").collect()
            expected = session.sql(stream.query).collect()
            assert sorted(map(tuple, table)) == sorted(map(tuple, expected))
        finally:
            stream.stop()

    check()
