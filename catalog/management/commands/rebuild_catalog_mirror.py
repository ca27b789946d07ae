"""Rebuild the database mirror of every view and table from its metadata file alone.

The pointer (metadata_location) is kept; everything the mirror says (identity, location,
properties, versions, representations, schemas, logs, snapshots, a view's dependencies) is
derived again from the file by the same code that every commit uses (catalog.mirror), and
each namespace's counts of views and tables from the rows (catalog.counts). Use it after
restoring a database backup that is older than the warehouse, or to check that the mirror
agrees with the files."""

from __future__ import annotations

from django.core.management.base import BaseCommand
from django.db import transaction

from catalog import counts, mirror
from catalog.core.errors import CatalogError
from catalog.models import CatalogObject
from catalog.services.kernel import KINDS


class Command(BaseCommand):
    help = "Rebuild the mirror of every view and table from its current metadata file."

    def handle(self, *args, **options) -> None:
        rebuilt = failed = 0
        for row in CatalogObject.objects.select_related("namespace").order_by("pk"):
            kind = KINDS[row.kind]
            obj = kind.model.objects.select_related("namespace").get(pk=row.pk)
            try:
                metadata = kind.read(obj.metadata_location)
            except CatalogError as error:
                failed += 1
                self.stderr.write(f"{kind.name} {obj}: {error.message}")
                continue
            with transaction.atomic():
                mirror.rebuild(obj, metadata)
            rebuilt += 1
            self.stdout.write(f"{kind.name} {obj}: rebuilt")
        counts.recount()
        self.stdout.write(self.style.SUCCESS(f"Rebuilt {rebuilt} objects; {failed} failed."))
        if failed:
            raise SystemExit(1)
