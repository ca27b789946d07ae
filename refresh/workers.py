"""Which workers are alive, known without asking them: every Celery worker process keeps a
`Worker` row fresh from a thread of its own (every `WORKER_HEARTBEAT_SECONDS`), and the web
side reads the rows. A worker silent for `WORKER_SILENT_AFTER_SECONDS` counts as gone, so a
request that needs Spark is answered 503 at once instead of waiting for nobody."""

from __future__ import annotations

import logging
import os
import socket
import threading
from datetime import timedelta

from celery.signals import worker_ready, worker_shutdown
from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from refresh.models import Worker

logger = logging.getLogger(__name__)

_stop = threading.Event()


def name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def alive() -> bool:
    """Whether some worker said it was alive recently."""
    since = timezone.now() - timedelta(seconds=settings.WORKER_SILENT_AFTER_SECONDS)
    return Worker.objects.filter(seen_at__gte=since).exists()


def beat() -> None:
    """Say this process is alive (one row per process)."""
    now = timezone.now()
    updated = Worker.objects.filter(name=name()).update(seen_at=now)
    if not updated:
        Worker.objects.update_or_create(
            name=name(),
            defaults={
                "seen_at": now,
                "started_at": now,
                "threads": settings.CELERY_WORKER_CONCURRENCY,
            },
        )


def _beating() -> None:
    try:
        while not _stop.is_set():
            close_old_connections()
            try:
                beat()
            except Exception:  # noqa: BLE001 - the next beat tries again
                logger.exception("The worker's heartbeat could not be written")
            _stop.wait(settings.WORKER_HEARTBEAT_SECONDS)
    finally:
        connection.close()


@worker_ready.connect
def _start(**_: object) -> None:
    threading.Thread(target=_beating, name="worker-heartbeat", daemon=True).start()


@worker_shutdown.connect
def _finish(**_: object) -> None:
    _stop.set()
    try:
        Worker.objects.filter(name=name()).delete()
    except Exception:  # noqa: BLE001 - a stale row expires by itself
        logger.exception("The worker's row could not be removed")
