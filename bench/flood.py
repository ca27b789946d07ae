"""Engines' load-table latency while a flood of requests that need Spark hits the app.

Starts the whole stack as deployed (a fresh SQLite database and warehouse; the web
service and the engines' catalog service under gunicorn with webapp/gunicorn.conf.py;
celery-beat; a Redis of its own unless REDIS_URL is set), then, beside `--engines` engines
loading one table through the catalog service (each every `--interval` seconds, in a
process of its own):

1. no worker: `--rounds` bursts of 50 requests at once (a viewer's view previews, an
   editor's CREATE MATERIALIZED TABLE), each answered 503;
2. one busy worker (its Spark holding a long refresh): the same bursts, answered 202
   (a job) up to JOBS_PER_USER per user, 429 beyond.

For each it prints what the flood was answered (statuses, the slowest answer) and the
load-table latencies (p50, p99) in a quiet moment before and during the bursts, side by
side, with the ratio. The bar (tests/spark/test_abuse.py): every answer under a second,
load-table p99 under 50 ms during the flood.

    .venv/bin/python bench/flood.py [--rounds 3] [--engines 2] [--interval 0.01]
        [--web-nice 5] [--postgres URL]
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


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


def report(label: str, measured) -> None:  # noqa: ANN001 - tests.flood.Measured
    from tests import flood

    statuses = collections.Counter(shot.status for shot in measured.shots)
    slowest = max(shot.seconds for shot in measured.shots)
    quiet99 = flood.percentile(measured.quiet, 0.99)
    during99 = flood.percentile(measured.during, 0.99)
    print(f"\n{label}: {len(measured.shots)} requests in {measured.flood_seconds:.2f} s")
    print(f"  answers: {dict(sorted(statuses.items()))}, slowest {slowest * 1000:.0f} ms")
    print("  load-table     p50        p99    samples")
    print(
        f"  quiet      {flood.median(measured.quiet) * 1000:6.1f} ms  {quiet99 * 1000:6.1f} ms"
        f"  {len(measured.quiet):7d}"
    )
    print(
        f"  flood      {flood.median(measured.during) * 1000:6.1f} ms  {during99 * 1000:6.1f} ms"
        f"  {len(measured.during):7d}"
    )
    print(f"  p99 flood / quiet: {during99 / quiet99:.2f}   (bar: p99 under 50 ms)")
    slowest_shots = sorted(measured.shots, key=lambda shot: -shot.seconds)[:3]
    print(
        "  slowest: "
        + ", ".join(
            f"{shot.what} {shot.status} {shot.seconds * 1000:.0f} ms" for shot in slowest_shots
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--engines", type=int, default=2)
    parser.add_argument(
        "--interval", type=float, default=0.01, help="seconds between an engine's loads"
    )
    parser.add_argument("--web-nice", type=int, default=5)
    parser.add_argument(
        "--postgres",
        default=os.environ.get("PG_DATABASE_URL"),
        help="a PostgreSQL server's URL (default: PG_DATABASE_URL): the app gets a database "
        "of its own there, as docs/deployment.md's does; without one, a SQLite file",
    )
    parser.add_argument("--keep", action="store_true", help="keep the stack's folder (logs)")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="lakeview-bench-flood-"))
    redis = _redis(root)
    from contextlib import ExitStack, nullcontext

    from tests import flood
    from tests.refresh_stack import postgres_database, refresh_stack
    from tests.spark.conftest import rest_catalog_conf

    try:
        with ExitStack() as resources:
            database = resources.enter_context(
                postgres_database(args.postgres) if args.postgres else nullcontext(None)
            )
            print(f"database: {'PostgreSQL' if database else 'SQLite'}", flush=True)
            stack = resources.enter_context(
                refresh_stack(
                    root / "stack",
                    deployed=True,
                    worker=False,
                    extra_env={"WEB_NICE": str(args.web_nice)},
                    database_url=database,
                )
            )
            scenario = flood.prepare(stack)
            sends = flood.abusive_sends(scenario)

            def measure():  # noqa: ANN202
                return flood.measure(
                    sends,
                    load_table_url=scenario.load_table_url,
                    token=scenario.engine_token,
                    engines=args.engines,
                    interval=args.interval,
                    rounds=args.rounds,
                )

            report("no worker", measure())

            from runtime.spark.session import build_spark_session

            stack.start_worker(nice=10)
            spark = build_spark_session(
                master="local[1]",
                jars_dir=str(REPO / "var" / "jars"),
                warehouse=str(root / "local-warehouse"),
                catalog_name="local",
                app_name="bench-flood",
            )
            for key, value in rest_catalog_conf(stack.server, name="fx").items():
                spark.conf.set(key, value)
            spark.sql("INSERT INTO fx.flood.t VALUES (1, '2024-01-01'), (2, '2024-01-02')")
            spark.stop()
            created = stack.statements(
                "CREATE MATERIALIZED TABLE slow FRESHNESS = INTERVAL '1' DAY "
                "REFRESH_MODE = FULL AS SELECT p.id, sum(r.id % 7) AS s FROM t p "
                "CROSS JOIN range(20000000000) r GROUP BY p.id",
                "flood",
            )
            run_id = created.json()["results"][0]["run_id"]
            stack.wait_for(
                lambda: stack.run(run_id)["state"] == "RUNNING", timeout=180, what="the refresh"
            )
            report("one busy worker (a long refresh holds its Spark)", measure())
    finally:
        if redis is not None:
            redis.terminate()
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
