"""Console queries against a warm Spark session, side by side in one run.

Starts the whole stack (the app under gunicorn, a Celery worker with its Spark, celery-beat,
Redis) on a fresh SQLite database and warehouse, fills a table of `--rows` rows (one
million by default) through the app's Iceberg REST catalog, and then, for each query:

- a point query (`SELECT * FROM big WHERE id = ...`),
- a filter with a limit (`SELECT id, k, v, label FROM big WHERE k = 7 LIMIT 100`),
- a GROUP BY over the whole table (`SELECT k, count(*), sum(v) FROM big GROUP BY k`),

alternating which goes first, `--repeat` times each (after one unmeasured run of each, so
that both sides are warm):

- through the app: `POST /api/statements/`, then `GET /api/jobs/<id>/rows?wait=5` (answered
  as soon as the worker stores the first rows; `--wait 0` polls every `--poll` seconds
  instead) until the first page of rows: the request, the job's pickup by the worker, the
  sandbox's checks, Spark, the first part stored;
- the same SQL in this process's already warm Spark session (local[2] too, through the same
  REST catalog with its table cache off, as the worker's): `spark.sql(...).collect()`.

The point query and the filter are plain reads of one table, which the worker answers
with the previews' in-process reader (QUERY_PLAIN_READS); the bench runs every query with
the worker's Spark first (the worker started with QUERY_PLAIN_READS=0), then the plain
reads again with a worker that answers them in process.

It prints the medians, their ratio (goal: at most 1.5 each) and the point query's time
through the app (goal: under 1 s), and where the app's time went: the POST, the wait for
a worker (job created to started), and the worker's phases (refresh.queries logs them).

    .venv/bin/python bench/query.py [--rows 1000000] [--repeat 7] [--wait 5] [--poll 0.02]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.refresh import _redis  # noqa: E402 - after the path

QUERIES = {
    "point": "SELECT * FROM big WHERE id = 123457",
    "filter + LIMIT 100": "SELECT id, k, v, label FROM big WHERE k = 7 LIMIT 100",
    "GROUP BY": "SELECT k, count(*) AS n, sum(v) AS total FROM big GROUP BY k",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--wait", type=float, default=5.0)
    parser.add_argument("--poll", type=float, default=0.02)
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="lakeview-bench-query-"))
    redis = _redis(root)
    from runtime.spark.session import build_spark_session
    from tests.refresh_stack import refresh_stack
    from tests.spark.conftest import rest_catalog_conf

    try:
        with refresh_stack(root / "stack", extra_env={"LOG_LEVEL": "INFO"}) as stack:
            spark = build_spark_session(
                master="local[2]",
                jars_dir=str(REPO / "var" / "jars"),
                warehouse=str(root / "local-warehouse"),
                catalog_name="local",
                app_name="bench-query",
            )
            for key, value in rest_catalog_conf(stack.server, name="st").items():
                spark.conf.set(key, value)
            spark.conf.set("spark.sql.shuffle.partitions", stack.server.env.get(
                "SPARK_SHUFFLE_PARTITIONS", "2"))  # fmt: skip
            print(f"filling st.bench.big with {args.rows:,} rows ...", flush=True)
            spark.sql("CREATE NAMESPACE st.bench")
            spark.sql(
                "CREATE TABLE st.bench.big USING iceberg AS SELECT id, id % 1000 AS k, "
                f"rand(7) AS v, concat('row-', id) AS label FROM range({args.rows})"
            )
            spark.sql("USE st.bench")
            print("\n== the worker's Spark reads every query (QUERY_PLAIN_READS=0) ==")
            _restart_worker(stack, plain=False)
            _compare(stack, spark, QUERIES, repeat=args.repeat, poll=args.poll, wait=args.wait)
            print("\n== plain reads answered in process (QUERY_PLAIN_READS=1) ==")
            _restart_worker(stack, plain=True)
            plain = {name: QUERIES[name] for name in ("point", "filter + LIMIT 100")}
            _compare(stack, spark, plain, repeat=args.repeat, poll=args.poll, wait=args.wait)
            spark.stop()
    finally:
        if redis is not None:
            redis.terminate()
        shutil.rmtree(root, ignore_errors=True)


def _through_the_app(stack, sql: str, poll: float, wait: float) -> tuple[float, float, dict]:
    """Seconds from the POST to the first page of rows, the POST's own seconds, and the job."""
    base = stack.server.base_url
    started = time.perf_counter()
    response = stack.api.post(
        f"{base}/api/statements/", json={"sql": sql, "namespace": "bench"}, timeout=60
    )
    posted = time.perf_counter() - started
    assert response.status_code == 202, response.text
    job = response.json()["job"]
    while True:
        page = stack.api.get(
            f"{base}{job['url']}rows", params={"limit": 100, "wait": wait}, timeout=30
        ).json()
        if page["rows"] or page["complete"]:
            break
        time.sleep(poll)
    elapsed = time.perf_counter() - started
    assert page["state"] in ("RUNNING", "SUCCEEDED") and page["rows"], page
    return elapsed, posted, job


def _in_spark(spark, sql: str) -> float:
    started = time.perf_counter()
    rows = spark.sql(sql).collect()
    elapsed = time.perf_counter() - started
    assert rows
    return elapsed


def _restart_worker(stack, *, plain: bool) -> None:
    if stack.worker is not None:
        stack.kill_worker()
    stack.server.env["QUERY_PLAIN_READS"] = "1" if plain else "0"
    stack.start_worker()


def _compare(
    stack, spark, queries: dict[str, str], *, repeat: int, poll: float, wait: float
) -> None:
    base = stack.server.base_url
    skip = len(_phase_lines(stack.log("worker", 200_000)))
    print("warming up (the worker's Spark starts with its first job) ...", flush=True)
    for sql in queries.values():
        _through_the_app(stack, sql, poll, wait)
        _in_spark(spark, sql)
    app: dict[str, list[float]] = {name: [] for name in queries}
    direct: dict[str, list[float]] = {name: [] for name in queries}
    posts: list[float] = []
    waits: list[float] = []
    jobs: list[int] = []
    for round_ in range(repeat):
        for name, sql in queries.items():
            steps = ("app", "spark") if round_ % 2 == 0 else ("spark", "app")
            for step in steps:
                if step == "app":
                    seconds, posted, job = _through_the_app(stack, sql, poll, wait)
                    app[name].append(seconds)
                    posts.append(posted)
                    jobs.append(job["id"])
                else:
                    direct[name].append(_in_spark(spark, sql))
            print(
                f"round {round_ + 1} {name}: app {app[name][-1]:.3f} s, "
                f"spark {direct[name][-1]:.3f} s",
                flush=True,
            )
    for job_id in jobs:
        job = stack.api.get(f"{base}/api/jobs/{job_id}/", timeout=30).json()
        created, started = (datetime.fromisoformat(job[k]) for k in ("created_at", "started_at"))
        waits.append((started - created).total_seconds())

    print()
    print(f"{'query':<20} {'app (s)':>9} {'spark (s)':>10} {'ratio':>7}   (medians of {repeat})")
    for name in queries:
        a, d = statistics.median(app[name]), statistics.median(direct[name])
        print(f"{name:<20} {a:>9.3f} {d:>10.3f} {a / d:>7.2f}")
    print("goals: each ratio at most 1.5; the point query's first rows under 1 s")
    print(f"  POST /api/statements/ (202)         {statistics.median(posts) * 1000:.0f} ms")
    print(f"  job created to started (pickup)     {statistics.median(waits) * 1000:.0f} ms")
    worker = _phases(stack.log("worker", 200_000), skip=skip + len(queries))
    print(f"  on the worker (medians, s): {worker}")
    print(json.dumps({n: [round(x, 4) for x in app[n]] for n in queries}))


def _phases(worker_log: str, *, skip: int) -> str:
    """Median seconds of each phase the worker logged for queries (refresh.queries), the
    first `skip` (the warm-up) left out."""
    found: dict[str, list[float]] = {}
    for line in _phase_lines(worker_log)[skip:]:
        for pair in line.split(" phases: ", 1)[1].split():
            name, _, seconds = pair.partition("=")
            found.setdefault(name, []).append(float(seconds))
    return ", ".join(f"{name} {statistics.median(values):.3f}" for name, values in found.items())


def _phase_lines(worker_log: str) -> list[str]:
    return [line for line in worker_log.splitlines() if re.search(r"Query \d+ phases: ", line)]


if __name__ == "__main__":
    main()
