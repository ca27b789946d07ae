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
- Merge queries run in update mode and write each micro-batch with `MERGE INTO` on the
  primary key (idempotent: a replay writes the same values).
- The trigger interval comes from the freshness; the checkpoint lives in the warehouse.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from refresh.core.streaming import StreamPlan, rewrite_sources
from refresh.spark.batch import RefreshResult, latest_snapshot, quote

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

BATCH_PROPERTY = "lakeview.stream-batch"


@dataclass(frozen=True)
class BatchResult:
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
) -> RefreshResult:
    """Overwrite the table with the query's result over the sources at their pinned
    snapshots (one commit)."""
    from pyspark.sql import functions as F

    replacements = {}
    for index, source in enumerate(sources):
        pin = pins.get(".".join(source[1:]))
        reader = spark.read
        if pin is not None:
            reader = reader.option("snapshot-id", str(pin[0]))
        frame = reader.table(quote(source))
        if pin is None:
            frame = frame.limit(0)
        frame.createOrReplaceTempView(_view(index, "load"))
        replacements[tuple(source[1:])] = _view(index, "load")
    sql = rewrite_sources(query, replacements, namespace=namespace, catalog=catalog)
    spark.sql(sql).writeTo(quote(target)).overwrite(F.lit(True))
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
) -> StreamingQuery:
    """Start the table's streaming query (resuming from `checkpoint` when it holds one;
    otherwise each stream starts after its snapshot in `start_after`)."""
    replacements = {}
    for index, stream in enumerate(plan.streams):
        qualified = (catalog, *stream)
        reader = spark.readStream.format("iceberg")
        pin = start_after.get(".".join(stream))
        if pin is not None:
            reader = reader.option("stream-from-timestamp", str(pin[1] + 1))
        reader.load(quote(qualified)).createOrReplaceTempView(_view(index, "stream"))
        replacements[tuple(stream)] = _view(index, "stream")
    sql = rewrite_sources(query, replacements, namespace=namespace, catalog=catalog)
    frame = spark.sql(sql)
    writer_target = quote(target)

    def write(batch: DataFrame, batch_id: int) -> None:
        started = time.time()
        session = batch.sparkSession
        if plan.mode == "append":
            marker = f"{key}:{batch_id}"
            if _has_batch(session, target, marker):
                on_batch(BatchResult(batch_id, 0, None, None, started, time.time(), True))
                return
            batch.persist()
            rows = batch.count()
            if rows:
                batch.writeTo(writer_target).option(
                    f"snapshot-property.{BATCH_PROPERTY}", marker
                ).append()
        else:
            batch.persist()
            rows = batch.count()
            if rows:
                view = f"__lakeview_batch_{abs(hash(key)) % 10**8}_{batch_id}"
                batch.createOrReplaceTempView(view)
                on = " AND ".join(f"t.{quote([k])} = s.{quote([k])}" for k in plan.key)
                session.sql(
                    f"MERGE INTO {writer_target} t USING {view} s ON {on} "
                    "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
                )
                session.catalog.dropTempView(view)
        batch.unpersist()
        result = latest_snapshot(session, target) if rows else RefreshResult(None, 0, 0)
        on_batch(
            BatchResult(
                batch_id, rows, result.snapshot_id, result.bytes_written, started, time.time()
            )
        )

    return (
        frame.writeStream.queryName(key)
        .outputMode("append" if plan.mode == "append" else "update")
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
