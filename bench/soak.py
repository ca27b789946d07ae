"""A soak: do materialized tables stay the same size, and as fresh, hour after hour?

Starts the whole stack (the app under gunicorn, a Celery worker, celery-beat with the
maintenance sweep every 30 s, the streaming process, Redis) on a fresh SQLite database,
creates a source table `bench.events` and two materialized tables over it:

- `filtered`: CONTINUOUS, `--freshness` seconds (10), a filter (`WHERE v > 0`, 5 rows in 7);
- `totals`: FULL, refreshed every minute, an aggregation (`GROUP BY k`, 10 groups);

then, after one warm-up append that the stream has written (not measured: the first
micro-batch's Spark is cold), appends `--rate` rows a second (1,000) to the source, one
pyiceberg commit every `--every` seconds (5), for `--minutes` (60). Every `--sample`
seconds (30; less on short runs) it reads, for each materialized table: its current
metadata.json's bytes, the metadata files kept in its metadata folder, the snapshots in its
current metadata, the live data files (the current snapshot's `total-data-files`); and the
app's history of refreshes
(micro-batches and scheduled refreshes, started to finished: the commit time). A poller
reads the filtered table's current snapshot in the app's database every 0.25 s: an append's
lag is the time from its commit to the first snapshot holding all its rows.

Prints a report at 10 minutes (at a third of `--minutes` on shorter runs) and at the end:
sizes now and their peak over the window before, commit time p50 / p99 over that window,
lag p99 over the freshness; then each size's peak at the end over its peak at 10 minutes
(goal: at most 1.5, flat rather than growing with time), the filtered table's lag p99 over
its freshness in every window (goal: at most 0.7 throughout; a FULL table's lag, an interval
plus its refresh just before each refresh, is shown without a goal), and, once the tables
caught up with the last append, whether both are exact: each equals its query over the
source (computed by pyarrow over the source's rows, read with pyiceberg), no duplicates.

    .venv/bin/python bench/soak.py [--minutes 60] [--rate 1000] [--every 5] [--freshness 10]
        [--sample 30] [--maintain-source] [--keep]
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote, urlparse

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.stack import NS, events_source, whole_stack  # noqa: E402

FILTER = "SELECT id, k, v FROM events WHERE v > 0"
TOTALS = "SELECT k, sum(v) AS total, count(*) AS n FROM events GROUP BY k"
GROUPS = 10
#: Size figures, as (key, label); each one's goal is end / 10 min at most SIZE_GOAL.
SIZES = (
    ("metadata_bytes", "metadata.json bytes"),
    ("metadata_files", "metadata files kept"),
    ("snapshots", "snapshots"),
    ("data_files", "data files"),
)
SIZE_GOAL = 1.5
LAG_GOAL = 0.7


def passing_below(n: int) -> int:
    """How many of the ids 0 .. n-1 pass FILTER (v = id % 7 - 1 > 0)."""
    return 5 * (n // 7) + max(0, n % 7 - 2)


def connect(db_path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=10)
    connection.row_factory = sqlite3.Row
    return connection


@contextmanager
def reading(db_path: Path) -> Iterator[sqlite3.Connection]:
    connection = connect(db_path)
    try:
        yield connection
    finally:
        connection.close()


def local(location: str) -> Path:
    """A file:// location (or a plain path) as a local path."""
    if "://" in location or location.startswith("file:"):
        return Path(unquote(urlparse(location).path))
    return Path(location)


def table_row(connection: sqlite3.Connection, name: str) -> sqlite3.Row:
    return connection.execute(
        "SELECT o.id, o.location, o.metadata_location, t.current_snapshot_id "
        "FROM catalog_catalogobject o JOIN catalog_table t ON t.catalogobject_ptr_id = o.id "
        "JOIN catalog_namespace n ON n.id = o.namespace_id WHERE n.name = ? AND o.name = ?",
        (NS, name),
    ).fetchone()


def total_records(connection: sqlite3.Connection, table_id: int) -> int:
    """Rows in a table's current snapshot, from the catalog's mirror of its snapshots."""
    row = connection.execute(
        "SELECT s.summary FROM catalog_table t JOIN catalog_tablesnapshot s "
        "ON s.table_id = t.catalogobject_ptr_id AND s.snapshot_id = t.current_snapshot_id "
        "WHERE t.catalogobject_ptr_id = ?",
        (table_id,),
    ).fetchone()
    if row is None:
        return 0
    return int(json.loads(row["summary"] or "{}").get("total-records", 0))


def sizes(connection: sqlite3.Connection, name: str) -> dict[str, int]:
    """A table's size figures now, from its current metadata file and metadata folder."""
    row = table_row(connection, name)
    path = local(row["metadata_location"])
    metadata = json.loads(path.read_bytes())
    current = metadata.get("current-snapshot-id")
    snapshots = metadata.get("snapshots") or []
    summary = next((s.get("summary", {}) for s in snapshots if s["snapshot-id"] == current), {})
    kept = sum(1 for p in path.parent.iterdir() if p.name.endswith(".metadata.json"))
    return {
        "metadata_bytes": path.stat().st_size,
        "metadata_files": kept,
        "snapshots": len(snapshots),
        "data_files": int(summary.get("total-data-files", 0)),
        "rows": int(summary.get("total-records", 0)),
    }


def moment(text: str | None) -> float | None:
    """A datetime the app's database holds (UTC) as a Unix time."""
    if not text:
        return None
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def runs(connection: sqlite3.Connection) -> list[dict]:
    """Finished single refreshes of the bench's tables (not the hourly aggregates)."""
    return [
        dict(row)
        for row in connection.execute(
            "SELECT id, table_name, trigger, action, state, started_at, finished_at, "
            "data_timestamp, error FROM refresh_refreshrun WHERE table_name LIKE ? "
            "AND finished_at IS NOT NULL AND batches = 1",
            (f"{NS}.%",),
        )
    ]


def maintenance_runs(connection: sqlite3.Connection) -> Counter:
    try:
        rows = connection.execute(
            "SELECT table_name, action, state, count(*) AS n FROM maintenance_maintenancerun "
            "WHERE table_name LIKE ? GROUP BY table_name, action, state",
            (f"{NS}.%",),
        ).fetchall()
    except sqlite3.OperationalError:  # no maintenance app (yet)
        return Counter()
    return Counter({(r["table_name"], r["action"], r["state"]): r["n"] for r in rows})


def maintenance_errors(connection: sqlite3.Connection) -> dict[tuple[str, str], str]:
    """The last error of each failed maintenance action, by (table, action)."""
    try:
        rows = connection.execute(
            "SELECT table_name, action, error FROM maintenance_maintenancerun "
            "WHERE table_name LIKE ? AND state = 'FAILED' ORDER BY id",
            (f"{NS}.%",),
        ).fetchall()
    except sqlite3.OperationalError:
        return {}
    return {(r["table_name"], r["action"]): r["error"] for r in rows}


def percentile(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(len(ordered) * fraction) - 1)]


def figure(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--every", type=float, default=5.0)
    parser.add_argument("--freshness", type=int, default=10)
    parser.add_argument("--sample", type=float, default=30.0)
    parser.add_argument(
        "--maintain-source",
        action="store_true",
        help="turn maintenance on for the source too (10 minutes of snapshots kept)",
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the temp dir (database, warehouse, logs)"
    )
    args = parser.parse_args()

    import pyarrow as pa
    import pyarrow.compute as pc

    duration = args.minutes * 60
    first = min(600.0, duration / 3)  # the first report, and the length of a window
    every_sample = min(args.sample, first / 10)
    checkpoints = [first, duration]
    full_seconds = 60
    names = {"filtered": f"CONTINUOUS, {args.freshness} s", "totals": "FULL, 1 min"}

    with whole_stack(
        "lakeview-bench-soak-", keep=args.keep, extra_env={"MAINTENANCE_SWEEP_SECONDS": "30"}
    ) as (stack, _redis):
        db_path = Path(stack.server.db_path)
        properties = {}
        if args.maintain_source:
            properties = {
                "lakeview.maintenance.enabled": "true",
                "history.expire.max-snapshot-age-ms": str(600_000),
                "write.metadata.delete-after-commit.enabled": "true",
                "write.metadata.previous-versions-max": "10",
            }
        catalog, schema, events = events_source(stack, properties=properties)
        for sql in (
            f"CREATE MATERIALIZED TABLE {NS}.filtered "
            f"FRESHNESS = INTERVAL '{args.freshness}' SECOND AS {FILTER}",
            f"CREATE MATERIALIZED TABLE {NS}.totals FRESHNESS = INTERVAL '1' MINUTE "
            f"REFRESH_MODE = FULL AS {TOTALS}",
        ):
            answer = stack.statements(sql)
            assert answer.status_code == 200, answer.text
        print("waiting for the stream to start ...", flush=True)
        detail = f"{stack.server.base_url}/api/namespaces/{NS}/materialized-tables/filtered/"
        stack.wait_for(
            lambda: stack.api.get(detail, timeout=30).json().get("stream_status") == "RUNNING",
            timeout=300,
            what="the stream",
        )
        with reading(db_path) as connection:
            filtered_id = table_row(connection, "filtered")["id"]
        batch = int(args.rate * args.every)

        def rows(first_id: int) -> pa.Table:
            ids = pa.array(range(first_id, first_id + batch), pa.int64())
            return pa.table(
                {
                    "id": ids,
                    "k": pc.binary_join_element_wise(
                        "k", pc.cast(pc.remainder(ids, GROUPS), pa.string()), ""
                    ),
                    "v": pc.subtract(pc.cast(pc.remainder(ids, 7), pa.float64()), 1.0),
                },
                schema=schema,
            )

        # Warm-up, not measured: the stream's first micro-batch with rows (its Spark's
        # first write) takes seconds more than the next ones.
        events.append(rows(0))

        def warmed_up() -> bool:
            with reading(db_path) as connection:
                return total_records(connection, filtered_id) >= passing_below(batch)

        stack.wait_for(warmed_up, timeout=120, what="the first micro-batch")

        appended: list[tuple[int, float]] = []  # (rows of filtered it needs, commit time)
        seen: dict[int, float] = {}  # index in appended -> first look that saw it
        samples: list[tuple[float, str, dict]] = []  # (elapsed, table, sizes)
        history: dict[int, dict] = {}  # run id -> run
        done = threading.Event()
        lock = threading.Lock()
        started = time.time()

        def poll() -> None:
            connection = connect(db_path)
            waiting = 0
            try:
                while True:
                    with lock:
                        count = len(appended)
                    if done.is_set() and waiting >= count:
                        return
                    try:
                        total = total_records(connection, filtered_id)
                    except sqlite3.OperationalError:
                        time.sleep(0.25)
                        continue
                    now = time.time()
                    while waiting < count and appended[waiting][0] <= total:
                        seen[waiting] = now
                        waiting += 1
                    time.sleep(0.25)
            finally:
                connection.close()

        def take_sample(connection: sqlite3.Connection) -> None:
            elapsed = time.time() - started
            for name in names:
                try:
                    samples.append((elapsed, name, sizes(connection, name)))
                except (OSError, ValueError, sqlite3.OperationalError) as error:
                    print(f"  (no sample of {name}: {error})", flush=True)
            for run in runs(connection):
                history[run["id"]] = run

        def sample() -> None:
            connection = connect(db_path)
            try:
                while not done.wait(every_sample):
                    take_sample(connection)
            finally:
                connection.close()

        poller = threading.Thread(target=poll, daemon=True)
        sampler = threading.Thread(target=sample, daemon=True)
        poller.start()
        sampler.start()

        def lags_between(start: float, end: float) -> list[float]:
            """Lag of each append committed in [start, end) seconds into the run."""
            return [
                seen[i] - at
                for i, (_, at) in enumerate(appended)
                if start <= at - started < end and i in seen
            ]

        def window_runs(name: str, start: float, end: float) -> list[dict]:
            chosen = []
            for run in history.values():
                if run["table_name"] != f"{NS}.{name}" or run["state"] != "SUCCEEDED":
                    continue
                if run["trigger"] not in ("CONTINUOUS", "SCHEDULED"):
                    continue
                finished = moment(run["finished_at"]) - started
                if start <= finished < end:
                    chosen.append(run)
            return chosen

        def full_lag_peaks(start: float, end: float) -> list[float]:
            """The FULL table's lag just before each refresh finished (the sawtooth's
            peaks): its finish minus the previous refresh's data timestamp."""
            done_runs = sorted(
                (
                    r
                    for r in history.values()
                    if r["table_name"] == f"{NS}.totals"
                    and r["state"] in ("SUCCEEDED", "SKIPPED")
                    and r["data_timestamp"]
                ),
                key=lambda r: moment(r["finished_at"]),
            )
            peaks = []
            for previous, run in zip(done_runs, done_runs[1:], strict=False):
                finished = moment(run["finished_at"])
                if start <= finished - started < end:
                    peaks.append(finished - moment(previous["data_timestamp"]))
            return peaks

        def peak(name: str, key: str, start: float, end: float) -> int | None:
            values = [s[key] for t, n, s in samples if n == name and start <= t <= end + 1]
            return max(values) if values else None

        reports: dict[float, dict] = {}

        def report(at: float) -> None:
            with reading(db_path) as connection:
                take_sample(connection)
            start = max(0.0, at - first)
            print()
            print(
                f"at {at / 60:.1f} min (sizes now / peak, the rest over the last "
                f"{(at - start) / 60:.1f} min)"
            )
            print(f"{'':28}" + "".join(f"{n + ' (' + m + ')':>30}" for n, m in names.items()))
            figures: dict[str, dict] = {}
            for name in names:
                now = next(s for t, n, s in reversed(samples) if n == name)
                figures[name] = {key: (now[key], peak(name, key, start, at)) for key, _ in SIZES}
            for key, label in SIZES:
                cells = [
                    f"{figures[n][key][0]:,} / {figures[n][key][1]:,}"
                    if figures[n][key][1] is not None
                    else "-"
                    for n in names
                ]
                print(f"{label:28}" + "".join(f"{c:>30}" for c in cells))
            cells = []
            for name in names:
                durations = [
                    moment(r["finished_at"]) - moment(r["started_at"])
                    for r in window_runs(name, start, at)
                ]
                p50 = statistics.median(durations) if durations else None
                p99 = percentile(durations, 0.99)
                figures[name]["commits"] = len(durations)
                cells.append(f"{figure(p50)} / {figure(p99)} s ({len(durations)})")
            print(f"{'commit time p50 / p99':28}" + "".join(f"{c:>30}" for c in cells))
            lags = lags_between(start, at)
            lag = percentile(lags, 0.99)
            full = percentile(full_lag_peaks(start, at), 0.99)
            figures["filtered"]["lag"] = None if lag is None else lag / args.freshness
            figures["totals"]["lag"] = None if full is None else full / full_seconds
            cells = [
                f"{figure(figures['filtered']['lag'])} (appends)",
                f"{figure(figures['totals']['lag'])} (before refreshes)",
            ]
            print(f"{'lag p99 / freshness':28}" + "".join(f"{c:>30}" for c in cells))
            with reading(db_path) as connection:
                source = sizes(connection, "events")
            print(
                f"source events (info)        {source['rows']:,} rows, "
                f"{source['metadata_bytes']:,} metadata bytes, {source['snapshots']} "
                f"snapshots, {source['data_files']} data files"
            )
            sys.stdout.flush()
            reports[at] = figures

        print(
            f"appending {args.rate} rows/s ({args.rate * args.every:,.0f} every "
            f"{args.every:g} s) for {args.minutes:g} min ...",
            flush=True,
        )
        next_id = batch  # after the warm-up's rows
        tick = 0
        pending = list(checkpoints)
        progress_every = max(60.0, first / 2)
        next_progress = progress_every
        while True:
            elapsed = time.time() - started
            if pending and elapsed >= pending[0]:
                report(pending.pop(0))
                if not pending:
                    break
            if elapsed >= next_progress:
                lags = lags_between(0, elapsed)
                print(
                    f"  [{elapsed / 60:.1f} min] {next_id:,} rows appended, "
                    f"{len(lags)}/{len(appended)} appends seen, lag p99 "
                    f"{figure(percentile(lags, 0.99))} s",
                    flush=True,
                )
                next_progress += progress_every
            events.append(rows(next_id))
            next_id += batch
            with lock:
                appended.append((passing_below(next_id), time.time()))
            tick += 1
            time.sleep(max(0.0, started + tick * args.every - time.time()))
        last_commit = appended[-1][1]

        # The end: the tables catch up with the last append, then are checked.
        print()
        print("waiting for both tables to catch up with the last append ...", flush=True)
        done.set()
        poller.join(timeout=180)
        sampler.join(timeout=30)
        caught_up = len(seen) == len(appended)

        def totals_refreshed() -> bool:
            with reading(db_path) as connection:
                return any(
                    r["state"] == "SUCCEEDED" and moment(r["data_timestamp"]) > last_commit
                    for r in runs(connection)
                    if r["table_name"] == f"{NS}.totals" and r["data_timestamp"]
                )

        try:
            stack.wait_for(totals_refreshed, timeout=3 * full_seconds, what="a refresh of totals")
        except AssertionError:
            print("  totals was not refreshed after the last append", flush=True)

        source = events.scan().to_arrow().sort_by("id")
        filtered = catalog.load_table(f"{NS}.filtered").scan().to_arrow().sort_by("id")
        expected = source.filter(pc.greater(source["v"], 0.0))
        distinct = len(pc.unique(filtered["id"]))
        filtered_exact = (
            filtered.num_rows == expected.num_rows == passing_below(next_id)
            and distinct == filtered.num_rows
            and all(
                filtered[c].combine_chunks().equals(expected[c].combine_chunks())
                for c in ("id", "k", "v")
            )
        )
        grouped = source.group_by("k").aggregate([("v", "sum"), ("v", "count")])
        want = {
            k: (total, n)
            for k, total, n in zip(
                grouped["k"].to_pylist(),
                grouped["v_sum"].to_pylist(),
                grouped["v_count"].to_pylist(),
                strict=True,
            )
        }
        totals = catalog.load_table(f"{NS}.totals").scan().to_arrow()
        got = {
            k: (total, n)
            for k, total, n in zip(
                totals["k"].to_pylist(),
                totals["total"].to_pylist(),
                totals["n"].to_pylist(),
                strict=True,
            )
        }
        totals_exact = got == want and totals.num_rows == len(want)

        ten, end = reports[checkpoints[0]], reports[checkpoints[1]]
        print()
        print(
            f"end ({args.minutes:g} min) / {first / 60:.1f} min, peaks "
            f"(goal: sizes at most {SIZE_GOAL}, lag p99 at most {LAG_GOAL} x freshness)"
        )
        print(f"{'':28}" + "".join(f"{n:>30}" for n in names))
        verdicts = []
        for key, label in SIZES:
            cells = []
            for name in names:
                before, after = ten[name][key][1], end[name][key][1]
                if not before or after is None:
                    cells.append(f"{before} -> {after}")
                    continue
                ratio = after / before
                verdicts.append(ratio <= SIZE_GOAL)
                verdict = "PASS" if ratio <= SIZE_GOAL else "FAIL"
                cells.append(f"{before:,} -> {after:,} {ratio:.2f} {verdict}")
            print(f"{label:28}" + "".join(f"{c:>30}" for c in cells))
        windows = []
        at = 0.0
        while at < duration - 1:
            lags = lags_between(at, min(duration, at + first))
            windows.append(percentile(lags, 0.99))
            at += first
        worst = max((w for w in windows if w is not None), default=None)
        worst_ratio = None if worst is None else worst / args.freshness
        lag_ok = worst_ratio is not None and worst_ratio <= LAG_GOAL and caught_up
        verdicts.append(lag_ok)
        full_worst = percentile(full_lag_peaks(0, duration + 1), 0.99)
        full_ratio = None if full_worst is None else full_worst / full_seconds
        print(
            f"{'lag p99 / freshness, worst':28}"
            f"{figure(worst_ratio) + (' PASS' if lag_ok else ' FAIL'):>30}"
            f"{figure(full_ratio) + ' (info)':>30}"
        )
        print(
            "  filtered, per window: "
            + ", ".join(figure(None if w is None else w / args.freshness) for w in windows)
            + f"; appends never seen: {len(appended) - len(seen)} of {len(appended)}"
        )
        print(
            f"exact at the end: filtered {'yes' if filtered_exact else 'NO'} "
            f"({filtered.num_rows:,} rows, {filtered.num_rows - distinct} duplicates, "
            f"{expected.num_rows:,} expected of {source.num_rows:,} source rows); "
            f"totals {'yes' if totals_exact else 'NO'} ({totals.num_rows} groups)"
        )
        verdicts += [filtered_exact, totals_exact]
        with reading(db_path) as connection:
            counts = maintenance_runs(connection)
            errors = maintenance_errors(connection)
            failed = [r for r in runs(connection) if r["state"] == "FAILED"]
        print(
            "maintenance runs: "
            + (
                ", ".join(
                    f"{table.split('.')[-1]} {action} {state} x{n}"
                    for (table, action, state), n in sorted(counts.items())
                )
                or "none"
            )
        )
        for (table, action), error in sorted(errors.items()):
            first_line = (error.strip().splitlines() or [""])[0]
            print(f"  last {action} error of {table.split('.')[-1]}: {first_line[:300]}")
        if failed:
            print(f"failed refreshes: {len(failed)}, the last: {failed[-1]['error'][:300]}")
        print("ALL PASS" if all(verdicts) else "NOT ALL PASS")


if __name__ == "__main__":
    main()
