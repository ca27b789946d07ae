"""Streaming hosts' leases on continuous tables (refresh.stream_hosts), on the database
alone: claims are exclusive, an expired lease can be taken over, a host takes its fair
share and gives up the surplus when another joins, a clean stop frees its tables at once,
and the catalog refuses a micro-batch commit stamped by a host that no longer holds the
table. The Supervisor's lease pass runs here as the streaming process runs it (no query is
running, so no Spark is started)."""

from __future__ import annotations

from datetime import UTC, timedelta

import pytest
from django.utils import timezone

from catalog import services
from catalog.core.errors import CommitConflict
from refresh import stream_hosts
from refresh.core.streaming import StreamPlan
from refresh.models import MaterializedTable, StreamHost
from refresh.streams import hosting, rebuilds, starts
from refresh.streams.state import Running, desired_tables
from refresh.streams.supervisor import Supervisor
from tests.integration.snapshots import commit_snapshot

pytestmark = pytest.mark.django_db

#: A running query's plan where the test needs none (no static sources to follow).
NO_PLAN = StreamPlan("append", (), ())
SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}


def continuous_tables(count: int, *, state: str = "ACTIVATED") -> list[int]:
    services.create_namespace(name="live")
    ids = []
    for i in range(count):
        table = services.create_table(namespace="live", name=f"t{i}", schema=SCHEMA).obj
        mt = MaterializedTable.objects.create(
            table=table,
            query="SELECT id FROM live.s",
            freshness_value=5,
            freshness_unit="SECOND",
            refresh_mode="CONTINUOUS",
            state=state,
        )
        ids.append(mt.pk)
    return ids


def supervisor(name: str) -> Supervisor:
    """A streaming host's supervisor whose lease pass runs by hand (no heartbeat thread)."""
    host = Supervisor(config=None, host_name=name)  # type: ignore[arg-type]
    host.host = stream_hosts.register(name)
    return host


def lease_pass(host: Supervisor) -> set[int]:
    return hosting.assign(host, host.host, desired_tables())


def silence(host: StreamHost, *, seconds: float = 3600) -> None:
    """The host stopped beating `seconds` ago (SIGKILL): its beat and its leases are old."""
    past = timezone.now() - timedelta(seconds=seconds)
    StreamHost.objects.filter(pk=host.pk).update(heartbeat_at=past)
    MaterializedTable.objects.filter(stream_host=host).update(stream_lease_until=past)


def holders() -> dict[int, str | None]:
    return dict(MaterializedTable.objects.values_list("pk", "stream_host__name"))


def test_a_table_held_by_one_host_cannot_be_claimed_by_another_until_its_lease_expires():
    [mt_id] = continuous_tables(1)
    a, b = stream_hosts.register("a:1"), stream_hosts.register("b:2")

    assert stream_hosts.claim(a, mt_id)
    assert not stream_hosts.claim(b, mt_id)
    assert stream_hosts.claim(a, mt_id), "the holder keeps (renews) its own lease"
    assert holders() == {mt_id: "a:1"}

    silence(a)
    assert not stream_hosts.holds(a.pk, mt_id), "an expired lease is no longer held"
    assert stream_hosts.renew(a, mt_id), "nobody claimed it yet: a's micro-batch may commit"
    silence(a)
    assert stream_hosts.claim(b, mt_id)
    assert not stream_hosts.claim(a, mt_id), "the old holder cannot take it back"
    assert not stream_hosts.renew(a, mt_id), "nor commit a micro-batch"
    assert holders() == {mt_id: "b:2"}
    assert stream_hosts.holds(b.pk, mt_id)


def test_a_takeover_starts_the_since_time_again_and_a_renewal_keeps_it():
    [mt_id] = continuous_tables(1)
    a, b = stream_hosts.register("a:1"), stream_hosts.register("b:2")
    stream_hosts.claim(a, mt_id)
    first = MaterializedTable.objects.get(pk=mt_id)

    assert stream_hosts.beat(a) == {mt_id}
    renewed = MaterializedTable.objects.get(pk=mt_id)
    assert renewed.stream_host_since == first.stream_host_since
    assert renewed.stream_lease_until >= first.stream_lease_until

    MaterializedTable.objects.filter(pk=mt_id).update(
        stream_host_since=timezone.now() - timedelta(hours=2)
    )
    silence(a)
    stream_hosts.claim(b, mt_id)
    taken = MaterializedTable.objects.get(pk=mt_id)
    assert taken.stream_host_since > timezone.now() - timedelta(minutes=5)
    assert stream_hosts.beat(a) == set(), "the silenced host's beat renews nothing of b's"


def test_a_lease_lasts_the_configured_seconds_and_a_host_holds_only_with_time_to_spare(settings):
    settings.STREAM_LEASE_SECONDS = 6
    [mt_id] = continuous_tables(1)
    a = stream_hosts.register("a:1")
    stream_hosts.claim(a, mt_id)
    until = MaterializedTable.objects.get(pk=mt_id).stream_lease_until
    assert timedelta(seconds=4) < until - timezone.now() <= timedelta(seconds=6.5)
    assert stream_hosts.holds(a.pk, mt_id)
    # Two seconds left: less than a third of the lease to land a commit in.
    MaterializedTable.objects.filter(pk=mt_id).update(
        stream_lease_until=timezone.now() + timedelta(seconds=1.5)
    )
    assert not stream_hosts.holds(a.pk, mt_id)


def test_hosts_take_at_most_their_fair_share_and_the_first_gives_up_the_surplus_to_a_newcomer():
    ids = continuous_tables(6)
    a = supervisor("a:1")
    assert lease_pass(a) == set(ids), "alone, a host takes every active table"

    b = supervisor("b:2")
    assert lease_pass(b) == set(), "every table is held: the newcomer waits"
    kept = lease_pass(a)
    assert len(kept) == 3, "two live hosts: a keeps ceil(6 / 2)"
    taken = lease_pass(b)
    assert taken == set(ids) - kept
    assert lease_pass(a) == kept and lease_pass(b) == taken, "stable once balanced"

    c = supervisor("c:3")
    lease_pass(a), lease_pass(b)
    assert len(lease_pass(c)) == 2
    counts = sorted(list(holders().values()).count(name) for name in ("a:1", "b:2", "c:3"))
    assert counts == [2, 2, 2]
    assert None not in holders().values()


def test_the_tables_of_a_host_that_died_are_taken_over_once_its_leases_expire():
    ids = continuous_tables(6)
    a, b = supervisor("a:1"), supervisor("b:2")
    lease_pass(a), lease_pass(b), lease_pass(a), lease_pass(b)
    of_a = {mt_id for mt_id, name in holders().items() if name == "a:1"}
    assert len(of_a) == 3

    assert lease_pass(b) == set(ids) - of_a, "a's leases still run: b takes nothing of it"
    silence(a.host)
    assert stream_hosts.live_hosts() == 1
    assert lease_pass(b) == set(ids), "a silent longer than its leases: b takes its tables"
    assert set(holders().values()) == {"b:2"}


def test_a_host_looks_again_as_another_host_s_lease_ends_rather_than_at_its_next_pass(
    settings, monkeypatch
):
    settings.STREAM_LEASE_SECONDS = 6
    ids = continuous_tables(2)
    a, b = supervisor("a:1"), supervisor("b:2")
    lease_pass(a), lease_pass(b)
    assert stream_hosts.next_expiry(b.host, ids) == pytest.approx(6, abs=1), "a's lease ends"
    assert stream_hosts.next_expiry(a.host, ids) == pytest.approx(6, abs=1), "b's lease ends"
    assert stream_hosts.next_expiry(a.host, []) is None

    # a stopped beating 5 s ago: its lease ends in about a second, and b's pass comes then
    # (not after its poll interval of 2 s).
    MaterializedTable.objects.filter(stream_host=a.host).update(
        stream_lease_until=timezone.now() + timedelta(seconds=1)
    )
    # The pass's leases only: no Spark here.
    monkeypatch.setattr(starts, "start_all", lambda state, tables: None)
    b.sync_once()
    assert 0.5 < hosting.pause(b) < 1.2
    silence(a.host)
    assert stream_hosts.next_expiry(b.host, ids) is None, "an ended lease is the pass's to take"
    b.sync_once()
    assert hosting.pause(b) == b.poll_seconds
    assert set(holders().values()) == {"b:2"}


def test_a_host_that_stops_cleanly_frees_its_tables_at_once():
    ids = continuous_tables(4)
    a, b = supervisor("a:1"), supervisor("b:2")
    lease_pass(a), lease_pass(b), lease_pass(a), lease_pass(b)
    hosting.leave(a)
    assert not StreamHost.objects.filter(pk=a.host.pk).exists()
    assert lease_pass(b) == set(ids)


def test_tables_no_longer_active_are_released_and_dead_hosts_forgotten():
    ids = continuous_tables(3)
    a = supervisor("a:1")
    lease_pass(a)
    MaterializedTable.objects.filter(pk=ids[0]).update(state="SUSPENDED")
    assert lease_pass(a) == set(ids[1:])
    assert holders()[ids[0]] is None

    silence(a.host, seconds=10 * 3600)
    assert stream_hosts.forget_dead() == 1
    assert set(holders().values()) == {None}, "a forgotten host's tables are free"


def test_the_catalog_refuses_a_micro_batch_commit_from_a_host_that_lost_the_lease():
    [mt_id] = continuous_tables(1)
    a, b = stream_hosts.register("a:1"), stream_hosts.register("b:2")
    stream_hosts.claim(a, mt_id)
    stamp = {stream_hosts.HOST_PROPERTY: str(a.token)}
    commit_snapshot("live", "t0", rows=5, summary=stamp)

    silence(a)
    with pytest.raises(CommitConflict, match="no longer holds"):
        commit_snapshot("live", "t0", rows=5, summary=stamp)
    stream_hosts.claim(b, mt_id)
    with pytest.raises(CommitConflict, match="no longer holds"):
        commit_snapshot("live", "t0", rows=5, summary=stamp)

    commit_snapshot("live", "t0", rows=5, summary={stream_hosts.HOST_PROPERTY: str(b.token)})
    # A commit without a host's stamp (any engine's, a refresh's) is not the guard's.
    commit_snapshot("live", "t0", rows=5)
    table = MaterializedTable.objects.get(pk=mt_id).table
    assert table.snapshots.count() == 3, "the two refused commits left nothing"


def test_an_ordinary_table_s_commit_is_stored_as_sent_whatever_host_stamp_its_summary_has():
    services.create_namespace(name="plain")
    table = services.create_table(namespace="plain", name="t", schema=SCHEMA).obj
    stamp = {stream_hosts.HOST_PROPERTY: "not-a-host"}

    commit_snapshot("plain", "t", rows=5, summary=stamp)
    commit_snapshot("plain", "t", rows=5, summary=stamp)

    assert table.snapshots.count() == 2


def test_fair_share_is_the_ceiling_of_tables_over_live_hosts():
    assert stream_hosts.fair_share(6, 2) == 3
    assert stream_hosts.fair_share(7, 3) == 3
    assert stream_hosts.fair_share(1, 4) == 1
    assert stream_hosts.fair_share(0, 2) == 0
    assert stream_hosts.fair_share(5, 0) == 5


def test_the_table_page_the_api_and_monitoring_say_which_host_streams_a_table_since_when(
    client, viewer
):
    from rest_framework.test import APIClient

    [mt_id] = continuous_tables(1)
    a = stream_hosts.register("node-7:4242")
    client.force_login(viewer)
    api = APIClient()
    api.force_authenticate(viewer)

    page = client.get("/namespaces/live/materialized-tables/t0/").content.decode()
    assert "no streaming host holds it" in page
    assert api.get("/api/namespaces/live/materialized-tables/t0/").json()["stream_host"] is None

    stream_hosts.claim(a, mt_id)
    mt = MaterializedTable.objects.get(pk=mt_id)
    since = mt.stream_host_since.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
    page = client.get("/namespaces/live/materialized-tables/t0/").content.decode()
    assert f"Streamed by <code>node-7:4242</code> since {since} UTC" in page
    detail = api.get("/api/namespaces/live/materialized-tables/t0/").json()["stream_host"]
    assert detail["name"] == "node-7:4242"
    assert detail["since"].startswith(since.replace(" ", "T"))
    assert detail["lease_until"] > detail["since"]

    monitoring = client.get("/monitoring/").content.decode()
    assert 'id="stream-hosts"' in monitoring and "<code>node-7:4242</code>" in monitoring
    assert '<span class="badge ok">live</span>' in monitoring


class FakeQuery:
    """A streaming query as the supervisor sees it (no Spark)."""

    def __init__(self) -> None:
        self.isActive = True
        self.status = {"isTriggerActive": False}
        self.stopped = 0

    def stop(self) -> None:
        self.isActive = False
        self.stopped += 1


def test_a_host_that_comes_back_after_a_takeover_stops_the_stream_it_lost_at_once():
    ids = continuous_tables(2)
    a, b = supervisor("a:1"), supervisor("b:2")
    lease_pass(a)
    queries = {mt_id: FakeQuery() for mt_id in ids}
    for mt_id, query in queries.items():
        a.running[mt_id] = Running(mt_id, query, (), "/nowhere", NO_PLAN)

    silence(a.host)  # paused longer than its leases
    assert lease_pass(b) == set(ids)
    # a's heartbeat thread wakes first: it renews nothing of b's.
    assert stream_hosts.beat(a.host) == set()
    assert not stream_hosts.renew(a.host, ids[0]), "a's next micro-batch may not commit"
    assert lease_pass(a) == set(), "two live hosts, every table held by b"
    assert a.running == {}
    assert [q.stopped for q in queries.values()] == [1, 1]
    assert set(holders().values()) == {"b:2"}


def test_a_host_above_its_share_stops_the_surplus_streams_before_releasing_them():
    ids = continuous_tables(4)
    a = supervisor("a:1")
    lease_pass(a)
    queries = {mt_id: FakeQuery() for mt_id in ids}
    for mt_id, query in queries.items():
        a.running[mt_id] = Running(mt_id, query, (), "/nowhere", NO_PLAN)
    supervisor("b:2")

    kept = lease_pass(a)
    assert len(kept) == 2 and set(a.running) == kept
    released = set(ids) - kept
    assert all(queries[m].stopped == 1 for m in released)
    assert all(queries[m].stopped == 0 and queries[m].isActive for m in kept)
    assert all(holders()[m] is None for m in released)


def test_the_stream_of_a_dropped_table_stops_and_its_checkpoints_go(warehouse):
    [mt_id] = continuous_tables(1)
    a = supervisor("a:1")
    lease_pass(a)
    mt = MaterializedTable.objects.get(pk=mt_id)
    checkpoint = warehouse / "live" / "t0.checkpoints" / "v1-1"
    checkpoint.mkdir(parents=True)
    query = FakeQuery()
    a.running[mt_id] = Running(mt_id, query, (), str(checkpoint), NO_PLAN)

    mt.delete()
    assert lease_pass(a) == set()
    assert a.running == {} and query.stopped == 1
    assert not checkpoint.parent.exists(), "a dropped table's checkpoints are deleted"


def test_operators_see_the_hosts_and_each_table_s_host_in_the_admin(admin_client):
    [mt_id] = continuous_tables(1)
    stream_hosts.claim(stream_hosts.register("node-9:77"), mt_id)
    for model in ("streamhost", "materializedtable"):
        response = admin_client.get(f"/admin/refresh/{model}/")
        assert response.status_code == 200
        assert "node-9:77" in response.content.decode(), model


def test_a_stream_restarts_from_the_checkpoint_its_manual_refresh_just_made(monkeypatch):
    """The pass reads the tables again after the refreshes it made: a stream started from the
    checkpoint read before them would resume the old one, which the refresh deletes."""
    from refresh.models import RefreshRun

    [mt_id] = continuous_tables(1)
    MaterializedTable.objects.filter(pk=mt_id).update(stream_checkpoint="/warehouse/old")
    mt = MaterializedTable.objects.get(pk=mt_id)
    RefreshRun.objects.create(
        materialized_table=mt, table_name=str(mt.table), trigger=RefreshRun.Trigger.MANUAL
    )
    a = supervisor("a:1")
    started: list[str] = []

    def recompute(state: Supervisor, run_id: int) -> None:  # what it leaves: a new checkpoint
        RefreshRun.objects.filter(pk=run_id).update(state=RefreshRun.State.SUCCEEDED)
        MaterializedTable.objects.filter(pk=mt_id).update(stream_checkpoint="/warehouse/new")

    monkeypatch.setattr(rebuilds, "recompute", recompute)
    monkeypatch.setattr(
        starts, "start", lambda state, table: started.append(table.stream_checkpoint)
    )
    a.sync_once()
    assert started == ["/warehouse/new"]


def test_the_heartbeat_thread_closes_its_database_connection_when_the_host_stops(
    settings, monkeypatch
):
    """The heartbeat runs on a thread of its own, with a database connection of its own;
    a stop ends the thread and closes that connection rather than leaving it to the server."""
    from django.db import connections

    settings.STREAM_LEASE_SECONDS = 0.3  # a beat every 0.1 s
    host = Supervisor(config=None, host_name="a:1")  # type: ignore[arg-type]
    closed: list[bool] = []

    def beat(_host: StreamHost) -> None:
        own = connections["default"]  # this thread's, not the test's
        own.ensure_connection()
        close = own.close

        def closing() -> None:  # SQLite's in-memory test database ignores a close
            closed.append(own is connections["default"])
            close()

        own.close = closing
        host.stopping.set()

    monkeypatch.setattr(stream_hosts, "beat", beat)
    monkeypatch.setattr(stream_hosts, "forget_dead", lambda: 0)
    hosting.join(host)
    host.beating.join(timeout=10)

    assert not host.beating.is_alive()
    assert closed == [True], "the thread ended with its connection still open"
