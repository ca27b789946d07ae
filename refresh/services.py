"""Writes to materialized tables and their refresh runs: the lifecycle rules of FLIP-435
(as Flink's MaterializedTableManager applies them) and the claim on a run.

- SUSPEND and RESUME are refused while the table is INITIALIZING; suspending a suspended
  table or resuming an active one is an error. SUSPEND disables the schedule, RESUME enables
  it, and RESUME's options apply to the runs it starts only.
- A run is claimed by a conditional update (QUEUED -> RUNNING) under a lock on its table,
  so a redelivered message, or a manual refresh racing a scheduled one, never does the same
  work twice at once.
- A run whose worker stopped saying it is alive is failed; after
  `MT_FAILURES_BEFORE_SUSPEND` consecutive failures (5, as Snowflake) the table suspends
  itself and says why."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from catalog import history
from catalog.core.errors import CatalogError, InvalidInput
from refresh import schedules
from refresh.models import MaterializedTable, RefreshRun

FAILURES_BEFORE_SUSPEND = 5


class InvalidState(CatalogError):
    """The table's state forbids the operation (Flink's lifecycle rules); HTTP 409."""

    iceberg_type = "CommitFailedException"


def _failures_allowed() -> int:
    return int(getattr(settings, "MT_FAILURES_BEFORE_SUSPEND", FAILURES_BEFORE_SUSPEND))


def _locked(mt: MaterializedTable) -> MaterializedTable:
    return (
        MaterializedTable.objects.select_for_update()
        .select_related("table__namespace")
        .get(pk=mt.pk)
    )


def _record(mt: MaterializedTable, *, actor: Any, action: str, message: str = "") -> None:
    history.record_change(mt.table, actor=actor, action=action, message=message)


def suspend(mt: MaterializedTable, *, actor: Any = None, reason: str = "") -> MaterializedTable:
    with transaction.atomic():
        mt = _locked(mt)
        if mt.state == MaterializedTable.State.INITIALIZING:
            raise InvalidState(
                f"Materialized table {mt} is initializing and cannot be suspended yet"
            )
        if mt.state == MaterializedTable.State.SUSPENDED:
            raise InvalidState(f"Materialized table {mt} is already suspended")
        mt.state = MaterializedTable.State.SUSPENDED
        mt.suspended_reason = reason
        mt.save(update_fields=["state", "suspended_reason", "updated_at"])
        schedules.set_enabled(mt, False)
        _record(mt, actor=actor, action="suspend_materialized_table", message=reason)
    return mt


def resume(mt: MaterializedTable, *, actor: Any = None) -> MaterializedTable:
    with transaction.atomic():
        mt = _locked(mt)
        if mt.state == MaterializedTable.State.INITIALIZING:
            raise InvalidState(f"Materialized table {mt} is initializing and cannot be resumed")
        if mt.state == MaterializedTable.State.ACTIVATED:
            raise InvalidState(f"Materialized table {mt} is already active")
        mt.state = MaterializedTable.State.ACTIVATED
        mt.suspended_reason = ""
        mt.consecutive_failures = 0
        mt.save(update_fields=["state", "suspended_reason", "consecutive_failures", "updated_at"])
        schedules.set_enabled(mt, True)
        _record(mt, actor=actor, action="resume_materialized_table")
    return mt


def enqueue(
    mt: MaterializedTable,
    *,
    trigger: str,
    schedule_time: datetime | None = None,
    partition: dict[str, str] | None = None,
    options: dict[str, str] | None = None,
    force: bool = False,
    actor: Any = None,
) -> RefreshRun:
    """A QUEUED run (any state may be refreshed by hand, as in Flink)."""
    partition = {str(k): str(v) for k, v in (partition or {}).items()}
    unknown = sorted(set(partition) - set(mt.partitioned_by))
    if unknown:
        raise InvalidInput(
            f"{', '.join(unknown)} is not a partition column of {mt} "
            f"(partitioned by: {', '.join(mt.partitioned_by) or 'nothing'})",
            field="partition",
        )
    return RefreshRun.objects.create(
        materialized_table=mt,
        table_name=str(mt.table),
        trigger=trigger,
        schedule_time=schedule_time,
        partition=partition,
        options=dict(options or {}),
        force=force,
        requested_by=actor if getattr(actor, "pk", None) else None,
    )


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
        if busy:
            return None
        now = timezone.now()
        taken = RefreshRun.objects.filter(pk=run_id, state=RefreshRun.State.QUEUED).update(
            state=RefreshRun.State.RUNNING, started_at=now, heartbeat_at=now, worker=worker
        )
        if taken != 1:
            return None
    run.refresh_from_db()
    return run


def heartbeat(run: RefreshRun) -> None:
    RefreshRun.objects.filter(pk=run.pk, state=RefreshRun.State.RUNNING).update(
        heartbeat_at=timezone.now()
    )


def finish(run: RefreshRun, *, state: str, error: str = "", **results: Any) -> RefreshRun:
    """RUNNING (or QUEUED, for a skip decided before starting) -> a finished state; counts
    failures toward the automatic suspension."""
    with transaction.atomic():
        done = RefreshRun.objects.filter(
            pk=run.pk, state__in=[RefreshRun.State.RUNNING, RefreshRun.State.QUEUED]
        ).update(state=state, finished_at=timezone.now(), error=error[:10_000], **results)
        run.refresh_from_db()
        if done == 1 and run.materialized_table_id is not None:
            _count(run)
    return run


def _count(run: RefreshRun) -> None:
    mt = _locked(run.materialized_table)
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
            suspend(mt, reason=reason)
    elif run.state in (RefreshRun.State.SUCCEEDED, RefreshRun.State.SKIPPED):
        if mt.consecutive_failures:
            mt.consecutive_failures = 0
            mt.save(update_fields=["consecutive_failures", "updated_at"])


def fail_abandoned(*, silent_for: timedelta) -> int:
    """Fail the RUNNING runs whose worker has not said it is alive for `silent_for` (it was
    killed); their tables stay at their last good snapshot, since a run commits once."""
    cutoff = timezone.now() - silent_for
    abandoned = RefreshRun.objects.filter(state=RefreshRun.State.RUNNING, heartbeat_at__lt=cutoff)
    count = 0
    for run in abandoned:
        finish(
            run,
            state=RefreshRun.State.FAILED,
            error=f"The worker {run.worker or '?'} stopped (no heartbeat since "
            f"{run.heartbeat_at:%Y-%m-%d %H:%M:%S} UTC)",
        )
        count += 1
    return count
