"""A refresh run's lifecycle, as NetBox's Job rows have one: enqueued (QUEUED), sent to a
worker, claimed by a conditional update (QUEUED -> RUNNING) under a lock on its table so that
two runs never do the same work at once, kept alive by its heartbeat, cancelled on request,
and finished with its outcome, which counts toward the table's automatic suspension after
`MT_FAILURES_BEFORE_SUSPEND` consecutive failures (5, as Snowflake). A rebuild run (ALTER
... AS, a rollback) ends by making its version current (`apply_rebuild`) or saying why it
did not (`fail_rebuild`). Runs whose worker died are failed, runs no worker took are sent
again, and NO_DATA ticks are folded per hour.

refresh.runner calls this module at a run's start (claim), while it runs (heartbeat) and
at its end (finish, which ends a rebuild run with `apply_rebuild` or `fail_rebuild`); the
table's lifecycle (refresh.services, refresh.definitions) calls it to queue runs. The row's
own steps (the conditional claim, the beat, the cancel request, the one finish) are every
run's (infra.runs); this module adds the table's: its lock, its busy check, its failures."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from catalog import history
from catalog.core.errors import AlreadyExists, InvalidInput, NotFound, Unavailable
from infra import broker, metrics
from infra import runs as run_rows
from infra.broker import redis_client
from refresh import signals, table_state
from refresh.core import definition as defs
from refresh.core.freshness import RefreshMode
from refresh.core.options import check_run_options
from refresh.core.partitions import check_partition_values
from refresh.models import MaterializedTable, MaterializedTableVersionLogEntry, RefreshRun

logger = logging.getLogger(__name__)


FAILURES_BEFORE_SUSPEND = 5


def _failures_allowed() -> int:
    return int(getattr(settings, "MT_FAILURES_BEFORE_SUSPEND", FAILURES_BEFORE_SUSPEND))


def apply_rebuild(
    run: RefreshRun, *, stream: Mapping[str, Any] | None = None, **results: Any
) -> RefreshRun:
    """The rebuild committed: the version becomes current here too (its query, sources, the
    schema it has), the log entry APPLIED, the run SUCCEEDED; for a CONTINUOUS table the new
    stream's checkpoint and pins (`stream`). Then the primary key's identifier fields, which
    REPLACE TABLE cannot carry, are set again (a schema-only commit; the rows stay)."""
    with transaction.atomic():
        mt = table_state.locked(run.materialized_table)
        entry = mt.version_log.get(run=run)
        version = mt.versions.get(version_id=run.definition_version)
        mt.query, mt.sources, mt.current_version = (
            version.query,
            version.sources,
            version.version_id,
        )
        mt.default_namespace, mt.expectations = version.default_namespace, version.expectations
        fields = [
            "query", "sources", "current_version", "default_namespace", "expectations",
            "updated_at",
        ]  # fmt: skip
        if stream is not None:
            mt.stream_checkpoint, mt.stream_start = stream["checkpoint"], stream["start"]
            fields += ["stream_checkpoint", "stream_start"]
        mt.save(update_fields=fields)
        mt.table.refresh_from_db()
        table_state.set_identifier_fields(
            mt, declared=version.declared_columns, actor=run.requested_by
        )
        if version.schema_id is None:
            version.schema_id = mt.table.current_schema_id
            version.save(update_fields=["schema_id"])
        entry.outcome = MaterializedTableVersionLogEntry.Outcome.APPLIED
        entry.save(update_fields=["outcome"])
        table_state.record(
            mt,
            actor=run.requested_by,
            action=f"{entry.operation}_materialized_table_definition_applied",
            message=f"version {version.version_id} is current (run {run.pk})",
        )
        _finish(run, state=RefreshRun.State.SUCCEEDED, **results)
    return run


def fail_rebuild(
    run: RefreshRun,
    *,
    error: str,
    state: str = RefreshRun.State.FAILED,
    expectations: Mapping[str, int] | None = None,
) -> RefreshRun:
    """The rebuild failed (or was cancelled: `state`) before its commit: the table, its
    definition and its state stay as they were; the run and the version log say why the
    change did not take effect. Not counted toward the automatic suspension: the table's
    refreshes are not failing."""
    with transaction.atomic():
        done = run_rows.finish(
            RefreshRun,
            pk=run.pk,
            state=state,
            error=error[:10_000],
            expectations=dict(expectations or {}),
        )
        run.refresh_from_db()
        if done:
            observe_finished(run)
        entry = MaterializedTableVersionLogEntry.objects.filter(run=run).first()
        if entry is not None and run.materialized_table_id is not None:
            entry.outcome = MaterializedTableVersionLogEntry.Outcome.FAILED
            entry.error = error[:10_000]
            entry.save(update_fields=["outcome", "error"])
            table_state.record(
                run.materialized_table,
                actor=run.requested_by,
                action=f"{entry.operation}_materialized_table_definition_failed",
                message=f"version {entry.version_id} did not take effect: {error[:2000]}",
            )
    return run


def enqueue(
    mt: MaterializedTable,
    *,
    trigger: str,
    schedule_time: datetime | None = None,
    partition: Mapping[str, str] | None = None,
    options: Mapping[str, str] | None = None,
    force: bool = False,
    full: bool = False,
    actor: Any = None,
) -> RefreshRun:
    """A QUEUED run (any state may be refreshed by hand, as in Flink). A second run for a
    planned tick that already has one raises AlreadyExists."""
    partition = {str(k): str(v) for k, v in (partition or {}).items()}
    unknown = sorted(set(partition) - set(mt.partitioned_by))
    if unknown:
        raise InvalidInput(
            f"{', '.join(unknown)} is not a partition column of {mt} "
            f"(partitioned by: {', '.join(mt.partitioned_by) or 'nothing'})",
            field="partition",
        )
    if partition:
        check_partition_values(
            partition,
            options=mt.options,
            column_types={f.name: f.type for f in mt.table.schema_fields()},
        )
    try:
        with transaction.atomic():
            return RefreshRun.objects.create(
                materialized_table=mt,
                table_name=str(mt.table),
                trigger=trigger,
                schedule_time=schedule_time,
                partition=partition,
                options=check_run_options(dict(options or {})),
                force=force,
                full=full,
                definition_version=mt.current_version,
                requested_by=actor if getattr(actor, "pk", None) else None,
            )
    except IntegrityError as error:
        raise AlreadyExists(
            f"The tick at {schedule_time} of {mt} already has a refresh run"
        ) from error


def dispatch(run: RefreshRun, *, countdown: float | None = None) -> None:
    """Send the run to a worker (Celery's task `refresh.run_refresh`, by name: services sit
    below the tasks that call them). A broker that cannot be reached is Unavailable."""
    try:
        broker.send_task("refresh.run_refresh", args=[run.pk], countdown=countdown)
    except Exception as error:  # kombu's OperationalError and friends: the broker is down
        raise Unavailable(f"The task queue cannot be reached: {error}") from error


def request_refresh(
    mt: MaterializedTable,
    *,
    trigger: str = RefreshRun.Trigger.MANUAL,
    partition: Mapping[str, str] | None = None,
    schedule_time: datetime | None = None,
    options: Mapping[str, str] | None = None,
    force: bool = True,
    full: bool = False,
    actor: Any = None,
) -> RefreshRun:
    """A one-time refresh (ALTER ... REFRESH, the page's buttons, the API), in any state:
    queued and sent to a worker. Returns the run (its id is the job id)."""
    with transaction.atomic():
        run = enqueue(
            mt,
            trigger=trigger,
            partition=partition,
            schedule_time=schedule_time,
            options=options,
            force=force,
            full=full,
            actor=actor,
        )
        table_state.record(
            mt,
            actor=actor,
            action="refresh_materialized_table",
            message=f"run {run.pk}" + (f", partition {run.partition}" if run.partition else ""),
        )
    try:
        dispatch(run)
    except Unavailable as error:
        # Never left QUEUED with no message on its way: the run says why it did not happen.
        finish(run, state=RefreshRun.State.FAILED, error=error.message)
        raise
    return run


def claim(run_id: int, *, worker: str) -> RefreshRun | None:
    """QUEUED -> RUNNING for this worker, unless the run is taken, finished, or another run
    of its table is running; None then (the caller does nothing)."""
    with transaction.atomic():
        run = RefreshRun.objects.filter(pk=run_id).first()
        if run is None or run.materialized_table_id is None:
            return None
        MaterializedTable.objects.select_for_update().filter(pk=run.materialized_table_id).get()
        busy = RefreshRun.objects.filter(
            materialized_table_id=run.materialized_table_id, state=RefreshRun.State.RUNNING
        ).exists()
        if busy or not run_rows.claim(RefreshRun, pk=run_id, worker=worker):
            return None
        run.refresh_from_db()
        signals.run_started.send(RefreshRun, run=run)
    return run


def heartbeat(run: RefreshRun) -> None:
    run_rows.beat(RefreshRun, pk=run.pk)


def cancel_run(run: RefreshRun, *, actor: Any = None) -> RefreshRun:
    """Stop a refresh run of a worker. A QUEUED run ends CANCELLED at once (its message then
    finds nothing to claim). A RUNNING one is asked to stop: its worker cancels the run's
    Spark jobs at its next look (about a second) and ends it CANCELLED, its table as it was
    (Spark aborts the write, and an Iceberg commit is all or nothing), unless the commit
    had already landed: then the run SUCCEEDED. A continuous table's runs belong to its
    stream, which SUSPEND stops; a finished run is InvalidState (409)."""
    who = table_state.user_of(actor)
    by = f" by {who.get_username()}" if who is not None else ""
    with transaction.atomic():
        # The table's row first, as claim() and finish() take it, then the run's: taken the
        # other way round, a cancel and a worker's claim of the same run deadlock.
        mt_id = (
            RefreshRun.objects.filter(pk=run.pk)
            .values_list("materialized_table_id", flat=True)
            .first()
        )
        if mt_id is not None:
            MaterializedTable.objects.select_for_update().filter(pk=mt_id).first()
        locked = RefreshRun.objects.select_for_update().filter(pk=run.pk).first()
        if locked is None:  # deleted since the caller found it (its table dropped)
            raise NotFound(f"Job does not exist: {run.pk}", field="job_id")
        if locked.state in RefreshRun.FINISHED:
            raise table_state.InvalidState(f"Refresh run {run.pk} already ended {locked.state}")
        mt = locked.materialized_table
        if locked.trigger == RefreshRun.Trigger.CONTINUOUS or (
            mt is not None and mt.refresh_mode == RefreshMode.CONTINUOUS
        ):
            raise table_state.InvalidState(
                f"Refresh run {run.pk} belongs to the stream of the continuous table "
                f"{locked.table_name}: SUSPEND stops it"
            )
        if locked.state == RefreshRun.State.QUEUED:
            message = f"Cancelled{by} before it started"
            if locked.trigger == RefreshRun.Trigger.REBUILD:
                fail_rebuild(locked, error=message, state=RefreshRun.State.CANCELLED)
            else:
                finish(locked, state=RefreshRun.State.CANCELLED, error=message)
        elif not run_rows.request_cancel(RefreshRun, pk=run.pk, by=who):
            mt = None  # asked before: nothing changes, and the history says it once
        if mt is not None:
            table_state.record(
                mt, actor=actor, action="cancel_refresh_run", message=f"run {run.pk}"
            )
    run.refresh_from_db()
    return run


def cancel_asked(run: RefreshRun) -> bool:
    """Whether someone asked the running `run` to stop (cancel_run)."""
    return run_rows.cancel_asked(RefreshRun, pk=run.pk)


def finish(run: RefreshRun, *, state: str, error: str = "", **results: Any) -> RefreshRun:
    """RUNNING (or QUEUED, for a skip decided before starting) -> a finished state; counts
    failures toward the automatic suspension. A rebuild run of a table ends as a rebuild
    does: SUCCEEDED makes its version current (`apply_rebuild`), any other state says why
    it did not (`fail_rebuild`, with the `expectations` counts among `results`)."""
    if run.trigger == RefreshRun.Trigger.REBUILD and run.materialized_table_id is not None:
        if state == RefreshRun.State.SUCCEEDED:
            return apply_rebuild(run, **results)
        return fail_rebuild(run, error=error, state=state, expectations=results.get("expectations"))
    return _finish(run, state=state, error=error, **results)


def _finish(run: RefreshRun, *, state: str, error: str = "", **results: Any) -> RefreshRun:
    with transaction.atomic():
        # The table's row first, then the run's, in the order claim() and cancel_run() take
        # them: the other order deadlocks with a cancel of the same run on PostgreSQL.
        if run.materialized_table_id is not None:
            MaterializedTable.objects.select_for_update().filter(
                pk=run.materialized_table_id
            ).first()
        done = run_rows.finish(RefreshRun, pk=run.pk, state=state, error=error[:10_000], **results)
        run.refresh_from_db()
        if done and run.materialized_table_id is not None:
            _count(run)
        if done:
            observe_finished(run)
    return run


def record_stream_failure(
    mt: MaterializedTable, *, error: str, expectations: Mapping[str, int] | None = None
) -> RefreshRun | None:
    """A continuous table's stream stopped on an error of its own: the first failure of a
    spell becomes a failed run in the history, announced as any failed run is (a
    notification's "run failed"; its next micro-batch is the recovery). Later failures of
    the same spell (the stream retries every few seconds) add nothing. Not counted toward
    the automatic suspension: the stream retries by itself, and its micro-batches, which
    are recorded as they commit, do not reset that count. `expectations`: the failed
    micro-batch's counts, when a FAIL UPDATE expectation failed it."""
    with transaction.atomic():
        # One conditional update decides whether this failure starts a spell (an UPDATE
        # locks its row: no SELECT FOR UPDATE is needed before it).
        spell = MaterializedTable.objects.filter(pk=mt.pk).exclude(stream_status="FAILED")
        if not spell.update(stream_status="FAILED", stream_error=error[:2000]):
            MaterializedTable.objects.filter(pk=mt.pk).update(stream_error=error[:2000])
            return None
        now = timezone.now()
        run = RefreshRun.objects.create(
            materialized_table=mt,
            table_name=str(mt.table),
            trigger=RefreshRun.Trigger.CONTINUOUS,
            action=RefreshRun.Action.INCREMENTAL,
            state=RefreshRun.State.FAILED,
            queued_at=now,
            started_at=now,
            finished_at=now,
            error=error[:10_000],
            definition_version=mt.current_version,
            expectations=dict(expectations or {}),
        )
        observe_finished(run)
    return run


def observe_finished(run: RefreshRun) -> None:
    """The run counts in the app's metrics (infra.metrics) once its end is committed, and
    its end is announced (signals.run_finished: notifications) in its transaction."""
    signals.run_finished.send(RefreshRun, run=run)
    seconds = (
        (run.finished_at - run.started_at).total_seconds()
        if run.started_at is not None and run.finished_at is not None
        else 0.0
    )
    labels = {
        "table": run.table_name,
        "trigger": run.trigger,
        "action": run.action,
        "outcome": run.state,
        "seconds": seconds,
    }
    transaction.on_commit(lambda: metrics.refresh_finished(**labels))


def _count(run: RefreshRun) -> None:
    mt = table_state.locked(run.materialized_table)
    if run.state == RefreshRun.State.FAILED:
        mt.consecutive_failures += 1
        mt.save(update_fields=["consecutive_failures", "updated_at"])
        if (
            mt.consecutive_failures >= _failures_allowed()
            and mt.state == MaterializedTable.State.ACTIVATED
        ):
            reason = (
                f"Suspended after {mt.consecutive_failures} consecutive failed refreshes; "
                f"the last error: {run.error[:500]}"
            )
            table_state.suspend(mt, reason=reason)
    elif run.state in (RefreshRun.State.SUCCEEDED, RefreshRun.State.SKIPPED):
        if mt.consecutive_failures:
            mt.consecutive_failures = 0
            mt.save(update_fields=["consecutive_failures", "updated_at"])


def fail_abandoned(*, silent_for: timedelta) -> int:
    """Fail the RUNNING runs whose worker has not said it is alive for `silent_for` (it was
    killed); their tables stay at their last good snapshot, since a run commits once."""
    count = 0
    for run in run_rows.abandoned(RefreshRun, silent_for=silent_for):
        if run.trigger == RefreshRun.Trigger.REBUILD:
            _settle_abandoned_rebuild(run)
            count += 1
            continue
        finish(
            run,
            state=RefreshRun.State.FAILED,
            error=f"The worker {run.worker or '?'} stopped (no heartbeat since "
            f"{run.heartbeat_at:%Y-%m-%d %H:%M:%S} UTC)",
        )
        count += 1
    return count


def resend_stranded(*, queued_for: timedelta) -> int:
    """Send the QUEUED runs no worker took for `queued_for` to a worker again; returns how
    many. A message a worker held (a run waiting for a free thread is sent again with a
    countdown, and the worker keeps that message until then) goes down with the worker
    when it is SIGKILLed, and Redis gives it back only after its visibility timeout, an
    hour: the run would say QUEUED all that time. Sending one again is safe, since a run
    is claimed once (`claim`): whichever message comes second finds it taken. Each run is
    sent again at most once per `queued_for` (a key in Redis), so a long queue behind busy
    workers is not flooded. Continuous tables' runs by hand wait for the streaming
    process, not for a worker, and are left alone."""
    stranded = RefreshRun.objects.filter(
        state=RefreshRun.State.QUEUED, queued_at__lt=timezone.now() - queued_for
    ).exclude(materialized_table__refresh_mode=RefreshMode.CONTINUOUS)
    sent = 0
    for run in stranded.only("pk"):
        if _first_resend(run.pk, seconds=queued_for.total_seconds()):
            logger.warning("Refresh run %s queued for over %s: sent again", run.pk, queued_for)
            dispatch(run)
            sent += 1
    return sent


def _first_resend(run_id: int, *, seconds: float) -> bool:
    """Whether this is the first resend of run `run_id` in `seconds` (a Redis key that
    expires); False when Redis cannot be reached (nor could the message be sent)."""
    import redis

    try:
        key = f"lakeview:resent-run:{run_id}"
        return bool(redis_client().set(key, "1", nx=True, ex=max(1, int(seconds))))
    except redis.RedisError:
        return False


def fold_skipped_runs(
    *, now: datetime | None = None, older_than: timedelta | None = None, periodic: bool = False
) -> int:
    """Fold the scheduled ticks skipped as NO_DATA (no source changed) that finished more
    than `older_than` ago (HISTORY_FOLD_SKIPPED_RUNS_AFTER_SECONDS) into one run per table
    and hour, as the streaming process folds micro-batches (refresh.streams.compact_history):
    the newest tick's run stays, with `batches` the ticks it stands for and its queued and
    start times the first tick's; its schedule time, reason, source snapshots and data
    timestamp (what lag is measured from) are the newest tick's. An idle table at one
    minute would otherwise keep 1,440 rows a day. Manual refreshes, failures and runs
    that did something are never folded. `periodic` (celery-beat's pass) reads only what
    the previous pass left (catalog.history.fold_per_hour). Returns how many runs were
    folded away."""
    if older_than is None:
        older_than = timedelta(seconds=settings.HISTORY_FOLD_SKIPPED_RUNS_AFTER_SECONDS)
    skipped = RefreshRun.objects.filter(
        trigger=RefreshRun.Trigger.SCHEDULED,
        state=RefreshRun.State.SKIPPED,
        action=RefreshRun.Action.NO_DATA,
    )
    return history.fold_per_hour(
        skipped,
        at="finished_at",
        before=(now or timezone.now()) - older_than,
        keys=("materialized_table_id", "table_name"),
        count="batches",
        earliest={"queued_at": ("queued_at",), "started_at": ("started_at",)},
        resume="NO_DATA ticks" if periodic else None,
    )


def _settle_abandoned_rebuild(run: RefreshRun) -> None:
    """A rebuild whose worker died: if its commit landed (the table's properties name its
    version), the version is current; otherwise nothing changed and the change failed."""
    mt = run.materialized_table
    if mt is None:
        fail_rebuild(run, error="The materialized table was dropped")
        return
    mt.table.refresh_from_db()
    committed = mt.table.properties.get(defs.VERSION_PROPERTY)
    if committed == str(run.definition_version) and mt.current_version != run.definition_version:
        apply_rebuild(run)
        return
    fail_rebuild(
        run,
        error=f"The worker {run.worker or '?'} stopped (no heartbeat since "
        f"{run.heartbeat_at:%Y-%m-%d %H:%M:%S} UTC) before the rebuild committed",
    )
