"""The Redis client of the app's own code: the rewrite leases (runtime.leases), the workers'
presence (catalog.workers) and the marks of runs sent again (refresh.services). Celery keeps
its own connections to the same Redis; `send_task` is how the app's code sends it a task.

One client per process and timeout: redis-py's client is thread-safe, holds a pool of
connections, and starts a new pool in a forked child, so a cached one serves every thread
and every worker process."""

from __future__ import annotations

from functools import cache
from typing import Any

from django.conf import settings


@cache
def redis_client(timeout: float = 2.0) -> Any:
    """The client for `settings.REDIS_URL`; `timeout` bounds each command and the connect."""
    import redis

    return redis.Redis.from_url(
        settings.REDIS_URL, socket_timeout=timeout, socket_connect_timeout=min(timeout, 2.0)
    )


def send_task(
    name: str,
    *,
    args: list[Any],
    kwargs: dict[str, Any] | None = None,
    countdown: float | None = None,
) -> None:
    """Send the task `name` (by name: the tasks sit above the modules that send them).

    Its result is neither stored nor waited for: the app's rows (runs, jobs) say how work
    went. Celery's own `send_task` otherwise subscribes the sending process to each task's
    result channel, never unsubscribed: a web process made one more Redis call per job and
    kept every subscription it ever made. Raises what the broker raises when it cannot be
    reached."""
    from celery import current_app

    current_app.send_task(name, args=args, kwargs=kwargs, countdown=countdown, ignore_result=True)
