"""The maintenance app's config: adds its section to the catalog's table page (the catalog
imports nothing of it)."""

from django.apps import AppConfig


class MaintenanceConfig(AppConfig):
    name = "maintenance"
    verbose_name = "Maintenance"

    def ready(self) -> None:
        # The table page shows this app's section; the catalog imports nothing of this app.
        from catalog.pages import tables
        from maintenance import pages

        panel = tables.Panel("maintenance", "maintenance/_section.html", pages.later)
        if panel not in tables.PANELS:
            tables.PANELS.append(panel)
