"""GET /metrics: Prometheus's text format with what operators graph and alert on (requests
by route, Iceberg commits and conflicts, refresh runs, each materialized table's lag, the
work in progress, live streaming hosts), only for the addresses and token allowed, and in
multiprocess mode the sum of every process's counts. No Spark: tables and runs are rows, as
tests/integration/test_monitoring.py makes them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from catalog import services
from catalog.core.errors import CommitConflict
from catalog.models import SparkJob
from infra import metrics
from maintenance.models import MaintenanceRun
from refresh import runs as refresh_runs
from refresh import stream_hosts
from refresh.models import RefreshRun
from tests.integration.test_monitoring import SCHEMA, materialized, refreshed

pytestmark = pytest.mark.django_db

REPO_ROOT = Path(__file__).resolve().parents[2]


def scrape(client: Client | None = None, **headers: str) -> dict[tuple[str, tuple], float]:
    """Every sample of a scrape from loopback: (name, sorted labels) -> value."""
    response = (client or Client()).get("/metrics", REMOTE_ADDR="127.0.0.1", **headers)
    assert response.status_code == 200, response.content[:500]
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    return samples(response.content.decode())


def samples(text: str) -> dict[tuple[str, tuple], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(found: dict, name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def test_a_scrape_names_the_route_of_a_request_made_before_it_never_its_path() -> None:
    before = scrape()
    client = Client()
    assert client.get("/login/").status_code == 200
    assert client.get("/api/namespaces/some-name-nobody-made/").status_code in (401, 403, 404)
    after = scrape()
    labels = {"view": "login", "method": "GET", "status": "2xx"}
    assert value(after, "lakeview_http_requests_total", **labels) == (
        value(before, "lakeview_http_requests_total", **labels) + 1
    )
    assert (
        value(after, "lakeview_http_request_duration_seconds_count", view="login", method="GET")
        >= 1
    )
    assert not any("some-name-nobody-made" in str(key) for key in after)


def test_a_commit_and_a_commit_conflict_count(django_capture_on_commit_callbacks) -> None:
    before = scrape()
    services.create_namespace(name="ns")
    with django_capture_on_commit_callbacks(execute=True):
        loaded = services.create_table(namespace="ns", name="t", schema=SCHEMA)
    with pytest.raises(CommitConflict):
        services.commit_table(
            namespace="ns",
            name="t",
            requirements=[
                {"type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000"}
            ],
            updates=[{"action": "set-properties", "updates": {"a": "b"}}],
        )
    assert loaded.obj is not None
    after = scrape()
    for name in ("lakeview_iceberg_commits_total", "lakeview_iceberg_commit_conflicts_total"):
        assert value(after, name, kind="table") == value(before, name, kind="table") + 1, name


def test_a_finished_refresh_run_counts_with_its_outcome_and_duration(
    django_capture_on_commit_callbacks,
) -> None:
    mt = materialized("ns", "daily")
    started = timezone.now() - timedelta(seconds=30)
    run = RefreshRun.objects.create(
        materialized_table=mt,
        table_name="ns.daily",
        trigger=RefreshRun.Trigger.MANUAL,
        action=RefreshRun.Action.FULL,
        state=RefreshRun.State.RUNNING,
        started_at=started,
    )
    labels = {"table": "ns.daily", "trigger": "MANUAL", "action": "FULL", "outcome": "FAILED"}
    before = scrape()
    with django_capture_on_commit_callbacks(execute=True):
        refresh_runs.finish(run, state=RefreshRun.State.FAILED, error="boom")
    after = scrape()
    assert value(after, "lakeview_refresh_runs_total", **labels) == 1
    histogram = {"trigger": "MANUAL", "action": "FULL", "outcome": "FAILED"}
    for part in ("count", "sum"):
        name = f"lakeview_refresh_run_duration_seconds_{part}"
        grown = value(after, name, **histogram) - value(before, name, **histogram)
        assert grown == (1 if part == "count" else pytest.approx(30, abs=5)), part


def test_a_refresh_run_rolled_back_with_its_transaction_is_not_counted(
    django_capture_on_commit_callbacks,
) -> None:
    mt = materialized("ns", "undone")
    run = RefreshRun.objects.create(
        materialized_table=mt, table_name="ns.undone", trigger="MANUAL", state="RUNNING"
    )
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        refresh_runs.finish(run, state=RefreshRun.State.SUCCEEDED)
    assert callbacks  # counted only when the outermost transaction commits
    runs = [key for key in scrape() if key[0].startswith("lakeview_refresh_run")]
    assert not [key for key in runs if ("table", "ns.undone") in key[1]]


def test_the_lag_of_each_materialized_table_is_read_at_scrape_time_against_its_freshness() -> None:
    late = materialized("ns", "late", freshness=(1, "HOUR"))
    refreshed(late, ago=timedelta(hours=2))
    materialized("ns", "never", freshness=(5, "MINUTE"))
    found = scrape()
    lag = value(found, "lakeview_materialized_table_lag_seconds", table="ns.late")
    assert lag == pytest.approx(7200, abs=60)
    assert value(found, "lakeview_materialized_table_freshness_seconds", table="ns.late") == 3600
    # A table with no data yet has a freshness and no lag.
    assert value(found, "lakeview_materialized_table_freshness_seconds", table="ns.never") == 300
    assert ("lakeview_materialized_table_lag_seconds", (("table", "ns.never"),)) not in found
    assert value(found, "lakeview_materialized_tables", state="ACTIVATED", mode="FULL") == 2


def test_work_in_progress_and_live_streaming_hosts_are_gauges() -> None:
    mt = materialized("ns", "busy")
    RefreshRun.objects.create(
        materialized_table=mt, table_name="ns.busy", trigger="SCHEDULED", state="QUEUED"
    )
    RefreshRun.objects.create(
        materialized_table=mt, table_name="ns.busy", trigger="MANUAL", state="RUNNING"
    )
    SparkJob.objects.create(kind="preview", state=SparkJob.State.QUEUED)
    MaintenanceRun.objects.create(
        table=mt.table, table_name="ns.busy", action="EXPIRE_SNAPSHOTS", trigger="MANUAL",
        state=MaintenanceRun.State.RUNNING,
    )  # fmt: skip
    stream_hosts.register("host-a")
    found = scrape()
    assert value(found, "lakeview_refresh_runs_in_progress", state="QUEUED") == 1
    assert value(found, "lakeview_refresh_runs_in_progress", state="RUNNING") == 1
    assert value(found, "lakeview_spark_jobs_in_progress", state="QUEUED") == 1
    assert value(found, "lakeview_spark_jobs_in_progress", state="RUNNING") == 0
    running = {"action": "EXPIRE_SNAPSHOTS", "state": "RUNNING"}
    assert value(found, "lakeview_maintenance_runs_in_progress", **running) == 1
    assert value(found, "lakeview_streaming_hosts_alive") == 1
    assert value(found, "lakeview_metrics_collector_up", collector="refresh.metrics.collect") == 1


def test_a_scrape_reads_the_database_in_two_queries_however_many_tables() -> None:
    for index in range(3):
        refreshed(materialized("ns", f"t{index}"), ago=timedelta(minutes=index))
    scrape()  # the queries are compiled once, at the first scrape
    with CaptureQueriesContext(connection) as few:
        scrape()
    for index in range(3, 12):
        refreshed(materialized("ns", f"t{index}"), ago=timedelta(minutes=index))
    with CaptureQueriesContext(connection) as many:
        found = scrape()
    assert len(few.captured_queries) == len(many.captured_queries) == 2
    assert value(found, "lakeview_materialized_table_lag_seconds", table="ns.t11") > 600


def test_a_request_from_an_address_outside_the_allowed_networks_gets_the_404_of_any_path() -> None:
    client = Client()
    refused = client.get("/metrics", REMOTE_ADDR="203.0.113.9")
    unknown = client.get("/no-such-page", REMOTE_ADDR="203.0.113.9")
    assert refused.status_code == unknown.status_code == 404
    assert b"lakeview_" not in refused.content
    assert refused.content.replace(b"/metrics", b"") == unknown.content.replace(
        b"/no-such-page", b""
    )


def test_the_allowed_networks_admit_their_addresses_ipv4_mapped_ones_too(settings) -> None:
    settings.METRICS_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    client = Client()
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="::ffff:10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 404


def test_with_a_token_a_request_without_it_or_with_another_is_refused(settings) -> None:
    settings.METRICS_TOKEN = "s3cret-token"
    client = Client()
    missing = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert missing.status_code == 403
    assert missing["WWW-Authenticate"] == "Bearer"
    assert b"lakeview_" not in missing.content
    wrong = client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_AUTHORIZATION="Bearer nope")
    assert wrong.status_code == 403
    assert b"s3cret" not in wrong.content
    assert scrape(client, HTTP_AUTHORIZATION="Bearer s3cret-token")


def test_only_get_and_head_are_answered() -> None:
    response = Client().post("/metrics", REMOTE_ADDR="127.0.0.1")
    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"


INCREMENT = textwrap.dedent(
    """
    import sys

    from infra import metrics

    for _ in range(int(sys.argv[1])):
        metrics.committed("view")
    metrics.request_answered("login", "GET", 200, 0.01)
    """
)


def test_in_multiprocess_mode_every_process_counts(tmp_path, monkeypatch) -> None:
    folder = tmp_path / "metrics"
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(folder), "PYTHONPATH": str(REPO_ROOT)}
    for times in (2, 3):
        subprocess.run([sys.executable, "-c", INCREMENT, str(times)], env=env, check=True)
    assert len(list(folder.glob("counter_*.db"))) == 2
    monkeypatch.setattr(metrics, "MULTIPROC_DIR", str(folder))
    found = scrape()
    assert value(found, "lakeview_iceberg_commits_total", kind="view") == 5
    labels = {"view": "login", "method": "GET", "status": "2xx"}
    assert value(found, "lakeview_http_requests_total", **labels) == 2
    # The database's gauges are read by the scraping process as before.
    assert value(found, "lakeview_streaming_hosts_alive") == 0


def test_a_dead_gunicorn_worker_is_marked_and_its_counts_stay(tmp_path) -> None:
    folder = tmp_path / "metrics"
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(folder), "PYTHONPATH": str(REPO_ROOT)}
    mark = textwrap.dedent(
        """
        import os, sys

        from prometheus_client import Gauge
        from infra import metrics

        Gauge("lakeview_test_live", "a live gauge", multiprocess_mode="livesum").set(1)
        metrics.committed("table")
        print(os.getpid())
        """
    )
    pid = subprocess.run(
        [sys.executable, "-c", mark], env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    assert list(folder.glob("gauge_livesum_*.db"))
    subprocess.run(
        [
            sys.executable,
            "-c",
            f"from infra import metrics; metrics.mark_process_dead({pid})",
        ],
        env=env,
        check=True,
    )
    assert not list(folder.glob("gauge_livesum_*.db"))
    assert list(folder.glob("counter_*.db"))


def test_dead_workers_files_fold_into_one_per_host_and_every_total_stays(
    tmp_path, monkeypatch
) -> None:
    folder = tmp_path / "metrics"
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(folder), "PYTHONPATH": str(REPO_ROOT)}
    pids = []
    for times in (2, 3, 4):
        run = subprocess.run(
            [sys.executable, "-c", INCREMENT + "print(__import__('os').getpid())", str(times)],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        pids.append(int(run.stdout.strip()))
    monkeypatch.setattr(metrics, "MULTIPROC_DIR", str(folder))
    before = scrape()
    assert value(before, "lakeview_iceberg_commits_total", kind="view") == 9
    for pid in pids:
        metrics.mark_process_dead(pid)
    # Three workers gone: one file per kind for the host, whatever the number of workers.
    assert sorted(path.name for path in folder.glob("*.db")) == [
        f"counter_{metrics._HOST}-exited.db",
        f"histogram_{metrics._HOST}-exited.db",
    ]
    after = scrape()
    for (name, labels), number in before.items():
        if name.startswith("lakeview_http_request") or name.startswith("lakeview_iceberg"):
            assert after[(name, labels)] == number, name
    # A live worker's counts add to the dead ones'.
    subprocess.run([sys.executable, "-c", INCREMENT, "1"], env=env, check=True)
    assert value(scrape(), "lakeview_iceberg_commits_total", kind="view") == 10


def test_a_worker_that_exits_during_another_ones_fold_is_folded_too_without_a_deadlock(
    tmp_path, monkeypatch
) -> None:
    # gunicorn's arbiter folds from its SIGCHLD handler; at SIGTERM its workers exit
    # together and a second SIGCHLD runs the handler inside the first one's fold. Here
    # the second call comes from inside the fold's read, as the signal would.
    from prometheus_client.mmap_dict import MmapedDict

    folder = tmp_path / "metrics"
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(folder), "PYTHONPATH": str(REPO_ROOT)}
    pids = []
    for times in (2, 3):
        run = subprocess.run(
            [sys.executable, "-c", INCREMENT + "print(__import__('os').getpid())", str(times)],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        pids.append(int(run.stdout.strip()))
    monkeypatch.setattr(metrics, "MULTIPROC_DIR", str(folder))
    read = MmapedDict.read_all_values_from_file
    signalled = []

    def read_then_signal(path):
        if not signalled:
            signalled.append(pids[1])
            metrics.mark_process_dead(pids[1])
        return read(path)

    monkeypatch.setattr(MmapedDict, "read_all_values_from_file", staticmethod(read_then_signal))
    folding = threading.Thread(target=metrics.mark_process_dead, args=(pids[0],), daemon=True)
    folding.start()
    folding.join(timeout=10)
    assert not folding.is_alive(), "the fold waits on its own lock"
    assert signalled
    assert sorted(path.name for path in folder.glob("*.db")) == [
        f"counter_{metrics._HOST}-exited.db",
        f"histogram_{metrics._HOST}-exited.db",
    ]
    assert value(scrape(), "lakeview_iceberg_commits_total", kind="view") == 5


def test_the_text_is_what_prometheus_clients_own_writer_writes(tmp_path) -> None:
    from prometheus_client import (
        CollectorRegistry,
        Counter,
        Gauge,
        Histogram,
        Summary,
        generate_latest,
    )
    from prometheus_client.multiprocess import MultiProcessCollector

    from infra import metrics_endpoint

    own = CollectorRegistry()
    Counter("c", 'help with \\ and\na "line"', ["v"], registry=own).labels('say "hi"\\n').inc()
    Histogram("h", "a histogram", ["v"], registry=own).labels("x").observe(0.3)
    Summary("s", "a summary", registry=own).observe(2)
    Gauge("g", "a gauge", registry=own).set(-1.5)
    assert metrics_endpoint.text(metrics_endpoint._families(own.collect())) == (
        generate_latest(own)
    )
    folder = tmp_path / "metrics"
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(folder), "PYTHONPATH": str(REPO_ROOT)}
    record = textwrap.dedent(
        """
        from infra import metrics

        metrics.request_answered("login", "GET", 200, 0.02)
        metrics.request_answered("login", "POST", 302, 3)
        metrics.refresh_finished(
            table="ns.t", trigger="SCHEDULED", action="FULL", outcome="SUCCEEDED", seconds=40
        )
        """
    )
    for _ in range(2):
        subprocess.run([sys.executable, "-c", record], env=env, check=True)
    library = CollectorRegistry()
    MultiProcessCollector(library, path=str(folder))

    def lines(text: bytes) -> list[str]:
        return sorted(line for line in text.decode().splitlines() if not line.startswith("#"))

    ours = metrics_endpoint.text(metrics_endpoint.recorded(str(folder)))
    assert lines(ours) == lines(generate_latest(library))
    assert (
        'lakeview_http_request_duration_seconds_bucket{le="+Inf",method="GET",view="login"} 2.0'
        in (ours.decode())
    )


def test_clear_metrics_empties_the_folder_of_the_processes_files_only(tmp_path, monkeypatch):
    from django.core.management import call_command

    folder = tmp_path / "metrics"
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(folder), "PYTHONPATH": str(REPO_ROOT)}
    subprocess.run([sys.executable, "-c", INCREMENT, "1"], env=env, check=True)
    (folder / "notes.txt").write_text("not ours")
    monkeypatch.setattr(metrics, "MULTIPROC_DIR", str(folder))
    call_command("clear_metrics")
    assert [path.name for path in folder.iterdir()] == ["notes.txt"]
    assert value(scrape(), "lakeview_iceberg_commits_total", kind="view") == 0
