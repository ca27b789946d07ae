"""Celery tasks of notifications: thin, ids in, one call each."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="alerts.deliver")
def deliver(delivery_id: int) -> str:
    """One attempt at a delivery (alerts.services.deliver)."""
    from alerts import services

    return services.deliver(delivery_id)


@shared_task(name="alerts.sweep")
def sweep() -> dict:
    """LATE and RECOVERED by lag, and deliveries whose task was lost (celery-beat,
    ALERTS_SWEEP_SECONDS)."""
    from alerts import services

    return services.sweep()
