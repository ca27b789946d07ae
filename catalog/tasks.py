"""Celery tasks of the catalog: thin wrappers that call one function each."""

from __future__ import annotations

from celery import shared_task

from catalog.iceberg_rest.auth import delete_expired_tokens


@shared_task(name="catalog.purge_expired_tokens")
def purge_expired_tokens() -> int:
    """Expired bearer tokens are useless; celery-beat runs this hourly (settings)."""
    return delete_expired_tokens()
