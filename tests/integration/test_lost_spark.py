"""A worker's Spark JVM that exits under a run (an OutOfMemoryError ends it: in local mode
the executors are the driver) is said as such, not as "Connection refused"; the restart
itself is tests/spark/test_mt_end_to_end.py's (a SIGKILLed JVM, then a refresh)."""

from __future__ import annotations

from contextlib import nullcontext
from types import SimpleNamespace

import pytest

from catalog.core.errors import Unavailable
from refresh import analysis
from runtime import engine, running


@pytest.fixture
def jvm_exited(monkeypatch):
    monkeypatch.setattr(engine, "_session", object())  # a session was running
    monkeypatch.setattr(engine, "jvm_gone", lambda: True)
    monkeypatch.setattr(engine, "job_group", lambda group, description: nullcontext())


def test_a_run_whose_jvm_exited_says_so_instead_of_connection_refused(jvm_exited):
    said = running.describe(ConnectionRefusedError(111, "Connection refused"))
    assert said.startswith("The worker's Spark stopped during this run (its JVM exited")
    assert "a new one starts with the next job" in said


def test_a_spark_job_whose_jvm_exited_is_unavailable_with_the_reason(jvm_exited):
    refused = ConnectionRefusedError(111, "Connection refused")
    with pytest.raises(Unavailable, match="stopped during this job"), analysis.spark_job("g", "x"):
        raise refused


def test_a_run_that_failed_with_its_jvm_alive_keeps_its_own_error(monkeypatch):
    monkeypatch.setattr(engine, "_session", object())
    monkeypatch.setattr(engine, "jvm_gone", lambda: False)
    ticks = iter(range(0, 10_000, 1))  # a clock a second on at each look: no real wait
    monkeypatch.setattr(engine, "time", SimpleNamespace(monotonic=lambda: next(ticks), sleep=print))
    said = running.describe(ConnectionRefusedError(111, "Connection refused"))
    assert "Connection refused" in said and "JVM" not in said


@pytest.mark.django_db  # a run session reads the names engines give the catalog
def test_a_session_made_on_a_jvm_replaced_meanwhile_is_not_kept_for_later_runs(monkeypatch):
    """Another thread starts a new JVM while this one makes a run's session on the old:
    that session is returned (its run fails saying the JVM exited) but never kept, or
    every later run of its namespace and settings would get a dead session."""
    old, new = object(), object()
    monkeypatch.setattr(engine, "_session", old)
    monkeypatch.setattr(engine, "_sessions", {})
    monkeypatch.setattr(engine, "spark", lambda: engine._session)
    made: list[object] = []

    def run_session(root, **_):
        engine._session = new  # the other thread's restart, while this session is made
        made.append(SimpleNamespace(root=root))
        return made[-1]

    monkeypatch.setattr(engine, "session_with", run_session)
    first = engine.run_session(namespace=["ns"])
    assert first.root is old and engine._sessions == {}
    # On the new JVM, a session is made and kept.
    second = engine.run_session(namespace=["ns"])
    assert second.root is new
    assert engine.run_session(namespace=["ns"]) is second
