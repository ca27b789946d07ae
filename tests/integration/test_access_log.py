"""The recorder of access events (catalog.access_log) with its background flusher writing to
the database (catalog.access_events' writer): rows arrive, from many threads at once, and a
full queue drops its oldest events and counts them. Run on SQLite and on PostgreSQL (the
flusher's thread has a connection of its own: these tests commit)."""

from __future__ import annotations

import io
import logging
import threading

import pytest
from django.db import connections
from prometheus_client import REGISTRY

from catalog import access_events, access_log
from catalog.models import AccessEvent
from infra.metrics import ACCESS_EVENTS_DROPPED
from tests.waiting import eventually

pytestmark = pytest.mark.django_db(transaction=True)


def event(name: str) -> dict:
    return {
        "at": access_log.now(),
        "actor": "ana",
        "actor_id": None,
        "credential": "session",
        "channel": "api",
        "action": "preview",
        "object_type": "table",
        "object": name,
        "object_uuid": None,
        "tables": None,
        "outcome": "allowed",
        "status": 200,
        "reason": "",
    }


def recorder(**options) -> access_log.Recorder:
    return access_log.Recorder(
        access_events._insert,
        on_drop=ACCESS_EVENTS_DROPPED.inc,
        on_thread_exit=connections.close_all,
        **options,
    )


def dropped_so_far() -> float:
    return REGISTRY.get_sample_value("lakeview_access_events_dropped_total") or 0.0


def test_events_reach_the_database_from_the_flusher_without_a_flush_by_the_caller():
    flusher = recorder(interval=0.05)
    try:
        for index in range(3):
            flusher.record(event(f"sales.t{index}"))
        eventually(lambda: AccessEvent.objects.count() == 3, what="the rows", timeout=10)
    finally:
        flusher.stop()
    assert sorted(AccessEvent.objects.values_list("object_name", flat=True)) == [
        "sales.t0",
        "sales.t1",
        "sales.t2",
    ]


def test_many_threads_recording_at_once_lose_nothing():
    flusher = recorder(interval=0.02, batch=25, capacity=100_000)
    threads = [
        threading.Thread(
            target=lambda n=n: [flusher.record(event(f"t{n}.e{i}")) for i in range(100)]
        )
        for n in range(8)
    ]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            thread.join()
    finally:
        flusher.stop()
    assert flusher.dropped == 0
    assert AccessEvent.objects.count() == 800
    assert AccessEvent.objects.values("object_name").distinct().count() == 800


def test_an_event_repeated_within_a_flush_is_one_row_with_its_count_and_first_time(
    monkeypatch,
):
    lines: list[str] = []
    monkeypatch.setattr(access_log, "log", lambda text: lines.extend(text.split("\n")))
    flusher = recorder(interval=60, capacity=1000)  # flushed here, by the test
    first = event("sales.orders")
    flusher.record(first)
    for _ in range(4):
        flusher.record(event("sales.orders"))
    flusher.record(event("sales.items"))
    flusher.record(event("sales.orders") | {"outcome": "refused", "status": 403})
    last = event("sales.orders")
    flusher.record(last)
    assert flusher.flush() == 8
    flusher.stop()
    rows = {(row.object_name, row.outcome): row for row in AccessEvent.objects.order_by("id")}
    assert {key: row.count for key, row in rows.items()} == {
        ("sales.orders", "allowed"): 6,
        ("sales.items", "allowed"): 1,
        ("sales.orders", "refused"): 1,
    }
    repeated = rows[("sales.orders", "allowed")]
    assert (repeated.first_occurred_at, repeated.occurred_at) == (
        access_log.moment(first["at"]),
        access_log.moment(last["at"]),
    )
    assert rows[("sales.items", "allowed")].first_occurred_at is None
    # The SIEM's copy has every one of them, a line each.
    assert len(lines) == 8 and lines[0] == access_log.line(first)


def test_a_full_queue_drops_its_oldest_events_and_counts_them(caplog):
    # The flusher waits a minute and is never woken by a batch: the queue only grows.
    flusher = recorder(interval=60, batch=10**6, capacity=10)
    before = dropped_so_far()
    written = io.StringIO()
    handler = logging.StreamHandler(written)
    access_log.LOGGER.addHandler(handler)
    try:
        with caplog.at_level(logging.INFO):
            for index in range(25):
                flusher.record(event(f"e{index:02d}"))
        assert (flusher.dropped, flusher.pending()) == (15, 10)
    finally:
        flusher.stop()
        access_log.LOGGER.removeHandler(handler)
    assert dropped_so_far() - before == 15
    assert any("access events dropped" in r.getMessage() for r in caplog.records)
    # Every event's log line was written, the dropped ones' too.
    assert len(written.getvalue().splitlines()) == 25
    kept = sorted(AccessEvent.objects.values_list("object_name", flat=True))
    assert kept == [f"e{index:02d}" for index in range(15, 25)]


def test_a_batch_the_database_refuses_is_counted_as_dropped_not_raised():
    def refuse(events):
        raise RuntimeError("the database is down")

    flusher = access_log.Recorder(refuse, interval=0)
    flusher.record(event("sales.t"))
    assert flusher.dropped == 1
