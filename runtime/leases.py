"""Turns between a table's row-level writers that Iceberg's optimistic commits cannot
reconcile: a continuous table's MERGE micro-batch (it adds delete files naming the table's
data files) and a compaction of the same table (it replaces those data files). Whichever
commits second fails; a MERGE that loses is run again (refresh.spark.stream_queries), but a
compaction that loses to a micro-batch every few seconds would never win. So both take a
short lease on the table in Redis and take turns: a micro-batch waits out a compaction
(its lag grows by the compaction's few seconds), never the other way round for long.

The lease is advisory and bounded: it expires `hold` seconds after its holder last renewed
it (a thread renews it every `hold / 3` while the block runs, however long a compaction
takes), so a holder that dies, even SIGKILLed mid-MERGE, frees the table within `hold`
seconds, not after the longest compaction's time. With Redis unreachable writers go ahead
without it (Iceberg's checks still keep the table exact; only a compaction may fail and be
tried at the next sweep)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from infra.broker import redis_client

logger = logging.getLogger(__name__)


@contextmanager
def rewriting(table_id: int, *, wait: float = 120.0, hold: float = 15.0) -> Iterator[bool]:
    """Hold table `table_id`'s rewrite lease for the block (waiting up to `wait` seconds;
    yields whether it was taken), renewed while the block runs."""
    import redis

    # Not thread-local: the renewing thread must see the holder's token.
    lock = redis_client(timeout=5).lock(
        f"lakeview:rewrite-lease:{table_id}",
        timeout=hold,
        blocking_timeout=wait,
        thread_local=False,
    )
    try:
        taken = bool(lock.acquire())
    except redis.RedisError as error:
        logger.warning("No rewrite lease for table %s (%s): going ahead", table_id, error)
        taken = False
    done = threading.Event()
    renewer = threading.Thread(
        target=_renew, args=(lock, hold, done), name=f"lease-{table_id}", daemon=True
    )
    if taken:
        renewer.start()
    try:
        yield taken
    finally:
        if taken:
            done.set()
            renewer.join()
            # Expired meanwhile, or Redis gone: nothing to free.
            with suppress(redis.RedisError, redis.exceptions.LockError):
                lock.release()


def _renew(lock: Any, hold: float, done: threading.Event) -> None:
    """Reset the lease's expiry to `hold` every `hold / 3` seconds until `done`."""
    import redis

    while not done.wait(hold / 3):
        try:
            lock.reacquire()
        except (redis.RedisError, redis.exceptions.LockError) as error:
            # Lost (Redis restarted, or a pause longer than `hold`): the writer goes on
            # without it, as when Redis is unreachable at the start.
            logger.warning("Rewrite lease lost (%s)", error)
            return
