"""Apply what the sources appended to a materialized table: the one implementation behind a
continuous table's micro-batches (refresh.spark.streaming) and a FULL table's incremental
refreshes (refresh.runner, refresh.core.incremental). Django-free.

- **append** plans (projections, filters, UNION ALL): the query over the appended rows
  (every other source read as empty) gives exactly the rows to add; one `append` commit.
- **combined** aggregations (COUNT / SUM / MIN / MAX of one table by its primary key), in
  a refresh: the aggregation of the appended rows alone, merged by adding counts and sums
  and keeping minima and maxima (`merge_combined`); nothing the source held is read.
- **merge** plans (aggregations, joins; a primary key): the query over each changed
  source's appended rows (the other sources whole) names the primary keys they touch; the
  query over the whole sources, for those keys only, gives their rows now; one `MERGE INTO`
  on the primary key updates them, inserts the new ones and deletes a touched key the query
  no longer gives (a HAVING that stopped holding). Every touched key's row is then the
  query's answer over the sources, whatever the aggregate or join.

A table's expectations (refresh.core.expectations) are applied to the rows each plan
computes (`batch.expected`): an append plan's new rows, a merge plan's touched keys' rows
(a key whose row DROP ROW leaves out is deleted, as a key the query no longer gives). A
combined aggregation never computes a key's whole row, so a table with expectations
recomputes its touched keys instead. Since a condition reads one output row, the table
then holds exactly what `expectations.kept_query` gives over the sources.

The user's query, however rewritten, reaches Spark only through the sandbox; the temporary
views the callers make (appended rows, pinned sources) are the only others it may read."""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from refresh.core import expectations as ex
from refresh.core.expectations import Expectation
from refresh.core.incremental import combinable
from refresh.core.streaming import StreamPlan, having_dropped, inner_toward, rewrite_sources
from refresh.spark.batch import (
    as_rows,
    expected,
    full_refresh,
    partition_condition,
    quote,
    release,
)
from refresh.spark.source_changes import row_changes
from runtime.spark import sandbox
from runtime.spark.commits import run_sql, with_properties
from runtime.spark.errors import is_commit_conflict

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from sqlglot import exp

Source = tuple[str, ...]

GONE = "__lakeview_gone"
_names = itertools.count()


def text_of(query: str | exp.Query) -> str:
    """A query as Spark SQL text: a parsed one rendered."""
    return query if isinstance(query, str) else query.sql(dialect="spark")


def _temp(frame: DataFrame, kind: str) -> str:
    name = f"__lakeview_{kind}_{next(_names)}"
    frame.createOrReplaceTempView(name)
    return name


def _partition_filter(frame: DataFrame, partition: Mapping[str, str] | None) -> DataFrame:
    return frame.where(partition_condition(partition)) if partition else frame


def appended_rows(
    session: SparkSession,
    *,
    query: str | exp.Query,
    appended: Mapping[Source, str],
    sources: Sequence[Source],
    whole: Mapping[Source, str],
    namespace: Sequence[str],
    catalog: str,
    scratch: list[str],
) -> DataFrame:
    """An append plan's new rows: the query with each source read from its appended rows
    (`appended`: source -> view) or, unchanged, as empty (views it makes go in `scratch`,
    for the caller to drop once the rows are written)."""
    replacements = dict(appended)
    for source in sources:
        if source not in replacements:
            base = whole.get(source) or quote((catalog, *source))
            replacements[source] = _temp(session.table(base).limit(0), "none")
            scratch.append(replacements[source])
    sql = rewrite_sources(query, replacements, namespace=namespace, catalog=catalog)
    return sandbox.query(session, sql, catalog=catalog, trusted_views=replacements.values())


def append(frame: DataFrame, *, target: Sequence[str], properties: Mapping[str, str]) -> None:
    """`frame`'s rows appended to the table in one commit, with snapshot properties."""
    with_properties(frame.writeTo(quote(target)), properties).append()


def merge_changes(
    session: SparkSession,
    *,
    plan: StreamPlan,
    query: str | exp.Query,
    target: Sequence[str],
    appended: Mapping[Source, str],
    whole: Mapping[Source, str],
    namespace: Sequence[str],
    catalog: str,
    deleted: Mapping[Source, str] | None = None,
    old: Mapping[Source, str] | None = None,
    partition: Mapping[str, str] | None = None,
    merge_turn: Callable[[], AbstractContextManager[Any]] = nullcontext,
    properties: Mapping[str, str] | None = None,
    expectations: Sequence[Expectation] = (),
    violations: dict[str, int] | None = None,
) -> int:
    """A merge plan's changes (see the module); returns how many keys were recomputed.
    `appended` maps each changed source to a view of the rows it inserted, `deleted` to a
    view of the rows it deleted (as they were); `whole` maps sources to views of them as the
    refresh reads them (pinned snapshots), `old` to views of them at the snapshots the last
    refresh read, and a source in neither is read as it is now. Inserted rows find their
    keys against the other sources as they are now, deleted rows against them as they were:
    together every key whose rows differ between the two. `properties` go into the MERGE's
    snapshot summary. `expectations` are applied to the touched keys' rows (their violations
    counted into `violations`; a FAIL UPDATE one raises before the MERGE); a key whose row
    DROP ROW leaves out is deleted."""
    key = [quote([k]) for k in plan.key]
    columns = ", ".join(key)
    deleted = deleted or {}
    trusted = [*appended.values(), *deleted.values(), *whole.values(), *(old or {}).values()]
    touched = []
    keyed = having_dropped(query)
    sides = [(source, view, whole) for source, view in appended.items()]
    sides += [(source, view, {**whole, **(old or {})}) for source, view in deleted.items()]
    for source, view, others in sides:
        toward = inner_toward(keyed, source, namespace=namespace, catalog=catalog)
        partial = rewrite_sources(
            toward, {**others, source: view}, namespace=namespace, catalog=catalog
        )
        touched.append(
            sandbox.query(
                session,
                f"SELECT DISTINCT {columns} FROM ({partial})",
                catalog=catalog,
                trusted_views=trusted,
            )
        )
    # Kept as plain rows: the recompute, the gone keys and the MERGE read a leaf, not the
    # plans that found the keys again.
    keys_frame = as_rows(
        _partition_filter(
            functools.reduce(lambda left, right: left.union(right), touched).distinct(),
            partition,
        )
    )
    count = keys_frame.count()
    keys = _temp(keys_frame, "keys")
    now = rewrite_sources(query, dict(whole), namespace=namespace, catalog=catalog)
    if expectations:
        now = ex.flagged_query(now, expectations)
    rows = _rows_of_keys(
        session,
        query=now,
        keys=keys,
        keys_frame=keys_frame,
        key=plan.key,
        count=count,
        catalog=catalog,
        trusted=[*trusted, keys],
    )
    if not expectations:
        rows = rows.cache()  # `expected` keeps the rows itself
    try:
        with expected(rows, expectations, violations) as kept:
            changed = _temp(_with_gone(kept, keys_frame, plan.key), "changed")
            with merge_turn():
                merge_by_key(
                    session,
                    target=target,
                    changes=changed,
                    key=plan.key,
                    columns=kept.columns,
                    properties=properties,
                )
        for view in (keys, changed):
            session.catalog.dropTempView(view)
    finally:
        rows.unpersist()
        release(keys_frame)
    return count


def _rows_of_keys(
    session: SparkSession,
    *,
    query: str,
    keys: str,
    keys_frame: DataFrame,
    key: Sequence[str],
    count: int,
    catalog: str,
    trusted: Sequence[str],
) -> DataFrame:
    """The rows `query` (SQL over the refresh's pinned sources) gives for the keys in the
    view `keys` (`keys_frame`, `count` of them), checked by the sandbox."""
    match = " AND ".join(f"q.{k} <=> k.{k}" for k in (quote([c]) for c in key))
    rows = sandbox.query(
        session,
        f"SELECT q.* FROM ({query}) q LEFT SEMI JOIN {keys} k ON {match}",
        catalog=catalog,
        trusted_views=trusted,
    )
    return _narrowed(rows, keys_frame, key, count)


def merge_by_key(
    session: SparkSession,
    *,
    target: Sequence[str],
    changes: str,
    key: Sequence[str],
    columns: Sequence[str],
    properties: Mapping[str, str] | None,
) -> None:
    """One MERGE INTO `target` of the view `changes` (its `columns`, and GONE): on the
    primary key, a gone key's row deleted, the others' updated or inserted."""
    on = " AND ".join(f"t.{k} <=> s.{k}" for k in (quote([c]) for c in key))
    names = [quote([c]) for c in columns]
    statement = (
        f"MERGE INTO {quote(target)} t USING {changes} s ON {on} "
        f"WHEN MATCHED AND s.{GONE} THEN DELETE "
        f"WHEN MATCHED THEN UPDATE SET {', '.join(f't.{c} = s.{c}' for c in names)} "
        f"WHEN NOT MATCHED AND NOT s.{GONE} THEN INSERT ({', '.join(names)}) "
        f"VALUES ({', '.join(f's.{c}' for c in names)})"
    )
    merge_retrying(session, statement, properties)


#: Up to this many touched keys, their values are also given to the recompute as literal
#: IN lists, which Spark pushes through projections, aggregations and joins down to the
#: sources' scans, where Iceberg skips the data files whose column statistics hold none of
#: them (a semi-join with the keys' view prunes nothing at planning time). Few: planning a
#: list of 10,000 literals took Spark 5 s on the bench's 10-million-row source, longer
#: than reading it whole.
PUSHED_KEYS = 200


def _narrowed(rows: DataFrame, keys: DataFrame, key: Sequence[str], count: int) -> DataFrame:
    """`rows` filtered by each key column's touched values (a superset of the touched keys:
    the semi-join stays exact), when there are few enough of them; else `rows`."""
    from pyspark.sql import functions as F

    if not count or count > PUSHED_KEYS:
        return rows if count else rows.limit(0)
    found = keys.collect()
    condition = None
    for index, column in enumerate(key):
        values = {row[index] for row in found}
        present = [v for v in values if v is not None]
        test = F.col(quote([column])).isin(present) if present else F.lit(False)
        if None in values:
            test = test | F.col(quote([column])).isNull()
        condition = test if condition is None else condition & test
    return rows.where(condition) if condition is not None else rows


def merge_combined(
    session: SparkSession,
    *,
    query: str | exp.Query,
    target: Sequence[str],
    kinds: Mapping[str, str],
    appended: Mapping[Source, str],
    namespace: Sequence[str],
    catalog: str,
    partition: Mapping[str, str] | None = None,
    merge_turn: Callable[[], AbstractContextManager[Any]] = nullcontext,
    timings: dict[str, float] | None = None,
    properties: Mapping[str, str] | None = None,
) -> None:
    """An aggregation whose values combine (refresh.core.incremental.combinable): the query
    over the appended rows alone, merged into the table by combining each value with the
    table's (counts and sums added, minima and maxima kept): nothing the source held before
    is read. Not idempotent, so only for a refresh whose table is known to be exactly as its
    last refresh left it (the decision checks the table's own history); micro-batches, which
    a crash may replay, recompute their keys instead."""
    sql = rewrite_sources(query, dict(appended), namespace=namespace, catalog=catalog)
    delta = sandbox.query(session, sql, catalog=catalog, trusted_views=appended.values())
    view = _temp(_partition_filter(delta, partition), "delta")
    keys = [quote([c]) for c, kind in kinds.items() if kind == "key"]
    values = [(quote([c]), kind) for c, kind in kinds.items() if kind != "key"]
    combined = {
        "count": "t.{c} + s.{c}",
        "sum": "coalesce(t.{c} + s.{c}, t.{c}, s.{c})",
        "min": "least(t.{c}, s.{c})",
        "max": "greatest(t.{c}, s.{c})",
    }
    on = " AND ".join(f"t.{k} <=> s.{k}" for k in keys)
    names = [quote([c]) for c in kinds]
    update = ", ".join(f"t.{c} = {combined[kind].format(c=c)}" for c, kind in values)
    statement = (
        f"MERGE INTO {quote(target)} t USING {view} s ON {on} "
        + (f"WHEN MATCHED THEN UPDATE SET {update} " if update else "")
        + f"WHEN NOT MATCHED THEN INSERT ({', '.join(names)}) "
        f"VALUES ({', '.join(f's.{c}' for c in names)})"
    )
    _mark(timings, "checked")
    try:
        with merge_turn():
            _mark(timings, "turn")
            merge_retrying(session, statement, properties)
    finally:
        session.catalog.dropTempView(view)


def merge_combined_changes(
    session: SparkSession,
    *,
    query: str | exp.Query,
    target: Sequence[str],
    kinds: Mapping[str, str],
    source: Source,
    inserted: str,
    deleted: str,
    whole: Callable[[], Mapping[Source, str]],
    namespace: Sequence[str],
    catalog: str,
    partition: Mapping[str, str] | None = None,
    merge_turn: Callable[[], AbstractContextManager[Any]] = nullcontext,
    properties: Mapping[str, str] | None = None,
) -> int:
    """A combinable aggregation (refresh.core.incremental.combinable) of one source that
    deleted rows as well as inserted them: each touched key's values come from the table's
    own row, the aggregation of the inserted rows and that of the deleted rows (counts and
    sums: added and subtracted; minima and maxima: kept or replaced by the inserted ones),
    so the source is not read whole. Where that cannot tell the answer, the key is
    recomputed over the sources (`whole()` pins them): a deleted minimum or maximum, a sum
    whose every non-null value may have gone (or a floating-point one, which subtraction
    would round), and, without a COUNT(*) column, any key that lost rows (it may have lost
    its last). A group whose COUNT(*) reaches 0 is deleted. One MERGE INTO; returns the
    keys touched. Not idempotent, like merge_combined: only for a refresh whose table is as
    its last refresh left it (the decision checks the table's own history)."""
    from pyspark.sql import functions as F

    from refresh.core.incremental import count_star_column

    keys = [c for c, kind in kinds.items() if kind == "key"]
    quoted = [quote([c]) for c in keys]
    trusted = [inserted, deleted]
    views = []
    for view, kind in ((inserted, "ins"), (deleted, "del")):
        sql = rewrite_sources(query, {source: view}, namespace=namespace, catalog=catalog)
        frame = sandbox.query(session, sql, catalog=catalog, trusted_views=trusted)
        views.append(_temp(_partition_filter(frame, partition), kind))
    ins, dele = views
    table = session.table(quote(target))
    types = {f.name: f.dataType for f in table.schema.fields}
    star = count_star_column(query)

    def on(left: str, right: str) -> str:
        return " AND ".join(f"{left}.{k} <=> {right}.{k}" for k in quoted)

    values, unsure = [], []
    for column, kind in kinds.items():
        if kind == "key":
            continue
        c = quote([column])
        if kind == "count":
            values.append(f"coalesce(t.{c}, 0) + coalesce(i.{c}, 0) - coalesce(d.{c}, 0)")
        elif kind == "sum":
            values.append(
                f"CASE WHEN t.{c} IS NULL AND i.{c} IS NULL THEN NULL "
                f"ELSE coalesce(t.{c}, 0) + coalesce(i.{c}, 0) - coalesce(d.{c}, 0) END"
            )
            unsure.append(f"(d.{c} IS NOT NULL AND i.{c} IS NULL)")
            if types.get(column) is not None and types[column].typeName() in ("double", "float"):
                unsure.append(f"d.{c} IS NOT NULL")
        else:
            pick, beyond = ("least", "<=") if kind == "min" else ("greatest", ">=")
            values.append(f"{pick}(t.{c}, i.{c})")
            unsure.append(f"(d.{c} IS NOT NULL AND d.{c} {beyond} t.{c})")
        values[-1] += f" AS {c}"
    if star is None:
        unsure = ["d.__present"]  # a group may have lost its last row: nothing tells
    quoted_star = quote([star]) if star else None
    gone = (
        f"coalesce(t.{quoted_star}, 0) + coalesce(i.{quoted_star}, 0) "
        f"- coalesce(d.{quoted_star}, 0) = 0"
        if quoted_star
        else "false"
    )
    combined = session.sql(
        f"SELECT {', '.join(f'k.{k}' for k in quoted)}, {', '.join(values)}, "
        f"({gone}) AS {GONE}, coalesce({' OR '.join(unsure) or 'false'}, false) AS __unsure "
        f"FROM (SELECT {', '.join(quoted)} FROM {ins} "
        f"UNION SELECT {', '.join(quoted)} FROM {dele}) k "
        f"LEFT JOIN {quote(target)} t ON {on('t', 'k')} "
        f"LEFT JOIN {ins} i ON {on('i', 'k')} "
        f"LEFT JOIN (SELECT *, true AS __present FROM {dele}) d ON {on('d', 'k')}"
    )
    columns = list(kinds)
    combined = as_rows(
        combined.select(
            *[
                F.col(quote([c])).cast(types[c]) if c in types else F.col(quote([c]))
                for c in columns
            ],
            GONE,
            "__unsure",
        )
    )
    scratch = [ins, dele]
    frames = [combined]
    try:
        count = combined.count()
        changed = combined.where("NOT __unsure").drop("__unsure")
        unsure_keys = as_rows(combined.where("__unsure").select(*[quote([k]) for k in keys]))
        frames.append(unsure_keys)
        unsure = unsure_keys.count()
        if unsure:
            pinned = whole()
            view = _temp(unsure_keys, "unsure")
            scratch.append(view)
            rows = _rows_of_keys(
                session,
                query=rewrite_sources(query, dict(pinned), namespace=namespace, catalog=catalog),
                keys=view,
                keys_frame=unsure_keys,
                key=keys,
                count=unsure,
                catalog=catalog,
                trusted=[*pinned.values(), view],
            ).cache()
            frames.append(rows)
            recomputed = _with_gone(rows, unsure_keys, keys)
            changed = changed.unionByName(
                recomputed.select(*[F.col(quote([c])) for c in columns], GONE)
            )
        source_view = _temp(changed, "combined")
        scratch.append(source_view)
        with merge_turn():
            merge_by_key(
                session,
                target=target,
                changes=source_view,
                key=keys,
                columns=columns,
                properties=properties,
            )
        return count
    finally:
        for frame in frames:
            release(frame)
        for view in scratch:
            session.catalog.dropTempView(view)


def _mark(timings: dict[str, float] | None, phase: str) -> None:
    """Seconds since the previous mark (or since `timings` was made: its "_at" entry), under
    `phase`: the worker logs where a refresh's time went (refresh.runner._log_phases)."""
    if timings is None:
        return
    now = time.perf_counter()
    timings[phase] = now - timings.get("_at", now)
    timings["_at"] = now


MERGE_ATTEMPTS = 4


def merge_retrying(
    session: SparkSession, statement: str, properties: Mapping[str, str] | None = None
) -> None:
    """Run a MERGE (its commit's snapshot summary with `properties`); when a concurrent
    commit (table maintenance) conflicts with it, run it again: the changed rows are a view
    over the sources, recomputed on each run, and merging on the primary key is idempotent,
    so a retry is exact."""
    for attempt in range(1, MERGE_ATTEMPTS + 1):
        try:
            run_sql(session, statement, properties or {})
            return
        except Exception as error:  # noqa: BLE001 - Py4J's errors; re-raised unless a conflict
            if attempt == MERGE_ATTEMPTS or not is_commit_conflict(error):
                raise
            time.sleep(0.2 * attempt)


def _with_gone(rows: DataFrame, keys: DataFrame, key: Sequence[str]) -> DataFrame:
    """The rows for the touched keys, flagged not gone, and the touched keys the query no
    longer gives, flagged gone (their other columns null)."""
    from pyspark.sql import functions as F

    present = rows.withColumn(GONE, F.lit(False))
    condition = functools.reduce(
        lambda left, right: left & right,
        [keys[quote([k])].eqNullSafe(rows[quote([k])]) for k in key],
    )
    gone = keys.join(rows, condition, "left_anti")
    for column in rows.schema.fields:
        if column.name not in key:
            gone = gone.withColumn(column.name, F.lit(None).cast(column.dataType))
    gone = gone.select(*[F.col(quote([c])) for c in rows.columns]).withColumn(GONE, F.lit(True))
    return present.unionByName(gone)


def pin_sources(
    session: SparkSession, *, pins: Mapping[Source, int | None], catalog: str
) -> dict[Source, str]:
    """A temporary view of each source at its snapshot in `pins` (empty where None): what
    a refresh reads, so that the snapshots it records are exactly the ones it read, and the
    next refresh's appended rows start right after them."""
    views = {}
    for source, snapshot in pins.items():
        reader = session.read
        if snapshot is not None:
            reader = reader.option("snapshot-id", str(snapshot))
        frame = reader.table(quote((catalog, *source)))
        views[source] = _temp(frame if snapshot is not None else frame.limit(0), "pinned")
    return views


def recompute(
    session: SparkSession,
    *,
    query: str | exp.Query,
    target: Sequence[str],
    catalog: str,
    namespace: Sequence[str],
    pins: Mapping[Source, int | None] | None,
    partition: Mapping[str, str] | None = None,
    timings: dict[str, float] | None = None,
    properties: Mapping[str, str] | None = None,
    expectations: Sequence[Expectation] = (),
    violations: dict[str, int] | None = None,
) -> None:
    """A FULL refresh (batch.full_refresh), its snapshot summary with `properties`, its
    `expectations` applied (violating rows counted into `violations`). Each
    table in `pins` (the runner gives every table the query reads, its views expanded:
    refresh.core.pinning) is read at its snapshot there, the one the run records, not at
    whatever a concurrent writer committed meanwhile: the commit answers exactly the
    snapshots it records, and the next refresh's appended rows start where its reads
    ended."""
    with pinned_reads(
        session, query=query, pins=pins or {}, namespace=namespace, catalog=catalog
    ) as (sql, views):
        full_refresh(
            session,
            target=target,
            query=sql,
            partition=partition,
            report=False,
            timings=timings,
            trusted_views=views,
            snapshot_properties=properties,
            expectations=expectations,
            violations=violations,
        )


@contextmanager
def pinned_reads(
    session: SparkSession,
    *,
    query: str | exp.Query,
    pins: Mapping[Source, int | None],
    namespace: Sequence[str],
    catalog: str,
) -> Iterator[tuple[str, list[str]]]:
    """`query` reading each table in `pins` at its snapshot (`pin_sources`), and the
    temporary views it reads them through (the only ones the sandbox lets it read), which
    are dropped afterwards."""
    views = pin_sources(session, pins=pins, catalog=catalog)
    try:
        sql = (
            rewrite_sources(query, views, namespace=namespace, catalog=catalog)
            if views
            else text_of(query)
        )
        yield sql, list(views.values())
    finally:
        for view in views.values():
            session.catalog.dropTempView(view)


@dataclass(frozen=True)
class Applied:
    """What an incremental refresh did, for its reason: per source that deleted rows,
    (rows deleted, rows inserted) as read; the keys recomputed (None: no keyed merge)."""

    counted: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    keys: int | None = None


def incremental_refresh(
    session: SparkSession,
    *,
    plan: StreamPlan,
    query: str | exp.Query,
    target: Sequence[str],
    catalog: str,
    namespace: Sequence[str],
    deltas: Mapping[Source, tuple[int | None, int]],
    pins: Mapping[Source, int | None],
    changed: Collection[Source] = (),
    max_read: float | None = None,
    partition: Mapping[str, str] | None = None,
    merge_turn: Callable[[], AbstractContextManager[Any]] = nullcontext,
    timings: dict[str, float] | None = None,
    properties: Mapping[str, str] | None = None,
    expectations: Sequence[Expectation] = (),
    violations: dict[str, int] | None = None,
    combining: bool = True,
) -> Applied:
    """A FULL table's incremental refresh: each source in `deltas` changed in the snapshots
    after `since` up to `until`: by appends only (Iceberg's incremental append scan reads
    their rows), or, for the sources in `changed`, also by deletes and rewrites (their rows
    deleted and inserted are read: refresh.spark.source_changes), which only a keyed plan
    (`plan.key`: the table's primary key) can apply; reading them stops before it starts
    (ChangesTooLarge) when their data files hold more than `max_read` of a source's rows.
    Every source is read at its snapshot in
    `pins`, the ones the run records, so the table ends exactly as the query over those
    snapshots (or its partition `partition` does), its `expectations` applied to the rows
    the plan computes (see the module; violations counted into `violations`). Its commit's
    snapshot summary gets `properties` (the refresh state). `combining=False` when the table
    may already hold part of the changes (a continuous table's catch-up: a micro-batch may
    have committed without Spark's commit log saying so): touched keys are then recomputed,
    which is idempotent, never combined with the table's values."""
    rewrites = [source for source in deltas if source in changed]
    if rewrites and not plan.key:
        raise ValueError("Deleted rows can only be applied to a table with a primary key")
    keyed = plan.mode == "merge" or bool(rewrites)
    # A combined merge adds to the table's values without computing a key's row, which an
    # expectation checks: with expectations, the touched keys are recomputed.
    combine = (
        combinable(query, plan.key)
        if combining and plan.mode == "merge" and not expectations
        else None
    )
    # One source whose aggregates combine: its changed rows' aggregates are merged with the
    # table's values (merge_combined, merge_combined_changes) rather than its keys
    # recomputed over the whole source.
    single = bool(combine) and len(deltas) == len(pins) == 1
    # Only a recompute reads the sources whole; each pinned read loads its table.
    recompute = keyed and not single
    whole = pin_sources(session, pins=pins, catalog=catalog) if recompute else {}

    def pinned_now() -> Mapping[Source, str]:
        # A combined merge's keys that need a recompute after all: pinned on demand.
        if not whole:
            whole.update(pin_sources(session, pins=pins, catalog=catalog))
        return whole

    # The other sources as the last refresh read them, for the keys deleted rows touch.
    old_pins = {s: (deltas[s][0] if s in deltas else pins.get(s)) for s in pins}
    old = (
        pin_sources(session, pins={s: old_pins[s] for s in deltas}, catalog=catalog)
        if rewrites and len(pins) > 1
        else {}
    )
    appended = {}
    deleted = {}
    scratch: list[str] = []
    applied = Applied()
    with ExitStack() as reads:
        counted = {}
        for source, (since, until) in deltas.items():
            if source in changed:
                found = reads.enter_context(
                    row_changes(
                        session,
                        table=(catalog, *source),
                        since=since,
                        until=until,
                        max_read=max_read,
                    )
                )
                appended[source] = _temp(found.inserted, "inserted")
                deleted[source] = _temp(found.deleted, "deleted")
                counted[".".join(source)] = (found.deleted.count(), found.inserted.count())
                continue
            reader = session.read
            if since is None:  # the source was empty then: all it holds was appended
                reader = reader.option("snapshot-id", str(until))
            else:
                reader = reader.option("start-snapshot-id", str(since)).option(
                    "end-snapshot-id", str(until)
                )
            appended[source] = _temp(reader.table(quote((catalog, *source))), "appended")
        _mark(timings, "read")
        try:
            if keyed and single and rewrites:
                [source] = rewrites
                keys = merge_combined_changes(
                    session,
                    query=query,
                    target=target,
                    kinds=combine,
                    source=source,
                    inserted=appended[source],
                    deleted=deleted[source],
                    whole=pinned_now,
                    namespace=namespace,
                    catalog=catalog,
                    partition=partition,
                    merge_turn=merge_turn,
                    properties=properties,
                )
                applied = Applied(counted=counted, keys=keys)
            elif keyed and single:
                [(source, view)] = appended.items()
                merge_combined(
                    session,
                    query=query,
                    target=target,
                    kinds=combine,
                    appended={source: view},
                    namespace=namespace,
                    catalog=catalog,
                    partition=partition,
                    merge_turn=merge_turn,
                    timings=timings,
                    properties=properties,
                )
            elif not keyed:
                rows = appended_rows(
                    session,
                    query=ex.flagged_query(text_of(query), expectations) if expectations else query,
                    appended=appended,
                    sources=plan.streams,
                    whole=whole,
                    namespace=namespace,
                    catalog=catalog,
                    scratch=scratch,
                )
                _mark(timings, "checked")
                with expected(_partition_filter(rows, partition), expectations, violations) as kept:
                    append(kept, target=target, properties=properties or {})
            else:
                keys = merge_changes(
                    session,
                    plan=plan,
                    query=query,
                    target=target,
                    appended=appended,
                    deleted=deleted,
                    whole=whole,
                    old=old,
                    namespace=namespace,
                    catalog=catalog,
                    partition=partition,
                    merge_turn=merge_turn,
                    properties=properties,
                    expectations=expectations,
                    violations=violations,
                )
                applied = Applied(counted=counted, keys=keys)
            _mark(timings, "written")
        finally:
            for view in [
                *whole.values(),
                *old.values(),
                *appended.values(),
                *deleted.values(),
                *scratch,
            ]:
                session.catalog.dropTempView(view)
            if timings is not None:
                timings.pop("_at", None)
    return applied
