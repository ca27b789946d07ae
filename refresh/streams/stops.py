"""A streaming query stopped or ended: stopping one between micro-batches, the table's status
after (STOPPED, or its checkpoints removed with a dropped table), and what follows a query
that ended by itself: a rewritten source (a catch-up), a lease lost (nothing: another host
runs it now), a refusal or a failure (a failed run, tried again later)."""

from __future__ import annotations

import logging
import time

from refresh import rights, runs
from refresh.models import MaterializedTable
from refresh.spark import stream_queries
from refresh.streams.catch_up import catch_up
from refresh.streams.checkpoints import delete_table_checkpoints
from refresh.streams.starts import refused
from refresh.streams.state import RETRY_SECONDS, HostState, Running, first_line, set_status

logger = logging.getLogger(__name__)

#: Errors that mean the stream cannot continue from its checkpoint but a catch-up to the
#: sources' current snapshots (or a load at them) can: a source rewritten (overwrite,
#: delete), or the snapshot the checkpoint stands at expired (the stream was stopped longer
#: than the retention).
_REWRITTEN_SOURCE = (
    "overwrite",
    "delete snapshot",
    "Cannot process",
    "deleted",
    "expired or removed",
    "Cannot find snapshot",
)


def stop(running: Running) -> None:
    """Stop the query between micro-batches, keeping its checkpoint."""
    try:
        stream_queries.stop_between_batches(running.query)
    except Exception:  # noqa: BLE001 - a query that fails to stop is gone anyway
        logger.exception("Stopping stream %s", running.mt_id)


def stopped(mt_id: int, running: Running) -> None:
    """A stopped query's table: STOPPED, or, dropped, its checkpoints gone with it."""
    exists = MaterializedTable.objects.filter(pk=mt_id).exists()
    if exists:
        set_status(mt_id, "STOPPED")
    else:
        delete_table_checkpoints(running.checkpoint)


def ended(state: HostState, running: Running, mt: MaterializedTable | None, *, held: bool) -> None:
    """The query ended by itself: a rewritten source (recompute), a lease lost (its
    micro-batch refused to commit), or a failure."""
    del state.running[running.mt_id]
    error = running.query.exception()
    message = first_line(error) if error is not None else "the query stopped"
    refusal = state.refusals.pop(running.mt_id, None)
    failed = state.expectation_failures.pop(running.mt_id, None)
    if mt is None:
        delete_table_checkpoints(running.checkpoint)
        return
    if not held:
        return  # another host runs it now; its status is that host's to write
    if refusal is not None:
        refused(state, mt.pk, rights.OwnerLacksPrivilege(refusal))
        return
    if error is not None and any(word in str(error) for word in _REWRITTEN_SOURCE):
        catch_up(
            state,
            mt,
            running.checkpoint,
            stopped=f"a source snapshot its stream cannot read ({message})",
        )
        return
    state.retry_after[mt.pk] = time.monotonic() + RETRY_SECONDS
    if failed is not None:
        # The batch's own words, not the foreachBatch wrapping Spark puts around them.
        runs.record_stream_failure(mt, error=failed[0], expectations=failed[1])
        return
    runs.record_stream_failure(mt, error=message)
