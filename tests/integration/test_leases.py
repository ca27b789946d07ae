"""The rewrite lease between a continuous table's MERGE micro-batches and compactions
(runtime/leases.py), on the test run's real Redis: held as long as its holder works, freed
soon after a holder dies without releasing it."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

from django.conf import settings

from runtime import leases

TABLE = 987_654  # no table has this id; the lease is only a Redis key


def _hold_forever(redis_url: str, ready) -> None:  # pragma: no cover - runs in a child
    settings.REDIS_URL = redis_url
    with leases.rewriting(TABLE, wait=5):  # the hold writers use
        ready.set()
        time.sleep(3600)


def test_a_lease_outlives_its_hold_while_its_holder_still_works():
    with leases.rewriting(TABLE, hold=1.5) as taken:
        assert taken
        time.sleep(2.5)  # longer than the hold: the renewal keeps it
        with leases.rewriting(TABLE, wait=0.5, hold=1.5) as second:
            assert not second
    with leases.rewriting(TABLE, wait=0.5) as after:
        assert after, "released when the block ended"


def test_a_lease_whose_holder_was_sigkilled_frees_within_its_hold():
    ready = multiprocessing.get_context("fork").Event()
    child = multiprocessing.get_context("fork").Process(
        target=_hold_forever, args=(settings.REDIS_URL, ready)
    )
    child.start()
    try:
        assert ready.wait(30)
        with leases.rewriting(TABLE, wait=0.3) as taken:
            assert not taken, "the child holds it"
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        started = time.monotonic()
        with leases.rewriting(TABLE, wait=30) as taken:
            assert taken
            # A restarted stream's next MERGE waits this long, not a compaction's time.
            assert time.monotonic() - started < 20.0
    finally:
        if child.is_alive():
            child.kill()
