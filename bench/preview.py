"""A 100-row preview with a partition filter on a table of 12 million rows, beside chdb.

Times, in one run, what a user waits for when previewing an attached table, against chdb
(ClickHouse in-process, `icebergLocal()`) running the same query on the same files:

    ours:  catalog.previews.preview_table(table, row_filter=<one day>, limit=100)
           (the Django glue: the attached table followed to its newest metadata file, the
           process's metadata cache, catalog.core.preview), and, as a second line, the API
           GET /api/namespaces/bench/tables/events/preview?filter=... under gunicorn;
    chdb:  SELECT * FROM icebergLocal('<table>') WHERE <the same day> LIMIT 100

each with the cache cold (ours: a fresh metadata cache; chdb: a fresh session and its Iceberg
metadata cache dropped) and warm (the same call again), N rounds alternating which side goes
first, and prints medians, p90s and the ratios ours / chdb (target: at most 1.5).

The table is made once with Spark (Iceberg's Hadoop catalog, so `vN.metadata.json` names
that chdb reads): one append per day, 60 days of 200,000 rows, 4 Parquet files each,
partitioned by days(ts), and kept under --data-dir (var/bench/preview) for later runs.

    .venv/bin/pip install -e '.[bench]'      # chdb, about 530 MB
    .venv/bin/python bench/preview.py [--rounds 9] [--no-http] [--profile]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DEFAULT_DATA_DIR = ROOT / "var" / "bench" / "preview"
TARGET = 1.5
LIMIT = 100

DAYS = 60
ROWS_PER_DAY = 200_000
FILES_PER_DAY = 4
FIRST_DAY = datetime.date(2024, 1, 1)
#: The day the filter picks (the middle of the table).
FILTER_DAY = FIRST_DAY + datetime.timedelta(days=37)

NAMESPACE = "bench"
TABLE = "events"
INSTALL = ".venv/bin/pip install -e '.[bench]'   (or: .venv/bin/pip install chdb)"


def _day_bounds() -> tuple[str, str]:
    start = datetime.datetime.combine(FILTER_DAY, datetime.time())
    return start.isoformat(), (start + datetime.timedelta(days=1)).isoformat()


def our_filter() -> str:
    """The partition filter in pyiceberg's expression language (our API's `filter`)."""
    start, end = _day_bounds()
    return f"ts >= '{start}+00:00' and ts < '{end}+00:00'"


def chdb_query(table_path: Path) -> str:
    start, end = (value.replace("T", " ") for value in _day_bounds())
    return (
        f"SELECT * FROM icebergLocal('{table_path}') "
        f"WHERE ts >= '{start}' AND ts < '{end}' LIMIT {LIMIT}"
    )


# -- the table (made once, by Spark, in a subprocess) ------------------------------------------


def table_path(data_dir: Path) -> Path:
    return data_dir / "warehouse" / NAMESPACE / TABLE


def _ready_file(data_dir: Path) -> Path:
    return data_dir / "table.json"


def generate(data_dir: Path) -> None:
    """Write the table with Spark (run in its own process: the JVM is gone before timing)."""
    from runtime.spark.session import build_spark_session

    warehouse = data_dir / "warehouse"
    shutil.rmtree(warehouse, ignore_errors=True)
    warehouse.mkdir(parents=True)
    spark = build_spark_session(
        master="local[2]",
        jars_dir=str(ROOT / "var" / "jars"),
        warehouse=str(warehouse),
        catalog_name="benchcat",
        catalog_conf={"type": "hadoop", "warehouse": str(warehouse)},
        app_name="lakeview-bench-preview",
        extra_conf={"spark.driver.memory": "2g"},
    )
    try:
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS benchcat.{NAMESPACE}")
        spark.sql(
            f"""CREATE TABLE benchcat.{NAMESPACE}.{TABLE} (
                event_id BIGINT NOT NULL,
                user_id BIGINT,
                session_id STRING,
                ts TIMESTAMP NOT NULL,
                event_type STRING,
                country STRING,
                url STRING,
                quantity INT,
                amount DOUBLE,
                price DECIMAL(12, 2)
            ) USING iceberg PARTITIONED BY (days(ts))
            TBLPROPERTIES ('format-version' = '2', 'write.distribution-mode' = 'none')"""
        )
        codes = "US DE FR GB NL SE PL ES IT JP BR IN CA AU MX KR TR AR ZA NO"
        countries = ", ".join(f"'{code}'" for code in codes.split(" "))
        events = "'view', 'view', 'view', 'click', 'click', 'search', 'add_to_cart', 'purchase'"
        for day in range(DAYS):
            date = FIRST_DAY + datetime.timedelta(days=day)
            start_us = (
                int(datetime.datetime.combine(date, datetime.time(), datetime.UTC).timestamp())
                * 1_000_000
            )
            first = day * ROWS_PER_DAY
            frame = spark.range(first, first + ROWS_PER_DAY, numPartitions=FILES_PER_DAY)
            frame = frame.selectExpr(
                "id AS event_id",
                "pmod(xxhash64(id, 1), 2000000) AS user_id",
                "uuid() AS session_id",
                f"timestamp_micros({start_us} + pmod(xxhash64(id, 2), 86400000000)) AS ts",
                f"element_at(array({events}), CAST(pmod(xxhash64(id, 3), 8) + 1 AS INT))"
                " AS event_type",
                f"element_at(array({countries}), CAST(pmod(xxhash64(id, 4), 20) + 1 AS INT))"
                " AS country",
                "concat('https://shop.example.com/p/', pmod(xxhash64(id, 5), 250000),"
                " '?ref=', pmod(xxhash64(id, 6), 97)) AS url",
                "CAST(pmod(xxhash64(id, 7), 5) + 1 AS INT) AS quantity",
                "pmod(xxhash64(id, 8), 1000000) / 1000.0D AS amount",
                "CAST(pmod(xxhash64(id, 9), 5000000) / 100 AS DECIMAL(12, 2)) AS price",
            )
            frame.writeTo(f"benchcat.{NAMESPACE}.{TABLE}").append()
            print(f"  day {day + 1}/{DAYS} written", flush=True)
        files = spark.sql(f"SELECT count(*) FROM benchcat.{NAMESPACE}.{TABLE}.files").first()[0]
        rows = spark.sql(f"SELECT count(*) FROM benchcat.{NAMESPACE}.{TABLE}").first()[0]
    finally:
        spark.stop()
    _ready_file(data_dir).write_text(
        json.dumps({"rows": rows, "files": files, "partitions": DAYS, "snapshots": DAYS})
    )


def ensure_table(data_dir: Path) -> dict[str, Any]:
    ready = _ready_file(data_dir)
    if not ready.exists():
        print(f"Making the table with Spark under {data_dir} (once; a few minutes)", flush=True)
        started = time.monotonic()
        subprocess.run(
            [sys.executable, __file__, "--generate", "--data-dir", str(data_dir)],
            cwd=ROOT,
            check=True,
        )
        print(f"Made in {time.monotonic() - started:.0f} s", flush=True)
    facts = json.loads(ready.read_text())
    metadata = table_path(data_dir) / "metadata"
    facts["bytes"] = sum(
        f.stat().st_size for f in (table_path(data_dir) / "data").rglob("*.parquet")
    )
    facts["metadata_files"] = len(list(metadata.glob("*.metadata.json")))
    return facts


# -- the two sides ------------------------------------------------------------------------------


def require_chdb() -> Any:
    try:
        import chdb  # noqa: F401
        from chdb import session as chdb_session
    except ImportError:
        sys.exit(f"chdb is not installed (a benchmark-only dependency): {INSTALL}")
    return chdb_session


def django_environment(root: Path, data_dir: Path) -> dict[str, str]:
    return {
        "DJANGO_SETTINGS_MODULE": "webapp.settings.dev",
        "DATABASE_URL": f"sqlite:///{root / 'db.sqlite3'}",
        "WAREHOUSE": str(root / "warehouse"),
        "ATTACH_LOCATIONS": str(data_dir / "warehouse"),
        "DEBUG": "0",
        "LOG_LEVEL": "WARNING",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "PYTHONUNBUFFERED": "1",
    }


def setup_catalog(root: Path, data_dir: Path) -> tuple[Any, str]:
    """A throwaway SQLite catalog with the table attached; returns (table, API token)."""
    (root / "warehouse").mkdir()
    os.environ.update(django_environment(root, data_dir))
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from rest_framework.authtoken.models import Token

    from catalog import services

    call_command("migrate", verbosity=0, interactive=False)
    user = get_user_model().objects.create_superuser("bench", "bench@example.com", "bench-pw")
    token = Token.objects.create(user=user).key
    services.create_namespace(name=NAMESPACE, actor=user)
    table = services.attach_table(
        namespace=NAMESPACE, name=TABLE, location=str(table_path(data_dir)), actor=user
    )
    return table, token


class Ours:
    """catalog.previews.preview_table on the attached table (what the API view calls)."""

    def __init__(self, table: Any) -> None:
        from catalog import previews

        self.previews = previews
        self.table = table
        self.filter = our_filter()

    def make_cold(self) -> None:
        self.previews.metadata_cache().clear()

    def query(self) -> Any:
        from catalog import services
        from catalog.models import Table

        # As the API view does: the row is looked up and followed per request.
        table = Table.objects.select_related("namespace").get(pk=self.table.pk)
        table = services.follow_attached(table)
        return self.previews.preview_table(table, row_filter=self.filter, limit=LIMIT)


class Chdb:
    """chdb in-process: cold is a fresh session with ClickHouse's caches dropped (neither
    timed: only the query is), warm the same query again in that session."""

    DROPS = (
        "SYSTEM DROP ICEBERG METADATA CACHE",
        "SYSTEM DROP PARQUET METADATA CACHE",
        "SYSTEM DROP QUERY CONDITION CACHE",
        "SYSTEM DROP QUERY CACHE",
        "SYSTEM DROP SCHEMA CACHE",
        "SYSTEM DROP FORMAT SCHEMA CACHE",
    )

    def __init__(self, chdb_session: Any, path: Path, scratch: Path) -> None:
        self.chdb_session = chdb_session
        self.sql = chdb_query(path)
        self.scratch = scratch
        self.session = None
        self.drops: list[str] = []
        session = self._new_session()
        for statement in self.DROPS:
            try:
                session.query(statement)
                self.drops.append(statement)
            except Exception:  # noqa: BLE001 - a cache this build lacks
                pass

    def _new_session(self) -> Any:
        if self.session is not None:
            self.session.close()
        shutil.rmtree(self.scratch, ignore_errors=True)
        self.session = self.chdb_session.Session(str(self.scratch))
        return self.session

    def make_cold(self) -> None:
        session = self._new_session()
        for statement in self.drops:
            session.query(statement)

    def query(self) -> Any:
        return self.session.query(self.sql, "ArrowTable")

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None


def _check_ours(result: Any) -> None:
    start, end = (datetime.datetime.fromisoformat(v + "+00:00") for v in _day_bounds())
    names = [name for name, _ in result.columns]
    ts = names.index("ts")
    if len(result.rows) != LIMIT:
        sys.exit(f"our preview returned {len(result.rows)} rows, not {LIMIT}")
    bad = [row[ts] for row in result.rows if not start <= row[ts] < end]
    if bad:
        sys.exit(f"our preview returned rows outside the filter: {bad[:3]}")


def _check_chdb(table: Any) -> None:
    start, end = (datetime.datetime.fromisoformat(v + "+00:00") for v in _day_bounds())
    if table.num_rows != LIMIT:
        sys.exit(f"chdb returned {table.num_rows} rows, not {LIMIT}")
    values = table.column("ts").to_pylist()
    aware = [v if v.tzinfo else v.replace(tzinfo=datetime.UTC) for v in values]
    bad = [v for v in aware if not start <= v < end]
    if bad:
        sys.exit(f"chdb returned rows outside the filter: {bad[:3]}")


def _timed(call: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = call()
    return time.perf_counter() - started, result


def measure(ours: Ours, peer: Chdb, rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {
        "ours cold": [],
        "ours warm": [],
        "chdb cold": [],
        "chdb warm": [],
    }
    # One unmeasured round: imports, first-call costs of both.
    for side, check in ((ours, _check_ours), (peer, _check_chdb)):
        side.make_cold()
        check(side.query())
        check(side.query())
    for index in range(rounds):
        sides = [("ours", ours, _check_ours), ("chdb", peer, _check_chdb)]
        if index % 2:
            sides.reverse()
        for name, side, check in sides:
            side.make_cold()  # not timed
            for kind in ("cold", "warm"):
                elapsed, result = _timed(side.query)
                check(result)
                times[f"{name} {kind}"].append(elapsed)
    return times


def _load_average() -> str:
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(0.9 * len(ordered)) - 1))]


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def measure_http(
    root: Path, data_dir: Path, token: str, peer: Chdb, rounds: int
) -> dict[str, list[float]]:
    """The API under gunicorn (one sync worker, DEBUG=0), warm: the worker's cache is warmed
    by a first request, then `rounds` requests, each beside a warm chdb query (alternating
    which goes first)."""
    import requests

    port = _free_port()
    env = {**os.environ, **django_environment(root, data_dir)}
    log = (root / "server.log").open("ab")
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "gunicorn", "webapp.wsgi"),
            *("--bind", f"127.0.0.1:{port}", "--workers", "1", "--timeout", "120"),
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}/api/namespaces/{NAMESPACE}/tables/{TABLE}/preview"
    session = requests.Session()
    session.headers["Authorization"] = f"Token {token}"
    params = {"filter": our_filter(), "limit": str(LIMIT)}
    day = FILTER_DAY.isoformat()

    def api() -> Any:
        response = session.get(url, params=params, timeout=120)
        if response.status_code != 200:
            sys.exit(f"the API answered {response.status_code}: {response.text[:300]}")
        return response.json()

    def check(body: Any) -> None:
        ts = [column["name"] for column in body["columns"]].index("ts")
        if len(body["rows"]) != LIMIT or any(not r[ts].startswith(day) for r in body["rows"]):
            sys.exit(f"the API returned {len(body['rows'])} rows, or rows outside the filter")

    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                check(api())
                break
            except requests.ConnectionError:
                if process.poll() is not None or time.monotonic() > deadline:
                    sys.exit(f"gunicorn did not start (see {root / 'server.log'})")
                time.sleep(0.2)
        peer.query()
        times: dict[str, list[float]] = {"API warm": [], "chdb warm": []}
        for index in range(rounds):
            sides = [("API warm", api, check), ("chdb warm", peer.query, _check_chdb)]
            if index % 2:
                sides.reverse()
            for name, call, verify in sides:
                elapsed, result = _timed(call)
                verify(result)
                times[name].append(elapsed)
        return times
    finally:
        process.terminate()
        process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--no-http", action="store_true", help="skip the API under gunicorn")
    parser.add_argument(
        "--profile", action="store_true", help="cProfile our cold and warm calls after timing"
    )
    parser.add_argument("--json", action="store_true", help="also print the results as JSON")
    parser.add_argument(
        "--regenerate", action="store_true", help="make the table again (with Spark)"
    )
    parser.add_argument("--generate", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    data_dir = args.data_dir.resolve()
    if args.generate:
        generate(data_dir)
        return
    chdb_session = require_chdb()
    if args.regenerate:
        _ready_file(data_dir).unlink(missing_ok=True)
    facts = ensure_table(data_dir)
    # chdb reads files only under its user_files_path, which is the working directory.
    os.chdir(data_dir)
    load_before = _load_average()
    root = Path(tempfile.mkdtemp(prefix="lakeview-preview-"))
    peer = None
    try:
        table, token = setup_catalog(root, data_dir)
        ours = Ours(table)
        peer = Chdb(chdb_session, table_path(data_dir), root / "chdb")
        times = measure(ours, peer, args.rounds)
        last = ours.query()
        pruning = last.pruning
        print(
            f"\nTable: {facts['rows']:,} rows, {facts['files']} data files "
            f"({facts['bytes'] / 1e6:,.0f} MB), {facts['partitions']} day partitions, "
            f"{facts['snapshots']} snapshots; filter: {our_filter()}"
        )
        print(
            f"Ours: catalog.previews.preview_table on the attached table (in-process); "
            f"planned {pruning.files_scanned} of {pruning.data_files} files "
            f"({pruning.skipped_by_partition} skipped by partition, "
            f"{pruning.manifests_skipped} of {pruning.manifests} manifests), "
            f"read {pruning.files_read}"
        )
        print(f"chdb: {peer.sql}")
        print(f"chdb cold also runs: {', '.join(peer.drops) or '(no cache drops available)'}")
        print(
            f"{args.rounds} rounds, alternating which side goes first; load average "
            f"{load_before} before, {_load_average()} after (2 cores: over 2 means others "
            "were busy too)\n"
        )
        print(f"{'':<12}{'median':>12}{'p90':>12}")
        for name, values in times.items():
            print(f"{name:<12}{_ms(statistics.median(values)):>12}{_ms(_p90(values)):>12}")
        results: dict[str, Any] = {"table": facts, "rounds": args.rounds}
        print()
        for kind in ("cold", "warm"):
            ratio = statistics.median(times[f"ours {kind}"]) / statistics.median(
                times[f"chdb {kind}"]
            )
            verdict = "meets" if ratio <= TARGET else "MISSES"
            print(f"ratio ours/chdb, {kind}: {ratio:.2f}  ({verdict} the target of {TARGET})")
            results[f"ratio_{kind}"] = ratio
        for name, values in times.items():
            results[f"{name.replace(' ', '_')}_ms"] = statistics.median(values) * 1000
        if not args.no_http:
            http = measure_http(root, data_dir, token, peer, args.rounds)
            print("\nThe API under gunicorn (1 sync worker), side by side with chdb warm:")
            for name, values in http.items():
                print(f"{name:<12}{_ms(statistics.median(values)):>12}{_ms(_p90(values)):>12}")
            ratio = statistics.median(http["API warm"]) / statistics.median(http["chdb warm"])
            verdict = "meets" if ratio <= TARGET else "MISSES"
            print(f"ratio API/chdb, warm: {ratio:.2f}  ({verdict} the target of {TARGET})")
            results["http_warm_ms"] = statistics.median(http["API warm"]) * 1000
            results["http_chdb_warm_ms"] = statistics.median(http["chdb warm"]) * 1000
            results["ratio_http_warm"] = ratio
        if args.json:
            print(json.dumps(results, indent=2))
        if args.profile:
            profile(ours)
    finally:
        if peer is not None:
            peer.close()
        shutil.rmtree(root, ignore_errors=True)


def profile(ours: Ours) -> None:
    import cProfile
    import pstats

    for kind in ("cold", "warm"):
        profiler = cProfile.Profile()
        for _ in range(5):
            if kind == "cold":
                ours.make_cold()
            profiler.enable()
            ours.query()
            profiler.disable()
        print(f"\n-- profile: ours {kind}, 5 calls --")
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(35)


if __name__ == "__main__":
    main()
