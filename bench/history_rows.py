"""How many history rows (and database bytes) one table makes per day, before and after
folding: one continuous materialized table at FRESHNESS 10 s (a micro-batch, so a commit,
every 5 s trigger: its source appended at least that often) and one FULL table at one
minute whose sources never change (every tick skipped as NO_DATA).

No Spark and no stack: a throwaway SQLite catalog (migrated), the two tables made by the
catalog's services, and one simulated day of their rows written through the paths the app
writes them with (commit events by `catalog.history.record_change`, as the kernel records
a commit; refresh runs with the fields the streaming process and the worker give them),
back-dated so that the whole day is past both folding ages. Then the folds run as
celery-beat and the streaming process run them (`refresh.streams.batches.compact_history`,
`refresh.runs.fold_skipped_runs`, `catalog.history.fold_commits`) and the rows and
bytes are counted again, after VACUUM (SQLite's `dbstat`: each table with its indexes).

    .venv/bin/python bench/history_rows.py [--days 1] [--keep]

`--days N` simulates N days (each folded after it was written, as the periodic folds
would) and times a last fold pass over all of it, which finds nothing to do."""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TRIGGER_SECONDS = 5  # half of FRESHNESS 10 s (refresh.core.streaming.trigger_seconds)
TICK_SECONDS = 60  # FRESHNESS 1 MINUTE, REFRESH_MODE FULL
DAY = 86_400
SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}
TABLES = {"catalog_catalogevent": "CatalogEvent", "refresh_refreshrun": "RefreshRun"}


def setup(root: Path) -> None:
    (root / "warehouse").mkdir()
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "webapp.settings.test",
            "DATABASE_URL": f"sqlite:///{root / 'db.sqlite3'}",
            "WAREHOUSE": str(root / "warehouse"),
            "LOG_LEVEL": "WARNING",
        }
    )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def make_tables() -> tuple[Any, Any, Any]:
    """(the refresh user, the continuous table, the idle FULL table)."""
    from django.contrib.auth import get_user_model

    from catalog import services
    from refresh.models import MaterializedTable

    refresher = get_user_model().objects.create_user("lakeview-refresh")
    services.create_namespace(name="bench")
    made = []
    for name, value, unit, mode in (
        ("live", 10, "SECOND", "CONTINUOUS"),
        ("idle", 1, "MINUTE", "FULL"),
    ):
        table = services.create_table(namespace="bench", name=name, schema=SCHEMA).obj
        made.append(
            MaterializedTable.objects.create(
                table=table,
                query="SELECT id FROM bench.events",
                freshness_value=value,
                freshness_unit=unit,
                refresh_mode=mode,
                state="ACTIVATED",
            )
        )
    return refresher, made[0], made[1]


def write_day(start: Any, refresher: Any, live: Any, idle: Any) -> None:
    """One day of both tables' history from `start`, as the app writes it."""
    from django.db import transaction

    from catalog import history
    from catalog.models import CatalogEvent
    from refresh.models import RefreshRun

    snapshot = 4_000_000_000_000_000_000
    source = {"bench.events": 7_000_000_000_000_000_000}
    with transaction.atomic():
        first_event = None
        for i in range(DAY // TRIGGER_SECONDS):
            at = start + timedelta(seconds=i * TRIGGER_SECONDS)
            location = f"{live.table.location}/metadata/{i + 2:05d}-{uuid.uuid4()}.metadata.json"
            # The micro-batch's commit through /iceberg (the kernel records it) ...
            event = history.record_change(
                live.table, actor=refresher, action="commit_table", metadata_location=location
            )
            first_event = first_event or event.pk
            # ... and its row in the refresh history (refresh.streams.batches.record_batch).
            RefreshRun.objects.create(
                materialized_table=live,
                table_name="bench.live",
                trigger=RefreshRun.Trigger.CONTINUOUS,
                action=RefreshRun.Action.INCREMENTAL,
                state=RefreshRun.State.SUCCEEDED,
                queued_at=at,
                started_at=at,
                finished_at=at + timedelta(seconds=1.2),
                batch_id=i,
                rows_written=5000,
                bytes_written=61_440,
                snapshot_id=snapshot + i,
                source_snapshots={"bench.events": source["bench.events"] + i},
                source_offsets={
                    "IcebergMicroBatchStream": {
                        "version": 1,
                        "snapshot_id": source["bench.events"] + i,
                        "position": 1,
                        "scan_all_files": False,
                    }
                },
                data_timestamp=at,
                definition_version=1,
                worker=f"bench-host:{os.getpid()}",
            )
        # auto_now_add stamped them now: move them back to their place in the day.
        for offset, pk in enumerate(
            CatalogEvent.objects.filter(pk__gte=first_event)
            .order_by("pk")
            .values_list("pk", flat=True)
        ):
            CatalogEvent.objects.filter(pk=pk).update(
                occurred_at=start + timedelta(seconds=offset * TRIGGER_SECONDS + 1.2)
            )
        for i in range(DAY // TICK_SECONDS):
            tick = start + timedelta(seconds=i * TICK_SECONDS)
            # A scheduled tick whose sources did not change (refresh.runner: NO_DATA).
            RefreshRun.objects.create(
                materialized_table=idle,
                table_name="bench.idle",
                trigger=RefreshRun.Trigger.SCHEDULED,
                action=RefreshRun.Action.NO_DATA,
                state=RefreshRun.State.SKIPPED,
                schedule_time=tick,
                reason="no data: no source changed since run 1",
                queued_at=tick,
                started_at=tick + timedelta(seconds=0.05),
                finished_at=tick + timedelta(seconds=0.08),
                source_snapshots=source,
                data_timestamp=tick + timedelta(seconds=0.05),
                definition_version=1,
                worker=f"bench-host:{os.getpid()}:ThreadPoolExecutor-0_1",
            )


def census(db: Path, live: Any, idle: Any) -> dict[str, Any]:
    """Rows of each kind, and each table's bytes with its indexes (after VACUUM)."""
    from django.db import connection

    from catalog.models import CatalogEvent
    from refresh.models import RefreshRun

    connection.close()
    with sqlite3.connect(db) as raw:
        raw.execute("VACUUM")
        owners = dict(raw.execute("SELECT name, tbl_name FROM sqlite_master"))
        sizes: dict[str, int] = {}
        for name, size in raw.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
            owner = owners.get(name, name)
            sizes[owner] = sizes.get(owner, 0) + size
    return {
        "events": CatalogEvent.objects.filter(object_uuid=live.table.uuid).count(),
        "live_runs": RefreshRun.objects.filter(materialized_table=live).count(),
        "idle_runs": RefreshRun.objects.filter(materialized_table=idle).count(),
        "event_bytes": sizes.get("catalog_catalogevent", 0),
        "run_bytes": sizes.get("refresh_refreshrun", 0),
    }


def fold_all() -> dict[str, float]:
    from catalog import history
    from refresh import services
    from refresh.streams.batches import compact_history

    took = {}
    for name, fold in (
        ("micro-batches (compact_history)", compact_history),
        ("NO_DATA ticks (fold_skipped_runs)", services.fold_skipped_runs),
        ("commit events (fold_commits)", history.fold_commits),
    ):
        began = time.perf_counter()
        fold()
        took[name] = time.perf_counter() - began
    return took


def show(label: str, counts: dict[str, Any], days: int) -> None:
    per = max(days, 1)
    print(
        f"{label:<44} events {counts['events'] / per:>8,.0f}/day"
        f" ({counts['event_bytes'] / per / 1024:>7,.0f} KiB)"
        f"  continuous runs {counts['live_runs'] / per:>8,.0f}/day"
        f"  idle FULL runs {counts['idle_runs'] / per:>6,.0f}/day"
        f"  (runs {counts['run_bytes'] / per / 1024:>7,.0f} KiB)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the temp folder")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="history-rows-"))
    try:
        setup(root)
        from django.utils import timezone

        from catalog.models import CatalogEvent
        from refresh.models import RefreshRun

        refresher, live, idle = make_tables()
        # Only what the simulated days add is counted: the tables' creation is left out.
        CatalogEvent.objects.all().delete()
        RefreshRun.objects.all().delete()
        # The days end just past both folding ages (a day for commits, an hour for runs).
        end = timezone.now().replace(minute=0, second=0, microsecond=0) - timedelta(hours=25)
        for day in range(args.days, 0, -1):
            began = time.perf_counter()
            write_day(end - timedelta(days=day), refresher, live, idle)
            print(f"day {args.days - day + 1}: written in {time.perf_counter() - began:.1f} s")
            if day == args.days:
                show(
                    "made by one day (no folding at all)",
                    census(root / "db.sqlite3", live, idle),
                    1,
                )
                from refresh.streams.batches import compact_history

                compact_history()
                show(
                    "kept today (micro-batches folded)", census(root / "db.sqlite3", live, idle), 1
                )
            took = fold_all()
            print("  folds: " + ", ".join(f"{name} {t:.2f} s" for name, t in took.items()))
        show(
            f"kept with every fold, over {args.days} day(s)",
            census(root / "db.sqlite3", live, idle),
            args.days,
        )
        began = time.perf_counter()
        took = fold_all()
        print(
            f"a fold pass with nothing left to fold: {time.perf_counter() - began:.2f} s ("
            + ", ".join(f"{name} {t:.2f} s" for name, t in took.items())
            + ")"
        )
    finally:
        if args.keep:
            print(f"kept: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
