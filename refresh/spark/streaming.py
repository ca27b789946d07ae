"""A continuous materialized table's Spark work: the initial load (or a recompute) at pinned
source snapshots, and the streaming query that follows the sources from there. Django-free:
the streaming process passes plain values and a callback per micro-batch.

- The load reads every source at one snapshot id (temporary views over
  `spark.read.option("snapshot-id", ...)`) and overwrites the table in one commit; the
  stream then starts strictly after those snapshots (`stream-from-timestamp`), so no
  append is read twice or missed.
- Append queries write each micro-batch with one `append` commit carrying the query's
  checkpoint key and batch id in the snapshot summary; a batch replayed after a crash finds
  its own snapshot and is not written again.
- Merge queries (aggregations, joins) stream their source's new rows; each micro-batch
  recomputes the keys those rows touch over the sources as they are, and merges them on the
  primary key (idempotent: a replay writes the same values).
- The trigger interval comes from the freshness; the checkpoint lives in the warehouse.
- The user's query, however rewritten, reaches Spark only through the sandbox
  (refresh.spark.sandbox); the temporary views this module makes are the only ones it may
  read besides the catalog's tables.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from refresh.core.streaming import StreamPlan, qualify_all, rewrite_sources
from refresh.spark import sandbox
from refresh.spark.batch import RefreshResult, latest_snapshot, quote, replace
from refresh.spark.changes import append, merge_changes, pin_sources

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

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


def _view(index: int, kind: str) -> str:
    return f"__lakeview_{kind}_{index}"


def pinned_snapshots(spark: SparkSession, tables: Sequence[Sequence[str]]) -> dict[str, Any]:
    """{"ns.name": (snapshot id, timestamp ms)} of each table's current snapshot now
    (None for a table without one)."""
    pins: dict[str, Any] = {}
    for table in tables:
        rows = spark.sql(
            f"SELECT snapshot_id, committed_at FROM {quote(table)}.snapshots "
            "ORDER BY committed_at DESC LIMIT 1"
        ).collect()
        key = ".".join(table[1:])
        pins[key] = (rows[0][0], int(rows[0][1].timestamp() * 1000)) if rows else None
    return pins


def load(
    spark: SparkSession,
    *,
    query: str,
    target: Sequence[str],
    sources: Sequence[Sequence[str]],
    pins: Mapping[str, Any],
    namespace: Sequence[str],
    catalog: str,
    replacing: Mapping[str, Any] | None = None,
) -> RefreshResult:
    """Overwrite the table with the query's result over the sources at their pinned
    snapshots (one commit). With `replacing` ({"partitioned_by": [...], "properties":
    {...}}), a new definition's load: the table is replaced, schema and rows in one commit
    (batch.replace)."""
    from pyspark.sql import functions as F

    snapshots = {}
    for source in sources:
        pin = pins.get(".".join(source[1:]))
        snapshots[tuple(source[1:])] = pin[0] if pin is not None else None
    replacements = pin_sources(spark, pins=snapshots, catalog=catalog)
    try:
        sql = rewrite_sources(query, replacements, namespace=namespace, catalog=catalog)
        frame = sandbox.query(spark, sql, catalog=catalog, trusted_views=replacements.values())
        if replacing is not None:
            replace(
                frame,
                target=target,
                partitioned_by=replacing["partitioned_by"],
                properties=replacing["properties"],
            )
        else:
            frame.writeTo(quote(target)).overwrite(F.lit(True))
    finally:
        for view in replacements.values():
            spark.catalog.dropTempView(view)
    return latest_snapshot(spark, target)


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
    merge_turn: Callable[[], AbstractContextManager[Any]] = nullcontext,
) -> StreamingQuery:
    """Start the table's streaming query (resuming from `checkpoint` when it holds one;
    otherwise each stream starts after its snapshot in `start_after`).

    Append plans stream the query itself. Merge plans stream the stream source's new rows
    (no state in Spark, so a table loaded at pinned snapshots continues exactly): each
    micro-batch runs the query over the new rows to find the primary keys they touch, runs
    the query over the sources as they are now for those keys only, and merges that on the
    primary key. Every key's row is thus the query's answer over a whole snapshot of the
    sources, whatever the aggregate or join."""
    streams = {}
    for index, stream in enumerate(plan.streams):
        reader = spark.readStream.format("iceberg")
        pin = start_after.get(".".join(stream))
        if pin is not None:
            reader = reader.option("stream-from-timestamp", str(pin[1] + 1))
        frame = reader.load(quote((catalog, *stream)))
        streams[tuple(stream)] = (_view(index, "stream"), frame)
    for view, frame in streams.values():
        frame.createOrReplaceTempView(view)
    replacements = {name: view for name, (view, _) in streams.items()}
    query = qualify_all(query, namespace=namespace, catalog=catalog)
    first = [True]

    if plan.mode == "append":
        streamed = sandbox.query(
            spark,
            rewrite_sources(query, replacements, namespace=namespace, catalog=catalog),
            catalog=catalog,
            trusted_views=replacements.values(),
        )
    else:
        [(_, streamed)] = list(streams.values())

    def write(batch: DataFrame, batch_id: int) -> None:
        started = time.time()
        session = batch.sparkSession
        replay_check, first[0] = first[0], False
        if plan.mode == "append":
            marker = f"{key}:{batch_id}"
            if replay_check and _has_batch(session, target, marker):
                on_batch(BatchResult(batch_id, 0, None, None, started, time.time(), True))
                return
            if batch.isEmpty():
                return
            append(batch, target=target, properties={BATCH_PROPERTY: marker})
        else:
            if batch.isEmpty():
                return
            [stream] = plan.streams
            suffix = f"{abs(hash(key)) % 10**8}_{batch_id}"
            new_rows = f"__lakeview_new_{suffix}"
            batch.createOrReplaceTempView(new_rows)
            # The table's rewrite lease (refresh.leases): a compaction of this table
            # commits before or after this MERGE, not in the middle of it.
            merge_changes(
                session,
                plan=plan,
                query=query,
                target=target,
                appended={tuple(stream): new_rows},
                whole={},
                namespace=namespace,
                catalog=catalog,
                merge_turn=merge_turn,
            )
            session.catalog.dropTempView(new_rows)
        on_batch(BatchResult(batch_id, -1, None, None, started, time.time()))

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
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and query.isActive:
        if not query.status.get("isTriggerActive"):
            break
        time.sleep(0.1)
    query.stop()
