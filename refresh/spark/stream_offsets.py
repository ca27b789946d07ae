"""What a stream has read, from its checkpoint: the Iceberg stream offsets Spark logs before
each micro-batch, the snapshot each streamed source is read through at a batch's end
offset (recorded in the batch's refresh state; a batch whose reads are not exactly known
records none rather than a wrong one), the last committed batch, the position a stopped
stream's table holds (its last batch's end offsets, else its load's pins) and a source's
lineage of snapshots. Django-free."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from refresh.core.incremental import Step
from refresh.core.streaming import StreamPlan, static_pins
from refresh.spark.change_views import Source
from runtime.spark.session import quote

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)


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
