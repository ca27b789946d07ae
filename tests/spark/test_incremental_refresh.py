"""Incremental refreshes are exact, always: random histories of two or three sources
(appends, DELETE, UPDATE, MERGE INTO, overwrites and compactions; `orders` written
merge-on-read, `returns` (partitioned by day, its overwrites replacing one day) and
`customers` copy-on-write) with refreshes and compactions of the
table itself (table maintenance) in between, for every query shape an incremental refresh
maintains; after each refresh the table (or the partition refreshed) holds exactly what the
query gives over the sources.

Each refresh decides as the worker does (refresh.core.incremental.decide, here fed with the
lineage Spark reads from the tables' `snapshots` metadata instead of the catalog's mirror)
and applies the decision with the worker's code: refresh.spark.changes.incremental_refresh
for INCREMENTAL, refresh.spark.changes.recompute (a full refresh at pinned snapshots) for
FULL. The test also knows what the decision must be from the operations since the refresh
it starts from (appends only: INCREMENTAL; a delete, update, merge or overwrite: INCREMENTAL
for a table with a primary key, FULL without one; nothing or compactions only: NO_DATA), so a
refresh that silently falls back to FULL fails it too (the tables are small, so the policy is
'strict', where no change is too large to apply, and a FULL it refuses counts as FULL).
Each shape has a fixed seed: CI runs the same histories every time, different per shape,
and a typical one besides.

Each refresh also records what it answers in its snapshot (refresh.core.refresh_state), and
at the end of every history each snapshot of the table with a refresh state passes the
verifier (refresh.spark.verify: the query over the recorded source snapshots, by time
travel, equals the table at that snapshot), racing refreshes' snapshots included."""

from __future__ import annotations

import dataclasses
import itertools
import math
import zlib
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, example, given, seed, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from refresh.core.definition import MERGE_ON_READ
from refresh.core.incremental import (
    Baseline,
    Kind,
    Step,
    decide,
    has_full_outer_join,
    null_supplied_key,
)
from refresh.core.refresh_state import partition_entry, read, read_partition, refresh_state
from refresh.core.streaming import StreamPlan, plan_stream
from refresh.spark import changes, combined, key_merges, source_changes, verify
from refresh.spark.stream_offsets import source_lineage
from tests.live_server import CatalogServer
from tests.spark.conftest import REST_CATALOG, rest_session

CATALOG = REST_CATALOG
DAYS = ("2024-01-01", "2024-01-02")

SOURCES = {
    "orders": "id BIGINT, customer BIGINT, amount BIGINT, ds STRING",
    "returns": "id BIGINT, customer BIGINT, amount BIGINT, ds STRING",
    "customers": "customer BIGINT, region STRING",
}
#: How each source's DELETE, UPDATE and MERGE write: position deletes, or rewritten files.
MERGE_ON_READ_SOURCES = {"orders"}
#: `returns` is partitioned by day, and its overwrite replaces one partition.
PARTITIONED_SOURCES = {"returns": "ds"}


@dataclass(frozen=True)
class Shape:
    name: str
    query: str
    key: tuple[str, ...] = ()
    partitioned_by: tuple[str, ...] = ()


SHAPES = [
    Shape("filter", "SELECT id, customer, amount, ds FROM orders WHERE amount > 40"),
    Shape(
        "group by",
        "SELECT customer, count(*) AS n, sum(amount) AS total, min(amount) AS lo, "
        "max(amount) AS hi, avg(amount) AS mean, count(DISTINCT amount) AS amounts "
        "FROM orders GROUP BY customer",
        key=("customer",),
    ),
    Shape(
        "group by of combinable aggregates (only the appended rows are read)",
        "SELECT customer, count(*) AS n, count(amount) AS c, sum(amount) AS total, "
        "min(amount) AS lo, max(amount) AS hi FROM orders WHERE amount > 5 GROUP BY customer",
        key=("customer",),
    ),
    Shape(
        "fact-dimension join",
        "SELECT o.id, o.amount, c.region FROM orders o JOIN customers c ON o.customer = c.customer",
        key=("id",),
    ),
    Shape(
        "aggregation over a join",
        "SELECT c.region, count(*) AS n, sum(o.amount) AS total FROM orders o "
        "JOIN customers c ON o.customer = c.customer GROUP BY c.region",
        key=("region",),
    ),
    Shape(
        "union all with a primary key",
        "SELECT id, amount, 'order' AS kind FROM orders "
        "UNION ALL SELECT id, -amount AS amount, 'return' AS kind FROM returns",
        key=("id", "kind"),
    ),
    Shape(
        "left join (rows keep their key when the other side leaves)",
        "SELECT o.id, o.amount, c.region FROM orders o "
        "LEFT JOIN customers c ON o.customer = c.customer",
        key=("id",),
    ),
    Shape(
        "having (groups leave)",
        "SELECT customer, count(*) AS n FROM orders GROUP BY customer HAVING count(*) < 3",
        key=("customer",),
    ),
    Shape(
        "date-formatter partitions, filter",
        "SELECT id, amount, ds FROM orders WHERE amount > 20",
        partitioned_by=("ds",),
    ),
    Shape(
        "date-formatter partitions, group by",
        "SELECT ds, customer, sum(amount) AS total FROM orders GROUP BY ds, customer",
        key=("ds", "customer"),
        partitioned_by=("ds",),
    ),
]

rows = st.lists(
    st.tuples(st.integers(1, 4), st.integers(0, 100), st.sampled_from(DAYS)),
    min_size=1,
    max_size=3,
)
OPERATIONS = {
    "append": st.tuples(st.just("append"), st.sampled_from(["orders", "orders", "returns"]), rows),
    "dimension": st.tuples(st.just("dimension"), st.just("customers"), st.integers(1, 5)),
    "delete": st.tuples(
        st.just("delete"), st.sampled_from(["orders", "returns"]), st.integers(0, 2)
    ),
    "overwrite": st.tuples(
        st.just("overwrite"), st.sampled_from(["orders", "returns"]), st.integers(0, 2)
    ),
    "update": st.tuples(
        st.just("update"), st.sampled_from(["orders", "returns"]), st.integers(0, 2)
    ),
    "merge": st.tuples(st.just("merge"), st.sampled_from(["orders", "returns"]), rows),
    # A dimension's row changes or leaves (customers has no DELETE above).
    "dimension change": st.tuples(
        st.just("dimension change"), st.just("customers"), st.integers(1, 5)
    ),
    "compact": st.tuples(st.just("compact"), st.just("orders"), st.none()),
    # Table maintenance compacts the materialized table itself between its refreshes.
    "maintenance": st.tuples(st.just("compact"), st.just("mt"), st.none()),
    "refresh": st.tuples(st.just("refresh"), st.none(), st.sampled_from([None, *DAYS])),
    # A writer appends while the refresh runs (after it read the snapshots it records).
    "racing refresh": st.tuples(
        st.just("racing refresh"), st.none(), st.sampled_from([None, *DAYS])
    ),
    "failing refresh": st.tuples(st.just("failing refresh"), st.none(), st.none()),
}
#: Appends and refreshes most of the time, as a table's life is; the rest now and then.
operation = st.sampled_from(
    ["append"] * 4
    + ["refresh"] * 4
    + ["dimension"] * 2
    + ["delete", "overwrite", "update", "merge", "merge", "dimension change"]
    + ["compact", "maintenance", "racing refresh", "failing refresh"]
).flatmap(OPERATIONS.__getitem__)
histories = st.lists(operation, min_size=4, max_size=10)
#: Every shape also runs this history: appends over several refreshes (whole and partition),
#: a late dimension row, then a delete.
TYPICAL = [
    ("append", "orders", [(1, 10, DAYS[0]), (2, 70, DAYS[1])]),
    ("refresh", None, None),
    ("append", "orders", [(3, 45, DAYS[0])]),
    ("dimension", "customers", 3),
    ("append", "returns", [(1, 5, DAYS[1])]),
    ("refresh", None, DAYS[0]),
    ("append", "orders", [(1, 90, DAYS[1]), (1, 1, DAYS[0])]),
    ("racing refresh", None, None),
    ("compact", "orders", None),
    ("compact", "mt", None),
    ("append", "orders", [(4, 33, DAYS[1])]),
    ("refresh", None, None),
    ("delete", "orders", 0),
    ("refresh", None, None),
    ("merge", "orders", [(2, 8, DAYS[0]), (3, 61, DAYS[1])]),
    ("failing refresh", None, None),
    ("dimension change", "customers", 3),
    ("refresh", None, DAYS[1]),
    ("update", "returns", 2),
    ("overwrite", "orders", 1),
    ("overwrite", "returns", 1),
    ("refresh", None, None),
]

_namespaces = itertools.count(1)


@dataclass
class Run:
    partition: dict[str, str]
    snapshots: dict[str, int | None]
    table_snapshot: int | None
    #: How many operations had happened when it ran.
    at: int


@dataclass
class History:
    """One random history against fresh tables, refreshed as the worker refreshes."""

    spark: SparkSession
    shape: Shape
    namespace: str
    plan: StreamPlan
    #: The materialized table refreshed.
    target: str = "mt"
    #: Whether only this history writes the sources, so that it knows what each refresh
    #: must decide and what the table must hold right after it (a continuous table as the
    #: source changes behind its back: then the verifier alone judges, at the end).
    strict: bool = True
    #: (source, "append" | "change" | "compact"), in order.
    ops: list[tuple[str, str]] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)
    next_id: itertools.count = field(default_factory=lambda: itertools.count(1))
    kinds: Counter = field(default_factory=Counter)

    def name(self, table: str) -> str:
        return f"{CATALOG}.{self.namespace}.{table}"

    # -- what happens to the sources --------------------------------------------------------

    def apply(self, kind: str, source: str, argument: object) -> None:
        before = self.current(source)
        self._apply(kind, source, argument)
        if self.current(source) != before:
            effect = {"append": "append", "dimension": "append", "compact": "compact"}
            # A MERGE that only inserted is an overwrite snapshot still: a change.
            self.ops.append((source, effect.get(kind, "change")))

    def _apply(self, kind: str, source: str, argument: object) -> None:
        spark = self.spark
        if kind == "append":
            values = ", ".join(
                f"({next(self.next_id)}, {customer}, {amount}, '{day}')"
                for customer, amount, day in argument  # type: ignore[union-attr]
            )
            spark.sql(f"INSERT INTO {self.name(source)} VALUES {values}")
        elif kind == "dimension":
            known = {r[0] for r in spark.table(self.name("customers")).collect()}
            if argument in known:  # a dimension's key is unique: a new customer only
                return
            region = ["north", "south"][argument % 2]  # type: ignore[operator]
            spark.sql(f"INSERT INTO {self.name('customers')} VALUES ({argument}, '{region}')")
        elif kind == "delete":
            if spark.table(self.name(source)).where(f"amount % 3 = {argument}").isEmpty():
                return
            spark.sql(f"DELETE FROM {self.name(source)} WHERE amount % 3 = {argument}")
        elif kind == "overwrite" and source in PARTITIONED_SOURCES:
            # One partition (a day) replaced: its rows kept but some, the others untouched.
            day = DAYS[argument % len(DAYS)]  # type: ignore[operator]
            spark.sql(
                f"INSERT OVERWRITE {self.name(source)} PARTITION (ds = '{day}') "
                f"SELECT id, customer, amount + 1 FROM {self.name(source)} "
                f"WHERE ds = '{day}' AND amount % 3 <> {argument}"
            )
        elif kind == "overwrite":
            spark.sql(
                f"INSERT OVERWRITE {self.name(source)} SELECT id, customer, amount + 1, ds "
                f"FROM {self.name(source)} WHERE amount % 3 <> {argument}"
            )
        elif kind == "update":
            if spark.table(self.name(source)).where(f"amount % 3 = {argument}").isEmpty():
                return
            spark.sql(
                f"UPDATE {self.name(source)} SET amount = amount + 7, customer = "
                f"customer % 4 + 1 WHERE amount % 3 = {argument}"
            )
        elif kind == "merge":
            # The rows' customers pick existing rows to update (by id) and new ones to insert.
            known = sorted(r[0] for r in spark.table(self.name(source)).select("id").collect())
            ids: list[int] = []
            for customer, _, _ in argument:  # type: ignore[union-attr]
                pick = known[customer % len(known)] if known and customer % 2 else None
                ids.append(pick if pick is not None and pick not in ids else next(self.next_id))
            values = ", ".join(
                f"({i}, {customer}, {amount}, '{day}')"
                for i, (customer, amount, day) in zip(ids, argument, strict=True)  # type: ignore[arg-type]
            )
            spark.sql(
                f"MERGE INTO {self.name(source)} t USING (SELECT * FROM VALUES {values} "
                "AS s(id, customer, amount, ds)) s ON t.id = s.id "
                "WHEN MATCHED AND s.amount % 5 = 0 THEN DELETE "
                "WHEN MATCHED THEN UPDATE SET t.amount = s.amount, t.customer = s.customer "
                "WHEN NOT MATCHED THEN INSERT *"
            )
        elif kind == "dimension change":
            known = {r[0] for r in spark.table(self.name("customers")).collect()}
            if argument not in known:
                return
            if argument % 2:  # type: ignore[operator]
                spark.sql(f"DELETE FROM {self.name('customers')} WHERE customer = {argument}")
            else:
                spark.sql(
                    f"UPDATE {self.name('customers')} SET region = concat(region, '+') "
                    f"WHERE customer = {argument}"
                )
        elif kind == "compact":
            spark.sql(
                f"CALL {CATALOG}.system.rewrite_data_files(table => '{self.namespace}.{source}', "
                "options => map('min-input-files', '2'))"
            )

    # -- the catalog's view of a table, from Spark's metadata tables -------------------------

    def current(self, table: str) -> int | None:
        found = self.spark.table(f"{self.name(table)}.refs").where("name = 'main'").collect()
        return found[0]["snapshot_id"] if found else None

    def lineage(self, table: str) -> dict[int, Step]:
        # The source's metadata as the streaming process reads it (the mirror says the same).
        return source_lineage(self.spark, (CATALOG, self.namespace, table))

    # -- a refresh, as refresh.runner does it ------------------------------------------------

    def refresh(self, day: str | None, *, racing: bool = False, failing: bool = False) -> None:
        partition = {"ds": day} if day and self.shape.partitioned_by else None
        sources = [".".join(s) for s in (*self.plan.streams, *self.plan.static)]
        now = {source: self.current(source.split(".")[-1]) for source in sources}
        baseline_index, own = self._baseline(partition)
        baseline = None
        if baseline_index is not None:
            run = self.runs[baseline_index]
            baseline = Baseline(baseline_index, run.snapshots, 1, run.table_snapshot)
        decision = decide(
            now=now,
            unknown=[],
            baseline=baseline,
            lineages={s: self.lineage(s.split(".")[-1]) for s in sources},
            plan=self.plan,
            table_lineage=self.lineage(self.target),
            table_snapshot=self.current(self.target),
            own_snapshots=own,
            definition_version=1,
            partition=partition,
            partition_columns=list(partition or {}),
            options={"refresh.incremental": "strict"},
            full_outer_join=has_full_outer_join(self.shape.query),
            primary_key=self.shape.key,
            null_supplied=null_supplied_key(self.shape.query, self.shape.key),
        )
        if self.strict:
            assert decision.kind is self._expected(baseline_index, partition), (
                decision,
                self.ops,
            )
        self.kinds[decision.kind] += 1
        at = len(self.ops)
        if racing:  # committed after the run read its sources' snapshots
            self.apply("append", "orders", [(2, 77, DAYS[0]), (4, 3, DAYS[1])])
        target = [CATALOG, self.namespace, self.target]
        before = self.current(self.target)
        state = refresh_state(
            version=1, sources={s: ("", now[s]) for s in sources}, started_ms=0
        ).summary() | partition_entry(partition)
        if decision.kind is Kind.NO_DATA:
            if self.strict and not racing:
                self._check(partition)
            return
        if failing:
            # The job fails at its write (the worker dies, Spark refuses the commit): nothing
            # is committed, no run is recorded, and the next refresh starts from the last
            # successful one's state.
            with pytest.raises(RuntimeError, match="half way"), _failing_writes():
                self._write(decision, partition, now, target, state)
            assert self.current(self.target) == before, "nothing half-written"
            return
        self._write(decision, partition, now, target, state)
        self.runs.append(Run(partition or {}, now, self.current(self.target), at))
        # Racing: the table is as of `now`; the next refresh must catch up.
        if self.strict and not racing:
            self._check(partition)

    def _write(self, decision, partition, now, target, state) -> None:
        """Apply the decision as refresh.runner does."""
        if decision.kind is Kind.INCREMENTAL:
            by_name = {".".join(s): s for s in self._sources()}
            plan = self.plan
            if not plan.key and self.shape.key:  # as refresh.runner keys an append plan
                plan = dataclasses.replace(plan, key=self.shape.key)
            changes.incremental_refresh(
                self.spark,
                plan=plan,
                query=self.shape.query,
                target=target,
                catalog=CATALOG,
                namespace=[self.namespace],
                deltas={by_name[d.source]: (d.since, d.until) for d in decision.deltas},
                changed=[by_name[d.source] for d in decision.deltas if d.changed],
                pins={source: now[name] for name, source in by_name.items()},
                partition=partition,
                properties=state,
            )
        else:
            changes.recompute(
                self.spark,
                query=self.shape.query,
                target=target,
                catalog=CATALOG,
                namespace=[self.namespace],
                pins={source: now[".".join(source)] for source in self._sources()},
                partition=partition,
                properties=state,
            )

    def verify_every_snapshot(self) -> int:
        """Every snapshot of the table that records a refresh state answers exactly what it
        records (the verifier's verdict); how many there were."""
        rows = self.spark.sql(
            f"SELECT snapshot_id, summary FROM {self.name(self.target)}.snapshots"
        )
        verified = 0
        for row in rows.collect():
            state = read(row["summary"])
            if state is None:
                continue
            verdict = verify.verify_snapshot(
                self.spark,
                query=self.shape.query,
                target=[CATALOG, self.namespace, self.target],
                snapshot_id=row["snapshot_id"],
                pins={(*s.namespace, s.name): s.snapshot_id for s in state.tables},
                namespace=[self.namespace],
                catalog=CATALOG,
                partition=read_partition(row["summary"]),
            )
            assert verdict.exact, (self.shape.name, row["snapshot_id"], verdict, self.ops)
            verified += 1
        return verified

    def _sources(self) -> list[tuple[str, ...]]:
        return [*self.plan.streams, *self.plan.static]

    def _baseline(self, partition: dict[str, str] | None) -> tuple[int | None, list[int]]:
        """refresh.sources.decide's choice: the latest run covering these rows, and the
        table snapshots of later runs of other partitions."""
        own: list[int] = []
        for index in range(len(self.runs) - 1, -1, -1):
            run = self.runs[index]
            if not run.partition or run.partition == (partition or {}):
                return index, own
            if not partition:
                return None, own
            own.append(run.table_snapshot)
        return None, own

    def _expected(self, baseline_index: int | None, partition: dict[str, str] | None) -> Kind:
        if baseline_index is None:
            return Kind.FULL
        read = {source[-1] for source in (*self.plan.streams, *self.plan.static)}
        since = [
            effect for source, effect in self.ops[self.runs[baseline_index].at :] if source in read
        ]
        if "change" in since:
            # A deleted row names a row of the table only by its primary key, and a
            # partition's rows only when the key holds the partition's column.
            keyed = bool(self.shape.key) and all(c in self.shape.key for c in partition or {})
            return Kind.INCREMENTAL if keyed else Kind.FULL
        return Kind.INCREMENTAL if "append" in since else Kind.NO_DATA

    def _check(self, partition: dict[str, str] | None) -> None:
        where = f" WHERE ds = '{partition['ds']}'" if partition else ""
        expected = self.spark.sql(f"SELECT * FROM ({self.shape.query}){where}").collect()
        actual = self.spark.sql(f"SELECT * FROM {self.name(self.target)}{where}").collect()
        assert _bag(actual) == _bag(expected), (
            f"{self.shape.name} after {self.ops}: table {sorted(actual)} != "
            f"query {sorted(expected)}"
        )


@contextmanager
def _failing_writes() -> Iterator[None]:
    """Every way an incremental refresh commits (an append, a MERGE, an overwrite) fails."""

    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the refresh failed half way")

    # Where each is called from: changes appends and overwrites, key_merges and combined
    # merge.
    places = [
        (changes, "append"),
        (changes, "full_refresh"),
        (key_merges, "merge_retrying"),
        (combined, "merge_retrying"),
    ]
    saved = {(module, name): getattr(module, name) for module, name in places}
    try:
        for module, name in saved:
            setattr(module, name, fail)
        yield
    finally:
        for (module, name), value in saved.items():
            setattr(module, name, value)


def _bag(found: list) -> Counter:
    def value(v: object) -> object:
        return round(v, 9) if isinstance(v, float) and math.isfinite(v) else v

    return Counter(tuple(value(v) for v in row) for row in found)


@pytest.fixture(scope="module")
def session(spark: SparkSession, catalog_server: CatalogServer) -> SparkSession:
    """One session for every history, on the app's REST catalog as the workers' are."""
    return rest_session(spark, catalog_server)


def _start(session: SparkSession, shape: Shape) -> History:
    namespace = f"inc{next(_namespaces)}"
    session.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{namespace}")
    session.sql(f"USE {CATALOG}.{namespace}")
    properties = ", ".join(f"'{k}' = '{v}'" for k, v in MERGE_ON_READ.items())
    for table, columns in SOURCES.items():
        written = f" TBLPROPERTIES ({properties})" if table in MERGE_ON_READ_SOURCES else ""
        if table in PARTITIONED_SOURCES:
            written = f" PARTITIONED BY ({PARTITIONED_SOURCES[table]}){written}"
        session.sql(
            f"CREATE TABLE {CATALOG}.{namespace}.{table} ({columns}) USING iceberg{written}"
        )
    partitioned = (
        f" PARTITIONED BY ({', '.join(shape.partitioned_by)})" if shape.partitioned_by else ""
    )
    session.sql(
        f"CREATE TABLE {CATALOG}.{namespace}.mt USING iceberg{partitioned} "
        f"TBLPROPERTIES ({properties}) AS SELECT * FROM ({shape.query}) WHERE false"
    )
    plan = plan_stream(shape.query, namespace=[namespace], catalog=CATALOG, primary_key=shape.key)
    return History(session, shape, namespace, plan)


@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_every_refresh_leaves_the_table_exactly_as_the_query_over_the_sources(
    session: SparkSession, shape: Shape
):
    seen: Counter = Counter()

    @settings(
        max_examples=1,  # and TYPICAL, per shape: the suite's time budget
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @seed(zlib.crc32(shape.name.encode()))  # each shape its own histories, the same each run
    @example(history=TYPICAL)
    @given(history=histories)
    def check(history: list) -> None:
        run = _start(session, shape)
        run.refresh(None)  # the first refresh (CREATE's)
        for kind, source, argument in history:
            if kind in ("refresh", "racing refresh", "failing refresh"):
                run.refresh(
                    argument,  # type: ignore[arg-type]
                    racing=kind == "racing refresh",
                    failing=kind == "failing refresh",
                )
            else:
                run.apply(kind, source, argument)
        run.apply("append", "orders", [(1, 50, DAYS[0])])
        run.refresh(None)
        seen.update(run.kinds)
        assert run.verify_every_snapshot() >= 1

    check()
    # Every history ends with an append and a refresh: incremental work was done.
    assert seen[Kind.INCREMENTAL] >= 1, seen


def test_row_changes_are_the_rows_deleted_and_inserted_and_too_spread_ones_are_not_read(
    session: SparkSession,
):
    """refresh.spark.source_changes on a merge-on-read table of four files: an UPDATE of one
    row in each file and a MERGE are read as exactly the rows they deleted and inserted;
    bounded by a share of the rows read, the same change is refused before any row is read
    (every file holds one of the changed rows)."""
    namespace = f"inc{next(_namespaces)}"
    properties = ", ".join(f"'{k}' = '{v}'" for k, v in MERGE_ON_READ.items())
    name = f"{CATALOG}.{namespace}.spread"
    session.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{namespace}")
    session.sql(
        f"CREATE TABLE {name} (id BIGINT, v BIGINT) USING iceberg TBLPROPERTIES ({properties})"
    )
    for start in range(0, 40, 10):  # four appends: four files
        session.sql(f"INSERT INTO {name} SELECT id, id FROM range({start}, {start + 10})")
    snapshots = lambda: [  # noqa: E731
        r[0]
        for r in session.sql(
            f"SELECT snapshot_id FROM {name}.snapshots ORDER BY committed_at"
        ).collect()
    ]
    since = snapshots()[-1]
    session.sql(f"UPDATE {name} SET v = -v WHERE id % 10 = 3")
    session.sql(
        f"MERGE INTO {name} t USING (SELECT 5L AS id, 50L AS v UNION ALL SELECT 99L, 9L) s "
        "ON t.id = s.id WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT *"
    )
    until = snapshots()[-1]
    table = (CATALOG, namespace, "spread")
    with source_changes.row_changes(session, table=table, since=since, until=until) as found:
        deleted = sorted(tuple(r) for r in found.deleted.collect())
        inserted = sorted(tuple(r) for r in found.inserted.collect())
    assert deleted == [(3, 3), (5, 5), (13, 13), (23, 23), (33, 33)]
    assert inserted == [(3, -3), (13, -13), (23, -23), (33, -33), (99, 9)]
    too_spread = source_changes.row_changes(
        session, table=table, since=since, until=until, max_read=0.5
    )
    with pytest.raises(source_changes.ChangesTooLarge, match="more than refresh.incremental"):
        too_spread.__enter__()
