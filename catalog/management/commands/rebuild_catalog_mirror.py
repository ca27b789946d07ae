"""Rebuild the database mirror of every view from its metadata file alone.

The pointer (View.metadata_location) is kept; everything the mirror says about versions,
representations, schemas, the version log and properties is read again from the file.
Use it after restoring a database backup that is older than the warehouse, or to check
that the mirror agrees with the files."""

from __future__ import annotations

from django.core.management.base import BaseCommand
from django.db import transaction

from catalog import mirror
from catalog.core.errors import CatalogError
from catalog.core.view_metadata import read_view_metadata
from catalog.models import View


class Command(BaseCommand):
    help = "Rebuild the mirror tables of every view from the view's current metadata file."

    def handle(self, *args, **options) -> None:
        rebuilt = failed = 0
        for view in View.objects.select_related("namespace").order_by("pk"):
            try:
                metadata = read_view_metadata(view.metadata_location)
            except CatalogError as error:
                failed += 1
                self.stderr.write(f"{view}: {error.message}")
                continue
            with transaction.atomic():
                # Cleared first, so rows the file no longer backs cannot survive.
                view.versions.all().delete()
                view.fields.all().delete()
                View.objects.filter(pk=view.pk).update(
                    view_uuid=metadata.view_uuid,
                    location=metadata.location,
                    current_version_id=metadata.current_version_id,
                    properties=dict(metadata.properties),
                )
                view.refresh_from_db()
                mirror.sync_view(view, metadata)
            rebuilt += 1
            self.stdout.write(f"{view}: {len(metadata.versions)} versions")
        self.stdout.write(self.style.SUCCESS(f"Rebuilt {rebuilt} views; {failed} failed."))
        if failed:
            raise SystemExit(1)
