"""Table maintenance's part of the management API (mounted at /api/ by webapp/api_urls.py)."""

from __future__ import annotations

from django.urls import path

from catalog import converters  # noqa: F401 - registers <dotted:...>
from maintenance import api as maint

TABLE = "namespaces/<dotted:namespace>/tables/<str:name>"

urlpatterns = [
    path(f"{TABLE}/maintenance", maint.PolicyView.as_view(), name="table-maintenance"),
    path(f"{TABLE}/maintenance/runs/", maint.RunListView.as_view(), name="table-maintenance-runs"),
    path(f"{TABLE}/maintenance/health", maint.HealthView.as_view(), name="table-health"),
    path("maintenance-runs/<int:run_id>/", maint.RunDetailView.as_view(), name="maintenance-run"),
    path(
        "maintenance-runs/<int:run_id>/cancel",
        maint.RunCancelView.as_view(),
        name="maintenance-run-cancel",
    ),
]
