"""Streaming hosts claiming one table at the same moment, on PostgreSQL's row-level
concurrency (SQLite serializes every writer; `make test` runs this on PostgreSQL): the
conditional UPDATE has exactly one winner each time, whether the table is free or its
holder's lease just expired."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from catalog import services
from refresh import stream_hosts
from refresh.models import MaterializedTable

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

HOSTS = 8
ROUNDS = 10
SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}


def claim_at_once(hosts: list, mt_id: int) -> list[int]:
    """Every host claims table `mt_id` at the same moment (a thread each); the winners."""
    won: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(len(hosts))

    def claim(n: int) -> None:
        try:
            start.wait()
            if stream_hosts.claim(hosts[n], mt_id):
                with lock:
                    won.append(n)
        finally:
            connection.close()

    threads = [threading.Thread(target=claim, args=(n,)) for n in range(len(hosts))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return won


@pytest.fixture
def postgres_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("row-level concurrency is checked on PostgreSQL (make test runs it there)")


def test_hosts_claiming_one_table_at_once_never_both_hold_it(postgres_only, warehouse):
    services.create_namespace(name="race")
    table = services.create_table(namespace="race", name="t", schema=SCHEMA).obj
    mt = MaterializedTable.objects.create(
        table=table,
        query="SELECT id FROM race.s",
        freshness_value=5,
        freshness_unit="SECOND",
        refresh_mode="CONTINUOUS",
        state="ACTIVATED",
    )
    hosts = [stream_hosts.register(f"h{n}:{n}") for n in range(HOSTS)]
    for round_ in range(ROUNDS):
        if round_ % 2:
            # The holder went silent: its lease has just ended.
            MaterializedTable.objects.filter(pk=mt.pk).update(
                stream_lease_until=timezone.now() - timedelta(seconds=1)
            )
        else:
            MaterializedTable.objects.filter(pk=mt.pk).update(
                stream_host=None, stream_host_since=None, stream_lease_until=None
            )
        won = claim_at_once(hosts, mt.pk)
        holder = MaterializedTable.objects.get(pk=mt.pk).stream_host_id
        assert len(won) == 1, (round_, won)
        assert holder == hosts[won[0]].pk
