"""The production shape on this machine: a Spark standalone master and one worker started from
the venv's pyspark (`spark-class ...Master` / `...Worker`, as docker-compose's spark-master
and spark-worker), and the whole stack pointed at it with `SPARK_MASTER=spark://...`: the
app under gunicorn, TWO Celery workers (each its own Spark driver, each with an executor on
the cluster), celery-beat and the streaming process. What runs on the cluster is the
production code path: the workers' and the streaming process's own sessions
(runtime.engine.session_config with SPARK_CONF), the jars shipped to the executors by
`spark.jars`, the warehouse a local folder that driver and executors share.

One stack for the module (tests run in order): a FULL refresh, a partition refresh and a
continuous table's micro-batches, each with exact rows computed here from what was
appended; the sandbox refuses a view that reads a file on the cluster too; and the two
workers share the work: concurrent refreshes of one table never overlap, while one worker
runs a long refresh the other runs a refresh of another table and a view's preview.

The test process reads and writes tables with pyiceberg only (no Spark of its own here)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyspark
import pytest
import requests
from pyiceberg.catalog.rest import RestCatalog

from tests.live_server import free_port
from tests.refresh_stack import RefreshStack, refresh_stack

NS = "cl"
SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"
#: Each driver (two workers, the streaming process) holds an executor for its lifetime: a
#: core and 512 MB each, so the Spark worker offers three of each.
APPS = 3
EXECUTOR_MEMORY_MB = 512
SPARK_CONF = {
    "spark.cores.max": "1",
    "spark.executor.memory": f"{EXECUTOR_MEMORY_MB}m",
    # Executors reach the drivers on loopback (one machine); a deployment names its host.
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


@dataclass
class SparkCluster:
    url: str
    web_url: str
    work_dir: Path
    root: Path
    processes: list[subprocess.Popen]

    def state(self) -> dict:
        return requests.get(f"{self.web_url}/json/", timeout=10).json()

    def wait_registered(self, timeout: float = 90) -> None:
        """Until the Spark worker registered with the master."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.state().get("aliveworkers", 0) >= 1:
                    return
            except requests.RequestException:
                pass
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.processes):
                logs = "\n".join(
                    (self.root / f"{n}.log").read_text(errors="replace")[-3000:]
                    for n in ("master", "worker")
                )
                raise RuntimeError(f"The Spark worker did not register:\n{logs}")
            time.sleep(0.5)

    def executor_logs(self) -> dict[str, str]:
        """Each application's executor stderr (the Spark worker keeps them in its work
        directory), by application name."""
        names = {app["id"]: app["name"] for app in self.state()["activeapps"]}
        logs: dict[str, str] = {}
        for app_dir in self.work_dir.glob("app-*"):
            text = "".join(p.read_text(errors="replace") for p in app_dir.glob("*/stderr"))
            logs[app_dir.name] = text
            if app_dir.name in names:
                logs[names[app_dir.name]] = logs.get(names[app_dir.name], "") + text
        return logs


def _stop_group(process: subprocess.Popen) -> None:
    """SIGTERM a process and its group (a Spark worker's executors), SIGKILL if it lingers."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


@contextmanager
def spark_cluster(root: Path) -> Iterator[SparkCluster]:
    """A standalone master and one worker on loopback, until the block ends (both stopped
    by pid, with the worker's executors, whatever happened). Yields at once: the caller
    waits for the worker's registration (`wait_registered`) when it needs the cluster."""
    root.mkdir(parents=True, exist_ok=True)
    port, web_port, worker_web_port = free_port(), free_port(), free_port()
    started: list[subprocess.Popen] = []
    cluster = SparkCluster(
        url=f"spark://127.0.0.1:{port}",
        web_url=f"http://127.0.0.1:{web_port}",
        work_dir=root / "work",
        root=root,
        processes=started,
    )
    # Spark's scripts would write logs and work folders into the venv otherwise.
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(root)}

    def spawn(name: str, *args: str) -> None:
        log = (root / f"{name}.log").open("ab")
        started.append(
            subprocess.Popen(
                [str(SPARK_CLASS), *args],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )

    try:
        spawn(
            "master",
            "org.apache.spark.deploy.master.Master",
            *("--host", "127.0.0.1", "--port", str(port), "--webui-port", str(web_port)),
        )
        spawn(
            "worker",
            "org.apache.spark.deploy.worker.Worker",
            cluster.url,
            *("--host", "127.0.0.1", "--webui-port", str(worker_web_port)),
            *("--cores", str(APPS), "--memory", f"{APPS * EXECUTOR_MEMORY_MB}m"),
            *("--work-dir", str(cluster.work_dir)),
        )
        yield cluster
    finally:
        for process in reversed(started):
            _stop_group(process)


@dataclass
class ClusterStack:
    stack: RefreshStack
    cluster: SparkCluster
    catalog: RestCatalog
    #: The two Celery workers' process ids.
    worker_pids: tuple[int, int]
    #: The two previews asked at once while the stack warmed up, once finished.
    warm_up: list[dict]


#: A Redis database of the module's own (other stacks use theirs; messages must not cross).
REDIS_DB = 7


@pytest.fixture(scope="module")
def cs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterStack]:
    root = tmp_path_factory.mktemp("cluster")
    started = time.monotonic()
    with ExitStack() as resources:
        cluster = resources.enter_context(spark_cluster(root / "spark"))
        stack = resources.enter_context(
            refresh_stack(
                root / "stack",
                worker=False,
                redis_db=REDIS_DB,
                extra_env={
                    "SPARK_MASTER": cluster.url,
                    "SPARK_CONF": json.dumps(SPARK_CONF),
                    # No maintenance sweep in these few minutes: only what the tests ask runs.
                    "MAINTENANCE_SWEEP_SECONDS": "3600",
                },
            )
        )
        # The two workers start side by side.
        first_started = time.time()
        stack.start_worker(wait=False)
        first = stack.worker
        assert first is not None
        second = _start_second_worker(stack, resources)
        stack.wait_for_worker(since=first_started)
        cluster.wait_registered()
        catalog = RestCatalog(
            "cl",
            uri=stack.server.iceberg_uri,
            credential=stack.server.credential,
            **{"oauth2-server-uri": f"{stack.server.iceberg_uri}/v1/oauth/tokens"},
        )
        print(f"\ncluster stack up in {time.monotonic() - started:.1f}s")
        warm_up = _warm_up(stack, catalog)
        print(f"both workers' Spark up in {time.monotonic() - started:.1f}s")
        yield ClusterStack(stack, cluster, catalog, (first.pid, second.pid), warm_up)


def _start_second_worker(stack: RefreshStack, resources: ExitStack) -> subprocess.Popen:
    """Another Celery worker on the same broker and database (its own node name, as each
    worker on one machine needs), once it says it is alive; stopped with `resources`."""
    started = time.time()
    command = (sys.executable, "-m", "celery", "-A", "webapp", "worker", "-l", "info")
    process = stack._spawn("worker2", command=(*command, "--pool", "threads", "-n", "w2@%h"))
    resources.callback(_stop_group, process)

    def alive() -> bool:
        listed = stack.api.get(f"{stack.server.base_url}/api/workers/", timeout=30).json()
        return any(
            w["name"].endswith(f":{process.pid}")
            and w["alive"]
            and datetime.fromisoformat(w["seen_at"]).timestamp() >= started - 1
            for w in listed
        )

    stack.wait_for(alive, timeout=90, what="the second worker to start")
    return process


def _warm_up(stack: RefreshStack, catalog: RestCatalog) -> list[dict]:
    """The source table, a view over it, and two previews of the view asked at once: each
    worker's Spark starts with the first job it takes, and the two start side by side (the
    second preview goes to the worker that is not busy with the first)."""
    catalog.create_namespace(NS)
    catalog.create_table(f"{NS}.orders", schema=ORDERS)
    append(catalog, (1, "a", 1.0), (2, "a", 2.0), (3, "b", 5.0), (4, "c", 7.5))
    view = stack.api.post(
        f"{stack.server.base_url}/api/namespaces/{NS}/views/",
        json={"name": "orders_b", "sql": "SELECT id, amount FROM orders WHERE ds = 'b'"},
        timeout=30,
    )
    assert view.status_code == 201, view.text
    url = f"{stack.server.base_url}/api/namespaces/{NS}/views/orders_b/preview"
    asked = [stack.api.get(url, params={"columns": [c]}, timeout=30) for c in ("id", "amount")]
    assert [a.status_code for a in asked] == [202, 202], [a.text for a in asked]
    return [stack.job(a.json()["job"]["url"], timeout=240) for a in asked]


def ok(stack: RefreshStack, sql: str) -> list[dict]:
    response = stack.statements(sql, namespace=NS)
    assert response.status_code == 200, response.text
    return response.json()["results"]


def finished(stack: RefreshStack, run_id: int, timeout: float = 180) -> dict:
    run = stack.wait_for(
        lambda: (lambda r: r if r["finished_at"] else None)(stack.run(run_id)),
        timeout=timeout,
        what=f"refresh run {run_id}",
    )
    assert run["state"] == "SUCCEEDED", run
    return run


def table_rows(catalog: RestCatalog, table: str, columns: list[str]) -> list[tuple]:
    arrow = catalog.load_table(f"{NS}.{table}").scan().to_arrow()
    return sorted(zip(*(arrow.column(c).to_pylist() for c in columns), strict=True))


ORDERS = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("ds", pa.string()),
        pa.field("amount", pa.float64()),
    ]
)
#: What the test appended to orders, as (id, ds, amount): the expected rows are computed
#: from it here, never read back from a table the stack wrote.
appended: list[tuple[int, str, float]] = []


def append(catalog: RestCatalog, *rows: tuple[int, str, float]) -> None:
    columns = list(zip(*rows, strict=True))
    batch = pa.table(
        {"id": list(columns[0]), "ds": list(columns[1]), "amount": list(columns[2])},
        schema=ORDERS,
    )
    catalog.load_table(f"{NS}.orders").append(batch)
    appended.extend(rows)


def daily(rows: list[tuple[int, str, float]]) -> list[tuple]:
    totals: dict[str, tuple[float, int]] = {}
    for _, ds, amount in rows:
        total, n = totals.get(ds, (0.0, 0))
        totals[ds] = (total + amount, n + 1)
    return sorted((ds, total, n) for ds, (total, n) in totals.items())


DAILY = "SELECT ds, sum(amount) AS total, count(*) AS n FROM orders GROUP BY ds"
FILTER = "SELECT id, ds, amount FROM orders WHERE amount > 1.5"


def moment(text: str) -> datetime:
    return datetime.fromisoformat(text)


def pid_of(worker: str) -> int:
    """A worker's process id from its name (host:pid, or host:pid:thread for a run)."""
    return int(worker.split(":")[1])


def test_a_full_refresh_runs_on_the_cluster_with_exact_rows(cs: ClusterStack):
    # The schema analysis is a Spark job too: both run in the workers' cluster sessions.
    [created] = ok(
        cs.stack,
        "CREATE MATERIALIZED TABLE daily PARTITIONED BY (ds) FRESHNESS = INTERVAL '1' DAY "
        f"REFRESH_MODE = FULL AS {DAILY}",
    )
    # The continuous table of a later test, now: the streaming host's Spark starts while
    # this refresh runs.
    ok(cs.stack, f"CREATE MATERIALIZED TABLE big FRESHNESS = INTERVAL '4' SECOND AS {FILTER}")
    run = finished(cs.stack, created["run_id"])

    assert run["action"] == "FULL" and run["rows_written"] == 3
    assert table_rows(cs.catalog, "daily", ["ds", "total", "n"]) == daily(appended)
    # It ran on the cluster: the worker's application holds an executor there, and that
    # executor ran the tasks.
    apps = {app["name"]: app for app in cs.cluster.state()["activeapps"]}
    assert apps["lakeview-refresh-worker"]["cores"] == 1
    assert "Finished task" in cs.cluster.executor_logs()["lakeview-refresh-worker"]


def test_a_partition_refresh_on_the_cluster_rewrites_that_partition_only(cs: ClusterStack):
    before = dict((row[0], row[1:]) for row in daily(appended))
    append(cs.catalog, (5, "a", 10.0), (6, "b", 100.0))

    [asked] = ok(cs.stack, "ALTER MATERIALIZED TABLE daily REFRESH PARTITION (ds = 'a')")
    run = finished(cs.stack, asked["run_id"])

    assert (run["action"], run["partition"]) == ("PARTITION", {"ds": "a"})
    now = dict((row[0], row[1:]) for row in daily(appended))
    assert table_rows(cs.catalog, "daily", ["ds", "total", "n"]) == sorted(
        [("a", *now["a"]), ("b", *before["b"]), ("c", *before["c"])]
    )


def test_a_continuous_tables_micro_batches_run_on_the_cluster_with_exact_rows(
    cs: ClusterStack,
):
    def follows() -> bool:
        expected = sorted(row for row in appended if row[2] > 1.5)
        return table_rows(cs.catalog, "big", ["id", "ds", "amount"]) == expected

    # Created with the first test: loaded, perhaps with the second test's rows by
    # micro-batches since.
    cs.stack.wait_for(follows, timeout=150, what="the continuous table's load", every=1.0)
    append(cs.catalog, (7, "d", 3.0), (8, "d", 1.0))
    cs.stack.wait_for(follows, timeout=60, what="a micro-batch", every=1.0)
    append(cs.catalog, (9, "a", 2.5))
    cs.stack.wait_for(follows, timeout=60, what="another micro-batch", every=1.0)

    def written() -> tuple[int, list[dict]]:
        history = cs.stack.api.get(
            f"{cs.stack.server.base_url}/api/namespaces/{NS}/materialized-tables/big/runs/",
            timeout=30,
        ).json()["results"]
        return sum(r["rows_written"] or 0 for r in history), history

    expected = len([row for row in appended if row[2] > 1.5])
    # A micro-batch's row is recorded just after its commit, which readers may see first.
    cs.stack.wait_for(
        lambda: written()[0] >= expected, timeout=30, what="the last micro-batch's row"
    )
    total, history = written()
    # The load and the micro-batches wrote each row once: none lost, none twice.
    assert total == expected, history
    batches = [r for r in history if (r["trigger"], r["action"]) == ("CONTINUOUS", "INCREMENTAL")]
    assert len(batches) >= 2 and all(r["state"] == "SUCCEEDED" for r in history), history
    assert "Finished task" in cs.cluster.executor_logs()["lakeview-streams"]


def test_the_sandbox_refuses_a_view_that_reads_a_file_on_the_cluster_too(
    cs: ClusterStack, tmp_path: Path
):
    secret = tmp_path / "secret.txt"
    secret.write_text("LAKEVIEW-CLUSTER-SECRET")
    # An engine stores the view through the Iceberg REST protocol, SQL as sent.
    version = {
        "version-id": 1, "schema-id": 0, "timestamp-ms": 1, "summary": {},
        "representations": [
            {"type": "sql", "sql": f"SELECT value FROM text.`{secret}`", "dialect": "spark"}
        ],
        "default-namespace": [NS],
    }  # fmt: skip
    schema = {
        "type": "struct", "schema-id": 0,
        "fields": [{"id": 0, "name": "value", "type": "string", "required": False}],
    }  # fmt: skip
    stored = cs.stack.server.iceberg_session().post(
        f"{cs.stack.server.iceberg_uri}/v1/namespaces/{NS}/views",
        json={"name": "leak", "schema": schema, "view-version": version},
        timeout=30,
    )
    assert stored.status_code == 200, stored.text

    answer = cs.stack.follow(
        cs.stack.api.get(
            f"{cs.stack.server.base_url}/api/namespaces/{NS}/views/leak/preview", timeout=30
        )
    )

    assert 400 <= answer.status_code < 500, answer.text
    assert "LAKEVIEW-CLUSTER-SECRET" not in answer.text


def _refresh(cs: ClusterStack, table: str) -> int:
    response = cs.stack.api.post(
        f"{cs.stack.server.base_url}/api/namespaces/{NS}/materialized-tables/{table}/refresh",
        json={"force": True},
        timeout=30,
    )
    assert response.status_code == 202, response.text
    return response.json()["jobId"]


def test_concurrent_refreshes_of_one_table_run_one_at_a_time(cs: ClusterStack):
    asked: list[int] = []
    threads = [
        threading.Thread(target=lambda: asked.append(_refresh(cs, "daily"))) for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    runs = sorted(
        (finished(cs.stack, run_id) for run_id in asked), key=lambda r: moment(r["started_at"])
    )

    assert len(runs) == 3
    for earlier, later in zip(runs, runs[1:], strict=False):
        assert moment(earlier["finished_at"]) <= moment(later["started_at"]), (earlier, later)
    assert table_rows(cs.catalog, "daily", ["ds", "total", "n"]) == daily(appended)


# Long enough to be seen running while another refresh and a preview run on the other
# worker: Spark sums 300 million numbers per row of `pauses` on the application's one
# executor core, about 3 s a row (the sandbox allows no sleep).
SPAN = 300_000_000
PAUSES = [1, 2, 3, 4]
SLOW = f"SELECT p.id, sum(r.id % 7) AS s FROM pauses p CROSS JOIN range({SPAN}) r GROUP BY p.id"


def test_while_one_worker_runs_a_long_refresh_the_other_serves_refreshes_and_previews(
    cs: ClusterStack,
):
    stack = cs.stack
    # The two previews asked at once while the stack warmed up went one to each worker.
    assert {pid_of(job["worker"]) for job in cs.warm_up} == set(cs.worker_pids), cs.warm_up
    assert all(job["state"] == "SUCCEEDED" for job in cs.warm_up), cs.warm_up
    cs.catalog.create_table(
        f"{NS}.pauses", schema=pa.schema([pa.field("id", pa.int64(), nullable=False)])
    )
    cs.catalog.load_table(f"{NS}.pauses").append(
        pa.table({"id": PAUSES}, schema=pa.schema([pa.field("id", pa.int64(), nullable=False)]))
    )
    [created] = ok(
        stack,
        f"CREATE MATERIALIZED TABLE slow FRESHNESS = INTERVAL '1' DAY REFRESH_MODE = FULL "
        f"AS {SLOW}",
    )
    slow = stack.wait_for(
        lambda: (lambda r: r if r["state"] == "RUNNING" else None)(stack.run(created["run_id"])),
        timeout=120,
        what="the slow refresh to start",
        every=0.2,
    )
    busy = pid_of(slow["worker"])

    other = finished(stack, _refresh(cs, "daily"))
    preview = stack.api.get(
        f"{stack.server.base_url}/api/namespaces/{NS}/views/orders_b/preview", timeout=30
    )
    assert preview.status_code == 202, preview.text
    job = stack.job(preview.json()["job"]["url"], timeout=120)

    assert stack.run(created["run_id"])["state"] == "RUNNING", "all that while"
    assert pid_of(other["worker"]) != busy and pid_of(job["worker"]) != busy
    assert {pid_of(other["worker"]), busy} == set(cs.worker_pids)
    assert job["state"] == "SUCCEEDED", job
    rows = sorted(tuple(row) for row in job["result"]["rows"])
    assert rows == sorted((i, amount) for i, ds, amount in appended if ds == "b")
    done = finished(stack, created["run_id"], timeout=240)
    assert done["rows_written"] == len(PAUSES)
    each = sum(range(7)) * (SPAN // 7) + sum(range(SPAN % 7))
    assert table_rows(cs.catalog, "slow", ["id", "s"]) == [(i, each) for i in PAUSES]
