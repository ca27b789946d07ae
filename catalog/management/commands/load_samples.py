"""`manage.py load_samples [--not-if-dropped] [--unless-turned-off]`: the sample data (a
`samples` namespace with customers, orders and events, about a million rows) written
through the catalog's commit path. Idempotent: a second run finds everything there, changes
nothing and says so. What `make run` and compose's `migrate` pass: `--not-if-dropped` does
nothing when the samples were loaded once and someone dropped their namespace since;
`--unless-turned-off` does nothing when the deployment says LOAD_SAMPLES=0."""

from __future__ import annotations

from typing import Any

from django.conf import settings
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
        parser.add_argument(
            "--unless-turned-off",
            action="store_true",
            help="do nothing if LOAD_SAMPLES=0 (the launchers' call: make run, compose)",
        )

    def handle(
        self, *args: Any, not_if_dropped: bool, unless_turned_off: bool, **options: Any
    ) -> None:
        if unless_turned_off and not settings.LOAD_SAMPLES:
            self.stdout.write("LOAD_SAMPLES=0: not loading the sample data.")
            return
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
