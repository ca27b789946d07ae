"""Starting the streaming queries of the tables a host holds (side by side, each loaded first
when it has no checkpoint), and what a running query's micro-batch asks of its host on
Spark's thread: whether it may still commit (the table's lease), whether the table's owner
may still read its sources (else the stream is refused: a failed run, tried again later),
and the FAIL UPDATE expectation that failed it."""

from __future__ import annotations

import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import close_old_connections, connection

from refresh import rights, runs, stream_hosts
from refresh.core import expectations as ex
from refresh.core.streaming import trigger_seconds
from refresh.models import MaterializedTable, RefreshRun
from refresh.sources import source_uuids
from refresh.spark import stream_queries
from refresh.streams import loads
from refresh.streams.batches import record_batch
from refresh.streams.state import (
    RETRY_SECONDS,
    HostState,
    Running,
    first_line,
    levels,
    set_status,
    signature,
    target,
)
from runtime import leases
from runtime.spark.session import activate

logger = logging.getLogger(__name__)

#: Queries started side by side in one pass (each start waits mostly on Spark's JVM).
START_THREADS = 4


def start_all(state: HostState, tables: list[MaterializedTable]) -> None:
    """Start the queries of `tables` side by side: a start is mostly waiting (Spark's
    analysis, the catalog's loads, the checkpoint's replay), so the tables a host takes
    over from a dead one all run within about one start's time rather than one after
    another (issue 21: within the lease time plus a trigger)."""
    if len(tables) <= 1:
        for mt in tables:
            start(state, mt)
        return

    _ = state.spark  # built once, here, not by two threads at once

    def start_on_thread(mt: MaterializedTable) -> None:
        try:
            activate(state.spark)  # as on the thread that built it
            start(state, mt)
        finally:
            # Each thread's database connection is its own; it ends with the thread.
            connection.close()

    with ThreadPoolExecutor(
        max_workers=min(len(tables), START_THREADS), thread_name_prefix="stream-start"
    ) as pool:
        list(pool.map(start_on_thread, tables))


def start(state: HostState, mt: MaterializedTable) -> None:
    began = time.monotonic()
    try:
        rights.check_owner_reads(mt)
        rights.check_owner_streams(mt)
    except rights.OwnerLacksPrivilege as error:
        refused(state, mt.pk, error)
        return
    state.expectation_failures.pop(mt.pk, None)  # a previous query's, not this one's
    try:
        plan, session = loads.plan_and_session(state, mt)
        if not mt.stream_checkpoint:
            mt = loads.load(state, session, mt, plan)
        planned = time.monotonic()
        key = f"lakeview-mt-{mt.pk}"
        # Read once per start: a source dropped and made again under its name (another
        # UUID) fails the stream, and the next start reads them again.
        uuids = source_uuids(".".join(s) for s in (*plan.streams, *plan.static))
        query = stream_queries.start(
            session,
            plan=plan,
            query=plan.sql(mt.query),
            target=target(mt),
            catalog=settings.CATALOG_NAME,
            namespace=levels(mt),
            checkpoint=mt.stream_checkpoint,
            key=f"{key}-{os.path.basename(mt.stream_checkpoint)}",
            trigger_seconds=trigger_seconds(mt.freshness),
            start_after={k: tuple(v) for k, v in (mt.stream_start or {}).items() if v},
            on_batch=lambda result, mt_id=mt.pk, version=mt.current_version: record_batch(
                mt_id, version, result, worker=state.worker
            ),
            may_commit=lambda mt_id=mt.pk: may_commit(state, mt_id),
            may_read=lambda mt_id=mt.pk: may_read(state, mt_id),
            commit_properties=state.stamp,
            version=mt.current_version,
            uuids=uuids,
            merge_turn=lambda table_id=mt.table_id: leases.rewriting(table_id),
            expectations=ex.from_json(mt.expectations),
            on_failed=lambda error, counts, mt_id=mt.pk: expectation_failed(
                state, mt_id, error, counts
            ),
        )
    except Exception as error:  # noqa: BLE001 - shown on the table's page, retried later
        logger.exception("Starting the stream of %s failed", mt)
        state.retry_after[mt.pk] = time.monotonic() + RETRY_SECONDS
        runs.record_stream_failure(mt, error=first_line(error))
        return
    state.running[mt.pk] = Running(
        mt.pk, query, signature(mt), mt.stream_checkpoint, plan, time.monotonic()
    )
    state.retry_after.pop(mt.pk, None)
    set_status(mt.pk, "RUNNING")
    # How long a start takes (a takeover's tables wait for it): the plan and session
    # (and a load, for a table without a checkpoint), then Spark's start of the query.
    logger.info(
        "Streaming %s from %s (started in %.2f s: plan %.2f s, query %.2f s)",
        mt,
        mt.stream_checkpoint,
        time.monotonic() - began,
        planned - began,
        time.monotonic() - planned,
    )


def may_commit(state: HostState, mt_id: int) -> bool:
    """Asked by a micro-batch just before it commits (on Spark's thread): whether this
    host still holds the table, its lease renewed for the commit."""
    assert state.host is not None
    close_old_connections()
    return stream_hosts.renew(state.host, mt_id)


def may_read(state: HostState, mt_id: int) -> None:
    """Asked by a micro-batch before it reads its new rows (on Spark's thread): raises
    once the table's owner may no longer read a source, after recording why (the
    query's own error says only that the batch's function failed)."""
    close_old_connections()
    mt = MaterializedTable.objects.select_related("table__namespace").filter(pk=mt_id).first()
    if mt is None:
        return
    try:
        rights.check_owner_reads(mt)
    except rights.OwnerLacksPrivilege as error:
        state.refusals[mt_id] = error.message
        raise


def expectation_failed(
    state: HostState, mt_id: int, error: ex.ExpectationFailed, counts: dict[str, int]
) -> None:
    """A FAIL UPDATE expectation failed a micro-batch (on Spark's foreachBatch thread):
    kept for refresh.streams.stops.ended, which records the stream's failure with it."""
    state.expectation_failures[mt_id] = (error.message, counts)


def refused(state: HostState, mt_id: int, error: rights.OwnerLacksPrivilege) -> None:
    """The table's owner may not read a source: its stream stays stopped, and the
    refusal is a failed run, counted toward the automatic suspension like a refresh's;
    the next pass tries again after RETRY_SECONDS."""
    logger.warning("The stream of table %s is refused: %s", mt_id, error.message)
    state.retry_after[mt_id] = time.monotonic() + RETRY_SECONDS
    set_status(mt_id, "FAILED", error=error.message)
    mt = MaterializedTable.objects.select_related("table__namespace").filter(pk=mt_id).first()
    if mt is not None:
        run = runs.enqueue(mt, trigger=RefreshRun.Trigger.CONTINUOUS)
        runs.finish(run, state=RefreshRun.State.FAILED, error=error.message)
