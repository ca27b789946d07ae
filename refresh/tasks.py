"""Celery tasks of materialized tables: thin, they take ids and plain values and call one
function each (refresh.runner on the worker side, refresh.services for housekeeping)."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings


@shared_task(name="refresh.run_refresh")
def run_refresh(run_id: int) -> str:
    """A queued run (CREATE, MANUAL, API): claim it and run it."""
    from refresh import runner

    return runner.execute(run_id)


@shared_task(name="refresh.scheduled_refresh")
def scheduled_refresh(materialized_table_id: int, options: dict | None = None) -> int | None:
    """A tick of a table's schedule (celery-beat sends it; refresh.schedules names it)."""
    from refresh import runner

    return runner.run_scheduled(materialized_table_id, options)


@shared_task(name="refresh.fail_abandoned_runs")
def fail_abandoned_runs() -> int:
    """Runs whose worker died (celery-beat calls this every 15 s: settings)."""
    from refresh import services

    return services.fail_abandoned(
        silent_for=timedelta(seconds=settings.MT_ABANDONED_AFTER_SECONDS)
    )
