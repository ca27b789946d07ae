"""The streaming process: a long-running process (`manage.py run_streams`) hosting the
streaming queries of ACTIVATED continuous materialized tables in one Spark session. Any
number of them share the tables through leases in the database (refresh.stream_hosts): each
runs the queries of the tables it holds, at most its fair share, and takes over the tables
of a host that died once their leases end, from their checkpoints.

It reads the desired state from the database every few seconds and makes it so: it claims
its share of the active continuous tables and starts a query for each table it holds, gives
up tables above its share, stops (between micro-batches, keeping the checkpoint) the query
of a table suspended, dropped or switched to FULL, given up or taken over, restarts one
whose definition, freshness, options or checkpoint changed. The table's lease holder is the
only writer of its `stream_*` columns.

- A table with no checkpoint is loaded first (its sources pinned at their current
  snapshots, one overwrite), then streamed from just after those snapshots. That is how a
  CREATE, a new definition, a switch from FULL and a recompute start.
- A source snapshot that deletes or overwrites rows stops the stream (Iceberg's stream
  source refuses it), and a merge plan's static source that moved on stops it between
  micro-batches; the table then catches up (`Supervisor._catch_up`): with a primary key,
  the sources' row changes since the snapshots it holds are applied by key in one commit
  (an INCREMENTAL run in its history) and the stream resumes just after them from a new
  checkpoint; where that cannot be exact, it is recomputed (loaded again, a new
  checkpoint), the history saying why. It never silently diverges.
- Every micro-batch is a RefreshRun (trigger CONTINUOUS); rows older than an hour are
  aggregated per hour, so a table running for months keeps a small history.
- Every commit, load or micro-batch, records in its snapshot summary what it answers
  (refresh.core.refresh_state): the definition version it runs and each source's table
  UUID, which this process passes to the Django-free Spark side, with the snapshot read.
- If the process dies, another host (or the next start) resumes its queries from their
  checkpoints once their leases end; a micro-batch commits only while its host holds the
  table's lease."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from catalog import history
from catalog import selectors as catalog_selectors
from catalog.core import metadata_io
from catalog.models import CatalogObject
from catalog.watch import warehouse_floor
from refresh import definitions, rights, runs, selectors, signals, stream_hosts
from refresh.core import expectations as ex
from refresh.core.freshness import RefreshMode
from refresh.core.incremental import (
    RESUMED,
    Kind,
    has_full_outer_join,
    incremental_reason,
    null_supplied_key,
)
from refresh.core.streaming import StreamPlan, static_moved, trigger_seconds
from refresh.models import MaterializedTable, RefreshRun, StreamHost
from refresh.sources import (
    check_streamable,
    read_twice,
    source_snapshots,
    source_uuids,
    state_of,
    view_versions,
)
from refresh.spark import jobs, streaming
from refresh.spark.source_changes import UnreadableChanges
from runtime import engine, leases
from runtime.spark import errors
from runtime.spark.session import SparkSessionConfig, activate, forget_jvm, jvm_gone

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

logger = logging.getLogger(__name__)

#: A stream that failed for another reason than a rewritten source is retried after this.
RETRY_SECONDS = 30.0
#: Micro-batch rows older than this are aggregated per hour.
KEEP_BATCHES = timedelta(hours=1)
#: Runs of a continuous table asked for by hand, which this process makes (the stream
#: paused), not a worker.
BY_HAND = (RefreshRun.Trigger.MANUAL, RefreshRun.Trigger.API)
MANUAL_REASON = (
    "full: a continuous table's manual refresh (its stream paused between micro-batches, "
    "the query recomputed at pinned source snapshots, the stream resumed just after them)"
)
COMPACT_EVERY_SECONDS = 300.0
#: Queries started side by side in one pass (each start waits mostly on Spark's JVM).
START_THREADS = 4
#: How long after another host's lease ends the next pass looks (the database's clock and
#: this process's timer need not tick together to the millisecond).
EXPIRY_MARGIN_SECONDS = 0.05
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


@dataclass
class Running:
    mt_id: int
    query: StreamingQuery
    signature: tuple
    checkpoint: str
    plan: StreamPlan
    #: time.monotonic() at the start: a static source's move recomputes the table at most
    #: once per trigger interval, so the stream makes progress between recomputes.
    started: float = 0.0
    last_progress_batch: int = -1


def _desired() -> dict[int, MaterializedTable]:
    """The tables whose streams should run (on some host): ACTIVATED continuous ones."""
    return {
        mt.pk: mt
        for mt in MaterializedTable.objects.select_related("table__namespace").filter(
            refresh_mode=RefreshMode.CONTINUOUS, state=MaterializedTable.State.ACTIVATED
        )
    }


def _signature(mt: MaterializedTable) -> tuple:
    return (
        mt.current_version,
        mt.stream_checkpoint,
        mt.freshness_value,
        mt.freshness_unit,
        json.dumps(mt.stream_options, sort_keys=True),
    )


def _levels(mt: MaterializedTable) -> list[str]:
    return (mt.default_namespace or mt.table.namespace.name).split(".")


def _target(mt: MaterializedTable) -> list[str]:
    return [settings.CATALOG_NAME, *mt.table.namespace.name.split("."), mt.table.name]


class Supervisor:
    def __init__(
        self,
        config: SparkSessionConfig,
        *,
        poll_seconds: float = 2.0,
        host_name: str | None = None,
    ) -> None:
        self.config = config
        self.poll_seconds = poll_seconds
        self.host_name = host_name
        self.host: StreamHost | None = None
        #: When (time.monotonic()) another host's lease next ends, as the last pass saw it.
        self.next_expiry: float | None = None
        self.running: dict[int, Running] = {}
        self.retry_after: dict[int, float] = {}
        #: Why a micro-batch refused to read (refresh.rights), by table, until its query ends.
        self.refusals: dict[int, str] = {}
        #: The FAIL UPDATE expectation that failed a micro-batch (its message, and the
        #: batch's counts of every expectation), by table, until its query ends.
        self.expectation_failures: dict[int, tuple[str, dict[str, int]]] = {}
        self.last_compaction = 0.0
        #: Why a table is recomputed (`_catch_up`), for its load's run, by table.
        self.recompute_reasons: dict[int, str] = {}
        #: A stream caught up or was sent to a recompute in this pass (`sync_once`).
        self.restarting = False
        self._spark: SparkSession | None = None
        self.stopping = threading.Event()
        self._beating: threading.Thread | None = None

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            self._spark = self.config.build()
        return self._spark

    # -- the loop ------------------------------------------------------------------------

    def run_forever(self) -> None:
        self.join()
        logger.info("Streaming host %s (%s) started", self.host, self.host.token)
        try:
            while not self.stopping.is_set():
                close_old_connections()
                try:
                    self.sync_once()
                except Exception:  # noqa: BLE001 - the process keeps serving the other tables
                    logger.exception("A pass over the continuous tables failed")
                self.stopping.wait(self._pause())
        finally:
            self.stop_all()
            self.leave()

    def _pause(self) -> float:
        """Until the next pass: the poll interval, or less when another host's lease ends
        sooner (a dead host's tables are claimed as its leases end; issue 21 asks for them
        to run elsewhere within the lease time plus one trigger)."""
        if self.next_expiry is None:
            return self.poll_seconds
        ends_in = self.next_expiry - time.monotonic()
        return max(0.0, min(self.poll_seconds, ends_in + EXPIRY_MARGIN_SECONDS))

    def join(self) -> StreamHost:
        """Register this process as a streaming host and start its heartbeat thread."""
        if self.host is None:
            self.host = stream_hosts.register(self.host_name)
            self._beating = threading.Thread(
                target=self._beat_forever, name="stream-host-heartbeat", daemon=True
            )
            self._beating.start()
        return self.host

    def leave(self) -> None:
        """A clean stop (streams already stopped): the leases end now, so the other hosts
        take the tables at their next pass rather than after the lease time."""
        if self.host is None:
            return
        try:
            stream_hosts.leave(self.host)
        except Exception:  # noqa: BLE001 - the leases then simply expire
            logger.exception("Leaving as streaming host %s", self.host)

    def _beat_forever(self) -> None:
        """Renew this host's leases every third of the lease time, on a thread of its own:
        a long load or rebuild in the loop never lets them lapse."""
        assert self.host is not None
        last_sweep = 0.0
        try:
            while not self.stopping.wait(stream_hosts.lease_seconds() / 3):
                close_old_connections()
                try:
                    stream_hosts.beat(self.host)
                    if time.monotonic() - last_sweep > 60:
                        stream_hosts.forget_dead()
                        last_sweep = time.monotonic()
                except Exception:  # noqa: BLE001 - a missed beat; the leases run on meanwhile
                    logger.exception("Heartbeat of streaming host %s failed", self.host)
        finally:
            # This thread's database connection is its own; it ends with the thread.
            connection.close()

    def _recover_lost_jvm(self) -> None:
        """When this host's Spark JVM has exited (an OutOfMemoryError in a micro-batch ends
        it), start a new one: the host keeps its leases, which its heartbeat renews, so no
        other host would take its tables; their streams start again from their checkpoints
        in this pass, as after a restart of the process."""
        if self._spark is None or not jvm_gone():
            return
        logger.error(
            "This host's Spark JVM has exited; starting a new one, and the streams of %s "
            "again from their checkpoints",
            sorted(self.running),
        )
        self.running.clear()  # their queries lived in the dead JVM
        forget_jvm()
        self._spark = None

    def _paused_for_room(self) -> bool:
        """When the warehouse's disk is at its floor (catalog.watch.warehouse_floor), this
        host's streams stop and none starts until there is room again: a runaway stream
        must not fill the disk the other tables and the database live on. A micro-batch
        running is given a few seconds, then cut short (its replay finds its marker)."""
        full = warehouse_floor()
        if full is None:
            return False
        if self.running:
            logger.error("Stopping the streams of %s: %s", sorted(self.running), full)
            streaming.stop_all_between_batches(
                [running.query for running in self.running.values()], timeout=5.0
            )
            for mt_id in list(self.running):
                del self.running[mt_id]
                _set_status(
                    mt_id, "FAILED", error=f"Stopped: {full}; it starts again once there is room"
                )
        return True

    def stop_all(self) -> None:
        for running in list(self.running.values()):
            self._stop(running)
        self.running.clear()

    def sync_once(self) -> None:
        host = self.join()
        self._recover_lost_jvm()
        active = _desired()
        held = self._assign(host, active)
        # Taken before the rebuilds and starts below, which take seconds: a lease ending
        # meanwhile makes the next pass come at once.
        ends_in = stream_hosts.next_expiry(host, active)
        self.next_expiry = None if ends_in is None else time.monotonic() + ends_in
        if self._paused_for_room():
            return
        self._rebuild_pending(held)
        # Read again: a rebuild or manual refresh just gave its table a new checkpoint and
        # new pins, which its stream must start from.
        desired = _desired()
        for mt_id, running in list(self.running.items()):
            mt = desired.get(mt_id)
            if not running.query.isActive:
                self._ended(running, mt, held=mt_id in held)
                continue
            if mt is None or _signature(mt) != running.signature:
                self._stop(running)
                del self.running[mt_id]
                self._stopped(mt_id, running)
                continue
            self._progress(running, mt)
            if not self._follow_views(running, mt):
                self._follow_static(running, mt)
        if self.restarting:
            # A catch-up or a recompute just gave its table a new checkpoint and pins (or
            # none): its stream starts from those, not from the ones read above.
            self.restarting = False
            desired = _desired()
        self._start_all(
            [
                mt
                for mt_id, mt in desired.items()
                if mt_id in held
                and mt_id not in self.running
                and time.monotonic() >= self.retry_after.get(mt_id, 0)
            ]
        )
        if time.monotonic() - self.last_compaction > COMPACT_EVERY_SECONDS:
            compact_history(periodic=True)
            self.last_compaction = time.monotonic()

    # -- leases --------------------------------------------------------------------------

    def _assign(self, host: StreamHost, desired: dict[int, MaterializedTable]) -> set[int]:
        """Settle this pass's leases; returns the tables this host holds afterwards.

        A running query whose lease another host took (this one was paused or cut off
        longer than the lease) stops at once: its micro-batches could no longer commit
        anyway. Tables above the fair share, or no longer active, stop between
        micro-batches and are released; then free or expired ones are claimed up to the
        share."""
        plan = stream_hosts.plan_for(host, desired)
        for mt_id in [m for m in self.running if m not in plan.keep and m not in plan.release]:
            running = self.running.pop(mt_id)
            if not MaterializedTable.objects.filter(pk=mt_id).exists():
                # Dropped (its lease went with its row): its checkpoints go too.
                self._stop(running)
                self._stopped(mt_id, running)
                continue
            logger.warning("Lost the lease of table %s to another host; stopping", mt_id)
            with contextlib.suppress(Exception):
                running.query.stop()
        # Stopped together, each between its micro-batches: a table suspended, dropped or
        # switched to FULL within the usual minute; a surplus one within a third of the
        # lease (a busy query whose batches run back to back is stopped then anyway; its
        # next holder replays the batch cut short, which finds its own commit if it made one).
        giving_up = {m: self.running.pop(m) for m in plan.release if m in self.running}
        for ending, timeout in (
            ([m for m in giving_up if m not in desired], 60.0),
            ([m for m in giving_up if m in desired], stream_hosts.lease_seconds() / 3),
        ):
            try:
                streaming.stop_all_between_batches(
                    [giving_up[m].query for m in ending], timeout=timeout
                )
            except Exception:  # noqa: BLE001 - a query that fails to stop is gone anyway
                logger.exception("Stopping streams %s", sorted(ending))
        for mt_id in plan.release:
            if mt_id in giving_up and mt_id not in desired:
                self._stopped(mt_id, giving_up[mt_id])
            if mt_id in desired:
                logger.info("Releasing table %s (above this host's share %s)", mt_id, plan.share)
            stream_hosts.release(host, mt_id)
        held = set(plan.keep)
        for mt_id in plan.candidates:
            if len(held) >= plan.share:
                break
            if stream_hosts.claim(host, mt_id):
                logger.info("Claimed table %s", mt_id)
                held.add(mt_id)
        return held

    def _may_commit(self, mt_id: int) -> bool:
        """Asked by a micro-batch just before it commits (on Spark's thread): whether this
        host still holds the table, its lease renewed for the commit."""
        assert self.host is not None
        close_old_connections()
        return stream_hosts.renew(self.host, mt_id)

    def _may_read(self, mt_id: int) -> None:
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
            self.refusals[mt_id] = error.message
            raise

    def _expectation_failed(
        self, mt_id: int, error: ex.ExpectationFailed, counts: dict[str, int]
    ) -> None:
        """A FAIL UPDATE expectation failed a micro-batch (on Spark's foreachBatch thread):
        kept for `_ended`, which records the stream's failure with it."""
        self.expectation_failures[mt_id] = (error.message, counts)

    def _refused(self, mt_id: int, error: rights.OwnerLacksPrivilege) -> None:
        """The table's owner may not read a source: its stream stays stopped, and the
        refusal is a failed run, counted toward the automatic suspension like a refresh's;
        the next pass tries again after RETRY_SECONDS."""
        logger.warning("The stream of table %s is refused: %s", mt_id, error.message)
        self.retry_after[mt_id] = time.monotonic() + RETRY_SECONDS
        _set_status(mt_id, "FAILED", error=error.message)
        mt = MaterializedTable.objects.select_related("table__namespace").filter(pk=mt_id).first()
        if mt is not None:
            run = runs.enqueue(mt, trigger=RefreshRun.Trigger.CONTINUOUS)
            runs.finish(run, state=RefreshRun.State.FAILED, error=error.message)

    # -- start, load, stop ---------------------------------------------------------------

    def _plan_and_session(self, mt: MaterializedTable) -> tuple[StreamPlan, SparkSession]:
        """How the stream keeps the table's query, and the session it runs in."""
        plan = check_streamable(
            mt.query, namespace=".".join(_levels(mt)), primary_key=mt.primary_key
        )
        session = jobs.run_session(
            self.spark,
            catalog=settings.CATALOG_NAME,
            namespace=_levels(mt),
            settings=mt.stream_options or {},
            aliases=sorted(catalog_selectors.engine_catalogs()),
        )
        return plan, session

    def _start_all(self, tables: list[MaterializedTable]) -> None:
        """Start the queries of `tables` side by side: a start is mostly waiting (Spark's
        analysis, the catalog's loads, the checkpoint's replay), so the tables a host takes
        over from a dead one all run within about one start's time rather than one after
        another (issue 21: within the lease time plus a trigger)."""
        if len(tables) <= 1:
            for mt in tables:
                self._start(mt)
            return

        _ = self.spark  # built once, here, not by two threads at once

        def start(mt: MaterializedTable) -> None:
            try:
                activate(self.spark)  # as on the thread that built it
                self._start(mt)
            finally:
                # Each thread's database connection is its own; it ends with the thread.
                connection.close()

        with ThreadPoolExecutor(
            max_workers=min(len(tables), START_THREADS), thread_name_prefix="stream-start"
        ) as pool:
            list(pool.map(start, tables))

    def _start(self, mt: MaterializedTable) -> None:
        began = time.monotonic()
        try:
            rights.check_owner_reads(mt)
        except rights.OwnerLacksPrivilege as error:
            self._refused(mt.pk, error)
            return
        self.expectation_failures.pop(mt.pk, None)  # a previous query's, not this one's
        try:
            plan, session = self._plan_and_session(mt)
            if not mt.stream_checkpoint:
                mt = self._load(session, mt, plan)
            planned = time.monotonic()
            key = f"lakeview-mt-{mt.pk}"
            # Read once per start: a source dropped and made again under its name (another
            # UUID) fails the stream, and the next start reads them again.
            uuids = source_uuids(".".join(s) for s in (*plan.streams, *plan.static))
            query = streaming.start(
                session,
                plan=plan,
                query=plan.sql(mt.query),
                target=_target(mt),
                catalog=settings.CATALOG_NAME,
                namespace=_levels(mt),
                checkpoint=mt.stream_checkpoint,
                key=f"{key}-{os.path.basename(mt.stream_checkpoint)}",
                trigger_seconds=trigger_seconds(mt.freshness),
                start_after={k: tuple(v) for k, v in (mt.stream_start or {}).items() if v},
                on_batch=lambda result, mt_id=mt.pk, version=mt.current_version: _record_batch(
                    mt_id, version, result, worker=self._worker
                ),
                may_commit=lambda mt_id=mt.pk: self._may_commit(mt_id),
                may_read=lambda mt_id=mt.pk: self._may_read(mt_id),
                commit_properties=self._stamp,
                version=mt.current_version,
                uuids=uuids,
                merge_turn=lambda table_id=mt.table_id: leases.rewriting(table_id),
                expectations=ex.from_json(mt.expectations),
                on_failed=lambda error, counts, mt_id=mt.pk: self._expectation_failed(
                    mt_id, error, counts
                ),
            )
        except Exception as error:  # noqa: BLE001 - shown on the table's page, retried later
            logger.exception("Starting the stream of %s failed", mt)
            self.retry_after[mt.pk] = time.monotonic() + RETRY_SECONDS
            runs.record_stream_failure(mt, error=_first_line(error))
            return
        self.running[mt.pk] = Running(
            mt.pk, query, _signature(mt), mt.stream_checkpoint, plan, time.monotonic()
        )
        self.retry_after.pop(mt.pk, None)
        _set_status(mt.pk, "RUNNING")
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

    @property
    def _stamp(self) -> dict[str, str]:
        """The snapshot-summary entry of this host's commits to a table: the catalog swaps
        them only while this host holds the table's lease (stream_hosts.check_commit)."""
        return {stream_hosts.HOST_PROPERTY: str(self.host.token)} if self.host else {}

    @property
    def _worker(self) -> str:
        """How runs name this process: "streams:" and the host's name."""
        return f"streams:{self.host.name if self.host else os.getpid()}"

    def _load(
        self,
        session: SparkSession,
        mt: MaterializedTable,
        plan: StreamPlan,
        run: RefreshRun | None = None,
        violations: dict[str, int] | None = None,
    ) -> Any:
        """Load the table at pinned source snapshots, then give it a new checkpoint: the
        stream (re)starts just after those snapshots. Recorded as `run` (a manual refresh,
        claimed) or as a run of its own (a start without a checkpoint). The expectations'
        counts go on the run, and into `violations` (for a claimed run's failure)."""
        claimed = run is not None
        violations = {} if violations is None else violations
        if run is None:
            first = not mt.runs.exclude(state=RefreshRun.State.CANCELLED).exists()
            run = RefreshRun.objects.create(
                materialized_table=mt,
                table_name=str(mt.table),
                trigger=RefreshRun.Trigger.CREATE if first else RefreshRun.Trigger.CONTINUOUS,
                action=RefreshRun.Action.FULL,
                reason=self.recompute_reasons.pop(mt.pk, ""),
                state=RefreshRun.State.RUNNING,
                started_at=timezone.now(),
                heartbeat_at=timezone.now(),
                worker=self._worker,
                definition_version=mt.current_version,
            )
            signals.run_started.send(RefreshRun, run=run)
        try:
            pins, result = self._pinned_load(
                session,
                mt,
                plan,
                query=plan.sql(mt.query),
                namespace=_levels(mt),
                version=mt.current_version,
                started=run.started_at,
                expectations=ex.from_json(mt.expectations),
                violations=violations,
            )
        except Exception as error:
            if not claimed:
                RefreshRun.objects.filter(pk=run.pk).update(
                    state=RefreshRun.State.FAILED,
                    finished_at=timezone.now(),
                    error=str(error)[:5000],
                    expectations=violations,
                )
                run.refresh_from_db()
                runs.observe_finished(run)
            raise
        checkpoint = _new_checkpoint(mt, mt.current_version)
        results = {
            "rows_written": result.rows_written,
            "bytes_written": result.bytes_written,
            "snapshot_id": result.snapshot_id,
            "source_snapshots": _pinned_ids(pins),
            "data_timestamp": run.started_at,
            "expectations": violations,
        }
        with transaction.atomic():
            if claimed:
                runs.finish(
                    run,
                    state=RefreshRun.State.SUCCEEDED,
                    action=RefreshRun.Action.FULL,
                    reason=MANUAL_REASON,
                    **results,
                )
            else:
                RefreshRun.objects.filter(pk=run.pk).update(
                    state=RefreshRun.State.SUCCEEDED, finished_at=timezone.now(), **results
                )
                run.refresh_from_db()
                runs.observe_finished(run)
            MaterializedTable.objects.filter(pk=mt.pk).update(
                stream_checkpoint=checkpoint,
                stream_start={k: list(v) if v else None for k, v in pins.items()},
            )
        mt.refresh_from_db()
        return mt

    def _rebuild_pending(self, held: set[int]) -> None:
        """ALTER ... AS and rollbacks of continuous tables (rebuild runs), and their manual
        refreshes (by hand or through the API): each table's query stops first (between
        micro-batches), so that nothing the stream writes lands in the middle; then
        `_rebuild` or `_recompute`. The loop then starts the table's query again, just after
        the snapshots the rebuild or recompute read (or, if it failed, from the old
        checkpoint): no moment where the stream and a batch job both write.

        Only for tables this host holds, or, for a table that is not streaming (suspended),
        one it can claim for the run (released at the next pass)."""
        pending = RefreshRun.objects.filter(
            trigger__in=[RefreshRun.Trigger.REBUILD, *BY_HAND],
            state=RefreshRun.State.QUEUED,
            materialized_table__refresh_mode=RefreshMode.CONTINUOUS,
        ).order_by("queued_at", "id")
        rows = pending.values_list(
            "pk", "materialized_table_id", "trigger", "materialized_table__state"
        )
        for run_id, mt_id, trigger, state in rows:
            if mt_id not in held:
                streaming_now = state == MaterializedTable.State.ACTIVATED
                if streaming_now or not stream_hosts.claim(self.host, mt_id):
                    continue
            running = self.running.pop(mt_id, None)
            if running is not None:
                self._stop(running)
            self.retry_after.pop(mt_id, None)
            if trigger == RefreshRun.Trigger.REBUILD:
                self._rebuild(run_id)
            else:
                self._recompute(run_id)

    @contextlib.contextmanager
    def _watched(self, run: RefreshRun) -> Iterator[Any]:
        """The run's heartbeat (runtime.running.Heartbeat), which also stops the run's Spark
        jobs, tagged with the job group `lakeview-run-<id>` on this host's session, at
        REFRESH_TIMEOUT_SECONDS or at the warehouse disk's floor."""
        from runtime.running import Heartbeat

        group = f"lakeview-run-{run.pk}"
        context = self.spark.sparkContext
        beating = Heartbeat(
            run,
            cancel=lambda: context.cancelJobGroup(group),
            limit=settings.REFRESH_TIMEOUT_SECONDS or None,
        )
        with engine.job_group(group, f"Refresh run {run.pk}", context=context):
            beating.start()
            try:
                yield beating
            finally:
                beating.stop()

    def _recompute(self, run_id: int) -> None:
        """A manual refresh of a continuous table, its stream stopped: the query over the
        sources pinned now replaces the rows (one commit, its refresh state those pins),
        and the stream continues just after them from a new checkpoint."""
        run = runs.claim(run_id, worker=self._worker)
        if run is None:
            return
        mt = run.materialized_table
        old_checkpoint = mt.stream_checkpoint
        violations: dict[str, int] = {}
        with self._watched(run) as beating:
            try:
                rights.check_owner_reads(mt)
                plan, session = self._plan_and_session(mt)
                self._load(session, mt, plan, run=run, violations=violations)
            except Exception as error:  # noqa: BLE001 - the run's failure, recorded below;
                # the stream then resumes from its old checkpoint
                failure: Exception | None = error
            else:
                failure = None
        if failure is not None:
            logger.error("The manual refresh of %s failed", mt, exc_info=failure)
            runs.finish(
                run,
                state=RefreshRun.State.FAILED,
                action=RefreshRun.Action.FULL,
                reason=MANUAL_REASON,
                error=_why_stopped(run, beating) or errors.failure_message(failure),
                expectations=violations,
            )
            return
        if old_checkpoint:
            _delete_checkpoint(old_checkpoint)

    def _rebuild(self, run_id: int) -> None:
        """Replace the table with the new definition's rows over its sources pinned now:
        schema and rows in one commit; a new checkpoint and pins for the new stream."""
        run = runs.claim(run_id, worker=self._worker)
        if run is None:
            return
        mt = run.materialized_table
        old_checkpoint = mt.stream_checkpoint
        violations: dict[str, int] = {}
        with self._watched(run) as beating:
            try:
                pins, result = self._rebuilt(run, mt, violations)
            except Exception as error:  # noqa: BLE001 - the change did not take effect
                failure: Exception | None = error
            else:
                failure = None
        if failure is not None:
            logger.error(
                "Rebuilding %s for version %s failed", mt, run.definition_version, exc_info=failure
            )
            runs.fail_rebuild(
                run,
                error=_why_stopped(run, beating) or errors.failure_message(failure),
                expectations=violations,
            )
            return
        checkpoint = _new_checkpoint(mt, run.definition_version)
        runs.apply_rebuild(
            run,
            stream={
                "checkpoint": checkpoint,
                "start": {k: list(v) if v else None for k, v in pins.items()},
            },
            rows_written=result.rows_written,
            bytes_written=result.bytes_written,
            snapshot_id=result.snapshot_id,
            source_snapshots=_pinned_ids(pins),
            data_timestamp=run.started_at,
            expectations=violations,
        )
        # The old definition's stream never resumes: its checkpoint would only pile up.
        if old_checkpoint:
            _delete_checkpoint(old_checkpoint)

    def _rebuilt(
        self, run: RefreshRun, mt: MaterializedTable, violations: dict[str, int]
    ) -> tuple[dict, Any]:
        """The rebuild's commit: the pins it read its sources at, and its result; the new
        version's expectations applied (their counts into `violations`)."""
        definition, properties = definitions.rebuild_of(run)
        version = mt.versions.get(version_id=run.definition_version)
        rights.check_version_reads(mt, run.definition_version)
        levels = definition.default_namespace.split(".")
        plan = check_streamable(
            definition.query, namespace=definition.default_namespace, primary_key=mt.primary_key
        )
        session = jobs.run_session(
            self.spark,
            catalog=settings.CATALOG_NAME,
            namespace=levels,
            settings=mt.stream_options or {},
            aliases=sorted(catalog_selectors.engine_catalogs()),
        )
        return self._pinned_load(
            session,
            mt,
            plan,
            query=plan.sql(definition.query),
            namespace=levels,
            version=run.definition_version,
            started=run.started_at or timezone.now(),
            replacing={"partitioned_by": definition.partitioned_by, "properties": properties},
            expectations=ex.from_json(version.expectations),
            violations=violations,
        )

    def _pinned_load(
        self,
        session: SparkSession,
        mt: MaterializedTable,
        plan: StreamPlan,
        *,
        query: str,
        namespace: list[str],
        version: int,
        started: datetime,
        replacing: dict[str, Any] | None = None,
        expectations: tuple[ex.Expectation, ...] = (),
        violations: dict[str, int] | None = None,
    ) -> tuple[dict[str, Any], Any]:
        """Pin every source of `plan` at its current snapshot, then load `query` (of
        definition `version`) into the table at exactly those pins, stamped with this host's
        token: (the pins, the load's result). A start, a manual refresh and a rebuild (which
        also replaces the table's partitioning and properties) all load this way, so that
        the stream they start next begins just after what the load read. `expectations` are
        applied to the load's rows (their counts into `violations`)."""
        sources = [(settings.CATALOG_NAME, *s) for s in (*plan.streams, *plan.static)]
        pins = streaming.pinned_snapshots(session, sources)
        result = streaming.load(
            session,
            query=query,
            target=_target(mt),
            sources=sources,
            pins=pins,
            namespace=namespace,
            catalog=settings.CATALOG_NAME,
            replacing=replacing,
            snapshot_properties={**_load_state(version, pins, started), **self._stamp},
            expectations=expectations,
            violations=violations,
        )
        return pins, result

    def _stop(self, running: Running) -> None:
        try:
            streaming.stop_between_batches(running.query)
        except Exception:  # noqa: BLE001 - a query that fails to stop is gone anyway
            logger.exception("Stopping stream %s", running.mt_id)

    def _stopped(self, mt_id: int, running: Running) -> None:
        exists = MaterializedTable.objects.filter(pk=mt_id).exists()
        if exists:
            _set_status(mt_id, "STOPPED")
        else:
            _delete_checkpoints(running.checkpoint)

    def _ended(self, running: Running, mt: MaterializedTable | None, *, held: bool) -> None:
        """The query ended by itself: a rewritten source (recompute), a lease lost (its
        micro-batch refused to commit), or a failure."""
        del self.running[running.mt_id]
        error = running.query.exception()
        message = _first_line(error) if error is not None else "the query stopped"
        refusal = self.refusals.pop(running.mt_id, None)
        failed = self.expectation_failures.pop(running.mt_id, None)
        if mt is None:
            _delete_checkpoints(running.checkpoint)
            return
        if not held:
            return  # another host runs it now; its status is that host's to write
        if refusal is not None:
            self._refused(mt.pk, rights.OwnerLacksPrivilege(refusal))
            return
        if error is not None and any(word in str(error) for word in _REWRITTEN_SOURCE):
            self._catch_up(
                mt,
                running.checkpoint,
                stopped=f"a source snapshot its stream cannot read ({message})",
            )
            return
        self.retry_after[mt.pk] = time.monotonic() + RETRY_SECONDS
        if failed is not None:
            # The batch's own words, not the foreachBatch wrapping Spark puts around them.
            runs.record_stream_failure(mt, error=failed[0], expectations=failed[1])
            return
        runs.record_stream_failure(mt, error=message)

    def _follow_views(self, running: Running, mt: MaterializedTable) -> bool:
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
        streaming.stop_between_batches(running.query)
        del self.running[mt.pk]
        self.restarting = True
        self._recompute_instead(
            mt,
            running.checkpoint,
            stopped=f"the view {changed[0]}",
            reason=f"full: the view {changed[0]}, not the one the stream's query merged in",
        )
        return True

    def _follow_static(self, running: Running, mt: MaterializedTable) -> None:
        """A static source (the other side of a stream-static join) moved on since the
        table's load: the micro-batches read it at the load's snapshot (every key answers
        the same one), so the table catches up with the sources' snapshots now (the query
        stopped between micro-batches; `_catch_up`: its keys the change touches recomputed,
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
        streaming.stop_between_batches(running.query)
        del self.running[mt.pk]
        changes = ", ".join(f"{name} {was} -> {now}" for name, (was, now) in moved.items())
        self._catch_up(
            mt, running.checkpoint, stopped=f"a static source of the join moved on ({changes})"
        )

    def _catch_up(self, mt: MaterializedTable, checkpoint: str, *, stopped: str) -> None:
        """The table's stream stopped at `checkpoint` (`stopped` says why). When the table is
        kept by a primary key and its sources' changes since the snapshots it holds read as
        row changes (refresh.core.incremental.catch_up), they are applied in one commit
        (`streaming.catch_up`; then a run in the history, INCREMENTAL, its reason what
        changed and that the stream resumed after it), and the stream starts again just
        after the snapshots the catch-up read, from a new checkpoint, as after a load.
        Otherwise the table is recomputed (`_recompute_next`), the history and the load's
        run saying why. A catch-up that fails otherwise is the stream's failure
        (runs.record_stream_failure): it is tried again after RETRY_SECONDS from the old
        checkpoint, which meets the same snapshot again. Meanwhile the table's stream status
        stays RUNNING: a switch to FULL waits for this pass (runner._stream_stopping)."""
        self.restarting = True
        try:
            rights.check_owner_reads(mt)
        except rights.OwnerLacksPrivilege as refusal:
            self._refused(mt.pk, refusal)
            return
        started = timezone.now()
        try:
            plan, session = self._plan_and_session(mt)
            key = tuple(plan.key or mt.primary_key or ())
            caught = streaming.plan_catch_up(
                session,
                plan=plan,
                key=key,
                catalog=settings.CATALOG_NAME,
                checkpoint=checkpoint,
                start_after=mt.stream_start or {},
                full_outer_join=has_full_outer_join(plan.sql(mt.query)),
                read_twice=read_twice(plan.sql(mt.query), ".".join(_levels(mt))),
                null_supplied=null_supplied_key(plan.sql(mt.query), key),
            )
        except Exception as failure:  # noqa: BLE001 - the stream's failure, tried again
            logger.exception("Planning the catch-up of %s failed", mt)
            self.retry_after[mt.pk] = time.monotonic() + RETRY_SECONDS
            runs.record_stream_failure(
                mt, error=f"Catching up after {stopped} failed: {_first_line(failure)}"
            )
            return
        decision = caught.decision
        if decision.kind is Kind.FULL:
            self._recompute_instead(mt, checkpoint, stopped=stopped, reason=decision.reason)
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
                applied = streaming.catch_up(
                    session,
                    caught,
                    plan=plan,
                    key=key,
                    query=plan.sql(mt.query),
                    target=_target(mt),
                    catalog=settings.CATALOG_NAME,
                    namespace=_levels(mt),
                    merge_turn=lambda: leases.rewriting(mt.table_id),
                    properties={
                        **_load_state(mt.current_version, dict(caught.pins), started),
                        **self._stamp,
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
            self._recompute_instead(mt, checkpoint, stopped=stopped, reason=str(failure))
            return
        except Exception as failure:  # noqa: BLE001 - the stream's failure, tried again
            logger.exception("The catch-up of %s failed", mt)
            self.retry_after[mt.pk] = time.monotonic() + RETRY_SECONDS
            runs.record_stream_failure(
                mt,
                error=f"Catching up after {stopped} failed: {_first_line(failure)}",
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
                source_snapshots=_pinned_ids(dict(caught.pins)),
                data_timestamp=started,
                expectations=violations,
                definition_version=mt.current_version,
                worker=self._worker,
                **results,
            )
            runs.observe_finished(run)
            MaterializedTable.objects.filter(pk=mt.pk).update(
                stream_checkpoint=_new_checkpoint(mt, mt.current_version),
                stream_start={k: list(v) if v else None for k, v in caught.pins.items()},
            )
        _delete_checkpoint(checkpoint)
        logger.info("%s caught up after %s: %s", mt, stopped, run.reason)

    def _recompute_instead(
        self, mt: MaterializedTable, checkpoint: str, *, stopped: str, reason: str
    ) -> None:
        """The table cannot catch up (`reason`): it is recomputed (`_recompute_next`), and
        its load's run says why."""
        why = reason.removeprefix("full: ")
        self.recompute_reasons[mt.pk] = (
            f"full: {why}; recomputed at the sources' snapshots now, the stream restarted "
            "after them"
        )
        _recompute_next(
            mt,
            checkpoint,
            why=f"{stopped[:1].upper()}{stopped[1:]}; recomputing: {why}",
            error=why,
        )

    def _progress(self, running: Running, mt: MaterializedTable) -> None:
        """Source offsets onto the batches' rows; the time the stream was last caught up."""
        caught_up = None
        for progress in running.query.recentProgress:
            batch_id = progress.get("batchId", -1)
            if progress.get("numInputRows", 0) == 0:
                caught_up = progress.get("timestamp")
                continue
            if batch_id > running.last_progress_batch:
                offsets = {
                    source.get("description", str(i)): source.get("endOffset")
                    for i, source in enumerate(progress.get("sources", []))
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


def _why_stopped(run: RefreshRun, beating: Any) -> str | None:
    """What a run its heartbeat stopped says (runtime.running.stopped), else None."""
    from runtime.running import stopped

    said = stopped(run, beating, limit_from="the deployment's REFRESH_TIMEOUT_SECONDS")
    return said[1] if said else None


def _new_checkpoint(mt: MaterializedTable, version: int) -> str:
    """A fresh checkpoint folder for the stream of definition `version`, beside the table's
    location (never reused: a load always starts its stream anew)."""
    return f"{mt.table.location}.checkpoints/v{version}-{int(time.time() * 1000)}"


def _pinned_ids(pins: dict[str, Any]) -> dict[str, int | None]:
    """Each source's pinned snapshot id (None for a source with no snapshot yet)."""
    return {name: (pin[0] if pin else None) for name, pin in pins.items()}


def _load_state(version: int, pins: dict[str, Any], started: datetime) -> dict[str, str]:
    """The snapshot-summary entry of a load at `pins` ("ns.table" -> (snapshot id, ms) or
    None, streaming.pinned_snapshots): the load reads every source at exactly its pin."""
    return state_of(
        version=version,
        snapshots=_pinned_ids(pins),
        started_ms=int(started.timestamp() * 1000),
    ).summary()


def _record_batch(
    mt_id: int, version: int, result: streaming.BatchResult, *, worker: str = ""
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


def _recompute_next(mt: MaterializedTable, checkpoint: str, *, why: str, error: str = "") -> None:
    """The table's stream cannot go on from `checkpoint` (stopped): it is dropped, and the
    next pass loads the table at the sources' snapshots then and streams on from a new one
    (a start without a checkpoint); `why` goes into the table's history."""
    MaterializedTable.objects.filter(pk=mt.pk).update(stream_checkpoint="")
    _delete_checkpoint(checkpoint)
    history.record_change(mt.table, actor=None, action="recompute_materialized_table", message=why)
    _set_status(mt.pk, "RECOMPUTING", error=error)


def _set_status(mt_id: int, status: str, *, error: str = "") -> None:
    MaterializedTable.objects.filter(pk=mt_id).update(stream_status=status, stream_error=error)


def _first_line(error: object) -> str:
    text = str(getattr(error, "desc", None) or error)
    return text.strip().split("\n")[0][:2000]


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _delete_checkpoints(checkpoint: str) -> None:
    """A dropped table's checkpoints: the folder beside its location that this process made
    (`<location>.checkpoints`)."""
    _remove_checkpoints(checkpoint.rsplit("/", 1)[0], depth=0)


def _delete_checkpoint(checkpoint: str) -> None:
    """One checkpoint a stream left for a new one (a manual refresh): a folder inside it."""
    _remove_checkpoints(checkpoint, depth=1)


def _remove_checkpoints(path: str, *, depth: int) -> None:
    """Remove `path` once normalised as the filesystem reads it, only if it is the
    `.checkpoints` folder (depth 0) or a folder directly inside one (depth 1), lies strictly
    inside the warehouse, and is not a symbolic link."""
    if not path.startswith("/"):
        return
    try:
        normalized = metadata_io.normalize_location(path)
    except Exception:  # noqa: BLE001 - a path we cannot read safely is left alone
        return
    parts = normalized.rstrip("/").split("/")
    if len(parts) <= depth + 1 or not parts[-1 - depth].endswith(".checkpoints"):
        return
    warehouse = metadata_io.normalize_location(settings.WAREHOUSE)
    if not metadata_io.is_inside(normalized, warehouse, strictly=True):
        return
    if os.path.islink(normalized) or not os.path.isdir(normalized):
        return
    # The catalog refuses locations inside a `.checkpoints` folder (kernel.SIDE_FOLDER), but
    # an object made before that rule may live in one: its files are not ours to delete.
    squatter = CatalogObject.objects.located_in(normalized).first()
    if squatter is not None:
        logger.warning(
            "Kept %s: %s %s lives inside it (%s)",
            normalized,
            squatter.kind,
            squatter,
            squatter.location,
        )
        return
    shutil.rmtree(normalized, ignore_errors=True)


def compact_history(*, older_than: timedelta = KEEP_BATCHES, periodic: bool = False) -> int:
    """Fold micro-batch rows that finished more than `older_than` ago into one row per table
    and hour (catalog.history.fold_per_hour): the hour's newest batch stays, with `batches`
    the batches it stands for, the sums of their rows and bytes written and of each
    expectation's violating rows, and the first one's queued and start times; its batch id,
    snapshot, source offsets and data timestamp are the newest batch's; a catch-up's row
    (`Supervisor._catch_up`, no batch id) is never folded. Safe beside another
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
