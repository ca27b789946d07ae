"""`manage.py verify_materialized_table ns.t [--snapshots N]`: recompute the query with Spark
over the source snapshots each of the table's newest N snapshots records (refresh.verification)
and compare; prints one verdict per snapshot and exits 1 when any differs. Runs its own
Spark session (as a worker does), against the app's Iceberg REST catalog (CATALOG_URI)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from catalog.core.errors import CatalogError
from refresh import analysis, selectors, verification
from refresh.models import Verification


class Command(BaseCommand):
    help = "Verify a materialized table's newest snapshots against its query (Spark)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("table", help="the materialized table, namespace levels and name")
        parser.add_argument(
            "--snapshots",
            type=int,
            default=1,
            help=f"how many of the newest snapshots with a refresh state (1 to "
            f"{verification.MAX_SNAPSHOTS})",
        )

    def handle(self, *args: Any, table: str, snapshots: int, **options: Any) -> None:
        namespace, _, name = table.rpartition(".")
        if not namespace or not name:
            raise CommandError(f"Name the table as namespace.name, not {table!r}")
        try:
            mt = selectors.get_materialized_table(namespace, name)
            with analysis.on_worker():
                done = verification.verify(mt, snapshots=snapshots)
        except CatalogError as error:
            raise CommandError(error.message) from None
        differs = 0
        for result in done:
            line = f"snapshot {result.snapshot_id}: {result.verdict}"
            if result.verdict == Verification.Verdict.DIFFERS:
                differs += 1
                line += f" ({result.missing_rows} rows missing, {result.extra_rows} extra)"
                for kind in ("missing", "extra"):
                    for row in result.sample.get(kind, [])[:5]:
                        line += f"\n    {kind}: {row}"
            elif result.reason:
                line += f" ({result.reason})"
            self.stdout.write(line)
        if differs:
            raise CommandError(f"{differs} of {len(done)} snapshots differ from their query")
