"""Run one refresh of each kind (full, incremental, partition, rebuild) on a worker's code
and print, as JSON, how many times sqlglot parsed each SQL text during each run.

Run as `python -m tests.spark.parse_counts <namespace>` in a catalog server's environment
(tests.live_server.CatalogServer.env): the process is the worker (its own Spark, the app's
REST catalog) and the server's database is its database. The source table `orders` must
exist in `<namespace>` with rows of day 2024-01-01; this makes the materialized table.
tests/spark/test_refresh_parses.py reads the output."""

from __future__ import annotations

import json
import sys
import time

from tests.sql_parses import parses

QUERY = (
    "SELECT ds, customer, sum(amount) AS total, avg(amount) AS mean "
    "FROM orders GROUP BY ds, customer"
)
ALTERED = (
    "SELECT ds, customer, sum(amount) AS total, max(amount) AS top "
    "FROM orders GROUP BY ds, customer"
)


def main(namespace: str) -> None:
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from refresh import analysis, definitions, runner, runs, services
    from refresh.core.freshness import Freshness, RefreshMode
    from refresh.models import RefreshRun
    from runtime import engine

    editor = get_user_model().objects.get(username="editor")
    with analysis.on_worker():
        mt = services.create_materialized_table(
            namespace=namespace,
            name="daily",
            query=QUERY,
            freshness=Freshness.parse(1, "HOUR"),
            refresh_mode=RefreshMode.FULL,
            primary_key=("ds", "customer"),
            partitioned_by=("ds",),
            options={"partition.fields.ds.date-formatter": "yyyy-MM-dd"},
            actor=editor,
        )
    report: dict[str, dict] = {}

    def run(kind: str, run_id: int) -> None:
        started = time.perf_counter()
        with parses() as seen:
            state = runner.execute(run_id, hops=runner.MAX_HOPS_DONE)
        row = RefreshRun.objects.get(pk=run_id)
        report[kind] = {
            "state": state,
            "action": row.action,
            "reason": row.reason,
            "error": row.error,
            "parses": dict(seen),
            "seconds": round(time.perf_counter() - started, 2),
        }

    first = RefreshRun.objects.filter(materialized_table=mt).order_by("id").first()
    run("full", first.pk)
    engine.spark().sql(
        f"INSERT INTO {settings.CATALOG_NAME}.{namespace}.orders VALUES "
        "(3, 1, 7, '2024-01-01'), (4, 2, 9, '2024-01-02')"
    )
    run("incremental", runs.enqueue(mt, trigger=RefreshRun.Trigger.MANUAL, force=True).pk)
    partition = runs.enqueue(
        mt, trigger=RefreshRun.Trigger.MANUAL, partition={"ds": "2024-01-01"}, full=True
    )
    run("partition", partition.pk)
    with analysis.on_worker():
        rebuild = definitions.alter_query(mt, query=ALTERED, actor=editor)
    run("rebuild", rebuild.pk)
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1])
