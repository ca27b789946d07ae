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
  recomputes the keys those rows touch over the sources (the stream at the end of the
  batch, the others as they are at the batch), and merges them on the primary key
  (idempotent: a replay writes the same values).
- Every commit says what it answers (refresh.core.refresh_state): the load records the
  snapshots it pinned; a micro-batch records, for each streamed source, the snapshot its
  end offset reads through (Spark logs it in the checkpoint before the batch runs) and, for
  a merge plan's other sources, the snapshot the batch pinned them at. A batch whose reads
  are not exactly known records none rather than a wrong one.
- A stream that stopped (a source snapshot it cannot read: a DELETE, UPDATE, MERGE INTO or
  overwrite; a merge plan's static source that moved on) catches up: from the snapshots the
  table holds (`stream_position`: the last committed batch's end offsets, the load's pins)
  to the sources' current ones, the row changes are applied by the table's primary key in
  one commit (`plan_catch_up`, `catch_up`: refresh.spark.changes.incremental_refresh), and
  the caller starts the stream again just after those snapshots, as after a load; where
  that is not possible, refresh.core.incremental.catch_up says why and the caller loads.
- Expectations (refresh.core.expectations) are applied to what each commit writes: the
  load's rows, an append batch's rows, a merge batch's touched keys' rows
  (refresh.spark.changes). Each batch's violations are counted and handed to the caller
  with its result; a FAIL UPDATE expectation that a batch's rows violate fails the batch
  before its commit (and so the query, its checkpoint left at the batch).
- The trigger interval comes from the freshness; the checkpoint lives in the warehouse.
- The user's query, however rewritten, reaches Spark only through the sandbox
  (runtime.spark.sandbox); the temporary views this module makes are the only ones it may
  read besides the catalog's tables.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from dataclasses import replace as replace_plan
from typing import TYPE_CHECKING, Any

from catalog.core.sql import as_query
from refresh.core import expectations as ex
from refresh.core import incremental
from refresh.core.incremental import Decision, Kind, Step
from refresh.core.refresh_state import refresh_state
from refresh.core.streaming import StreamPlan, qualify_all, rewrite_sources, static_pins
from refresh.spark.batch import RefreshResult, expected, latest_snapshot, replace
from refresh.spark.changes import (
    Applied,
    Source,
    append,
    incremental_refresh,
    merge_changes,
    pin_sources,
)
from runtime.spark import sandbox
from runtime.spark.commits import with_properties
from runtime.spark.session import quote

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

logger = logging.getLogger(__name__)

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
    snapshot_properties: Mapping[str, str] | None = None,
    expectations: Sequence[ex.Expectation] = (),
    violations: dict[str, int] | None = None,
) -> RefreshResult:
    """Overwrite the table with the query's result over the sources at their pinned
    snapshots (one commit, whose snapshot summary gets `snapshot_properties`: the refresh
    state of those pins), its `expectations` applied (batch.expected: counts into
    `violations`, ExpectationFailed before the commit). With `replacing`
    ({"partitioned_by": [...], "properties": {...}}), a new definition's load: the table is
    replaced, schema and rows in one commit (batch.replace)."""
    from pyspark.sql import functions as F

    snapshots = {}
    for source in sources:
        pin = pins.get(".".join(source[1:]))
        snapshots[tuple(source[1:])] = pin[0] if pin is not None else None
    replacements = pin_sources(spark, pins=snapshots, catalog=catalog)
    try:
        sql = rewrite_sources(query, replacements, namespace=namespace, catalog=catalog)
        if expectations:
            sql = ex.flagged_query(sql, expectations)
        frame = sandbox.query(spark, sql, catalog=catalog, trusted_views=replacements.values())
        with expected(frame, expectations, violations) as kept:
            if replacing is not None:
                replace(
                    kept,
                    target=target,
                    partitioned_by=replacing["partitioned_by"],
                    properties=replacing["properties"],
                    snapshot_properties=snapshot_properties,
                )
            else:
                with_properties(kept.writeTo(quote(target)), snapshot_properties or {}).overwrite(
                    F.lit(True)
                )
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
        streams[tuple(stream)] = (_view(index, "stream"), frame)
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


@dataclass(frozen=True)
class StreamOffset:
    """An Iceberg stream source's offset as Spark logs it: Iceberg's StreamingOffset JSON,
    {"version": 1, "snapshot_id", "position", "scan_all_files"}.

    As a micro-batch's END offset (SparkMicroBatchStream.latestOffset and planFiles, Iceberg
    1.10, spark/v3.5) it means: every snapshot after the batch's start offset up to
    `snapshot_id` was read whole, and of `snapshot_id` itself the data files it added whose
    index, in Iceberg's own order (MicroBatches: its manifests in order, each starting at
    the running count of added and existing entries), is below `position` (exclusive);
    with `scan_all_files`, all its data files rather than the added ones. Snapshots that are
    not appends are never read (a `replace` is skipped, a delete or overwrite stops the
    stream), so the batch then holds every append up to `snapshot_id`. Iceberg's
    START_OFFSET (-1, -1) means nothing was read: the source had no snapshot after the
    stream's start."""

    snapshot_id: int
    position: int
    scan_all_files: bool = False

    @property
    def read_nothing(self) -> bool:
        return self.snapshot_id < 0


def parse_offset(text: str | None) -> StreamOffset | None:
    """An Iceberg stream offset from the JSON Spark logged; None for no offset ("-").
    ValueError for anything else: an offset this code cannot read says nothing exact."""
    if text is None or text.strip() in ("", "-"):
        return None
    found = json.loads(text)
    if not isinstance(found, dict) or found.get("version") != 1:
        raise ValueError(f"not an Iceberg stream offset (version 1): {text[:200]}")
    snapshot_id, position = found.get("snapshot_id"), found.get("position")
    scan_all = found.get("scan_all_files", False)
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (snapshot_id, position)):
        raise ValueError(f"not an Iceberg stream offset: {text[:200]}")
    if not isinstance(scan_all, bool):
        raise ValueError(f"not an Iceberg stream offset: {text[:200]}")
    return StreamOffset(snapshot_id, position, scan_all)


def read_through(
    offsets: Sequence[StreamOffset | None],
    *,
    streams: Sequence[Source],
    start_after: Mapping[str, Any],
    holds: Callable[[Source, StreamOffset], bool | None],
) -> dict[Source, int | None] | None:
    """The snapshot of each streamed source whose appends a micro-batch holds, all of them
    and nothing after, from the batch's end `offsets` (one per source, in Spark's order,
    which is its plan's, not the query's: each offset's snapshot id names its table, since
    Iceberg snapshot ids belong to one table). `holds(source, offset)` says whether the
    source has the offset's snapshot (None: it has not) and whether the offset lies at its
    end (True) or inside it (False). A source that read nothing since the load stands at
    its pin in `start_after` ("ns.table" -> (snapshot id, ms)). None when that is not
    exactly known: an offset inside a snapshot (a read limit), a snapshot no source has
    (expired meanwhile), offsets that do not match the sources."""
    if len(offsets) != len(streams):
        return None
    through: dict[Source, int | None] = {}
    for offset in offsets:
        if offset is None or offset.read_nothing:
            continue
        owners = [(s, h) for s in streams if s not in through for h in [holds(s, offset)]]
        found = [(source, whole) for source, whole in owners if whole is not None]
        if len(found) != 1:
            return None
        [(source, whole)] = found
        if not whole:
            # Part of the snapshot's files only: the table holds more than its parent and
            # less than it, which no snapshot answers. No refresh state for this batch.
            return None
        through[source] = offset.snapshot_id
    for source in streams:
        if source not in through:
            pin = start_after.get(".".join(source))
            through[source] = pin[0] if pin else None
    return through


def logged_offsets(session: SparkSession, *, checkpoint: str, batch_id: int) -> list[str | None]:
    """The end offsets Spark logged for micro-batch `batch_id` (JSON, None for a source
    without one), one per source. Spark writes them to `<checkpoint>/offsets/<batch_id>`
    before it runs the batch (and runs a batch replayed after a crash with the same ones);
    they are read with Spark's own OffsetSeqLog, whose file manager reads local and object-
    store checkpoints alike and knows the file's format."""
    jvm = session._jvm  # noqa: SLF001 - py4j's entry point
    log = jvm.org.apache.spark.sql.execution.streaming.OffsetSeqLog(
        session._jsparkSession,  # noqa: SLF001
        f"{checkpoint.rstrip('/')}/offsets",
    )
    found = log.get(batch_id)
    if not found.isDefined():
        raise LookupError(f"no offsets logged for micro-batch {batch_id} in {checkpoint}")
    offsets = found.get().offsets()
    texts: list[str | None] = []
    for index in range(offsets.length()):
        offset = offsets.apply(index)
        texts.append(offset.get().json() if offset.isDefined() else None)
    return texts


class _Tables:
    """The sources' Iceberg tables in the JVM (one load each per micro-batch: the REST
    catalog's current metadata), for what Spark's readers do not say."""

    def __init__(self, session: SparkSession, catalog: str) -> None:
        self.jvm = session._jvm  # noqa: SLF001
        self.jsession = session._jsparkSession  # noqa: SLF001
        self.catalog = catalog
        self.loaded: dict[Source, Any] = {}

    def table(self, source: Source) -> Any:
        if source not in self.loaded:
            table = self.jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
                self.jsession, quote((self.catalog, *source))
            )
            # A catalog that caches tables (Iceberg's default; the app's own turns it off)
            # hands back the metadata of its first load: a snapshot committed since would
            # be unknown.
            table.refresh()
            self.loaded[source] = table
        return self.loaded[source]

    def holds(self, source: Source, offset: StreamOffset) -> bool | None:
        """See `read_through`: whether any data file of the offset's snapshot lies at or
        past its position, asked of Iceberg's own MicroBatches (the stream's file index)."""
        table = self.table(source)
        snapshot = table.snapshot(offset.snapshot_id)
        if snapshot is None:
            return None
        if snapshot.operation() != "append":
            return True  # never read by the stream: its position means nothing
        largest = self.jvm.java.lang.Long.MAX_VALUE
        rest = (
            getattr(self.jvm.org.apache.iceberg.MicroBatches, "from")(snapshot, table.io())
            .specsById(table.specs())
            .generate(offset.position, largest, largest, offset.scan_all_files)
        )
        return bool(rest.tasks().isEmpty())


def batch_reads(
    session: SparkSession,
    *,
    plan: StreamPlan,
    catalog: str,
    checkpoint: str,
    batch_id: int,
    start_after: Mapping[str, Any],
) -> dict[Source, int | None] | None:
    """The snapshot a micro-batch reads of each source, or None when it is not exactly
    known (the batch then records no refresh state, and a merge reads as before).

    Streamed sources: the snapshot the batch's end offset reads through (`read_through`).
    A merge plan's other sources: their pins (core.streaming.static_pins), at which the
    caller reads them, so that every key of the table, touched by this batch or not,
    answers the same snapshot of them."""
    try:
        offsets = [
            parse_offset(text)
            for text in logged_offsets(session, checkpoint=checkpoint, batch_id=batch_id)
        ]
        tables = _Tables(session, catalog)
        streams = [tuple(stream) for stream in plan.streams]
        through = read_through(
            offsets, streams=streams, start_after=start_after, holds=tables.holds
        )
        if through is None:
            logger.warning(
                "Micro-batch %s of %s: its end offsets %s do not each end a snapshot of "
                "its sources; no refresh state recorded",
                batch_id,
                checkpoint,
                offsets,
            )
            return None
        return {**through, **static_pins(plan, start_after)}
    except Exception:  # noqa: BLE001 - the batch's rows are still right; only the state is unknown
        logger.warning(
            "Micro-batch %s of %s: the snapshots it reads are unknown; no refresh state",
            batch_id,
            checkpoint,
            exc_info=True,
        )
        return None


def committed_batch(session: SparkSession, *, checkpoint: str) -> int | None:
    """The last micro-batch Spark's commit log in `checkpoint` says completed (None: none
    did). Spark writes `<checkpoint>/commits/<batch_id>` once the batch's function returned,
    so the table holds everything that batch wrote; a later batch whose offsets are logged
    but not committed may or may not have written (read with Spark's own CommitLog)."""
    jvm = session._jvm  # noqa: SLF001 - py4j's entry point
    log = jvm.org.apache.spark.sql.execution.streaming.CommitLog(
        session._jsparkSession,  # noqa: SLF001
        f"{checkpoint.rstrip('/')}/commits",
    )
    latest = log.getLatestBatchId()
    return int(latest.get()) if latest.isDefined() else None


def stream_position(
    session: SparkSession,
    *,
    plan: StreamPlan,
    catalog: str,
    checkpoint: str,
    start_after: Mapping[str, Any],
) -> dict[str, int | None] | str:
    """The snapshot of each source ("ns.table") whose rows the table holds now that its
    stream is stopped, or why that is not exactly known: a streamed source at the snapshot
    the last committed micro-batch's end offset reads through (`read_through`; the load's
    pin when none committed since), a merge plan's static source at the pin every batch
    read it at (`static_pins`).

    A batch after it may have written without Spark's commit log saying so (a crash
    between the two): the table then holds a little more, the changes of some keys past
    that snapshot, which a keyed catch-up from it recomputes anyway."""
    pins = {k: tuple(v) for k, v in start_after.items() if v}
    streams = [tuple(stream) for stream in plan.streams]
    last = committed_batch(session, checkpoint=checkpoint)
    if last is None:
        through: dict[Source, int | None] | None = {
            source: (pins[".".join(source)][0] if ".".join(source) in pins else None)
            for source in streams
        }
    else:
        try:
            offsets = [
                parse_offset(text)
                for text in logged_offsets(session, checkpoint=checkpoint, batch_id=last)
            ]
        except (LookupError, ValueError) as error:
            return f"the offsets of micro-batch {last} cannot be read ({error})"
        through = read_through(
            offsets, streams=streams, start_after=pins, holds=_Tables(session, catalog).holds
        )
        if through is None:
            return (
                f"micro-batch {last}'s end offsets ({', '.join(map(str, offsets))}) do not "
                "each end a snapshot of its sources (a read limit cut one, or it expired)"
            )
    position = {".".join(source): snapshot for source, snapshot in through.items()}
    for source in plan.static:
        name = ".".join(source)
        if name in start_after:  # else the batches' pin is unknown: not in the position
            position[name] = static_pins(plan, start_after)[tuple(source)]
    return position


def source_lineage(session: SparkSession, table: Sequence[str]) -> dict[int, Step]:
    """A table's ((catalog, *namespace, name)) snapshots as its metadata lists them (Spark's
    `snapshots` metadata table), by id: what refresh.core.incremental walks."""
    rows = session.sql(
        f"SELECT snapshot_id, parent_id, operation, summary FROM {quote(table)}.snapshots"
    ).collect()
    return {
        row["snapshot_id"]: Step.of(
            row["snapshot_id"], row["parent_id"], row["operation"], row["summary"]
        )
        for row in rows
    }


@dataclass(frozen=True)
class CatchUp:
    """How a stopped stream catches up (refresh.core.incremental.catch_up's decision), the
    snapshots the table holds (`position`, or why they are unknown) and the sources' pins
    now ("ns.table" -> (snapshot id, ms) or None), which the catch-up reads and the stream
    then starts just after."""

    decision: Decision
    position: Mapping[str, int | None] | str
    pins: Mapping[str, Any]


def plan_catch_up(
    session: SparkSession,
    *,
    plan: StreamPlan,
    key: Sequence[str],
    catalog: str,
    checkpoint: str,
    start_after: Mapping[str, Any],
    full_outer_join: bool = False,
    read_twice: Sequence[str] = (),
    null_supplied: str = "",
) -> CatchUp:
    """Where the stopped stream of a table whose primary key is `key` (empty: none) stands
    (`stream_position`), its sources' snapshots now, and what catching up from one to the
    other takes (refresh.core.incremental.catch_up: INCREMENTAL, NO_DATA or FULL with why).
    Reads metadata and the checkpoint only: no row."""
    sources = [(catalog, *source) for source in (*plan.streams, *plan.static)]
    pins = pinned_snapshots(session, sources)
    now = {name: (pin[0] if pin else None) for name, pin in pins.items()}
    position = stream_position(
        session, plan=plan, catalog=catalog, checkpoint=checkpoint, start_after=start_after
    )
    held = {} if isinstance(position, str) else position
    # The lineages of the sources that moved only (one metadata read each).
    lineages = {
        name: source_lineage(session, source)
        for source in sources
        for name in [".".join(source[1:])]
        if held.get(name, -1) != now[name]
    }
    decision = incremental.catch_up(
        position=position,
        now=now,
        lineages=lineages,
        key=key,
        full_outer_join=full_outer_join,
        read_twice=read_twice,
        null_supplied=null_supplied,
    )
    return CatchUp(decision, position, pins)


def catch_up(
    session: SparkSession,
    caught: CatchUp,
    *,
    plan: StreamPlan,
    key: Sequence[str],
    query: str,
    target: Sequence[str],
    catalog: str,
    namespace: Sequence[str],
    merge_turn: Callable[[], AbstractContextManager[Any]] = nullcontext,
    properties: Mapping[str, str] | None = None,
    expectations: Sequence[ex.Expectation] = (),
    violations: dict[str, int] | None = None,
) -> Applied:
    """Apply an INCREMENTAL catch-up (`plan_catch_up`): each moved source's changes from
    the snapshot the table holds to its pin, by the table's primary key `key`
    (refresh.spark.changes.incremental_refresh), every source read at its pin, in one
    commit whose summary gets `properties` (the refresh state of the pins, the host's
    token). Touched keys are recomputed and merged, never combined nor appended: the table
    may hold a little more than its position (`stream_position`). UnreadableChanges when a
    source's changes cannot be read after all (equality deletes, a snapshot expired
    meanwhile)."""
    if caught.decision.kind is not Kind.INCREMENTAL:
        raise ValueError(f"nothing to apply: {caught.decision.reason}")
    # Always by key, even for sources that only appended: appending the rows of a batch
    # the table may already hold would write them twice; merging them by key cannot.
    keyed = replace_plan(plan, mode="merge", key=tuple(plan.key or key))
    by_name = {".".join(source): tuple(source) for source in (*plan.streams, *plan.static)}
    return incremental_refresh(
        session,
        plan=keyed,
        query=query,
        target=target,
        catalog=catalog,
        namespace=namespace,
        deltas={by_name[d.source]: (d.since, d.until) for d in caught.decision.deltas},
        changed=[by_name[d.source] for d in caught.decision.deltas if d.changed],
        pins={
            source: (caught.pins[name][0] if caught.pins.get(name) else None)
            for name, source in by_name.items()
        },
        merge_turn=merge_turn,
        properties=properties,
        expectations=expectations,
        violations=violations,
        combining=False,
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
