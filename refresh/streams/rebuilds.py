"""The batch work a streaming host does for the continuous tables it holds, each table's query
stopped first (between micro-batches) so that nothing the stream writes lands in the middle:
ALTER ... AS and rollbacks (rebuild runs: the new definition's schema and rows in one
commit) and manual refreshes by hand or through the API (the query recomputed at pinned
source snapshots). The table's stream then starts again just after the snapshots they read,
from a new checkpoint (or, if they failed, from the old one)."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable, Iterator
from typing import Any

from django.conf import settings
from django.utils import timezone

from catalog import selectors as catalog_selectors
from refresh import definitions, rights, runs, stream_hosts
from refresh.core import expectations as ex
from refresh.core.freshness import RefreshMode
from refresh.models import MaterializedTable, RefreshRun
from refresh.sources import check_streamable
from refresh.spark import jobs
from refresh.streams import loads
from refresh.streams.checkpoints import delete_checkpoint, new_checkpoint
from refresh.streams.state import HostState
from refresh.streams.stops import stop
from runtime import engine
from runtime.spark import errors
from runtime.spark.policies import reading_as

logger = logging.getLogger(__name__)

#: Runs of a continuous table asked for by hand, which this process makes (the stream
#: paused), not a worker.
BY_HAND = (RefreshRun.Trigger.MANUAL, RefreshRun.Trigger.API)


def rebuild_pending(state: HostState, held: set[int]) -> None:
    """ALTER ... AS and rollbacks of continuous tables (rebuild runs), and their manual
    refreshes (by hand or through the API): each table's query stops first (between
    micro-batches), so that nothing the stream writes lands in the middle; then
    `rebuild` or `recompute`. The loop then starts the table's query again, just after
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
    for run_id, mt_id, trigger, table_state in rows:
        if mt_id not in held:
            streaming_now = table_state == MaterializedTable.State.ACTIVATED
            if streaming_now or not stream_hosts.claim(state.host, mt_id):
                continue
        running = state.running.pop(mt_id, None)
        if running is not None:
            stop(running)
        state.retry_after.pop(mt_id, None)
        if trigger == RefreshRun.Trigger.REBUILD:
            rebuild(state, run_id)
        else:
            recompute(state, run_id)


@contextlib.contextmanager
def watched(state: HostState, run: RefreshRun) -> Iterator[Any]:
    """The run's heartbeat (runtime.running.Heartbeat), which also stops the run's Spark
    jobs, tagged with the job group `lakeview-run-<id>` on this host's session, at
    REFRESH_TIMEOUT_SECONDS or at the warehouse disk's floor."""
    from runtime.running import Heartbeat

    group = f"lakeview-run-{run.pk}"
    context = state.spark.sparkContext
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


def _claimed(state: HostState, run_id: int) -> tuple[Any, Any, str] | None:
    """The run this host claimed (None: another took it), its table and the checkpoint its
    stream had: a recompute or a rebuild deletes it once the table is past it."""
    run = runs.claim(run_id, worker=state.worker)
    if run is None:
        return None
    return run, run.materialized_table, run.materialized_table.stream_checkpoint


@dataclasses.dataclass
class Attempt:
    """What a run's work under its heartbeat came to: the work's result, or the exception
    and the error the run records (the heartbeat's reason to stop it, if it did); and the
    expectations' violation counts either way."""

    result: Any = None
    failure: Exception | None = None
    error: str = ""
    violations: dict[str, int] = dataclasses.field(default_factory=dict)


def attempt(state: HostState, run: RefreshRun, work: Callable[[dict[str, int]], Any]) -> Attempt:
    """Run `work(violations)` under the run's heartbeat (`watched`); a failure is kept,
    not raised: the caller records it and the stream resumes from its old checkpoint."""
    outcome = Attempt()
    # Read as the table's refreshes read: through its owner's row filters and masks.
    owner_reads = reading_as(rights.owner_policies(run.materialized_table))
    with watched(state, run) as beating, owner_reads:
        try:
            outcome.result = work(outcome.violations)
        except Exception as error:  # noqa: BLE001 - the run's failure, recorded by the caller
            outcome.failure = error
    if outcome.failure is not None:
        outcome.error = why_stopped(run, beating) or errors.failure_message(outcome.failure)
    return outcome


def recompute(state: HostState, run_id: int) -> None:
    """A manual refresh of a continuous table, its stream stopped: the query over the
    sources pinned now replaces the rows (one commit, its refresh state those pins),
    and the stream continues just after them from a new checkpoint."""
    claimed = _claimed(state, run_id)
    if claimed is None:
        return
    run, mt, old_checkpoint = claimed

    def work(violations: dict[str, int]) -> None:
        rights.check_owner_reads(mt)
        plan, session = loads.plan_and_session(state, mt)
        loads.load(state, session, mt, plan, run=run, violations=violations)

    outcome = attempt(state, run, work)
    if outcome.failure is not None:
        logger.error("The manual refresh of %s failed", mt, exc_info=outcome.failure)
        runs.finish(
            run,
            state=RefreshRun.State.FAILED,
            action=RefreshRun.Action.FULL,
            reason=loads.MANUAL_REASON,
            error=outcome.error,
            expectations=outcome.violations,
        )
        return
    if old_checkpoint:
        delete_checkpoint(old_checkpoint)


def rebuild(state: HostState, run_id: int) -> None:
    """Replace the table with the new definition's rows over its sources pinned now:
    schema and rows in one commit; a new checkpoint and pins for the new stream."""
    claimed = _claimed(state, run_id)
    if claimed is None:
        return
    run, mt, old_checkpoint = claimed
    outcome = attempt(state, run, lambda violations: rebuilt(state, run, mt, violations))
    if outcome.failure is not None:
        # The change did not take effect: the old definition's stream resumes.
        logger.error(
            "Rebuilding %s for version %s failed",
            mt,
            run.definition_version,
            exc_info=outcome.failure,
        )
        runs.fail_rebuild(run, error=outcome.error, expectations=outcome.violations)
        return
    pins, result = outcome.result
    checkpoint = new_checkpoint(mt, run.definition_version)
    runs.apply_rebuild(
        run,
        stream={
            "checkpoint": checkpoint,
            "start": {k: list(v) if v else None for k, v in pins.items()},
        },
        rows_written=result.rows_written,
        bytes_written=result.bytes_written,
        snapshot_id=result.snapshot_id,
        source_snapshots=loads.pinned_ids(pins),
        data_timestamp=run.started_at,
        expectations=outcome.violations,
    )
    # The old definition's stream never resumes: its checkpoint would only pile up.
    if old_checkpoint:
        delete_checkpoint(old_checkpoint)


def rebuilt(
    state: HostState, run: RefreshRun, mt: MaterializedTable, violations: dict[str, int]
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
        state.spark,
        catalog=settings.CATALOG_NAME,
        namespace=levels,
        settings=mt.stream_options or {},
        aliases=sorted(catalog_selectors.engine_catalogs()),
    )
    return loads.pinned_load(
        state,
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


def why_stopped(run: RefreshRun, beating: Any) -> str | None:
    """What a run its heartbeat stopped says (runtime.running.stopped), else None."""
    from runtime.running import stopped

    said = stopped(run, beating, limit_from="the deployment's REFRESH_TIMEOUT_SECONDS")
    return said[1] if said else None
