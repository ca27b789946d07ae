"""Materialized-table refreshes against a warm Spark, side by side in one run.

Starts the whole stack (the app under gunicorn, a Celery worker with its Spark, celery-beat,
Redis) on a fresh SQLite database and warehouse, fills a source table of `--rows` rows (5
million by default) through the app's Iceberg REST catalog, and creates a FULL materialized
table over it. Then, alternating, `--repeat` times each:

- a manual refresh end to end: `POST .../refresh` (force) until the run is SUCCEEDED in the
  app's database (queueing, the claim, the worker's job, the commit, the finish);
- the same query as `INSERT OVERWRITE` into a table of the same schema and the same write
  and housekeeping properties, in this process's already warm Spark session (local[2] too),
  through the same catalog.

It prints the medians and their ratio (target: at most 1.05), and the time to decide a
NO_DATA skip (target: under 100 ms): the decision itself, in-process against the stack's
database, and a whole skipped run through the API.

Then the incremental case (issue 19): a source of `--incremental-rows` rows (10 million by
default) under two FULL tables, a filter and a GROUP BY with a primary key; `--repeat`
times, 0.1% of the rows (10,000) are appended and each table is refreshed as a worker
decides (INCREMENTAL), then once more with `full` (a FULL recompute of the same data). It
prints the medians and incremental / full per table (goals: at most 0.05 for the filter,
0.15 for the GROUP BY).

    .venv/bin/python bench/refresh.py [--rows 5000000] [--incremental-rows 10000000]
        [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

QUERY = "SELECT id, k, v * 2 AS v2, concat('row-', id) AS label FROM events WHERE v > 0.1"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _redis(root: Path) -> subprocess.Popen | None:
    if os.environ.get("REDIS_URL"):
        return None
    port = _free_port()
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no"],
        cwd=root,
        stdout=subprocess.DEVNULL,
    )
    os.environ["REDIS_URL"] = f"redis://127.0.0.1:{port}/0"
    time.sleep(0.5)
    return process


def run_state(stack, run_id: int) -> str | None:
    connection = sqlite3.connect(f"file:{stack.server.db_path}?mode=ro", uri=True, timeout=5)
    try:
        row = connection.execute(
            "SELECT state FROM refresh_refreshrun WHERE id = ?", (run_id,)
        ).fetchone()
    finally:
        connection.close()
    return row[0] if row else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--incremental-rows", type=int, default=10_000_000)
    parser.add_argument(
        "--only",
        choices=("managed", "incremental"),
        help="run one of the two parts (both by default)",
    )
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="lakeview-bench-refresh-"))
    redis = _redis(root)
    from refresh.spark.session import build_spark_session
    from tests.refresh_stack import refresh_stack
    from tests.spark.conftest import rest_catalog_conf

    try:
        with refresh_stack(root / "stack") as stack:
            spark = build_spark_session(
                master="local[2]",
                jars_dir=str(REPO / "var" / "jars"),
                warehouse=str(root / "local-warehouse"),
                catalog_name="local",
                app_name="bench-refresh",
            )
            for key, value in rest_catalog_conf(stack.server, name="st").items():
                spark.conf.set(key, value)
            spark.sql("CREATE NAMESPACE st.bench")
            if args.only != "incremental":
                _managed_case(stack, spark, rows=args.rows, repeat=args.repeat)
            if args.only != "managed":
                _incremental_case(stack, spark, rows=args.incremental_rows, repeat=args.repeat)
            spark.stop()
    finally:
        if redis is not None:
            redis.terminate()
        shutil.rmtree(root, ignore_errors=True)


def _managed_case(stack, spark, *, rows: int, repeat: int) -> None:
    """A managed FULL refresh against the same INSERT OVERWRITE in a warm session, and the
    NO_DATA decision (see the module)."""
    print(f"filling st.bench.events with {rows:,} rows ...", flush=True)
    spark.sql(
        "CREATE TABLE st.bench.events USING iceberg AS SELECT id, id % 1000 AS k, "
        f"rand(7) AS v FROM range({rows})"
    )
    response = stack.statements(
        "CREATE MATERIALIZED TABLE bench.wide FRESHNESS = INTERVAL '1' DAY "
        f"REFRESH_MODE = FULL AS {QUERY}"
    )
    assert response.status_code == 200, response.text
    first = response.json()["results"][0]["run_id"]
    stack.wait_for(
        lambda: stack.run(first)["state"] in ("SUCCEEDED", "FAILED"),
        timeout=900,
        what="the first refresh",
    )
    assert stack.run(first)["state"] == "SUCCEEDED", stack.run(first)
    # The same table properties as the materialized table's (its writes and the
    # catalog's metadata housekeeping at each commit), so that both commits do the
    # same work.
    same = ", ".join(
        f"'{row['key']}' = '{row['value']}'"
        for row in spark.sql("SHOW TBLPROPERTIES st.bench.wide").collect()
        if row["key"].startswith(("write.", "history.", "commit."))
    )
    spark.sql(
        f"CREATE TABLE st.bench.direct USING iceberg TBLPROPERTIES ({same}) "
        "AS SELECT * FROM st.bench.wide"
    )
    direct_sql = f"INSERT OVERWRITE st.bench.direct {QUERY.replace('events', 'st.bench.events')}"
    spark.sql(direct_sql)  # warm: the session has run this once

    endpoint = f"{stack.server.base_url}/api/namespaces/bench/materialized-tables/wide/refresh"
    managed, direct, waits, jobs = [], [], [], []

    def run_managed() -> None:
        seconds, run = _timed_refresh(stack, "wide", {"force": True})
        managed.append(seconds)
        stamps = {
            k: datetime.fromisoformat(run[k]) for k in ("queued_at", "started_at", "finished_at")
        }
        waits.append((stamps["started_at"] - stamps["queued_at"]).total_seconds())
        jobs.append((stamps["finished_at"] - stamps["started_at"]).total_seconds())

    def run_direct() -> None:
        started = time.perf_counter()
        spark.sql(direct_sql)
        direct.append(time.perf_counter() - started)

    for round_ in range(repeat):
        # Alternate which goes first, so that neither always follows the other.
        for step in (run_managed, run_direct) if round_ % 2 == 0 else (run_direct, run_managed):
            step()
        print(
            f"round {round_ + 1}: managed {managed[-1]:.2f} s, direct {direct[-1]:.2f} s",
            flush=True,
        )

    # NO_DATA: nothing changed since the last refresh.
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "webapp.settings.dev",
            "DATABASE_URL": stack.server.env["DATABASE_URL"],
            "WAREHOUSE": stack.server.env["WAREHOUSE"],
        }
    )
    import django

    django.setup()
    from refresh import selectors, sources
    from refresh.core.incremental import Kind

    mt = selectors.get_materialized_table("bench", "wide")
    decisions = []
    for _ in range(50):
        started = time.perf_counter()
        decision = sources.decide(mt, partition=None, force=False, full_asked=False).decision
        decisions.append(time.perf_counter() - started)
        assert decision.kind is Kind.NO_DATA, decision
    started = time.perf_counter()
    answer = stack.api.post(endpoint, json={"force": False}, timeout=60)
    job = answer.json()["jobId"]
    stack.wait_for(
        lambda: stack.run(job)["state"] in ("SKIPPED", "SUCCEEDED", "FAILED"),
        timeout=60,
        what="a skip",
        every=0.01,
    )
    skip_end_to_end = time.perf_counter() - started
    assert stack.run(job)["action"] == "NO_DATA", stack.run(job)

    m, d = statistics.median(managed), statistics.median(direct)
    p50 = statistics.median(decisions) * 1000
    p99 = sorted(decisions)[int(len(decisions) * 0.99) - 1] * 1000
    print()
    print(f"source rows                          {rows:,}")
    print(f"manual refresh, API to SUCCEEDED     {m:.2f} s (median of {repeat})")
    print(f"INSERT OVERWRITE in a warm session   {d:.2f} s (median of {repeat})")
    print(f"ratio                                {m / d:.3f}  (target <= 1.05)")
    print(
        f"  of the managed time: queued to started {statistics.median(waits):.3f} s, "
        f"started to finished {statistics.median(jobs):.3f} s"
    )
    print(f"  inside the worker (medians): {_phases(stack.log('worker', 100_000))}")
    print(f"NO_DATA decision                     p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    print(f"skipped run, API to SKIPPED          {skip_end_to_end * 1000:.0f} ms")
    print("                                     (target: decision under 100 ms)")


def _phases(worker_log: str, runs: set[int] | None = None) -> str:
    """Median seconds of each phase the worker logged (refresh.runner._log_phases) for the
    runs `runs` (every FULL refresh's when None)."""
    found: dict[str, list[float]] = {}
    for line in worker_log.splitlines():
        logged = re.search(r"Refresh run (\d+) (\w+) phases: ", line)
        if logged is None:
            continue
        if runs is None and logged.group(2) != "FULL":
            continue
        if runs is not None and int(logged.group(1)) not in runs:
            continue
        for pair in line.split(" phases: ", 1)[1].split():
            name, _, seconds = pair.partition("=")
            found.setdefault(name, []).append(float(seconds))
    return ", ".join(f"{name} {statistics.median(values):.3f}" for name, values in found.items())


INCREMENTAL_TABLES = {
    # name: (query, goal of incremental / full)
    "filtered": ("SELECT id, k, v FROM facts WHERE v > 0.5", 0.05),
    "grouped": (
        "SELECT k, count(*) AS n, sum(v) AS total, max(v) AS top FROM facts GROUP BY k",
        0.15,
    ),
}


def _incremental_case(stack, spark, *, rows: int, repeat: int) -> None:
    """Incremental against full refreshes of the same tables, side by side (see above)."""
    print(f"\nfilling st.bench.facts with {rows:,} rows ...", flush=True)
    # k NOT NULL: a primary key's columns are non-null.
    spark.sql("CREATE TABLE st.bench.facts (id BIGINT, k BIGINT NOT NULL, v DOUBLE) USING iceberg")
    spark.sql(
        f"INSERT INTO st.bench.facts SELECT id, id % 100000 AS k, rand(11) AS v FROM range({rows})"
    )
    for name, (query, _) in INCREMENTAL_TABLES.items():
        key = " (PRIMARY KEY (k) NOT ENFORCED)" if "GROUP BY" in query else ""
        answer = stack.statements(
            f"CREATE MATERIALIZED TABLE bench.{name}{key} FRESHNESS = INTERVAL '1' DAY "
            f"REFRESH_MODE = FULL AS {query}"
        )
        assert answer.status_code == 200, answer.text
        first = answer.json()["results"][0]["run_id"]
        stack.wait_for(
            lambda first=first: stack.run(first)["state"] in ("SUCCEEDED", "FAILED"),
            timeout=900,
            what=f"{name}'s first refresh",
        )
    # The floor: the smallest Spark commits through the same catalog in this warm session,
    # a one-row INSERT and a one-row MERGE into a copy of the GROUP BY table.
    spark.sql("CREATE TABLE st.bench.floor_append (id BIGINT) USING iceberg")
    spark.sql(
        "CREATE TABLE st.bench.floor_merge USING iceberg TBLPROPERTIES "
        "('write.merge.mode' = 'merge-on-read', 'write.update.mode' = 'merge-on-read', "
        "'write.delete.mode' = 'merge-on-read') AS SELECT * FROM st.bench.grouped"
    )
    floors: dict[str, list[float]] = {"append": [], "merge": []}
    step = max(1, rows // 1000)  # 0.1%
    timings: dict[str, dict[str, list[float]]] = {
        name: {"INCREMENTAL": [], "FULL": []} for name in INCREMENTAL_TABLES
    }
    run_ids: dict[tuple[str, str], set[int]] = {}
    start = rows
    for round_ in range(repeat):
        spark.sql(
            f"INSERT INTO st.bench.facts SELECT id, id % 100000 AS k, rand({round_}) AS v "
            f"FROM range({start}, {start + step})"
        )
        start += step
        for name in INCREMENTAL_TABLES:
            for body, action in (({}, "INCREMENTAL"), ({"full": True}, "FULL")):
                seconds, run = _timed_refresh(stack, name, body)
                assert run["action"] == action, run
                timings[name][action].append(seconds)
                run_ids.setdefault((name, action), set()).add(run["id"])
        started = time.perf_counter()
        spark.sql(f"INSERT INTO st.bench.floor_append VALUES ({round_})")
        floors["append"].append(time.perf_counter() - started)
        started = time.perf_counter()
        spark.sql(
            "MERGE INTO st.bench.floor_merge t USING (SELECT 7 AS k, 1 AS n) s ON t.k = s.k "
            "WHEN MATCHED THEN UPDATE SET t.n = t.n + s.n"
        )
        floors["merge"].append(time.perf_counter() - started)
        print(
            f"round {round_ + 1}: "
            + ", ".join(
                f"{name} {t['INCREMENTAL'][-1]:.2f} s / {t['FULL'][-1]:.2f} s"
                for name, t in timings.items()
            ),
            flush=True,
        )
    print(f"\nsource rows {rows:,}, appended per round {step:,}")
    for name, (_query, goal) in INCREMENTAL_TABLES.items():
        incremental = statistics.median(timings[name]["INCREMENTAL"])
        full = statistics.median(timings[name]["FULL"])
        print(
            f"{name:<9} incremental {incremental:.2f} s, full {full:.2f} s, "
            f"ratio {incremental / full:.3f} (goal <= {goal})"
        )
        log = stack.log("worker", 200_000)
        for action in ("INCREMENTAL", "FULL"):
            print(f"  {action.lower()} in the worker: {_phases(log, run_ids[(name, action)])}")
        floor = statistics.median(floors["append" if name == "filtered" else "merge"])
        what = "one-row INSERT" if name == "filtered" else "one-row MERGE into its copy"
        print(f"  floor: a {what} in a warm session {floor:.2f} s = {floor / full:.3f} of full")


def _timed_refresh(stack, name: str, body: dict) -> tuple[float, dict]:
    endpoint = f"{stack.server.base_url}/api/namespaces/bench/materialized-tables/{name}/refresh"
    started = time.perf_counter()
    answer = stack.api.post(endpoint, json=body, timeout=60)
    assert answer.status_code == 202, answer.text
    job = answer.json()["jobId"]
    # Watched in the app's database (read-only, every 20 ms), not by polling the API: twenty
    # requests a second would take CPU from the job being measured.
    stack.wait_for(
        lambda: run_state(stack, job) in ("SUCCEEDED", "FAILED"),
        timeout=900,
        what=f"a refresh of {name}",
        every=0.02,
    )
    seconds = time.perf_counter() - started
    run = stack.run(job)
    assert run["state"] == "SUCCEEDED", run
    return seconds, run


if __name__ == "__main__":
    main()
