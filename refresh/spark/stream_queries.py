"""A continuous materialized table's streaming query, started after its load's pins, and its
micro-batches. Django-free: the streaming process passes plain values and a callback per
micro-batch.

- Append queries write each micro-batch with one `append` commit carrying the query's
  checkpoint key and batch id in the snapshot summary; a batch replayed after a crash finds
  its own snapshot and is not written again.
- Merge queries (aggregations, joins) stream their source's new rows; each micro-batch
  recomputes the keys those rows touch over the sources (the stream at the end of the
  batch, the others as they are at the batch), and merges them on the primary key
  (idempotent: a replay writes the same values).
- Every commit says what it answers (refresh.core.refresh_state): for each streamed source,
  the snapshot its end offset reads through (refresh.spark.stream_offsets) and, for a merge
  plan's other sources, the snapshot the batch pinned them at.
- Expectations (refresh.core.expectations) are applied to what each batch writes (an
  append batch's rows, a merge batch's touched keys' rows: refresh.spark.changes); each
  batch's violations are counted and handed to the caller with its result; a FAIL UPDATE
  expectation that a batch's rows violate fails the batch before its commit (and so the
  query, its checkpoint left at the batch).
- The trigger interval comes from the freshness; the checkpoint lives in the warehouse.
  A query stops between micro-batches, keeping its checkpoint.
- The user's query, however rewritten, reaches Spark only through the sandbox
  (runtime.spark.sandbox)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from catalog.core.sql import as_query
from refresh.core import expectations as ex
from refresh.core.refresh_state import refresh_state
from refresh.core.streaming import StreamPlan, qualify_all, rewrite_sources
from refresh.spark.batch import expected
from refresh.spark.change_views import Source
from refresh.spark.changes import append, pin_sources
from refresh.spark.key_merges import merge_changes
from runtime.spark import sandbox
from runtime.spark.session import quote

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery
from refresh.spark.stream_loads import view_name
from refresh.spark.stream_offsets import batch_reads

BATCH_PROPERTY = "lakeview.stream-batch"


@dataclass(frozen=True)
class BatchResult:
    """A micro-batch written (its rows and snapshot are read from the commit's summary by
    the caller; -1 rows means "see the snapshot")."""

    batch_id: int
    rows: int
    snapshot_id: int | None
    bytes_written: int | None
    started: float
    finished: float
    replayed: bool = False
    #: The snapshot the batch read of each source ("ns.table"), as its refresh state
    #: records them; None when it records none.
    sources: Mapping[str, int | None] | None = None
    #: {expectation name: rows of the batch that violated it}.
    expectations: Mapping[str, int] | None = None


class NotHolder(RuntimeError):
    """A micro-batch whose host no longer holds its table: it must not commit."""


def start(
    spark: SparkSession,
    *,
    plan: StreamPlan,
    query: str,
    target: Sequence[str],
    catalog: str,
    namespace: Sequence[str],
    checkpoint: str,
    key: str,
    trigger_seconds: float,
    start_after: Mapping[str, Any],
    on_batch: Callable[[BatchResult], None],
    version: int,
    uuids: Mapping[str, str],
    merge_turn: Callable[[], AbstractContextManager[Any]] = nullcontext,
    may_commit: Callable[[], bool] = lambda: True,
    may_read: Callable[[], None] = lambda: None,
    commit_properties: Mapping[str, str] | None = None,
    expectations: Sequence[ex.Expectation] = (),
    on_failed: Callable[[ex.ExpectationFailed, Mapping[str, int]], None] = lambda e, c: None,
) -> StreamingQuery:
    """Start the table's streaming query (resuming from `checkpoint` when it holds one;
    otherwise each stream starts after its snapshot in `start_after`).

    Each micro-batch's commit records its refresh state: definition `version`, and each
    source ("ns.table" -> table UUID in `uuids`) at the snapshot the batch read
    (`batch_reads`).

    Append plans stream the query itself. Merge plans stream the stream source's new rows
    (no state in Spark, so a table loaded at pinned snapshots continues exactly): each
    micro-batch runs the query over the new rows to find the primary keys they touch, runs
    the query over the sources for those keys only (the stream at the end of the batch, the
    others as they are at the batch), and merges that on the primary key. Every key's row is
    thus the query's answer over a whole snapshot of the sources, whatever the aggregate or
    join.

    Just before a micro-batch writes, `may_commit()` must say yes (the host still holds the
    table), else the batch fails with `NotHolder` and the query ends, its checkpoint left at
    the batch for whoever holds the table now; every commit also carries
    `commit_properties` in its snapshot summary (the host's token, which the catalog checks
    at the commit itself). Before a micro-batch reads its new rows, `may_read()` raises when
    the table's owner may no longer read its sources: the batch fails, and so does the
    query, its checkpoint at the batch.

    `expectations` are applied to each batch's rows (see the module); the batch's counts go
    in its BatchResult. When a FAIL UPDATE expectation fails the batch, `on_failed(error,
    counts)` is called before the batch raises it."""
    streams = {}
    for index, stream in enumerate(plan.streams):
        reader = spark.readStream.format("iceberg")
        pin = start_after.get(".".join(stream))
        if pin is not None:
            reader = reader.option("stream-from-timestamp", str(pin[1] + 1))
        frame = reader.load(quote((catalog, *stream)))
        streams[tuple(stream)] = (view_name(index, "stream"), frame)
    for view, frame in streams.values():
        frame.createOrReplaceTempView(view)
    replacements = {name: view for name, (view, _) in streams.items()}
    query = qualify_all(query, namespace=namespace, catalog=catalog)
    # Parsed once for the stream's life: each merge batch rewrites a copy of it.
    parsed = as_query(query) if plan.mode == "merge" else None
    first = [True]

    def summary(reads: Mapping[Source, int | None] | None, started: float) -> dict[str, str]:
        """The refresh-state entry of a batch that read `reads` (none when not known)."""
        if reads is None:
            return {}
        named = {".".join(source): snapshot for source, snapshot in reads.items()}
        return refresh_state(
            version=version,
            sources={name: (uuids.get(name, ""), snapshot) for name, snapshot in named.items()},
            started_ms=int(started * 1000),
        ).summary()

    def named(reads: Mapping[Source, int | None] | None) -> dict[str, int | None] | None:
        return None if reads is None else {".".join(s): i for s, i in reads.items()}

    if plan.mode == "append":
        # The flags are computed in the stream's own query: each batch arrives flagged.
        streamed = sandbox.query(
            spark,
            rewrite_sources(
                ex.flagged_query(query, expectations) if expectations else query,
                replacements,
                namespace=namespace,
                catalog=catalog,
            ),
            catalog=catalog,
            trusted_views=replacements.values(),
        )
    else:
        [(_, streamed)] = list(streams.values())

    def write(batch: DataFrame, batch_id: int) -> None:
        started = time.time()
        session = batch.sparkSession
        replay_check, first[0] = first[0], False
        marker = f"{key}:{batch_id}"
        if plan.mode == "append" and replay_check and _has_batch(session, target, marker):
            on_batch(BatchResult(batch_id, 0, None, None, started, time.time(), True))
            return
        may_read()
        if batch.isEmpty():
            return
        reads = batch_reads(
            session,
            plan=plan,
            catalog=catalog,
            checkpoint=checkpoint,
            batch_id=batch_id,
            start_after=start_after,
        )
        counts: dict[str, int] = {}
        try:
            apply(batch, batch_id, session, marker, reads, started, counts)
        except ex.ExpectationFailed as error:
            on_failed(error, dict(counts))
            raise
        on_batch(
            BatchResult(
                batch_id,
                -1,
                None,
                None,
                started,
                time.time(),
                sources=named(reads),
                expectations=counts if expectations else None,
            )
        )

    def apply(
        batch: DataFrame,
        batch_id: int,
        session: SparkSession,
        marker: str,
        reads: Mapping[Source, int | None] | None,
        started: float,
        counts: dict[str, int],
    ) -> None:
        """Write the batch's changes, its expectations applied (their counts into
        `counts`)."""
        if not may_commit():
            raise NotHolder(f"micro-batch {batch_id} of {key}: this host no longer holds the table")
        if plan.mode == "append":
            properties = {
                BATCH_PROPERTY: marker,
                **summary(reads, started),
                **(commit_properties or {}),
            }
            with expected(batch, expectations, counts) as kept:
                append(kept, target=target, properties=properties)
        else:
            [stream] = plan.streams
            # Every source is read at the snapshot the state records. The stream at the one
            # its end offset reads through: read as it is now, the keys this batch touches
            # would also count rows appended since, whose other keys only the next batch
            # recomputes, and the table would answer no snapshot. The others at their pins
            # (static_pins), for the same reason. Not known exactly: every source read as it
            # is, and no state.
            whole = pin_sources(session, pins=reads, catalog=catalog) if reads else {}
            new_rows = f"__lakeview_new_{abs(hash(key)) % 10**8}_{batch_id}"
            batch.createOrReplaceTempView(new_rows)
            try:
                # The table's rewrite lease (runtime.leases): a compaction of this table
                # commits before or after this MERGE, not in the middle of it.
                merge_changes(
                    session,
                    plan=plan,
                    query=parsed if parsed is not None else query,
                    target=target,
                    appended={tuple(stream): new_rows},
                    whole=whole,
                    namespace=namespace,
                    catalog=catalog,
                    merge_turn=merge_turn,
                    properties={**summary(reads, started), **(commit_properties or {})},
                    expectations=expectations,
                    violations=counts,
                )
            finally:
                for view in [new_rows, *whole.values()]:
                    session.catalog.dropTempView(view)

    return (
        streamed.writeStream.queryName(key)
        .outputMode("append")
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=f"{trigger_seconds} seconds")
        .foreachBatch(write)
        .start()
    )


def _has_batch(spark: SparkSession, target: Sequence[str], marker: str) -> bool:
    """Whether a snapshot of the table already holds this micro-batch (a replay)."""
    rows = spark.sql(
        f"SELECT 1 FROM {quote(target)}.snapshots "
        f"WHERE summary['{BATCH_PROPERTY}'] = '{marker.replace(chr(39), '')}' LIMIT 1"
    ).collect()
    return bool(rows)


def stop_between_batches(query: StreamingQuery, *, timeout: float = 60.0) -> None:
    """Stop the query when no micro-batch is running (Flink's stop with savepoint: the
    checkpoint then holds exactly what was committed)."""
    stop_all_between_batches([query], timeout=timeout)


def stop_all_between_batches(queries: Sequence[StreamingQuery], *, timeout: float) -> None:
    """Stop each query as soon as no micro-batch of it runs, all of them within `timeout`
    seconds: one that is still in a micro-batch then is stopped anyway (a batch cut short
    did not commit, or committed without Spark's commit log: either way its replay finds
    its marker or merges the same keys again)."""
    deadline = time.monotonic() + timeout
    waiting = list(queries)
    while waiting and time.monotonic() < deadline:
        for query in list(waiting):
            if not query.isActive or not query.status.get("isTriggerActive"):
                query.stop()
                waiting.remove(query)
        if waiting:
            time.sleep(0.1)
    for query in waiting:
        query.stop()
