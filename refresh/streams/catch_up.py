"""A running stream that must stop to stay exact, and how its table catches up: a view
merged into its query has a new version (the table recomputed with it), a static source of a
stream-static join moved on, or a source snapshot the stream cannot read (an overwrite or
delete, an expired snapshot). A table with a primary key then applies its sources' row
changes since the snapshots it holds by key in one commit, and streams on from a new
checkpoint just after them; where that cannot be exact, it is recomputed, the history
saying why. It never silently diverges."""

from __future__ import annotations

import logging
import time
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from catalog import history
from refresh import rights, runs, selectors
from refresh.core import expectations as ex
from refresh.core.incremental import (
    RESUMED,
    Kind,
    has_full_outer_join,
    incremental_reason,
    null_supplied_key,
)
from refresh.core.streaming import static_moved, trigger_seconds
from refresh.models import MaterializedTable, RefreshRun
from refresh.sources import read_twice, source_snapshots, view_versions
from refresh.spark import stream_catch_up, stream_queries
from refresh.spark.source_changes import UnreadableChanges
from refresh.streams import loads
from refresh.streams.checkpoints import delete_checkpoint, new_checkpoint
from refresh.streams.starts import refused
from refresh.streams.state import (
    RETRY_SECONDS,
    HostState,
    Running,
    first_line,
    levels,
    set_status,
    target,
)
from runtime import leases

logger = logging.getLogger(__name__)


def follow_views(state: HostState, running: Running, mt: MaterializedTable) -> bool:
    """A view merged into the stream's query has a new version: the stream runs the SQL
    of the old one, so it stops and the table is recomputed with the new (as a FULL
    refresh would be), its stream started after that load. At most once per trigger
    interval; True when it stopped the stream."""
    if not running.plan.views:
        return False
    if time.monotonic() - running.started < trigger_seconds(mt.freshness):
        return False
    current = view_versions([name for name, _ in running.plan.views])
    changed = [
        f"{name} is at version {current.get(name)}"
        for name, version in running.plan.views
        if current.get(name) != version
    ]
    if not changed:
        return False
    stream_queries.stop_between_batches(running.query)
    del state.running[mt.pk]
    state.restarting = True
    recompute_instead(
        state,
        mt,
        running.checkpoint,
        stopped=f"the view {changed[0]}",
        reason=f"full: the view {changed[0]}, not the one the stream's query merged in",
    )
    return True


def follow_static(state: HostState, running: Running, mt: MaterializedTable) -> None:
    """A static source (the other side of a stream-static join) moved on since the
    table's load: the micro-batches read it at the load's snapshot (every key answers
    the same one), so the table catches up with the sources' snapshots now (the query
    stopped between micro-batches; `catch_up`: its keys the change touches recomputed,
    or, where that is not possible, the table recomputed), and the stream goes on with
    the new pins; at most once per trigger interval."""
    if not running.plan.static:
        return
    if time.monotonic() - running.started < trigger_seconds(mt.freshness):
        return
    current, _ = source_snapshots([(settings.CATALOG_NAME, *s) for s in running.plan.static])
    moved = static_moved(running.plan, mt.stream_start or {}, current)
    if not moved:
        return
    stream_queries.stop_between_batches(running.query)
    del state.running[mt.pk]
    changes = ", ".join(f"{name} {was} -> {now}" for name, (was, now) in moved.items())
    catch_up(
        state, mt, running.checkpoint, stopped=f"a static source of the join moved on ({changes})"
    )


def catch_up(state: HostState, mt: MaterializedTable, checkpoint: str, *, stopped: str) -> None:
    """The table's stream stopped at `checkpoint` (`stopped` says why). When the table is
    kept by a primary key and its sources' changes since the snapshots it holds read as
    row changes (refresh.core.incremental.catch_up), they are applied in one commit
    (`stream_catch_up.catch_up`; then a run in the history, INCREMENTAL, its reason what
    changed and that the stream resumed after it), and the stream starts again just
    after the snapshots the catch-up read, from a new checkpoint, as after a load.
    Otherwise the table is recomputed (`recompute_next`), the history and the load's
    run saying why. A catch-up that fails otherwise is the stream's failure
    (runs.record_stream_failure): it is tried again after RETRY_SECONDS from the old
    checkpoint, which meets the same snapshot again. Meanwhile the table's stream status
    stays RUNNING: a switch to FULL waits for this pass (runner._stream_stopping)."""
    state.restarting = True
    try:
        rights.check_owner_reads(mt)
    except rights.OwnerLacksPrivilege as refusal:
        refused(state, mt.pk, refusal)
        return
    started = timezone.now()
    try:
        plan, session = loads.plan_and_session(state, mt)
        key = tuple(plan.key or mt.primary_key or ())
        caught = stream_catch_up.plan_catch_up(
            session,
            plan=plan,
            key=key,
            catalog=settings.CATALOG_NAME,
            checkpoint=checkpoint,
            start_after=mt.stream_start or {},
            full_outer_join=has_full_outer_join(plan.sql(mt.query)),
            read_twice=read_twice(plan.sql(mt.query), ".".join(levels(mt))),
            null_supplied=null_supplied_key(plan.sql(mt.query), key),
        )
    except Exception as failure:  # noqa: BLE001 - the stream's failure, tried again
        logger.exception("Planning the catch-up of %s failed", mt)
        state.retry_after[mt.pk] = time.monotonic() + RETRY_SECONDS
        runs.record_stream_failure(
            mt, error=f"Catching up after {stopped} failed: {first_line(failure)}"
        )
        return
    decision = caught.decision
    if decision.kind is Kind.FULL:
        recompute_instead(state, mt, checkpoint, stopped=stopped, reason=decision.reason)
        return
    violations: dict[str, int] = {}
    results: dict[str, Any] = {
        "action": RefreshRun.Action.NO_DATA,
        "state": RefreshRun.State.SKIPPED,
        "reason": decision.reason,
    }
    try:
        if decision.kind is Kind.INCREMENTAL:
            before, _ = selectors.current_snapshot(mt.table_id)
            applied = stream_catch_up.catch_up(
                session,
                caught,
                plan=plan,
                key=key,
                query=plan.sql(mt.query),
                target=target(mt),
                catalog=settings.CATALOG_NAME,
                namespace=levels(mt),
                merge_turn=lambda: leases.rewriting(mt.table_id),
                properties={
                    **loads.load_state(mt.current_version, dict(caught.pins), started),
                    **state.stamp,
                },
                expectations=ex.from_json(mt.expectations),
                violations=violations,
            )
            snapshot_id, summary = selectors.current_snapshot(mt.table_id)
            if snapshot_id == before:
                summary = {}  # nothing committed (no key's row changed)
            counted = incremental_reason(decision.deltas, applied.counted, applied.keys)
            results = {
                "action": RefreshRun.Action.INCREMENTAL,
                "state": RefreshRun.State.SUCCEEDED,
                "reason": f"{counted}; {RESUMED}",
                **selectors.written(summary),
                "snapshot_id": snapshot_id,
            }
    except UnreadableChanges as failure:
        recompute_instead(state, mt, checkpoint, stopped=stopped, reason=str(failure))
        return
    except Exception as failure:  # noqa: BLE001 - the stream's failure, tried again
        logger.exception("The catch-up of %s failed", mt)
        state.retry_after[mt.pk] = time.monotonic() + RETRY_SECONDS
        runs.record_stream_failure(
            mt,
            error=f"Catching up after {stopped} failed: {first_line(failure)}",
            expectations=violations or None,
        )
        return
    with transaction.atomic():
        run = RefreshRun.objects.create(
            materialized_table=mt,
            table_name=str(mt.table),
            trigger=RefreshRun.Trigger.CONTINUOUS,
            queued_at=started,
            started_at=started,
            finished_at=timezone.now(),
            source_snapshots=loads.pinned_ids(dict(caught.pins)),
            data_timestamp=started,
            expectations=violations,
            definition_version=mt.current_version,
            worker=state.worker,
            **results,
        )
        runs.observe_finished(run)
        MaterializedTable.objects.filter(pk=mt.pk).update(
            stream_checkpoint=new_checkpoint(mt, mt.current_version),
            stream_start={k: list(v) if v else None for k, v in caught.pins.items()},
        )
    delete_checkpoint(checkpoint)
    logger.info("%s caught up after %s: %s", mt, stopped, run.reason)


def recompute_instead(
    state: HostState, mt: MaterializedTable, checkpoint: str, *, stopped: str, reason: str
) -> None:
    """The table cannot catch up (`reason`): it is recomputed (`recompute_next`), and
    its load's run says why."""
    why = reason.removeprefix("full: ")
    state.recompute_reasons[mt.pk] = (
        f"full: {why}; recomputed at the sources' snapshots now, the stream restarted after them"
    )
    recompute_next(
        mt,
        checkpoint,
        why=f"{stopped[:1].upper()}{stopped[1:]}; recomputing: {why}",
        error=why,
    )


def recompute_next(mt: MaterializedTable, checkpoint: str, *, why: str, error: str = "") -> None:
    """The table's stream cannot go on from `checkpoint` (stopped): it is dropped, and the
    next pass loads the table at the sources' snapshots then and streams on from a new one
    (a start without a checkpoint); `why` goes into the table's history."""
    MaterializedTable.objects.filter(pk=mt.pk).update(stream_checkpoint="")
    delete_checkpoint(checkpoint)
    history.record_change(mt.table, actor=None, action="recompute_materialized_table", message=why)
    set_status(mt.pk, "RECOMPUTING", error=error)
