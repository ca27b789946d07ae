"""What a web process would otherwise load during its first requests, loaded when it starts
(gunicorn's post_worker_init, webapp/gunicorn.conf.py).

Django imports the URLconf and builds its reverse lookups on the first request and the
first reverse(); Celery imports its result backend and opens its producer's connection on
the first task sent. Together that is about half a second of CPU in one request, holding
Python's lock: every other thread of that worker process waits behind it. Measured under a
flood of Spark-bound requests (tests/spark/test_abuse.py), a worker's first accepted job
made its neighbours' 429s take 0.8 s instead of 0.1 s."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def warm() -> None:
    """Load the URLconf with every namespace's reverse lookups, and Celery's backend and
    producer connection. A broker that cannot be reached is logged, not raised: the first
    task sent then connects (or fails saying why), as it would have without this."""
    from django.urls import get_resolver

    _populate(get_resolver())
    from celery import current_app

    try:
        current_app.backend  # noqa: B018 - the attribute imports and builds the backend
        with current_app.producer_or_acquire() as producer:
            producer.connection.ensure_connection(max_retries=0)
    except Exception as error:  # noqa: BLE001 - any broker failure: the first send says it
        log.warning("The task queue could not be reached at start: %s", error)


def _populate(resolver: object) -> None:
    resolver.reverse_dict  # type: ignore[attr-defined]  # noqa: B018 - builds the lookups
    for _prefix, included in resolver.namespace_dict.values():  # type: ignore[attr-defined]
        _populate(included)
