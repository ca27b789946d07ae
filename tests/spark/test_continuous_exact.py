"""Every snapshot a continuous table's stream commits is an exact answer to what it records:
random histories of appends, DELETE, UPDATE, MERGE INTO, overwrites and compactions on its
two sources (`orders` written merge-on-read, `returns` copy-on-write), micro-batches,
compactions of the table itself (table maintenance), and manual refreshes (the stream
stopped between micro-batches, the table recomputed at pinned source snapshots, the stream
restarted just after them, as refresh.streams does) while a writer keeps appending, for an
append plan (a filter), an append plan over both sources with a primary key (UNION ALL) and
a merge plan (a GROUP BY with a primary key over a stream-static join: the static side is
read at the load's snapshot). A delete, update, merge or overwrite stops the stream
(Iceberg's stream source refuses it), and so does, for the join, its static side moving on;
as the streaming process does (refresh.streams.catch_up), a table with a primary key then
catches up incrementally (refresh.spark.stream_catch_up.plan_catch_up and catch_up: the rows the
sources deleted and inserted since the snapshots the table holds, applied by key in one
commit) and its stream resumes just after; the one without is recomputed. Each history
asserts which happened: a keyed table is never recomputed. Afterwards each snapshot of the
table with a refresh state passes the verifier (refresh.spark.verify), and the table equals
its query over the sources.

A second materialized table over the first (a cascade) is refreshed at random moments as
the worker refreshes a scheduled table (tests.spark.test_incremental_refresh.History:
refresh.core.incremental decides, INCREMENTAL when the continuous table only appended since
its last refresh, FULL otherwise), while the stream keeps writing; each of its snapshots
verifies against the snapshot of the first it read.

The stream runs with the streaming process's Django-free code (refresh.spark.stream_queries) in
this test's Spark session; micro-batches are waited for with `processAllAvailable`."""

from __future__ import annotations

import itertools
import zlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, example, given, seed, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from refresh.core.definition import MERGE_ON_READ
from refresh.core.incremental import Kind, has_full_outer_join, null_supplied_key
from refresh.core.refresh_state import read, refresh_state
from refresh.core.streaming import StreamPlan, plan_stream, static_moved
from refresh.spark import stream_catch_up, stream_loads, stream_queries, verify
from tests.live_server import CatalogServer
from tests.spark.conftest import REST_CATALOG, rest_session
from tests.spark.test_incremental_refresh import History, Shape

CATALOG = REST_CATALOG
SOURCES = ("orders", "returns")
#: Each continuous table's query and primary key, and the cascade's (query, key) over it.
SHAPES = {
    "filter": (
        "SELECT id, customer, amount FROM orders WHERE amount > 40",
        (),
        "SELECT customer, count(*) AS n, sum(amount) AS total FROM mt GROUP BY customer",
        ("customer",),
    ),
    # An append plan kept by its primary key when a source rewrites rows.
    "union all": (
        "SELECT id, amount, 'order' AS kind FROM orders "
        "UNION ALL SELECT id, -amount AS amount, 'return' AS kind FROM returns",
        ("id", "kind"),
        "SELECT kind, count(*) AS n, sum(amount) AS total FROM mt GROUP BY kind",
        ("kind",),
    ),
    # A merge plan: a GROUP BY over a stream-static join (returns is static: read at the
    # load's snapshot by every micro-batch; when it moves on, the table catches up).
    "join group by": (
        "SELECT o.customer, count(*) AS n, sum(o.amount) AS total, max(r.amount) AS top "
        "FROM orders o JOIN returns r ON o.customer = r.customer GROUP BY o.customer",
        ("customer",),
        "SELECT n, count(*) AS customers FROM mt GROUP BY n",
        ("n",),
    ),
}

rows = st.lists(st.tuples(st.integers(1, 4), st.integers(0, 100)), min_size=1, max_size=3)
source = st.sampled_from(["orders", "orders", "returns"])
operation = st.one_of(
    st.tuples(st.just("append"), source, rows),
    st.tuples(st.just("append"), source, rows),
    st.tuples(st.just("batch"), st.none(), st.none()),
    st.tuples(st.just("batch"), st.none(), st.none()),
    st.tuples(st.just("manual refresh"), source, rows),
    st.tuples(st.just("delete"), source, st.integers(0, 2)),
    st.tuples(st.just("update"), source, st.integers(0, 2)),
    st.tuples(st.just("merge"), source, rows),
    st.tuples(st.just("overwrite"), source, st.integers(0, 2)),
    st.tuples(st.just("compact"), st.sampled_from([*SOURCES, "mt"]), st.none()),
    st.tuples(st.just("cascade refresh"), st.none(), st.none()),
)
histories = st.lists(operation, min_size=3, max_size=8)
#: A manual refresh while a writer keeps appending, a static source moving on, table
#: maintenance, then a delete, a MERGE INTO and an UPDATE the stream cannot follow, on the
#: streamed source and on the join's static side, a round each; the cascade refreshed after
#: appends only and after the changes.
TYPICAL = [
    ("append", "orders", [(1, 50), (2, 70)]),
    ("append", "returns", [(2, 45)]),
    ("batch", None, None),
    ("cascade refresh", None, None),
    ("manual refresh", "orders", [(3, 45)]),
    # The join's static side moves on (customer 2's top return), then a batch touches
    # customer 1 only: customer 2's row must still answer what the batch records.
    ("append", "returns", [(2, 60)]),
    ("append", "orders", [(1, 90)]),
    ("batch", None, None),
    ("cascade refresh", None, None),
    ("compact", "mt", None),
    ("compact", "orders", None),
    ("delete", "orders", 0),
    ("append", "orders", [(4, 60)]),
    ("batch", None, None),
    ("cascade refresh", None, None),
    # Updates two orders (odd customers pick existing ids), inserts one, deletes one whose
    # amount is a multiple of 5.
    ("merge", "orders", [(1, 55), (3, 36), (2, 20), (5, 41)]),
    ("batch", None, None),
    ("update", "returns", 1),
    ("append", "orders", [(2, 61)]),
    ("batch", None, None),
    ("cascade refresh", None, None),
    ("merge", "returns", [(3, 12), (2, 48)]),
    ("update", "orders", 2),
    ("batch", None, None),
]
_namespaces = itertools.count(1)


@dataclass
class Stream:
    """One continuous table and its stream, driven as the streaming process drives it."""

    spark: SparkSession
    query: str
    plan: StreamPlan
    namespace: str
    folder: Path
    #: The table's primary key (a merge plan's; an append plan's is the table's own).
    key: tuple[str, ...] = ()
    next_id: itertools.count = field(default_factory=lambda: itertools.count(1))
    running: Any = None
    checkpoints: itertools.count = field(default_factory=lambda: itertools.count(1))
    checkpoint: str = ""
    #: Where the stream started ("ns.table" -> (snapshot id, ms), None when empty): a
    #: load's pins or a catch-up's.
    pins: dict = field(default_factory=dict)
    #: The reasons of the catch-ups (INCREMENTAL or NO_DATA) and of the recomputes (FULL)
    #: after the stream stopped, by what stopped it ("rewrite" or "static").
    caught_up: list[tuple[str, str]] = field(default_factory=list)
    recomputed: list[tuple[str, str]] = field(default_factory=list)

    def name(self, table: str) -> str:
        return f"{CATALOG}.{self.namespace}.{table}"

    def append(self, source: str, values: list[tuple[int, int]]) -> None:
        text = ", ".join(f"({next(self.next_id)}, {c}, {a})" for c, a in values)
        self.spark.sql(f"INSERT INTO {self.name(source)} VALUES {text}")

    def change(self, kind: str, source: str, argument: Any) -> None:
        table = self.name(source)
        if kind == "delete":
            self.spark.sql(f"DELETE FROM {table} WHERE amount % 3 = {argument}")
        elif kind == "update":
            self.spark.sql(
                f"UPDATE {table} SET amount = amount + 7, customer = customer % 4 + 1 "
                f"WHERE amount % 3 = {argument}"
            )
        elif kind == "merge":
            # Odd customers pick an existing row to update (or delete: an amount that is a
            # multiple of 5), the others insert a new one.
            known = sorted(r[0] for r in self.spark.table(table).select("id").collect())
            ids: list[int] = []
            for customer, _ in argument:
                pick = known[customer % len(known)] if known and customer % 2 else None
                ids.append(pick if pick is not None and pick not in ids else next(self.next_id))
            values = ", ".join(f"({i}, {c}, {a})" for i, (c, a) in zip(ids, argument, strict=True))
            self.spark.sql(
                f"MERGE INTO {table} t USING (SELECT * FROM VALUES {values} "
                "AS s(id, customer, amount)) s ON t.id = s.id "
                "WHEN MATCHED AND s.amount % 5 = 0 THEN DELETE "
                "WHEN MATCHED THEN UPDATE SET t.amount = s.amount, t.customer = s.customer "
                "WHEN NOT MATCHED THEN INSERT *"
            )
        else:
            self.spark.sql(
                f"INSERT OVERWRITE {table} SELECT id, customer, amount + 1 FROM {table} "
                f"WHERE amount % 3 <> {argument}"
            )

    def compact(self, table: str) -> None:
        """A compaction (a `replace` snapshot): of a source, which the stream skips, or of
        the continuous table itself (table maintenance), between its micro-batches as the
        table's rewrite lease orders them in the streaming process."""
        if table == "mt":
            self.batches()
        self.spark.sql(
            f"CALL {CATALOG}.system.rewrite_data_files(table => '{self.namespace}.{table}', "
            "options => map('min-input-files', '2'))"
        )

    def state(self, pins: dict) -> dict[str, str]:
        """The refresh state of a commit that read the sources at `pins`."""
        return refresh_state(
            version=1,
            sources={name: ("", pin[0] if pin else None) for name, pin in pins.items()},
            started_ms=0,
        ).summary()

    def load_and_start(self) -> None:
        """A load at the source's snapshot now, then the stream just after it (a start
        without a checkpoint, a manual refresh, a recompute)."""
        sources = [(CATALOG, *source) for source in (*self.plan.streams, *self.plan.static)]
        pins = stream_loads.pinned_snapshots(self.spark, sources)
        stream_loads.load(
            self.spark,
            query=self.query,
            target=[CATALOG, self.namespace, "mt"],
            sources=sources,
            pins=pins,
            namespace=[self.namespace],
            catalog=CATALOG,
            snapshot_properties=self.state(pins),
        )
        self.start(pins)

    def start(self, pins: dict) -> None:
        """The stream from a new checkpoint, just after `pins`."""
        self.pins = pins
        checkpoint = self.folder / f"checkpoint-{next(self.checkpoints)}"
        self.checkpoint = str(checkpoint)
        self.running = stream_queries.start(
            self.spark,
            plan=self.plan,
            query=self.query,
            target=[CATALOG, self.namespace, "mt"],
            catalog=CATALOG,
            namespace=[self.namespace],
            checkpoint=self.checkpoint,
            key=f"exact-{self.namespace}-{checkpoint.name}",
            trigger_seconds=0.5,
            start_after={k: tuple(v) for k, v in pins.items() if v},
            on_batch=lambda result: None,
            version=1,
            uuids={},
        )

    def catch_up(self, stopped: str) -> None:
        """The stopped stream catches up, as refresh.streams.catch_up does: incrementally by the
        table's key from the snapshots it holds, then streams on from a new checkpoint just
        after the snapshots it read; or, where it cannot, the table is recomputed."""
        caught = stream_catch_up.plan_catch_up(
            self.spark,
            plan=self.plan,
            key=self.key,
            catalog=CATALOG,
            checkpoint=self.checkpoint,
            start_after=self.pins,
            full_outer_join=has_full_outer_join(self.query),
            null_supplied=null_supplied_key(self.query, self.key),
        )
        if caught.decision.kind is Kind.FULL:
            self.recomputed.append((stopped, caught.decision.reason))
            self.load_and_start()
            return
        if caught.decision.kind is Kind.INCREMENTAL:
            stream_catch_up.catch_up(
                self.spark,
                caught,
                plan=self.plan,
                key=self.key,
                query=self.query,
                target=[CATALOG, self.namespace, "mt"],
                catalog=CATALOG,
                namespace=[self.namespace],
                properties=self.state(dict(caught.pins)),
            )
        self.caught_up.append((stopped, caught.decision.reason))
        self.start(dict(caught.pins))

    def batches(self) -> None:
        """Wait for the stream to take in what the source has; a stream that a source's
        delete, update, merge or overwrite stopped catches up (or is recomputed), as the
        streaming process does."""
        try:
            self.running.processAllAvailable()
        except Exception:  # noqa: BLE001 - Iceberg's stream refuses a rewritten source
            self.running.stop()
            self.catch_up("rewrite")
            self.running.processAllAvailable()
        # A static source that moved on: the batches above read it at the load's snapshot;
        # the table catches up, as the streaming process does
        # (refresh.streams.catch_up.follow_static).
        static = [(CATALOG, *source) for source in self.plan.static]
        current = {
            name: (pin[0] if pin else None)
            for name, pin in stream_loads.pinned_snapshots(self.spark, static).items()
        }
        if static_moved(self.plan, self.pins, current):
            stream_queries.stop_between_batches(self.running)
            self.catch_up("static")

    def manual_refresh(self) -> None:
        stream_queries.stop_between_batches(self.running)
        self.load_and_start()

    def stop(self) -> None:
        if self.running is not None and self.running.isActive:
            self.running.stop()

    def verify_every_snapshot(self) -> int:
        """Every snapshot of the table with a refresh state passes the verifier; how many."""
        rows_ = self.spark.sql(f"SELECT snapshot_id, summary FROM {self.name('mt')}.snapshots")
        verified = 0
        for row in rows_.collect():
            state = read(row["summary"])
            if state is None:
                continue
            verdict = verify.verify_snapshot(
                self.spark,
                query=self.query,
                target=[CATALOG, self.namespace, "mt"],
                snapshot_id=row["snapshot_id"],
                pins={(*s.namespace, s.name): s.snapshot_id for s in state.tables},
                namespace=[self.namespace],
                catalog=CATALOG,
            )
            assert verdict.exact, (self.query, row["snapshot_id"], verdict)
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


def _stream(session: SparkSession, shape: str, folder: Path) -> tuple[Stream, History]:
    """Fresh sources and a continuous table of `shape` over them, and the cascade over it."""
    query, key, rollup, rollup_key = SHAPES[shape]
    namespace = f"exact{next(_namespaces)}"
    session.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{namespace}")
    session.sql(f"USE {CATALOG}.{namespace}")
    properties = ", ".join(f"'{k}' = '{v}'" for k, v in MERGE_ON_READ.items())
    for source in SOURCES:
        # orders takes its deletes, updates and merges as position deletes, returns as
        # rewritten files.
        written = f" TBLPROPERTIES ({properties})" if source == "orders" else ""
        session.sql(
            f"CREATE TABLE {CATALOG}.{namespace}.{source} "
            f"(id BIGINT, customer BIGINT, amount BIGINT) USING iceberg{written}"
        )
    for table, select in (("mt", query), ("rollup", rollup)):
        session.sql(
            f"CREATE TABLE {CATALOG}.{namespace}.{table} USING iceberg "
            f"TBLPROPERTIES ({properties}) AS SELECT * FROM ({select}) WHERE false"
        )
    plan = plan_stream(query, namespace=[namespace], catalog=CATALOG, primary_key=key)
    cascade = History(
        session,
        Shape(f"{shape} cascade", rollup, key=rollup_key),
        namespace,
        plan_stream(rollup, namespace=[namespace], catalog=CATALOG, primary_key=rollup_key),
        target="rollup",
        strict=False,
    )
    return Stream(session, query, plan, namespace, folder / namespace, key=key), cascade


@pytest.mark.parametrize("shape", list(SHAPES))
def test_every_snapshot_of_a_continuous_table_answers_what_it_records(
    session: SparkSession, shape: str, tmp_path: Path
):
    kinds: Counter = Counter()
    #: (what the stream did, what stopped it), over every history.
    stops: Counter = Counter()

    @settings(
        max_examples=1,  # and TYPICAL: a minute or two of Spark each, three shapes
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        # Each example takes a minute of Spark: a failure is reported as found, unshrunk.
        phases=[Phase.explicit, Phase.generate],
    )
    @seed(zlib.crc32(shape.encode()))
    @example(history=TYPICAL)
    @given(history=histories)
    def check(history: list) -> None:
        stream, cascade = _stream(session, shape, tmp_path)
        try:
            stream.append("orders", [(1, 10)])
            stream.load_and_start()
            for kind, source, argument in history:
                if kind == "append":
                    stream.append(source, argument)
                elif kind == "batch":
                    stream.batches()
                elif kind == "cascade refresh":
                    cascade.refresh(None)  # while the stream may be writing
                elif kind == "manual refresh":
                    stream.append(source, argument)  # a writer keeps appending meanwhile
                    stream.manual_refresh()
                elif kind == "compact":
                    stream.compact(source)
                else:
                    stream.change(kind, source, argument)
            stream.append("orders", [(2, 99)])
            stream.append("returns", [(3, 98)])
            stream.batches()
            cascade.refresh(None)
            kinds.update(cascade.kinds)
            stops.update(("caught up", stopped) for stopped, _ in stream.caught_up)
            stops.update(("recomputed", stopped) for stopped, _ in stream.recomputed)
            if stream.key:
                # Never a recompute: every stop was caught up by key, and said what changed.
                assert stream.recomputed == [], stream.recomputed
                for _, reason in stream.caught_up:
                    assert reason.startswith(("incremental: ", "no data: ")), reason
                    assert reason.endswith("; the stream resumed after it"), reason
            else:
                assert stream.caught_up == [], stream.caught_up
                for _, reason in stream.recomputed:
                    assert "PRIMARY KEY (...) NOT ENFORCED" in reason, reason
            if stream.plan.static:
                # "returns" got rows after the load (the history's last appends at least).
                assert "static" in {stopped for stopped, _ in stream.caught_up}, stream
            assert stream.verify_every_snapshot() >= 2
            assert cascade.verify_every_snapshot() >= 1
            table = session.sql(f"SELECT * FROM {stream.name('mt')}").collect()
            expected = session.sql(stream.query).collect()
            assert sorted(map(tuple, table)) == sorted(map(tuple, expected))
        finally:
            stream.stop()

    check()
    # TYPICAL's delete, MERGE INTO and UPDATE of the streamed source, a round each (and,
    # for the UNION ALL, of the other streamed source): caught up by key, or, without a
    # key, recomputed.
    done = "caught up" if SHAPES[shape][1] else "recomputed"
    assert stops[(done, "rewrite")] >= 3, stops
    # The cascade's refreshes were incremental where the continuous table only appended.
    if not SHAPES[shape][1]:  # a merge plan's micro-batches rewrite rows: FULL every time
        assert kinds[Kind.INCREMENTAL] >= 1, kinds
