"""Celery tasks of materialized tables: thin, they take ids and plain values and call one
function each (refresh.runner on the worker side, refresh.services for housekeeping; a
console job: catalog.jobs.run with refresh.console's operation, imported here)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from celery import shared_task
from django.conf import settings

from refresh import console, runs


@shared_task(name="refresh.run_refresh")
def run_refresh(run_id: int, hops: int = 0) -> str:
    """A queued run (CREATE, MANUAL, API): claim it and run it (`hops`: how many busy
    workers handed it on already)."""
    from refresh import runner

    return runner.execute(run_id, hops=hops)


@shared_task(name=console.TASK)
def run_console_job(job_id: int, hops: int = 0) -> str:
    """A console script's job (refresh.console.run sent it): claim it and run the rest of
    the script with this worker's Spark (`hops`: how many busy workers handed it on)."""
    from catalog import jobs

    return jobs.run(job_id, hops=hops, operation=console.run_job, task=console.TASK)


@shared_task(name="refresh.scheduled_refresh", bind=True)
def scheduled_refresh(
    self: Any,
    materialized_table_id: int,
    options: dict | None = None,
    sent_at: float | None = None,
    hops: int = 0,
) -> int | None:
    """A tick of a table's schedule (celery-beat sends it; refresh.schedules names it). When
    beat sent it is in the message's `lakeview_sent_at` header (webapp.celery stamps it),
    or in `sent_at` once a busy worker handed it on."""
    from refresh import runner

    stamped = sent_at or self.request.get("lakeview_sent_at")
    return runner.run_scheduled(
        materialized_table_id, options, sent_at=float(stamped) if stamped else None, hops=hops
    )


@shared_task(name="refresh.fail_abandoned_runs")
def fail_abandoned_runs() -> int:
    """Runs whose worker died (celery-beat calls this every 15 s: settings): RUNNING ones
    are failed, QUEUED ones whose message went down with it are sent again."""

    runs.resend_stranded(queued_for=timedelta(seconds=settings.MT_STRANDED_AFTER_SECONDS))
    return runs.fail_abandoned(silent_for=timedelta(seconds=settings.MT_ABANDONED_AFTER_SECONDS))


@shared_task(name="refresh.fold_skipped_runs")
def fold_skipped_runs() -> int:
    """Old NO_DATA ticks folded per table and hour (celery-beat, HISTORY_FOLD_EVERY_SECONDS):
    FULL tables run with no streaming process too."""

    return runs.fold_skipped_runs(periodic=True)


@shared_task(name="refresh.prune_query_results")
def prune_query_results() -> int:
    """Query results past QUERY_RESULT_KEEP_HOURS or beyond each user's newest
    QUERY_RESULTS_PER_USER, and history past QUERY_HISTORY_KEEP_DAYS (celery-beat)."""
    from refresh import queries

    return queries.prune()
