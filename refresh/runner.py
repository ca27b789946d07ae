"""A refresh run on a worker: claim -> decide -> execute -> record.

1. Claim the run (refresh.runs.claim, a conditional update: a redelivered message or a
   second worker finds it taken and does nothing). If another run of the table is running,
   a scheduled run is SKIPPED (Snowflake skips a tick whose predecessor is still running)
   and a manual one is sent again a moment later.
2. Decide from the mirror, without a Spark job: one RefreshPlan (refresh.core.plan), made
   by refresh.sources.decide (a rebuild: refresh.definitions.rebuild_plan) with the rules
   of refresh.core.incremental: the definition, its query parsed once, the sources at the
   snapshots the run reads and records, the decision (NO_DATA: skip, every source is at the
   snapshots the last covering successful refresh read; INCREMENTAL: the sources only
   appended since; FULL) with its reason, and the partition.
3. Execute the plan in a session of the worker's long-lived Spark: apply the appended
   snapshots (refresh.spark.changes, as the continuous mode does), run the query and
   overwrite the table (or one partition), or for a rebuild replace the table, in one
   Iceberg commit through the app's REST catalog, while a thread keeps the run's heartbeat
   fresh. Every step works on the plan's parsed query (one that rewrites it, on a copy).
4. Record the outcome (refresh.runs.finish): rows, bytes and the snapshot from the
   snapshot's summary, the decision and its reason; a rebuild's finish makes its version
   current or says why not.

Source snapshots are read from the mirror before the job, and the job reads every table
the query reads (views expanded) at exactly those snapshots: a source that changes during
it changes nothing the commit answers, and the next tick sees the change."""

from __future__ import annotations

import dataclasses
import logging
import time
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.utils import timezone
from sqlglot import exp

from catalog import workers
from catalog.core.errors import CatalogError
from infra import broker
from infra import runs as run_rows
from refresh import definitions, rights, runs, selectors, services, sources
from refresh.core.freshness import RefreshMode, planned_tick
from refresh.core.incremental import Kind, incremental_reason, max_change_ratio, policy
from refresh.core.options import TIMEOUT_OPTION, check_run_options, run_time_limit
from refresh.core.partitions import scheduled_partition
from refresh.core.plan import RefreshPlan
from refresh.core.refresh_state import partition_entry
from refresh.core.streaming import StreamPlan
from refresh.models import MaterializedTable, RefreshRun
from refresh.spark import batch, changes
from refresh.spark.source_changes import ChangesTooLarge
from runtime import engine, leases
from runtime.running import Heartbeat, describe, refresh_slots, stopped, worker_name
from runtime.spark.policies import reading_as

logger = logging.getLogger(__name__)

#: A manual run waiting for a running one is sent again after this many seconds.
BUSY_RETRY_SECONDS = 2.0


def run_scheduled(
    materialized_table_id: int,
    options: dict[str, str] | None = None,
    *,
    sent_at: float | None = None,
    hops: int = 0,
) -> int | None:
    """A tick of a table's schedule: a run for the planned tick, the one at or before the
    moment beat sent it (`sent_at`, seconds since the epoch: webapp.celery stamps it), not
    the moment a worker got the message; so a tick that waited in the queue past the next
    one is still its own run, and its start says how late it is. With the partition that
    tick refreshes; then run here, or handed on to an idle worker (catalog.workers)."""
    if workers.hand_over(hops):
        try:
            broker.send_task(
                "refresh.scheduled_refresh",
                args=[materialized_table_id, options],
                kwargs={"sent_at": sent_at or time.time(), "hops": hops + 1},
            )
        except Exception:  # noqa: BLE001 - the broker is down: run it here instead
            logger.warning("A tick of table %s could not be handed on", materialized_table_id)
        else:
            return None
    mt = (
        MaterializedTable.objects.select_related("table__namespace")
        .filter(pk=materialized_table_id)
        .first()
    )
    if mt is None or mt.state != MaterializedTable.State.ACTIVATED:
        return None
    sent = datetime.fromtimestamp(sent_at, UTC) if sent_at else timezone.now()
    tick = planned_tick(min(sent, timezone.now()), mt.freshness)
    try:
        partition = scheduled_partition(tick, mt.freshness, mt.options, table=str(mt))
        run = runs.enqueue(
            mt,
            trigger=RefreshRun.Trigger.SCHEDULED,
            schedule_time=tick,
            partition=partition,
            options=options,
        )
    except services.AlreadyExists:
        return None  # this tick has its run already (a redelivered or doubled tick)
    execute(run.pk, hops=MAX_HOPS_DONE)
    return run.pk


def execute(run_id: int, *, hops: int = 0) -> str:
    """Claim and run one refresh; returns the run's final state (or why nothing ran). When
    every refresh thread is busy, the run is sent again a moment later, still QUEUED; when
    this worker runs something and another runs nothing, it is handed on to that one
    (catalog.workers; `hops`: how many workers did so already)."""
    if workers.hand_over(hops) and _hand_on(run_id, hops + 1):
        return "handed to an idle worker"
    slots = refresh_slots()
    if not slots.acquire(blocking=False):
        run = RefreshRun.objects.filter(pk=run_id, state=RefreshRun.State.QUEUED).first()
        if run is not None:
            runs.dispatch(run, countdown=BUSY_RETRY_SECONDS)
        return "waiting for a refresh thread"
    try:
        with workers.occupied():
            return _execute(run_id)
    finally:
        slots.release()


#: A scheduled tick's run, made on a worker that already chose to run it, is not handed on.
MAX_HOPS_DONE = workers.MAX_HOPS


def _hand_on(run_id: int, hops: int) -> bool:
    return run_rows.hand_on(
        RefreshRun,
        pk=run_id,
        send=lambda: broker.send_task("refresh.run_refresh", args=[run_id], kwargs={"hops": hops}),
        what=f"Refresh run {run_id}",
    )


def _execute(run_id: int) -> str:
    """One run: claim, decide (one RefreshPlan), execute the plan in Spark, record the
    outcome. refresh.runs is entered at the claim, by the heartbeat, and at the finish."""
    run = runs.claim(run_id, worker=worker_name())
    if run is None:
        return _not_claimed(run_id)
    mt = run.materialized_table
    if mt.refresh_mode == RefreshMode.CONTINUOUS and run.trigger != RefreshRun.Trigger.CONTINUOUS:
        # The streaming process rebuilds and refreshes continuous tables by hand: it stops
        # their query between micro-batches first (refresh.streams), so that the stream and
        # a batch job never write the table at once.
        run_rows.release(RefreshRun, pk=run.pk)
        return "left to the streaming process"
    if _stream_stopping(mt):
        # Just switched from CONTINUOUS: its last micro-batch may still commit. A refresh
        # waits until the streaming process stopped the stream, so that no append of the
        # stream lands after (and on top of) this refresh's rows.
        run_rows.release(RefreshRun, pk=run.pk)
        runs.dispatch(run, countdown=BUSY_RETRY_SECONDS)
        return "waiting for the stream to stop"
    clock = {"claimed": time.perf_counter()}
    try:
        plan = decide(run, mt)
    except Exception as error:  # noqa: BLE001 - any failure is the run's, recorded
        logger.warning("%s of %s failed before its job: %s", _what(run), mt, error)
        runs.finish(run, state=RefreshRun.State.FAILED, error=describe(error))
        return RefreshRun.State.FAILED
    clock["decided"] = time.perf_counter()
    now = timezone.now()
    if plan.decision.refused:
        # refresh.incremental = 'strict': a refresh that cannot be incremental fails with
        # the reason instead of recomputing (no Spark job runs).
        runs.finish(
            run,
            state=RefreshRun.State.FAILED,
            action=RefreshRun.Action.FULL,
            reason=plan.reason,
            error=plan.reason[:1].upper() + plan.reason[1:],
            source_snapshots=dict(plan.snapshots),
        )
        return RefreshRun.State.FAILED
    if plan.kind is Kind.NO_DATA:
        runs.finish(
            run,
            state=RefreshRun.State.SKIPPED,
            action=RefreshRun.Action.NO_DATA,
            reason=plan.reason,
            source_snapshots=dict(plan.snapshots),
            data_timestamp=now,
        )
        return RefreshRun.State.SKIPPED
    # Its Spark reads the sources through the row filters and masks of the table's owner:
    # the table holds what its owner may see (catalog.policies).
    with reading_as(plan.policies):
        return _carry_out(run, mt, plan, now=now, clock=clock)


def decide(run: RefreshRun, mt: MaterializedTable) -> RefreshPlan:
    """The run's plan, from the catalog's mirror (no Spark job), with the owner's rights:
    nothing is read unless the owner may read every source (a rebuild: of its version)."""
    if run.trigger == RefreshRun.Trigger.REBUILD:
        rights.check_version_reads(mt, run.definition_version)
        return definitions.rebuild_plan(run)
    rights.check_owner_reads(mt)
    return sources.decide(mt, partition=run.partition or None, force=run.force, full_asked=run.full)


def _what(run: RefreshRun) -> str:
    return f"{'Rebuild' if run.trigger == RefreshRun.Trigger.REBUILD else 'Refresh'} run {run.pk}"


def _carry_out(
    run: RefreshRun,
    mt: MaterializedTable,
    plan: RefreshPlan,
    *,
    now: datetime,
    clock: dict[str, float],
) -> str:
    """Execute the plan in a session of the worker's Spark, in one Iceberg commit, while
    the heartbeat runs; then record the outcome."""
    what = f"{_what(run)} of {mt}"
    if plan.rebuild is not None:
        recorded: dict[str, Any] = {}
    elif plan.kind is Kind.INCREMENTAL:
        recorded = {"action": RefreshRun.Action.INCREMENTAL, "reason": plan.reason}
    else:
        action = RefreshRun.Action.PARTITION if plan.partition else RefreshRun.Action.FULL
        recorded = {"action": action, "reason": plan.reason}
    beating = _watched(run, mt)
    beating.start()
    violations: dict[str, int] = {}
    spark_timings: dict[str, float] = {}
    try:
        session = engine.run_session(
            namespace=plan.namespace.split("."),
            # A run's options checked again where Spark takes them: options stored before a
            # rule was tightened fail the run, naming the option, instead of reaching Spark.
            conf=None if plan.rebuild is not None else check_run_options(dict(run.options or {})),
        )
        before, _ = selectors.current_snapshot(mt.table_id)
        target = [settings.CATALOG_NAME, *mt.table.namespace.name.split("."), mt.table.name]
        clock["session"] = time.perf_counter()
        # What the commit answers, in its snapshot's summary (refresh.core.refresh_state).
        state = sources.state_of(
            version=plan.version,
            snapshots=dict(plan.snapshots),
            started_ms=_ms(now),
            views=plan.views,
        ).summary() | partition_entry(plan.partition)
        if plan.rebuild is not None:
            _rebuild(session, plan, target, state, violations, what=what, group=_group(run))
        else:
            with engine.job_group(_group(run), what):
                if plan.kind is Kind.INCREMENTAL and plan.stream is not None:
                    spark_timings["_at"] = time.perf_counter()
                    try:
                        applied = _incremental(
                            session, mt, plan, target, spark_timings, state, violations
                        )
                    except ChangesTooLarge as too_large:
                        # Adaptive: the changed rows lie in files holding too much of the
                        # source (nothing was read yet), so recomputing is the cheaper.
                        recorded = {
                            "action": RefreshRun.Action.FULL,
                            "reason": f"full: {too_large}",
                        }
                        spark_timings = {}
                        _full(session, run, plan, target, spark_timings, state, violations)
                    else:
                        if applied is not None and (applied.counted or applied.keys is not None):
                            recorded["reason"] = incremental_reason(
                                plan.decision.deltas, applied.counted, applied.keys
                            )
                else:
                    _full(session, run, plan, target, spark_timings, state, violations)
        clock["written"] = time.perf_counter()
    except Exception as error:  # noqa: BLE001 - any failure is the run's, recorded
        beating.stop()
        ended, message = _stopped(run, beating) or (RefreshRun.State.FAILED, describe(error))
        logger.warning("%s ended %s: %s", what, ended, error)
        runs.finish(run, state=ended, error=message, expectations=violations, **recorded)
        return ended
    beating.stop()
    snapshot_id, summary = selectors.current_snapshot(mt.table_id)
    if snapshot_id == before and plan.rebuild is None:
        summary = {}  # nothing committed (an empty overwrite of an empty table)
    runs.finish(
        run,
        state=RefreshRun.State.SUCCEEDED,
        **recorded,
        **selectors.written(summary),
        snapshot_id=snapshot_id,
        source_snapshots=dict(plan.snapshots),
        data_timestamp=now,
        expectations=violations,
    )
    clock["finished"] = time.perf_counter()
    if plan.rebuild is None:
        _log_phases(run, recorded["action"], clock, spark_timings)
    return RefreshRun.State.SUCCEEDED


def _log_phases(
    run: RefreshRun, action: str, clock: dict[str, float], spark: dict[str, float]
) -> None:
    """Where a run's time went, one line per run (bench/refresh.py reads it)."""
    phases = {
        "decide": clock["decided"] - clock["claimed"],
        "session": clock["session"] - clock["decided"],
        "spark": clock["written"] - clock["session"],
        **{f"spark.{key}": value for key, value in spark.items()},
        "finish": clock["finished"] - clock["written"],
    }
    logger.info(
        "Refresh run %s %s phases: %s",
        run.pk,
        action,
        " ".join(f"{name}={seconds:.3f}" for name, seconds in phases.items()),
    )


def _full(
    session: Any,
    run: RefreshRun,
    plan: RefreshPlan,
    target: list[str],
    timings: dict[str, float],
    state: dict[str, str],
    violations: dict[str, int],
) -> None:
    """Recompute the query (or a partition of it) with every table it reads, through
    views, pinned at the snapshot the run records (changes.recompute), whatever its shape:
    the commit's summary records `state`, and that is then exactly what it answers. The
    table's expectations are applied to its rows (their counts into `violations`)."""
    query, pins = _pinned(plan, what=f"{_what(run)} of {run.materialized_table}")
    changes.recompute(
        session,
        query=query,
        target=target,
        catalog=settings.CATALOG_NAME,
        namespace=plan.namespace.split("."),
        pins=pins,
        partition=plan.partition,
        timings=timings,
        properties=state,
        expectations=plan.expectations,
        violations=violations,
    )


def _rebuild(
    session: Any,
    plan: RefreshPlan,
    target: list[str],
    state: dict[str, str],
    violations: dict[str, int],
    *,
    what: str,
    group: str,
) -> None:
    """ALTER ... AS or a rollback of a FULL table: the version's query, its sources read
    at the snapshots the state records, replaces the table's schema and rows in one commit
    (batch.rebuild); recording the run then makes the version current."""
    assert plan.rebuild is not None
    query, pins = _pinned(plan, what=what)
    with (
        changes.pinned_reads(
            session,
            query=query,
            pins=pins,
            namespace=plan.namespace.split("."),
            catalog=settings.CATALOG_NAME,
        ) as (sql, views),
        engine.job_group(group, what),
    ):
        batch.rebuild(
            session,
            target=target,
            query=sql,
            partitioned_by=plan.rebuild.partitioned_by,
            properties=dict(plan.properties),
            snapshot_properties=state,
            trusted_views=views,
            expectations=plan.expectations,
            violations=violations,
        )


def _pinned(
    plan: RefreshPlan, *, what: str
) -> tuple[str | exp.Query, dict[tuple[str, ...], int | None]]:
    """The plan's query, parsed, with its views expanded and the tables it reads pinned
    (`pinned`); a query that reads no table goes to Spark as written."""
    query, pins = pinned(plan.source, plan.namespace, dict(plan.snapshots), what=what)
    if not pins and query is plan.parsed:
        return plan.query, pins
    return query, pins


def pinned(
    query: str | exp.Query, namespace: str, snapshots: dict[str, int | None], *, what: str
) -> tuple[str | exp.Query, dict[tuple[str, ...], int | None]]:
    """The query with its views expanded (sources.expanded_query) and each table it reads
    at its snapshot in `snapshots` (the ones the run records): text for text, and for a
    parsed query the expanded one parsed (the query itself when no view was expanded). A
    view that cannot be expanded is read as it is when Spark reads it, said in the log, as
    is a table the recorded snapshots do not name; neither fails the refresh."""
    try:
        expanded = sources.expanded_query(query, namespace)
    except CatalogError as error:  # the query itself does not parse: Spark will say why
        logger.warning("%s reads its sources unpinned: %s", what, error)
        return query, {}
    for reason in expanded.unexpanded:
        logger.warning("%s reads the view %s unpinned", what, reason)
    pins = {}
    for table in expanded.tables:
        name = ".".join(table)
        if name in snapshots:
            pins[table] = snapshots[name]
        else:
            logger.warning("%s reads %s unpinned: its snapshot was not recorded", what, name)
    if isinstance(query, str):
        return expanded.query, pins
    return (expanded.parsed if expanded.views else query), pins


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _pins(plan: StreamPlan, snapshots: dict[str, int | None]) -> dict[tuple[str, ...], int | None]:
    """Each source the query reads, at the snapshot the run records."""
    return {s: snapshots.get(".".join(s)) for s in (*plan.streams, *plan.static)}


def _incremental(
    session: Any,
    mt: MaterializedTable,
    plan: RefreshPlan,
    target: list[str],
    timings: dict[str, float],
    state: dict[str, str],
    violations: dict[str, int],
) -> changes.Applied | None:
    """Apply what the sources changed (refresh.spark.changes, the continuous mode's code:
    appended rows, or the rows a source deleted and inserted), every source read at the
    snapshot the run records; a MERGE takes the table's rewrite lease as a micro-batch
    does. The table's expectations are applied to the rows the plan computes (their counts
    into `violations`). A table with a primary key is kept by its key whatever its shape
    once a source deleted rows."""
    assert plan.stream is not None
    stream = plan.stream
    if not stream.key and mt.primary_key:
        stream = dataclasses.replace(stream, key=tuple(mt.primary_key))
    by_name = {".".join(source): source for source in (*stream.streams, *stream.static)}
    return changes.incremental_refresh(
        session,
        plan=stream,
        # A query over views runs with their SQL merged in: their tables are its sources.
        query=plan.flat if plan.flat is not None else plan.source,
        target=target,
        catalog=settings.CATALOG_NAME,
        namespace=plan.namespace.split("."),
        deltas={by_name[d.source]: (d.since, d.until) for d in plan.decision.deltas},
        changed=[by_name[d.source] for d in plan.decision.deltas if d.changed],
        # Under 'auto', reading changes spread over most of a source's files gives way to a
        # full refresh (Snowflake's adaptive refresh); 'strict' reads them whatever it costs.
        max_read=max_change_ratio(mt.options) if policy(mt.options) == "auto" else None,
        pins=_pins(stream, dict(plan.snapshots)),
        partition=plan.partition,
        merge_turn=lambda: leases.rewriting(mt.table_id),
        timings=timings,
        properties=state,
        expectations=plan.expectations,
        violations=violations,
    )


def _not_claimed(run_id: int) -> str:
    run = RefreshRun.objects.filter(pk=run_id).first()
    if run is None or run.state != RefreshRun.State.QUEUED:
        return "not claimed"  # finished, taken by another worker, or gone
    if run.materialized_table_id is None:
        runs.finish(run, state=RefreshRun.State.CANCELLED, error="The table was dropped")
        return RefreshRun.State.CANCELLED
    if run.trigger == RefreshRun.Trigger.SCHEDULED:
        runs.finish(
            run,
            state=RefreshRun.State.SKIPPED,
            error="Skipped: the previous refresh of the table was still running",
        )
        return RefreshRun.State.SKIPPED
    runs.dispatch(run, countdown=BUSY_RETRY_SECONDS)
    return "waiting for the running refresh"


def _stream_stopping(mt: MaterializedTable) -> bool:
    """A FULL table whose stream the streaming process has not yet said it stopped, changed
    less than MT_ABANDONED_AFTER_SECONDS ago (past that, a streaming process that never
    answers is taken as gone, and refreshes go on)."""
    if mt.refresh_mode != RefreshMode.FULL or mt.stream_status not in ("RUNNING", "RECOMPUTING"):
        return False
    waited = timezone.now() - mt.updated_at
    return waited.total_seconds() < settings.MT_ABANDONED_AFTER_SECONDS


def _watched(run: RefreshRun, mt: MaterializedTable) -> Heartbeat:
    """The heartbeat of a batch run, which also stops its Spark jobs (job group
    `lakeview-run-<id>`) on a cancel or at the table's time limit."""
    limit = run_time_limit(mt.options, cap=settings.REFRESH_TIMEOUT_SECONDS)
    return Heartbeat(run, watch=_group(run), limit=limit)


def _group(run: RefreshRun) -> str:
    return f"lakeview-run-{run.pk}"


def _stopped(run: RefreshRun, beating: Heartbeat) -> tuple[str, str] | None:
    """The state and error of a run its heartbeat stopped (cancelled, or past its time
    limit), else None: the run failed on its own."""
    return stopped(
        run,
        beating,
        limit_from=f"table option {TIMEOUT_OPTION}, at most the deployment's "
        "REFRESH_TIMEOUT_SECONDS",
    )
