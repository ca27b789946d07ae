"""Waiting for a job's news: a client that asks for a job's rows with `wait` is answered
when there is news (its query stored its first rows, or it ended) instead of asking again
and again. The worker publishes on the job's channel (`announce`), and the waiting
request, subscribed, wakes (`wait_for_news`)."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.conf import settings

from infra import broker

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: The longest a request waits for a job's news, in seconds: it holds a web thread.
MAX_WAIT_SECONDS = 5.0
#: A waiting request looks again this often without news (a news lost with Redis).
LOOK_AGAIN_SECONDS = 0.5


def _news_channel(job_id: int) -> str:
    return f"{settings.WORKERS_KEY}:job-news:{job_id}"


def announce(job_id: int) -> None:
    """Wake the requests waiting on the job (`wait_for_news`). Best effort: a waiter looks
    again on its own every LOOK_AGAIN_SECONDS."""
    import redis

    try:
        broker.redis_client().publish(_news_channel(job_id), b"1")
    except redis.RedisError as error:
        logger.debug("Job %s's news not published: %s", job_id, error)


def wait_for_news(
    job_id: int, *, user: Any, seconds: float, look: Callable[[], tuple[T, bool]]
) -> T:
    """What `look()` answers once it says it is done (its second value), or when `seconds`
    (at most MAX_WAIT_SECONDS) have passed: `look` runs first, then each time the job has
    news. A user waits in at most QUERIES_PER_USER + 1 requests at a time (each holds a web
    thread); beyond, and when Redis cannot be reached, the answer is `look()`'s at once."""
    import redis

    value, done = look()
    if done or seconds <= 0:
        return value
    client = broker.redis_client()
    waiting = f"{settings.WORKERS_KEY}:waiting:{getattr(user, 'pk', None)}"
    try:
        with client.pipeline() as pipe:
            count, _ = pipe.incr(waiting).expire(waiting, 60).execute()
    except redis.RedisError:
        return value
    pubsub = None
    try:
        if count > settings.QUERIES_PER_USER + 1:
            return value
        pubsub = client.pubsub(ignore_subscribe_messages=True)
        pubsub.subscribe(_news_channel(job_id))
        deadline = time.monotonic() + min(seconds, MAX_WAIT_SECONDS)
        value, done = look()  # news sent from the subscription on wakes this request
        while not done and (left := deadline - time.monotonic()) > 0:
            pubsub.get_message(timeout=min(left, LOOK_AGAIN_SECONDS))
            value, done = look()
        return value
    except redis.RedisError:
        return value
    finally:
        with contextlib.suppress(redis.RedisError):
            if pubsub is not None:
                pubsub.close()
            client.decr(waiting)
