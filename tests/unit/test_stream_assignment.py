"""The fair-share rule of streaming hosts (refresh.stream_hosts.assign), without a database:
what a host keeps, gives up and may claim in one pass."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from refresh.stream_hosts import assign, fair_share

T0 = datetime(2026, 11, 26, 8, 0, tzinfo=UTC)


def since(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def test_alone_a_host_may_claim_every_free_active_table():
    plan = assign(active=[1, 2, 3], held={}, live=1, free=[3, 1, 2])
    assert (plan.share, plan.keep, plan.release, plan.candidates) == (3, [], [], [1, 2, 3])


def test_when_a_host_joins_the_first_keeps_its_oldest_tables_and_gives_up_the_newest():
    held = {1: since(5), 2: since(0), 3: since(9), 4: since(1)}
    plan = assign(active=[1, 2, 3, 4], held=held, live=2, free=[])
    assert plan.share == 2
    assert plan.keep == [2, 4]
    assert sorted(plan.release) == [1, 3]
    assert plan.candidates == []


def test_tables_no_longer_active_are_given_up_whatever_the_share():
    plan = assign(active=[1], held={1: since(0), 2: since(0)}, live=1, free=[])
    assert (plan.keep, plan.release) == ([1], [2])


def test_a_host_never_counts_its_own_tables_as_candidates():
    plan = assign(active=[1, 2, 3, 4], held={2: since(0)}, live=2, free=[1, 2, 4])
    assert plan.keep == [2] and plan.candidates == [1, 4]


def test_the_share_is_the_ceiling_and_no_active_table_means_none():
    assert [fair_share(6, n) for n in (1, 2, 3, 4, 6, 7)] == [6, 3, 2, 2, 1, 1]
    assert fair_share(0, 3) == 0
    assert assign(active=[], held={5: since(0)}, live=1, free=[]).release == [5]
