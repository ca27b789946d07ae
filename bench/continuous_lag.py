"""How far a continuous materialized table lags behind a steadily appended source.

Starts the whole stack (the app under gunicorn, a Celery worker, celery-beat, the streaming
process, Redis) on a fresh SQLite database, creates a source table and a CONTINUOUS
materialized table over it (a filter, `--freshness` seconds), then appends `--rate` rows per
second (one pyiceberg commit a second) for `--minutes`. A poller looks at the materialized
table every 0.25 s for the newest id it holds; an append's lag is the time from its commit
to the first look that sees all its rows.

Prints lag p50 and p99 divided by the declared freshness (target: p99 at most 1.0), and the
streaming process's CPU seconds (its Python and its JVM) per 1,000 rows.

    .venv/bin/python bench/continuous_lag.py [--minutes 3] [--rate 1000] [--freshness 10]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--freshness", type=int, default=10)
    args = parser.parse_args()

    import pyarrow as pa
    import pyarrow.compute as pc
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.expressions import GreaterThan

    from bench.processes import cpu_seconds
    from bench.refresh import _redis
    from tests.refresh_stack import refresh_stack

    root = Path(tempfile.mkdtemp(prefix="lakeview-bench-lag-"))
    redis = _redis(root)
    try:
        with refresh_stack(root / "stack") as stack:
            catalog = RestCatalog(
                "lv", uri=stack.server.iceberg_uri, credential=stack.server.credential
            )
            catalog.create_namespace("bench")
            schema = pa.schema(
                [
                    pa.field("id", pa.int64(), nullable=False),
                    pa.field("k", pa.string()),
                    pa.field("v", pa.float64()),
                ]
            )
            events = catalog.create_table("bench.events", schema=schema)
            response = stack.statements(
                "CREATE MATERIALIZED TABLE bench.fresh "
                f"FRESHNESS = INTERVAL '{args.freshness}' SECOND "
                "AS SELECT id, k, v FROM events WHERE v >= 0"
            )
            assert response.status_code == 200, response.text
            print("waiting for the stream to start ...", flush=True)
            stack.wait_for(
                lambda: stack.api.get(
                    f"{stack.server.base_url}/api/namespaces/bench/materialized-tables/fresh/"
                )
                .json()
                .get("stream_status")
                == "RUNNING",
                timeout=300,
                what="the stream",
            )
            fresh = catalog.load_table("bench.fresh")
            streams_pid = stack.streams.pid
            cpu_before = cpu_seconds(streams_pid)

            appended: list[tuple[int, float]] = []  # (last id, commit time)
            seen: dict[int, float] = {}
            done = threading.Event()

            def poll() -> None:
                newest = -1
                while not done.is_set() or (appended and newest < appended[-1][0]):
                    fresh.refresh()
                    scan = fresh.scan(row_filter=GreaterThan("id", newest), selected_fields=("id",))
                    ids = scan.to_arrow().column("id")
                    now = time.time()
                    if len(ids):
                        newest = max(newest, pc.max(ids).as_py())
                    for last, _ in appended:
                        if last <= newest and last not in seen:
                            seen[last] = now
                    if done.is_set() and time.time() > deadline + 120:
                        return
                    time.sleep(0.25)

            deadline = time.time() + args.minutes * 60
            poller = threading.Thread(target=poll, daemon=True)
            poller.start()
            next_id = 0
            print(f"appending {args.rate} rows/s for {args.minutes} min ...", flush=True)
            while time.time() < deadline:
                tick = time.time()
                ids = list(range(next_id, next_id + args.rate))
                next_id += args.rate
                events.append(
                    pa.table(
                        {
                            "id": ids,
                            "k": [f"k{i % 10}" for i in ids],
                            "v": [float(i % 7) for i in ids],
                        },
                        schema=schema,
                    )
                )
                appended.append((ids[-1], time.time()))
                time.sleep(max(0.0, 1.0 - (time.time() - tick)))
            done.set()
            poller.join(timeout=180)
            cpu = cpu_seconds(streams_pid) - cpu_before

            lags = sorted(seen[last] - at for last, at in appended if last in seen)
            missing = len(appended) - len(lags)
            p50 = statistics.median(lags)
            p99 = lags[max(0, int(len(lags) * 0.99) - 1)]
            rows = next_id
            print()
            print(f"appends                      {len(appended)} ({rows:,} rows)")
            print(f"declared freshness           {args.freshness} s")
            print(
                f"lag p50                      {p50:.2f} s = {p50 / args.freshness:.2f} x freshness"
            )
            print(
                f"lag p99                      {p99:.2f} s = {p99 / args.freshness:.2f} x freshness"
            )
            print("                             (target: p99 at most 1.0 x freshness)")
            print(f"appends never seen           {missing}")
            per_thousand = cpu / (rows / 1000)
            print(f"streaming process CPU        {cpu:.1f} s = {per_thousand:.3f} s per 1,000 rows")
    finally:
        if redis is not None:
            redis.terminate()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
