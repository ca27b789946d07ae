"""`manage.py load_samples [--not-if-dropped]`: the sample data (a `samples` namespace with
customers, orders and events, about a million rows) written through the catalog's commit
path. Idempotent: a second run finds everything there, changes nothing and says so.
`--not-if-dropped` (what `make run` passes) does nothing when the samples were loaded once
and someone dropped their namespace since."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from catalog.core import samples as core
from catalog.core.errors import CatalogError
from catalog.services import samples


class Command(BaseCommand):
    help = "Load the sample data (namespace samples) if it is not there yet."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--not-if-dropped",
            action="store_true",
            help="do nothing if the samples were loaded before and their namespace dropped",
        )

    def handle(self, *args: Any, not_if_dropped: bool, **options: Any) -> None:
        if not_if_dropped and samples.were_dropped():
            self.stdout.write(
                f"The {core.NAMESPACE} namespace was dropped; not loading the samples again "
                "(`manage.py load_samples` does)."
            )
            return
        try:
            result = samples.load_samples()
        except CatalogError as error:
            raise CommandError(f"Loading the samples failed: {error.message}") from None
        if not result.changed:
            self.stdout.write(
                f"Samples already loaded: {core.NAMESPACE}."
                f"{{{','.join(result.present)}}} exist; nothing changed."
            )
            return
        if result.namespace_created:
            self.stdout.write(f"Created namespace {core.NAMESPACE}")
        for name, rows, commits in result.created:
            snapshots = f" in {commits} snapshots" if commits > 1 else ""
            self.stdout.write(f"Created table {core.NAMESPACE}.{name}: {rows:,} rows{snapshots}")
        for name in result.present:
            self.stdout.write(f"Kept {core.NAMESPACE}.{name} as it is (already there)")
        self.stdout.write(self.style.SUCCESS(f"Samples loaded in {result.seconds:.1f} s."))
