"""A table page's Maintenance section and its forms (mounted by webapp/urls.py)."""

from __future__ import annotations

from django.urls import path

from maintenance import pages

app_name = "maintenance"

TABLE = "namespaces/<str:namespace>/tables/<str:name>"

urlpatterns = [
    path(f"{TABLE}/maintenance/", pages.section_page, name="table-maintenance-section"),
    path(f"{TABLE}/maintenance/enabled", pages.set_enabled, name="table-maintenance-enabled"),
    path(f"{TABLE}/maintenance/run", pages.run_now, name="table-maintenance-run"),
    path(
        f"{TABLE}/maintenance/runs/<int:run_id>/cancel",
        pages.cancel_run,
        name="table-maintenance-run-cancel",
    ),
]
