"""A soak of incremental refreshes through row changes: does a long-lived Spark that applies
a source's MERGE round after round keep what it holds bounded?

A worker's Spark (and a streaming host's, whose catch-ups are the same code) lives for
months. Each incremental refresh through row changes stages two scan task sets in Iceberg's
JVM-wide registries (SparkTableCache, ScanTaskSetManager) and keeps its row changes, touched
keys and combined rows as local checkpoints (blocks in the block manager); all of them must
be released by the refresh that made them, or the JVM grows with every refresh.

One local Spark session (local[2]) on the app's own Iceberg REST catalog (the app under
gunicorn on a fresh SQLite database, as the workers' sessions use it) makes a merge-on-read
source
`orders` of `--rows` rows and a keyed GROUP BY over it (count and sum per customer, the
combined path, and a HAVING one, the recompute path), then for `--rounds` rounds: one
`MERGE INTO orders` updating and inserting `--changes` rows, and both tables refreshed
incrementally with refresh.spark.changes.incremental_refresh (the worker's code). Every
`--sample` rounds it prints the JVM's persistent RDDs, the block manager's memory in use,
the staged task sets still registered, the JVM heap in use after a GC, and the median
seconds of the last refreshes; at the end, each figure at the end over its figure after the
first sample (goal: flat, at most 1.5 for the heap, exactly what it was for the registries
and RDDs), and whether both tables equal their queries.

    .venv/bin/python bench/changes_soak.py [--rounds 200] [--rows 200000] [--changes 200]
        [--sample 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CATALOG = "lv"
TABLES = {
    "revenue": (
        "SELECT customer, count(*) AS n, sum(amount) AS total FROM orders GROUP BY customer",
        ("customer",),
    ),
    "busy": (
        "SELECT customer, count(*) AS n FROM orders GROUP BY customer HAVING count(*) > 3",
        ("customer",),
    ),
}


def held(spark) -> dict[str, float]:
    """What the JVM holds now: persistent RDDs, block manager memory (MB), Iceberg's staged
    task sets, heap in use after a GC (MB)."""
    jvm = spark._jvm
    context = spark.sparkContext._jsc.sc()
    status = context.getExecutorMemoryStatus()
    used = 0
    values = status.values().iterator()
    while values.hasNext():
        pair = values.next()
        used += pair._1() - pair._2()
    jvm.java.lang.System.gc()
    runtime = jvm.java.lang.Runtime.getRuntime()
    return {
        "rdds": float(context.getPersistentRDDs().size()),
        "blocks MB": used / 2**20,
        "staged sets": float(jvm.lakeview.changes.RowChanges.stagedSets()),
        "heap MB": (runtime.totalMemory() - runtime.freeMemory()) / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--sample", type=int, default=20)
    args = parser.parse_args()

    from runtime.spark.session import build_spark_session
    from tests.live_server import catalog_server
    from tests.spark.conftest import rest_catalog_conf

    root = Path(tempfile.mkdtemp(prefix="lakeview-changes-soak-"))
    with catalog_server(root / "server") as server:
        spark = build_spark_session(
            master="local[2]",
            jars_dir=str(REPO / "var" / "jars"),
            warehouse=str(root / "local"),
            catalog_name="local",
            app_name="bench-changes-soak",
        )
        for key, value in rest_catalog_conf(server, name=CATALOG).items():
            spark.conf.set(key, value)
        spark.conf.set("spark.sql.defaultCatalog", CATALOG)
        soak(spark, args)
        spark.stop()


def soak(spark, args: argparse.Namespace) -> None:
    from refresh.core.definition import MERGE_ON_READ
    from refresh.core.streaming import StreamPlan
    from refresh.spark import changes

    spark.sparkContext.setLogLevel("ERROR")
    spark.conf.set("spark.sql.shuffle.partitions", "4")
    properties = ", ".join(f"'{k}' = '{v}'" for k, v in MERGE_ON_READ.items())
    spark.sql(f"CREATE NAMESPACE {CATALOG}.s")
    spark.sql(f"USE {CATALOG}.s")
    spark.sql(
        f"CREATE TABLE orders (id BIGINT, customer BIGINT, amount BIGINT) USING iceberg "
        f"TBLPROPERTIES ({properties})"
    )
    spark.sql(f"INSERT INTO orders SELECT id, id % 1000, id % 97 FROM range({args.rows})")
    for name, (query, _) in TABLES.items():
        spark.sql(f"CREATE TABLE {name} USING iceberg TBLPROPERTIES ({properties}) AS {query}")

    def current(table: str) -> int:
        return spark.sql(
            f"SELECT snapshot_id FROM {CATALOG}.s.{table}.refs WHERE name = 'main'"
        ).first()[0]

    since = current("orders")
    seconds: list[float] = []
    first: dict[str, float] | None = None
    next_id = args.rows
    half = max(1, args.changes // 2)
    print(
        f"{args.rows:,} source rows, {args.changes:,} changed per round, {args.rounds} rounds",
        flush=True,
    )
    for number in range(1, args.rounds + 1):
        spark.sql(
            f"MERGE INTO orders t USING (SELECT id * 7 % {args.rows} AS id, id % 1000 AS customer, "
            f"{number} AS amount FROM range({half}) UNION ALL SELECT id, id % 1000, 1 "
            f"FROM range({next_id}, {next_id + half})) s ON t.id = s.id "
            "WHEN MATCHED THEN UPDATE SET t.amount = s.amount WHEN NOT MATCHED THEN INSERT *"
        )
        next_id += half
        until = current("orders")
        started = time.perf_counter()
        for name, (query, key) in TABLES.items():
            changes.incremental_refresh(
                spark,
                plan=StreamPlan("merge", (("s", "orders"),), (), key),
                query=query,
                target=[CATALOG, "s", name],
                catalog=CATALOG,
                namespace=["s"],
                deltas={("s", "orders"): (since, until)},
                changed=[("s", "orders")],
                pins={("s", "orders"): until},
            )
        seconds.append(time.perf_counter() - started)
        since = until
        if number % args.sample == 0 or number == args.rounds:
            now = held(spark)
            first = first or now
            recent = statistics.median(seconds[-args.sample :])
            print(
                f"round {number}: "
                + ", ".join(f"{k} {v:,.1f}" for k, v in now.items())
                + f", refreshes {recent:.2f} s",
                flush=True,
            )
    assert first is not None
    print(
        "\nend / first sample: "
        + ", ".join(
            f"{k} {now[k] / first[k]:.2f}" if first[k] else f"{k} {now[k]:.0f} (from 0)"
            for k in now
        )
    )
    early = statistics.median(seconds[: args.sample])
    late = statistics.median(seconds[-args.sample :])
    print(f"refresh seconds, last rounds over first: {late / early:.2f}")
    for name, (query, _) in TABLES.items():
        differs = spark.sql(
            f"SELECT count(*) FROM ((SELECT * FROM {name} EXCEPT ALL ({query})) "
            f"UNION ALL (({query}) EXCEPT ALL SELECT * FROM {name}))"
        ).first()[0]
        print(f"{name}: {'exact' if differs == 0 else f'{differs} rows differ'}")


if __name__ == "__main__":
    main()
