"""Celery tasks of maintenance: thin, ids in, one function each."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings


@shared_task(name="maintenance.run")
def run_maintenance(run_ids: list[int]) -> list[str]:
    """Queued runs of one table, in order (maintenance.services.start queues them)."""
    from maintenance import runner

    return runner.execute(run_ids)


@shared_task(name="maintenance.sweep")
def sweep() -> int:
    """celery-beat's tick (MAINTENANCE_SWEEP_SECONDS): samples, and what is due."""
    from maintenance import services

    services.fail_abandoned(silent_for=timedelta(seconds=settings.MT_ABANDONED_AFTER_SECONDS))
    return services.sweep()


@shared_task(name="maintenance.prune")
def prune() -> int:
    """Health samples and runs older than MAINTENANCE_KEEP_DAYS (celery-beat, hourly)."""
    from maintenance import services

    return services.prune()
