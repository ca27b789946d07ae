"""A continuous table loaded at pinned source snapshots: every source pinned at its current
snapshot, the table's query loaded at exactly those pins in one commit stamped with this
host's token, then a new checkpoint whose stream starts just after them. A start without a
checkpoint, a manual refresh, a recompute and a rebuild (refresh.streams.rebuilds) all load
this way."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from catalog import selectors as catalog_selectors
from refresh import runs, signals
from refresh.core import expectations as ex
from refresh.core.streaming import StreamPlan
from refresh.models import MaterializedTable, RefreshRun
from refresh.sources import check_streamable, state_of
from refresh.spark import jobs, stream_loads
from refresh.streams.checkpoints import new_checkpoint
from refresh.streams.state import HostState, levels, target

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: The reason of a continuous table's manual refresh (refresh.streams.rebuilds.recompute).
MANUAL_REASON = (
    "full: a continuous table's manual refresh (its stream paused between micro-batches, "
    "the query recomputed at pinned source snapshots, the stream resumed just after them)"
)


def plan_and_session(state: HostState, mt: MaterializedTable) -> tuple[StreamPlan, SparkSession]:
    """How the stream keeps the table's query, and the session it runs in."""
    plan = check_streamable(mt.query, namespace=".".join(levels(mt)), primary_key=mt.primary_key)
    session = jobs.run_session(
        state.spark,
        catalog=settings.CATALOG_NAME,
        namespace=levels(mt),
        settings=mt.stream_options or {},
        aliases=sorted(catalog_selectors.engine_catalogs()),
    )
    return plan, session


def load(
    state: HostState,
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
            reason=state.recompute_reasons.pop(mt.pk, ""),
            state=RefreshRun.State.RUNNING,
            started_at=timezone.now(),
            heartbeat_at=timezone.now(),
            worker=state.worker,
            definition_version=mt.current_version,
        )
        signals.run_started.send(RefreshRun, run=run)
    try:
        pins, result = pinned_load(
            state,
            session,
            mt,
            plan,
            query=plan.sql(mt.query),
            namespace=levels(mt),
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
    checkpoint = new_checkpoint(mt, mt.current_version)
    results = {
        "rows_written": result.rows_written,
        "bytes_written": result.bytes_written,
        "snapshot_id": result.snapshot_id,
        "source_snapshots": pinned_ids(pins),
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


def pinned_load(
    state: HostState,
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
    pins = stream_loads.pinned_snapshots(session, sources)
    result = stream_loads.load(
        session,
        query=query,
        target=target(mt),
        sources=sources,
        pins=pins,
        namespace=namespace,
        catalog=settings.CATALOG_NAME,
        replacing=replacing,
        snapshot_properties={**load_state(version, pins, started), **state.stamp},
        expectations=expectations,
        violations=violations,
    )
    return pins, result


def pinned_ids(pins: dict[str, Any]) -> dict[str, int | None]:
    """Each source's pinned snapshot id (None for a source with no snapshot yet)."""
    return {name: (pin[0] if pin else None) for name, pin in pins.items()}


def load_state(version: int, pins: dict[str, Any], started: datetime) -> dict[str, str]:
    """The snapshot-summary entry of a load at `pins` ("ns.table" -> (snapshot id, ms) or
    None, stream_loads.pinned_snapshots): the load reads every source at exactly its pin."""
    return state_of(
        version=version,
        snapshots=pinned_ids(pins),
        started_ms=int(started.timestamp() * 1000),
    ).summary()
