"""Maintenance runs on a worker: claim, a health sample, Iceberg's action in the worker's
Spark (maintenance.spark.actions), the figures after, finish. Runs of one table are given
in order to one task and run one after another; a run whose table is busy with another
maintenance run (a second worker, a manual run) is sent again a moment later."""

from __future__ import annotations

import logging
import time
from contextlib import nullcontext

from django.conf import settings

from catalog import workers
from catalog.models import Table
from maintenance import selectors, services
from maintenance.core.policy import Action, Policy
from maintenance.models import MaintenanceRun
from maintenance.spark import actions
from runtime import engine, leases, running
from runtime.spark.errors import is_commit_conflict

logger = logging.getLogger(__name__)

BUSY_RETRY_SECONDS = 5.0


def execute(run_ids: list[int]) -> list[str]:
    """Run each queued run in order; returns each one's final state (or why not)."""
    slots = running.refresh_slots()
    if not slots.acquire(blocking=False):
        services.dispatch(run_ids, countdown=BUSY_RETRY_SECONDS)
        return ["waiting for a worker thread"]
    try:
        # Counted as this worker's work: refreshes and jobs go to an idle worker meanwhile.
        with workers.occupied():
            return _execute(run_ids)
    finally:
        slots.release()


def _execute(run_ids: list[int]) -> list[str]:
    outcomes: list[str] = []
    for index, run_id in enumerate(run_ids):
        run = services.claim(run_id, worker=running.worker_name())
        if run is None:
            still_queued = MaintenanceRun.objects.filter(
                pk=run_id, state=MaintenanceRun.State.QUEUED
            ).exists()
            if still_queued:  # another run of the table is running: later, in order
                services.dispatch(run_ids[index:], countdown=BUSY_RETRY_SECONDS)
                outcomes.append("table busy, sent again")
                break
            outcomes.append("not claimed")
            continue
        outcomes.append(_run(run))
    return outcomes


#: Actions that replace data, delete or manifest files: they take the table's rewrite lease
#: (runtime.leases) so that a continuous table's MERGE micro-batches wait for them.
REWRITES = (
    Action.REWRITE_DATA_FILES,
    Action.REWRITE_POSITION_DELETE_FILES,
    Action.REWRITE_MANIFESTS,
)


def _run_action(run: MaintenanceRun, table: Table, policy: Policy) -> actions.Outcome:
    turn = leases.rewriting(table.pk) if Action(run.action) in REWRITES else nullcontext()
    with turn:
        return _attempts(run, table, policy)


def _attempts(run: MaintenanceRun, table: Table, policy: Policy) -> actions.Outcome:
    """The action; once more when its commit lost to a writer Iceberg cannot rebase it onto
    (a refresh replaced the files a compaction rewrote)."""

    def attempt() -> actions.Outcome:
        return actions.run(
            engine.spark(),
            Action(run.action),
            catalog=settings.CATALOG_NAME,
            namespace=table.namespace.levels,
            name=table.name,
            table_location=table.location,
            policy=policy,
            now_ms=int(time.time() * 1000),
        )

    try:
        return attempt()
    except Exception as error:
        if not is_commit_conflict(error):
            raise
        logger.info("Maintenance run %s met a concurrent commit; once more", run.pk)
    return attempt()


def _run(run: MaintenanceRun) -> str:
    table = Table.objects.select_related("namespace").filter(pk=run.table_id).first()
    if table is None:
        services.finish(run, state=MaintenanceRun.State.CANCELLED, error="The table was dropped")
        return MaintenanceRun.State.CANCELLED
    group = f"lakeview-maintenance-{run.pk}"
    beating = running.Heartbeat(
        run,
        beat=lambda: services.heartbeat(run),
        watch=group,
        limit=settings.REFRESH_TIMEOUT_SECONDS or None,
        asked=lambda: services.cancel_asked(run),
    )
    beating.start()
    try:
        before = services.record_sample(table, run=run)
        policy = selectors.policy_of(table)
        with engine.job_group(group, f"Maintenance run {run.pk}: {run.action} of {table}"):
            outcome = _run_action(run, table, policy)
        table.refresh_from_db()
        after = services.record_sample(table, run=run)
    except Exception as error:  # noqa: BLE001 - any failure is the run's, recorded
        beating.stop()
        ended, message = running.stopped(
            run, beating, limit_from="the deployment's REFRESH_TIMEOUT_SECONDS"
        ) or (MaintenanceRun.State.FAILED, running.describe(error))
        logger.warning("Maintenance run %s ended %s", run.pk, ended, exc_info=True)
        services.finish(run, state=ended, error=message)
        return ended
    finally:
        beating.stop()
    services.finish(
        run,
        state=MaintenanceRun.State.SUCCEEDED,
        files_before=before.data_files + before.delete_files,
        files_after=after.data_files + after.delete_files,
        bytes_before=before.data_bytes,
        bytes_after=after.data_bytes,
        snapshots_before=before.snapshots,
        snapshots_after=after.snapshots,
        snapshots_expired=outcome.snapshots_expired,
        files_rewritten=outcome.rewritten_files,
        files_added=outcome.added_files,
        files_deleted=outcome.files_deleted,
        orphans_removed=outcome.files_deleted if run.action == Action.REMOVE_ORPHAN_FILES else 0,
        files_outside=outcome.files_outside,
        details={
            **outcome.details,
            "rewritten_bytes": outcome.rewritten_bytes,
            "removed_delete_files": outcome.removed_delete_files,
            "failed_files": outcome.failed_files,
            "files_missing": outcome.files_missing,
            "orphans_found": outcome.orphans_found,
        },
    )
    return MaintenanceRun.State.SUCCEEDED
