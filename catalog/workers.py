"""Which workers are alive, known without asking them: every Celery worker process says so
in Redis every `WORKER_HEARTBEAT_SECONDS` from a thread of its own (a sorted set of worker
names scored by when each last said it), and the web side reads the set. A worker silent
for `WORKER_SILENT_AFTER_SECONDS` counts as gone, so a request that needs Spark is answered
503 at once instead of waiting for nobody.

Redis, not the database: a heartbeat must never wait behind a long write transaction (on
SQLite, every writer waits for one lock), and Redis is the broker anyway: with it down,
nothing could be queued."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from celery.signals import worker_ready, worker_shutdown
from django.conf import settings

from infra.broker import redis_client

logger = logging.getLogger(__name__)

_stop = threading.Event()


def name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _key() -> str:
    return f"{settings.WORKERS_KEY}:seen"


def beat(worker: str | None = None, *, at: float | None = None) -> None:
    """Say this process (or `worker`) is alive now (or `at`, seconds since the epoch)."""
    moment = time.time() if at is None else at
    member = worker or name()
    pipe = redis_client().pipeline()
    pipe.zadd(_key(), {member: moment})
    pipe.hsetnx(f"{settings.WORKERS_KEY}:started", member, moment)
    pipe.execute()


def forget(worker: str | None = None) -> None:
    member = worker or name()
    pipe = redis_client().pipeline()
    pipe.zrem(_key(), member)
    pipe.hdel(f"{settings.WORKERS_KEY}:started", member)
    pipe.hdel(_busy_key(), member)
    pipe.execute()


# -- several workers: work goes to an idle one --------------------------------------------
#
# Each worker process has its own Spark (a driver; on a cluster, its own executors), so a
# worker already running a refresh or a job is not where the next one should go while
# another sits idle: Spark would run the two side by side on one driver's cores. Celery
# gives a message to whichever worker asks first, busy or not. So a worker that receives a
# refresh or a Spark job while it runs one, and sees another alive worker running nothing,
# puts the message back on the queue (at most MAX_HOPS times, then runs it itself): the
# idle worker, blocked waiting on the queue for longer, is handed it next by Redis.
# Claims stay conditional updates, so a message handed on twice still runs once.

#: How many times one message may be handed on before a busy worker runs it anyway.
MAX_HOPS = 3

_running = 0
_running_lock = threading.Lock()


def _busy_key() -> str:
    return f"{settings.WORKERS_KEY}:busy"


def _publish(count: int, worker: str | None = None) -> None:
    try:
        redis_client().hset(_busy_key(), worker or name(), count)
    except Exception:  # noqa: BLE001 - then others take this worker as idle: a wasted hop
        logger.warning("Redis cannot be reached to say how busy this worker is")


@contextlib.contextmanager
def occupied() -> Iterator[None]:
    """This process runs a refresh or a Spark job while the block runs (said in Redis)."""
    global _running
    with _running_lock:
        _running += 1
        count = _running
    _publish(count)
    try:
        yield
    finally:
        with _running_lock:
            _running -= 1
            count = _running
        _publish(count)


def running_here() -> int:
    return _running


def idle_elsewhere(*, me: str | None = None) -> bool:
    """Whether another worker that said it is alive runs nothing now."""
    me = me or name()
    since = time.time() - settings.WORKER_SILENT_AFTER_SECONDS
    client = redis_client()
    alive = [member.decode() for member in client.zrangebyscore(_key(), since, "+inf")]
    busy = {key.decode(): int(value) for key, value in client.hgetall(_busy_key()).items()}
    return any(member != me and busy.get(member, 0) == 0 for member in alive)


def hand_over(hops: int) -> bool:
    """Whether a message that reached this worker should go back to the queue for an idle
    worker: this one runs something, another runs nothing, and it was not handed on
    MAX_HOPS times already. False when Redis cannot be asked (then it runs here)."""
    if hops >= MAX_HOPS or running_here() == 0:
        return False
    try:
        return idle_elsewhere()
    except Exception:  # noqa: BLE001 - no answer: run it here rather than lose it
        logger.warning("Redis cannot be reached to find an idle worker")
        return False


def alive() -> bool:
    """Whether some worker said it was alive recently (False when Redis cannot be asked:
    nothing could be queued then either)."""
    since = time.time() - settings.WORKER_SILENT_AFTER_SECONDS
    try:
        return bool(redis_client().zcount(_key(), since, "+inf"))
    except Exception:  # noqa: BLE001 - the broker is down: no worker can take anything
        logger.warning("Redis cannot be reached to see which workers are alive")
        return False


def listed() -> list[dict[str, Any]]:
    """Every worker that said it was alive in the last hour: name, started_at, seen_at,
    alive. Older entries are dropped (so the set stays as small as the fleet)."""
    now = time.time()
    client = redis_client()
    client.zremrangebyscore(_key(), "-inf", now - 3600)
    seen = {
        member.decode(): score for member, score in client.zrange(_key(), 0, -1, withscores=True)
    }
    started_key = f"{settings.WORKERS_KEY}:started"
    started = {key.decode(): float(value) for key, value in client.hgetall(started_key).items()}
    gone = [member for member in started if member not in seen]
    if gone:
        client.hdel(started_key, *gone)
    silent = settings.WORKER_SILENT_AFTER_SECONDS
    return [
        {
            "name": member,
            "started_at": _iso(started.get(member, at)),
            "seen_at": _iso(at),
            "alive": at >= now - silent,
        }
        for member, at in seen.items()
    ]


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def _beating() -> None:
    while not _stop.is_set():
        try:
            beat()
        except Exception:  # noqa: BLE001 - the next beat tries again
            logger.exception("The worker's heartbeat could not be written")
        _stop.wait(settings.WORKER_HEARTBEAT_SECONDS)


@worker_ready.connect
def _start(**_: object) -> None:
    threading.Thread(target=_beating, name="worker-heartbeat", daemon=True).start()


@worker_shutdown.connect
def _finish(**_: object) -> None:
    _stop.set()
    try:
        forget()
    except Exception:  # noqa: BLE001 - a stale entry expires by itself
        logger.exception("The worker's heartbeat could not be removed")
