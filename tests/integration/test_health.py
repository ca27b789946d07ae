"""/healthz and /readyz, as a load balancer, compose or Kubernetes asks them: without
signing in, by any host name, never a login redirect or a CSRF page, and never a secret in
the answer."""

from __future__ import annotations

import pytest
from django.test import Client
from django.test.utils import CaptureQueriesContext

from catalog import services, workers
from infra.broker import redis_client
from refresh import stream_hosts
from refresh.models import MaterializedTable
from webapp import health

pytestmark = pytest.mark.django_db

CHECKS = ["database", "broker", "workers", "streams"]


@pytest.fixture
def probe() -> Client:
    """A client with no session, asking by a host name ALLOWED_HOSTS does not list (a
    Kubernetes probe asks by the pod's IP address)."""
    return Client(HTTP_HOST="10.1.2.3:8000", enforce_csrf_checks=True)


def test_healthz_answers_without_touching_the_database(probe) -> None:
    from django.db import connection

    with CaptureQueriesContext(connection) as queries:
        response = probe.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert response["Cache-Control"] == "no-store"
    assert len(queries) == 0


def test_readyz_names_every_check_with_its_time_and_fails_without_a_worker(probe, caplog) -> None:
    with caplog.at_level("INFO", logger="django.request"):
        response = probe.get("/readyz")
    assert response.status_code == 503
    # Polled every few seconds while a worker is down: no server error in the log each time.
    assert not [r for r in caplog.records if r.name == "django.request"]
    body = response.json()
    assert body["status"] == "failing"
    assert list(body["checks"]) == CHECKS
    for name, check in body["checks"].items():
        assert isinstance(check["ms"], float) and check["ms"] >= 0, name
    assert body["checks"]["database"] == {"ok": True, "ms": body["checks"]["database"]["ms"]}
    assert body["checks"]["broker"]["ok"] is True
    assert body["checks"]["workers"]["ok"] is False
    assert "no worker" in body["checks"]["workers"]["error"]
    # Nothing continuous: the streams need no host.
    assert body["checks"]["streams"]["ok"] is True


def test_readyz_answers_200_once_a_worker_is_alive(probe) -> None:
    workers.beat("w@test:1")
    response = probe.get("/readyz")
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "ok"
    assert all(check["ok"] for check in response.json()["checks"].values())


def test_active_continuous_tables_need_a_live_streaming_host(probe) -> None:
    workers.beat("w@test:1")
    services.create_namespace(name="live")
    schema = {"type": "struct", "schema-id": 0, "fields": []}
    table = services.create_table(namespace="live", name="t", schema=schema).obj
    mt = MaterializedTable.objects.create(
        table=table,
        query="SELECT 1 AS one",
        freshness_value=5,
        freshness_unit="SECOND",
        refresh_mode="CONTINUOUS",
        state="ACTIVATED",
    )
    response = probe.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["streams"] == {
        "ok": False,
        "ms": response.json()["checks"]["streams"]["ms"],
        "error": "continuous tables are active and no streaming host is live",
    }
    host = stream_hosts.register("streams:1")
    assert probe.get("/readyz").status_code == 200
    # A suspended table needs no host.
    stream_hosts.leave(host)
    MaterializedTable.objects.filter(pk=mt.pk).update(state="SUSPENDED")
    assert probe.get("/readyz").status_code == 200


def test_a_broker_that_cannot_be_reached_fails_readiness_without_its_address(
    probe, settings
) -> None:
    workers.beat("w@test:1")
    settings.REDIS_URL = "redis://:broker-secret-1@127.0.0.1:1/0"
    redis_client.cache_clear()
    try:
        response = probe.get("/readyz")
    finally:
        redis_client.cache_clear()
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["broker"]["ok"] is False
    assert checks["broker"]["error"].startswith("failed (")
    assert checks["workers"]["ok"] is False  # heartbeats live in the broker
    assert checks["database"]["ok"] is True
    assert b"broker-secret-1" not in response.content and b"127.0.0.1" not in response.content


def test_a_failing_check_says_which_error_but_not_its_text(probe, monkeypatch) -> None:
    from django.db import OperationalError

    def database() -> None:
        raise OperationalError('connection to "db" failed for user "lakeview" password=s3cret')

    monkeypatch.setitem(health.CHECKS, "database", database)
    response = probe.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["database"]["error"] == "failed (OperationalError)"
    assert b"s3cret" not in response.content and b"lakeview" not in response.content


def test_probes_meet_no_login_csrf_or_host_check(probe) -> None:
    # The same host name is refused on any other path (ALLOWED_HOSTS holds): a 400 page.
    refused = Client(HTTP_HOST="10.1.2.3:8000", raise_request_exception=False).get("/")
    assert refused.status_code == 400 and b"Bad request" in refused.content
    assert probe.head("/healthz").status_code == 200
    response = probe.post("/healthz")
    assert response.status_code == 405 and response["Allow"] == "GET, HEAD"
    # A page behind login redirects; the health endpoints do not.
    client = Client(enforce_csrf_checks=True)
    assert client.get("/").status_code == 302
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code in (200, 503)
    assert "sessionid" not in client.cookies and "csrftoken" not in client.cookies
