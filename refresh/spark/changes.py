"""Apply what the sources appended to a materialized table: the one implementation behind a
continuous table's micro-batches (refresh.spark.stream_queries) and a FULL table's incremental
refreshes (refresh.runner, refresh.core.incremental). Django-free. This module reads the
changes and picks the plan (`incremental_refresh`), appends, and recomputes a FULL refresh
at pinned snapshots (`recompute`); a merge by key is refresh.spark.key_merges, a combined
aggregation refresh.spark.combined, the views they all read refresh.spark.change_views.

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

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from refresh.core import expectations as ex
from refresh.core.expectations import Expectation
from refresh.core.incremental import combinable
from refresh.core.streaming import StreamPlan, rewrite_sources
from refresh.spark.batch import expected, full_refresh
from refresh.spark.source_changes import row_changes
from runtime.spark.commits import with_properties
from runtime.spark.session import quote

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from sqlglot import exp
from refresh.spark.change_views import (
    Source,
    appended_rows,
    mark,
    partition_filter,
    temp_view,
    text_of,
)
from refresh.spark.combined import merge_combined, merge_combined_changes
from refresh.spark.key_merges import merge_changes


def append(frame: DataFrame, *, target: Sequence[str], properties: Mapping[str, str]) -> None:
    """`frame`'s rows appended to the table in one commit, with snapshot properties."""
    with_properties(frame.writeTo(quote(target)), properties).append()


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
        views[source] = temp_view(frame if snapshot is not None else frame.limit(0), "pinned")
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
                appended[source] = temp_view(found.inserted, "inserted")
                deleted[source] = temp_view(found.deleted, "deleted")
                counted[".".join(source)] = (found.deleted.count(), found.inserted.count())
                continue
            reader = session.read
            if since is None:  # the source was empty then: all it holds was appended
                reader = reader.option("snapshot-id", str(until))
            else:
                reader = reader.option("start-snapshot-id", str(since)).option(
                    "end-snapshot-id", str(until)
                )
            appended[source] = temp_view(reader.table(quote((catalog, *source))), "appended")
        mark(timings, "read")
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
                mark(timings, "checked")
                with expected(partition_filter(rows, partition), expectations, violations) as kept:
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
            mark(timings, "written")
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
