"""The Redis client of the app's own code: the rewrite leases (refresh.leases), the workers'
presence (catalog.workers) and the marks of runs sent again (refresh.services). Celery keeps
its own connections to the same Redis.

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
