"""Every write of maintenance: a table's policy (its properties, through the one commit
path), runs (queued, claimed, finished), health samples, and the sweep that queues what
is due. Runs are rows claimed with a conditional update (infra.runs, as refresh runs are),
under a lock of their table: two never run on one table at once."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from catalog import history
from catalog.core.errors import CommitConflict, InvalidInput, NotFound, ReadOnly, Unavailable
from catalog.models import Table
from catalog.services import tables as table_services
from infra import runs as run_rows
from maintenance import selectors, signals
from maintenance.core import policy as policies
from maintenance.core.policy import Action, PolicyError
from maintenance.models import HealthSample, MaintenanceRun

logger = logging.getLogger(__name__)

#: The order "Run maintenance now" runs every action in: compaction first, so that the
#: expiry after it can drop the files compaction replaced once they leave the retention.
ALL_ACTIONS = (
    Action.REWRITE_DATA_FILES,
    Action.REWRITE_POSITION_DELETE_FILES,
    Action.REWRITE_MANIFESTS,
    Action.EXPIRE_SNAPSHOTS,
    Action.REMOVE_ORPHAN_FILES,
)


def _check_managed(table: Table) -> None:
    if hasattr(table, "attachment"):
        raise ReadOnly(
            f"{table} is attached: its writer keeps it, the catalog only reads it",
        )


def set_policy(
    *, table: Table, changes: Mapping[str, str | None], actor: Any = None
) -> policies.Policy:
    """Set (a string) or remove (None) maintenance properties of `table` in one commit
    through the catalog's commit path, as an engine's ALTER TABLE SET TBLPROPERTIES would.
    Only the policy's own properties; each value checked, the wrong one named."""
    _check_managed(table)
    updates: dict[str, str] = {}
    removals: list[str] = []
    for name, value in changes.items():
        if name not in policies.POLICY_PROPERTIES:
            raise InvalidInput(
                f"{name[:100]} is not a maintenance setting "
                f"(one of: {', '.join(policies.POLICY_PROPERTIES)})",
                field=name[:100],
            )
        if value is None:
            removals.append(name)
            continue
        try:
            parsed = policies.parse_value(name, str(value))
        except PolicyError as error:
            raise InvalidInput(str(error), field=error.field) from None
        updates[name] = str(parsed).lower() if isinstance(parsed, bool) else str(parsed)
    body: list[dict[str, Any]] = []
    if updates:
        body.append({"action": "set-properties", "updates": updates})
    if removals:
        body.append({"action": "remove-properties", "removals": removals})
    if body:
        table_services.commit_table(
            namespace=table.namespace.name,
            name=table.name,
            requirements=[{"type": "assert-table-uuid", "uuid": str(table.uuid)}],
            updates=body,
            actor=actor,
        )
        table.refresh_from_db()
    return selectors.policy_of(table)


def start(
    *,
    table: Table,
    actions: Sequence[Action] = ALL_ACTIONS,
    trigger: str = MaintenanceRun.Trigger.MANUAL,
    actor: Any = None,
) -> list[MaintenanceRun]:
    """Queue `actions` on `table` (in that order, on one worker) and send them. An action
    already queued or running on the table is not queued twice: its run is returned."""
    _check_managed(table)
    with transaction.atomic():
        Table.objects.select_for_update().filter(pk=table.pk).first()
        pending = {
            run.action: run
            for run in selectors.active(table).filter(state=MaintenanceRun.State.QUEUED)
        }
        runs = [
            pending.get(action.value)
            or MaintenanceRun.objects.create(
                table=table,
                table_name=str(table),
                action=action.value,
                trigger=trigger,
                requested_by=actor if getattr(actor, "is_authenticated", False) else None,
            )
            for action in actions
        ]
        new = [r.pk for r in runs if r.action not in pending]
        if new:
            transaction.on_commit(lambda: dispatch(new))
    return runs


def dispatch(run_ids: Sequence[int], *, countdown: float | None = None) -> None:
    from celery import current_app

    try:  # by name: the task (maintenance.tasks) sits above this module and calls it
        current_app.send_task("maintenance.run", args=[list(run_ids)], countdown=countdown)
    except Exception as error:  # kombu's OperationalError and friends: the broker is down
        raise Unavailable(f"The task queue cannot be reached: {error}") from error


def claim(run_id: int, *, worker: str) -> MaintenanceRun | None:
    """QUEUED -> RUNNING for this worker, unless the run is taken or finished, or another
    maintenance run of its table is running; None then."""
    with transaction.atomic():
        run = MaintenanceRun.objects.filter(pk=run_id).first()
        if run is None or run.table_id is None:
            return None
        Table.objects.select_for_update().filter(pk=run.table_id).first()
        if MaintenanceRun.objects.filter(
            table_id=run.table_id, state=MaintenanceRun.State.RUNNING
        ).exists():
            return None
        if not run_rows.claim(MaintenanceRun, pk=run_id, worker=worker):
            return None
    run.refresh_from_db()
    return run


def heartbeat(run: MaintenanceRun) -> None:
    run_rows.beat(MaintenanceRun, pk=run.pk)


def cancel_run(run: MaintenanceRun, *, actor: Any = None) -> MaintenanceRun:
    """Stop a maintenance run: a QUEUED one ends CANCELLED at once; a RUNNING one is asked
    to stop, and its worker cancels its Spark jobs at its next look (about a second) and
    ends it CANCELLED, the table unchanged (an Iceberg action commits once, at its end),
    unless the commit had already landed. A finished run is a CommitConflict (409)."""
    who = actor if getattr(actor, "pk", None) else None
    with transaction.atomic():
        locked = MaintenanceRun.objects.select_for_update().filter(pk=run.pk).first()
        if locked is None:  # deleted since the caller found it (pruned)
            raise NotFound(f"Maintenance run {run.pk} does not exist")
        if locked.state in MaintenanceRun.FINISHED:
            raise CommitConflict(f"Maintenance run {run.pk} already ended {locked.state}")
        if locked.state == MaintenanceRun.State.QUEUED:
            by = f" by {who.get_username()}" if who is not None else ""
            finish(
                locked,
                state=MaintenanceRun.State.CANCELLED,
                error=f"Cancelled{by} before it started",
            )
        elif not run_rows.request_cancel(MaintenanceRun, pk=run.pk, by=who):
            # Asked before: nothing changes, and the history says it once.
            run.refresh_from_db()
            return run
        history.record(
            actor=actor,
            action="cancel_maintenance_run",
            object_type="table",
            object_name=locked.table_name,
            message=f"run {run.pk} ({locked.action})",
        )
    run.refresh_from_db()
    return run


def cancel_asked(run: MaintenanceRun) -> bool:
    """Whether someone asked the running `run` to stop (cancel_run)."""
    return run_rows.cancel_asked(MaintenanceRun, pk=run.pk)


def finish(run: MaintenanceRun, *, state: str, error: str = "", **results: Any) -> MaintenanceRun:
    """An active run -> a finished state; its end is announced (signals.run_finished:
    notifications) in the same transaction."""
    with transaction.atomic():
        done = run_rows.finish(
            MaintenanceRun, pk=run.pk, state=state, error=error[:10_000], **results
        )
        run.refresh_from_db()
        if done:
            signals.run_finished.send(MaintenanceRun, run=run)
    return run


def fail_abandoned(*, silent_for: timedelta) -> int:
    """Runs whose worker stopped beating (killed mid-action) are failed, freeing the table."""
    abandoned = list(run_rows.abandoned(MaintenanceRun, silent_for=silent_for))
    for run in abandoned:
        finish(
            run,
            state=MaintenanceRun.State.FAILED,
            error="The worker running this stopped answering (it was stopped or died)",
        )
    return len(abandoned)


def record_sample(table: Table, *, run: MaintenanceRun | None = None) -> HealthSample:
    return _save_sample(table, selectors.health_of(table, with_files=True), run=run)


def _save_sample(
    table: Table, health: policies.Health, *, run: MaintenanceRun | None = None
) -> HealthSample:
    return HealthSample.objects.create(
        table=table,
        data_files=health.data_files,
        data_bytes=health.data_bytes,
        delete_files=health.delete_files,
        snapshots=health.snapshots,
        manifests=health.manifests,
        metadata_bytes=health.metadata_bytes,
        metadata_files=health.metadata_files,
        run=run,
    )


def sweep(*, now: datetime | None = None) -> int:
    """celery-beat's maintenance tick: for every managed table whose policy is on, take a
    health sample when the last is old enough, and queue what is due (one task per table,
    its actions in order). Returns how many runs were queued."""
    now = now or timezone.now()
    sample_every = timedelta(seconds=settings.MAINTENANCE_SAMPLE_SECONDS)
    queued = 0
    for table in selectors.managed_tables().iterator(chunk_size=200):
        try:
            queued += _sweep_table(table, now=now, sample_every=sample_every)
        except Exception:  # noqa: BLE001 - one table's trouble never stops the sweep
            logger.exception("Maintenance sweep of table %s", table.pk)
    return queued


def _sweep_table(table: Table, *, now: datetime, sample_every: timedelta) -> int:
    policy = selectors.policy_of(table)
    if not policy.enabled:
        return 0
    last = HealthSample.objects.filter(table=table).order_by("-taken_at").first()
    if last is None or last.taken_at < now - sample_every:
        health = selectors.health_of(table, with_files=True)
        _save_sample(table, health)
    else:
        # Manifests are counted from files: between samples, the last sample's count.
        health = dataclasses.replace(selectors.health_of(table), manifests=last.manifests)
    if selectors.active(table).exists():
        return 0
    due = policies.due(
        policy,
        health,
        now_ms=int(now.timestamp() * 1000),
        last_started_ms=selectors.last_started(table),
    )
    if not due:
        return 0
    return len(start(table=table, actions=due, trigger=MaintenanceRun.Trigger.SCHEDULED))


def prune(*, now: datetime | None = None) -> int:
    """Health samples and finished runs older than MAINTENANCE_KEEP_DAYS; scheduled runs
    that succeeded sooner, after MAINTENANCE_KEEP_SCHEDULED_DAYS (a continuous table's
    expiry runs about every minute: its history would otherwise hold ~1,500 rows a day).
    The samples taken for them stay: the chart keeps its shape."""
    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.MAINTENANCE_KEEP_DAYS)
    routine = now - timedelta(days=settings.MAINTENANCE_KEEP_SCHEDULED_DAYS)
    samples, _ = HealthSample.objects.filter(taken_at__lt=cutoff).delete()
    runs, _ = MaintenanceRun.objects.filter(
        queued_at__lt=cutoff, state__in=MaintenanceRun.FINISHED
    ).delete()
    routine_runs, _ = MaintenanceRun.objects.filter(
        queued_at__lt=routine,
        state=MaintenanceRun.State.SUCCEEDED,
        trigger=MaintenanceRun.Trigger.SCHEDULED,
    ).delete()
    return samples + runs + routine_runs
