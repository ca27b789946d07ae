"""The micro-batches' history: each micro-batch a RefreshRun (trigger CONTINUOUS, recorded on
Spark's foreachBatch thread), the source offsets and the caught-up time a running query
reports, and the rows older than an hour folded per table and hour, so a table streaming
for months keeps a small history."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import close_old_connections
from django.utils import timezone

from catalog import history
from refresh import runs, selectors
from refresh.models import MaterializedTable, RefreshRun
from refresh.spark import stream_queries
from refresh.streams.state import Running

#: Micro-batch rows older than this are aggregated per hour.
KEEP_BATCHES = timedelta(hours=1)
#: How often a streaming host folds the history (`compact_history`).
COMPACT_EVERY_SECONDS = 300.0


def record_batch(
    mt_id: int, version: int, result: stream_queries.BatchResult, *, worker: str = ""
) -> None:
    """A micro-batch's row in the history (called on Spark's foreachBatch thread)."""
    if result.replayed:
        return
    close_old_connections()
    mt = MaterializedTable.objects.select_related("table__namespace").filter(pk=mt_id).first()
    if mt is None:
        return
    started = datetime.fromtimestamp(result.started, tz=UTC)
    # The commit's own figures, from the snapshot the micro-batch made.
    snapshot_id, summary = selectors.current_snapshot(mt.table_id)
    batch = RefreshRun.objects.create(
        materialized_table=mt,
        table_name=str(mt.table),
        trigger=RefreshRun.Trigger.CONTINUOUS,
        action=RefreshRun.Action.INCREMENTAL,
        state=RefreshRun.State.SUCCEEDED,
        queued_at=started,
        started_at=started,
        finished_at=datetime.fromtimestamp(result.finished, tz=UTC),
        batch_id=result.batch_id,
        **selectors.written(summary),
        snapshot_id=snapshot_id,
        # What the batch read (its commit's refresh state); empty when it records none.
        source_snapshots=dict(result.sources or {}),
        expectations=dict(result.expectations or {}),
        data_timestamp=started,
        definition_version=version,
        worker=worker or f"streams:{os.getpid()}",
    )
    runs.observe_finished(batch)


def progress(running: Running, mt: MaterializedTable) -> None:
    """Source offsets onto the batches' rows; the time the stream was last caught up."""
    caught_up = None
    for report in running.query.recentProgress:
        batch_id = report.get("batchId", -1)
        if report.get("numInputRows", 0) == 0:
            caught_up = report.get("timestamp")
            continue
        if batch_id > running.last_progress_batch:
            offsets = {
                source.get("description", str(i)): source.get("endOffset")
                for i, source in enumerate(report.get("sources", []))
            }
            RefreshRun.objects.filter(
                materialized_table_id=mt.pk,
                trigger=RefreshRun.Trigger.CONTINUOUS,
                batch_id=batch_id,
            ).update(source_offsets=offsets)
            running.last_progress_batch = batch_id
    fields: dict[str, Any] = {"stream_status": "RUNNING", "stream_error": ""}
    if caught_up:
        fields["stream_heartbeat_at"] = _parse_time(caught_up)
    MaterializedTable.objects.filter(pk=mt.pk).update(**fields)


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def compact_history(*, older_than: timedelta = KEEP_BATCHES, periodic: bool = False) -> int:
    """Fold micro-batch rows that finished more than `older_than` ago into one row per table
    and hour (catalog.history.fold_per_hour): the hour's newest batch stays, with `batches`
    the batches it stands for, the sums of their rows and bytes written and of each
    expectation's violating rows, and the first one's queued and start times; its batch id,
    snapshot, source offsets and data timestamp are the newest batch's; a catch-up's row
    (refresh.streams.catch_up, no batch id) is never folded. Safe beside another
    host's pass (each hour is one locked transaction). `periodic` (this process's own pass)
    reads only what its previous pass left. Returns how many rows were folded away."""
    batches = RefreshRun.objects.filter(
        trigger=RefreshRun.Trigger.CONTINUOUS,
        action=RefreshRun.Action.INCREMENTAL,
        state=RefreshRun.State.SUCCEEDED,
        # A catch-up (no batch id) keeps its own row: its reason says what changed.
        batch_id__isnull=False,
    )
    return history.fold_per_hour(
        batches,
        at="finished_at",
        before=timezone.now() - older_than,
        keys=("materialized_table_id", "table_name"),
        count="batches",
        sums=("rows_written", "bytes_written"),
        summed_maps=("expectations",),
        earliest={"queued_at": ("queued_at",), "started_at": ("started_at",)},
        resume="micro-batches" if periodic else None,
    )
