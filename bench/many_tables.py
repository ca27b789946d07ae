"""What one machine holds: FULL tables at one-minute freshness and continuous tables at 10 s,
growing in steps until ticks run late or lag passes the freshness.

Starts the whole stack (the app under gunicorn, the Celery worker, celery-beat, the
streaming process, a Redis of its own unless `REDIS_URL` is set) on a fresh SQLite database
and a source `bench.events` that a writer appends `--rate` rows to every second (one
pyiceberg commit a second). Each step grows the catalog to N FULL tables (`full_<i>`: a
GROUP BY over the source, FRESHNESS = INTERVAL '1' MINUTE, REFRESH_MODE = FULL) and M
continuous ones (`cont_<j>`: a filter every row passes, FRESHNESS = INTERVAL '10' SECOND),
waits until the new streams run and a minute boundary passes, then measures for
`--step-minutes`:

- ticks on time: of the scheduled ticks of every FULL table in the window (one a minute,
  the tick being the refresh's `schedule_time`), those whose run refreshed the table
  before the next tick, so that it kept its freshness (the source changes every second:
  every tick has work); a tick with no run, skipped behind the previous one, failed or
  ended later, is late;
- run start delay p99: a scheduled run's start after its tick;
- lag p99 / freshness: each append's time from its commit to the first moment a
  continuous table holds its rows (polled from the catalog's mirror every 0.25 s), over
  every continuous table, divided by the 10 s freshness;
- CPU (% of one core) and peak resident memory of each process with what it started
  (its Spark JVM, gunicorn's workers).

It stops after the first step whose ticks on time fall under 95% or whose lag passes the
freshness (`--keep-going` runs every step).

    .venv/bin/python bench/many_tables.py [--steps 2x1,4x2,8x4,16x8,32x16]
        [--step-minutes 3] [--rate 100] [--keep-going] [--keep]
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.processes import cpu_seconds, rss_bytes  # noqa: E402
from bench.soak import (  # noqa: E402
    figure,
    moment,
    percentile,
    reading,
    table_row,
    total_records,
)
from bench.stack import NS, events_source, whole_stack  # noqa: E402

FULL_QUERY = "SELECT k, count(*) AS n, sum(v) AS total FROM events WHERE v >= {i} GROUP BY k"
CONTINUOUS_QUERY = "SELECT id, k, v FROM events WHERE v > -{j}"  # every row passes
FULL_INTERVAL = 60.0
CONTINUOUS_FRESHNESS = 10.0
TICKS_GOAL = 0.95
LAG_GOAL = 1.0


@dataclass
class Appends:
    """The writer's commits: (rows in the source after it, commit time)."""

    done: list[tuple[int, float]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def since(self, start: float, end: float) -> list[tuple[int, float]]:
        with self.lock:
            return [(n, t) for n, t in self.done if start <= t < end]


@dataclass
class Visible:
    """For each continuous table, when its row count first reached each value polled."""

    firsts: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def seen(self, name: str, rows: int, at: float) -> None:
        with self.lock:
            history = self.firsts.setdefault(name, [])
            if not history or rows > history[-1][0]:
                history.append((rows, at))

    def first_holding(self, name: str, rows: int) -> float | None:
        with self.lock:
            return next((t for n, t in self.firsts.get(name, []) if n >= rows), None)


def parse_steps(text: str) -> list[tuple[int, int]]:
    steps = []
    for part in text.split(","):
        full, _, continuous = part.partition("x")
        steps.append((int(full), int(continuous)))
    return steps


def scheduled_runs(db_path: Path, start: float, end: float) -> list[dict]:
    """Scheduled runs of the bench's FULL tables whose tick fell in [start, end)."""
    with reading(db_path) as connection:
        rows = connection.execute(
            "SELECT table_name, schedule_time, started_at, finished_at, state "
            "FROM refresh_refreshrun "
            "WHERE trigger = 'SCHEDULED' AND table_name LIKE ?",
            (f"{NS}.full_%",),
        ).fetchall()
    found = []
    for row in rows:
        tick = moment(row["schedule_time"])
        if tick is not None and start <= tick < end:
            found.append(
                {
                    **dict(row),
                    "tick": tick,
                    "start": moment(row["started_at"]),
                    "end": moment(row["finished_at"]),
                }
            )
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", default="2x1,4x2,8x4,16x8,32x16")
    parser.add_argument("--step-minutes", type=float, default=3.0)
    parser.add_argument("--rate", type=int, default=100)
    parser.add_argument("--keep-going", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir")
    args = parser.parse_args()

    import pyarrow as pa

    stop = threading.Event()
    try:
        with whole_stack("lakeview-bench-many-", keep=args.keep) as (stack, redis):
            db_path = Path(stack.server.db_path)
            _, schema, events = events_source(stack)
            appends, visible = Appends(), Visible()
            continuous: list[str] = []
            table_ids: dict[str, int] = {}

            def write() -> None:
                written = 0
                while not stop.is_set():
                    began = time.time()
                    ids = list(range(written, written + args.rate))
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
                    written += args.rate
                    with appends.lock:
                        appends.done.append((written, time.time()))
                    stop.wait(max(0.0, 1.0 - (time.time() - began)))

            def poll() -> None:
                while not stop.is_set():
                    with reading(db_path) as connection:
                        for name in list(continuous):
                            if name not in table_ids:
                                table_ids[name] = table_row(connection, name)["id"]
                            rows = total_records(connection, table_ids[name])
                            visible.seen(name, rows, time.time())
                    stop.wait(0.25)

            processes = {
                "web": stack.server.process.pid,
                "worker": stack.worker.pid,
                "beat": stack.beat.pid,
                "streams": stack.streams.pid,
                **({"redis": redis.pid} if redis is not None else {}),
            }
            peaks: dict[str, int] = dict.fromkeys(processes, 0)

            def sample_memory() -> None:
                while not stop.is_set():
                    for name, pid in processes.items():
                        peaks[name] = max(peaks[name], rss_bytes(pid))
                    stop.wait(2.0)

            threads = [threading.Thread(target=f, daemon=True) for f in (write, poll)]
            threads.append(threading.Thread(target=sample_memory, daemon=True))
            for thread in threads:
                thread.start()

            full_count = 0
            print(
                "step  FULL  CONT  ticks on time  start delay p99  lag p99 / freshness  "
                + "  ".join(f"{name} CPU% / peak MB" for name in processes),
                flush=True,
            )
            for step, (n_full, n_continuous) in enumerate(parse_steps(args.steps), 1):
                while full_count < n_full:
                    answer = stack.statements(
                        f"CREATE MATERIALIZED TABLE {NS}.full_{full_count} "
                        "FRESHNESS = INTERVAL '1' MINUTE REFRESH_MODE = FULL AS "
                        + FULL_QUERY.format(i=full_count % 7)
                    )
                    assert answer.status_code == 200, answer.text
                    full_count += 1
                while len(continuous) < n_continuous:
                    name = f"cont_{len(continuous)}"
                    answer = stack.statements(
                        f"CREATE MATERIALIZED TABLE {NS}.{name} "
                        "FRESHNESS = INTERVAL '10' SECOND AS "
                        + CONTINUOUS_QUERY.format(j=len(continuous) + 1)
                    )
                    assert answer.status_code == 200, answer.text
                    continuous.append(name)

                def running(names: list[str] = continuous) -> bool:
                    base = f"{stack.server.base_url}/api/namespaces/{NS}/materialized-tables"
                    return all(
                        stack.api.get(f"{base}/{n}/", timeout=30).json().get("stream_status")
                        == "RUNNING"
                        for n in names
                    )

                stack.wait_for(running, timeout=600, what="every stream to run")
                # The window starts at a minute boundary: whole minutes of ticks in it.
                start = (time.time() // FULL_INTERVAL + 1) * FULL_INTERVAL
                time.sleep(max(0.0, start - time.time()))
                cpu_before = {name: cpu_seconds(pid) for name, pid in processes.items()}
                for name in peaks:
                    peaks[name] = 0
                time.sleep(args.step_minutes * 60)
                end = time.time()
                cpu = {
                    name: (cpu_seconds(pid) - cpu_before[name]) / (end - start)
                    for name, pid in processes.items()
                }
                # Give the window's last appends and ticks the time they are allowed.
                time.sleep(FULL_INTERVAL + 1)

                ticks = int((end - start) // FULL_INTERVAL) * n_full
                runs = scheduled_runs(db_path, start, start + (ticks // max(n_full, 1)) * 60)
                delays = [r["start"] - r["tick"] for r in runs if r["start"] is not None]
                on_time = sum(
                    1
                    for r in runs
                    if r["end"] is not None
                    and r["state"] == "SUCCEEDED"
                    and r["end"] - r["tick"] <= FULL_INTERVAL
                )
                late_share = on_time / ticks if ticks else 1.0
                lags = []
                for rows, committed in appends.since(start, end - CONTINUOUS_FRESHNESS):
                    for name in continuous:
                        seen = visible.first_holding(name, rows)
                        lags.append((seen if seen is not None else time.time()) - committed)
                lag_p99 = percentile(lags, 0.99)
                ratio = None if lag_p99 is None else lag_p99 / CONTINUOUS_FRESHNESS
                print(
                    f"{step:>4}  {n_full:>4}  {n_continuous:>4}  "
                    f"{on_time:>4}/{ticks:<4} {late_share:>4.0%}  "
                    f"{figure(percentile(delays, 0.99), 1):>12} s  "
                    f"{figure(ratio):>19}  "
                    + "  ".join(
                        f"{cpu[name] * 100:>6.0f} / {peaks[name] / 2**20:>6,.0f}"
                        for name in processes
                    ),
                    flush=True,
                )
                if not args.keep_going and (
                    late_share < TICKS_GOAL or (ratio is not None and ratio > LAG_GOAL)
                ):
                    print(
                        f"stopped: ticks on time under {TICKS_GOAL:.0%} or lag over the "
                        "freshness; the step before is what this machine holds",
                        flush=True,
                    )
                    break
            stop.set()
            for thread in threads:
                thread.join(timeout=30)
    finally:
        stop.set()


if __name__ == "__main__":
    main()
