"""Materialized tables' part of the management API, with their monitoring and lineage
(mounted at /api/ by webapp/api_urls.py)."""

from __future__ import annotations

from django.urls import path, re_path

from catalog import converters  # noqa: F401 - registers <dotted:...>
from refresh.api import lineage, runs, statements, tables, verifications, versions
from refresh.api import monitoring as mt_monitoring
from refresh.api import queries as query_views

MT = "namespaces/<dotted:namespace>/materialized-tables/<str:name>"

urlpatterns = [
    path("statements/", statements.StatementsView.as_view(), name="statements"),
    path("queries/", query_views.QueryListView.as_view(), name="query-list"),
    path("queries/<int:query_id>/", query_views.QueryDetailView.as_view(), name="query-detail"),
    path("queries/<int:query_id>/rows", query_views.QueryRowsView.as_view(), name="query-rows"),
    re_path(
        r"^queries/(?P<query_id>[0-9]+)/result\.(?P<fmt>csv|parquet)$",
        query_views.QueryDownloadView.as_view(),
        name="query-download",
    ),
    path("queries/<int:query_id>/run", query_views.QueryRunView.as_view(), name="query-run"),
    path("jobs/<int:job_id>/rows", query_views.JobRowsView.as_view(), name="job-rows"),
    path(
        "namespaces/<dotted:namespace>/materialized-tables/",
        tables.MaterializedTableListView.as_view(),
        name="mt-list",
    ),
    path(f"{MT}/", tables.MaterializedTableDetailView.as_view(), name="mt-detail"),
    path(f"{MT}/suspend", tables.SuspendView.as_view(), name="mt-suspend"),
    path(f"{MT}/resume", tables.ResumeView.as_view(), name="mt-resume"),
    path(f"{MT}/refresh", runs.RefreshView.as_view(), name="mt-refresh"),
    path(f"{MT}/runs/", runs.RunListView.as_view(), name="mt-runs"),
    path(f"{MT}/versions/", versions.VersionListView.as_view(), name="mt-versions"),
    path(f"{MT}/definition", versions.DefinitionView.as_view(), name="mt-definition"),
    path(f"{MT}/rollback", versions.DefinitionRollbackView.as_view(), name="mt-rollback"),
    path(f"{MT}/verify", verifications.VerifyView.as_view(), name="mt-verify"),
    path(
        f"{MT}/verifications/",
        verifications.VerificationListView.as_view(),
        name="mt-verifications",
    ),
    path(
        "monitoring/tables/",
        mt_monitoring.MonitoredTablesView.as_view(),
        name="monitoring-tables",
    ),
    path(
        "monitoring/history/",
        mt_monitoring.MonitoringHistoryView.as_view(),
        name="monitoring-history",
    ),
    path("lineage/", lineage.LineageView.as_view(), name="lineage"),
    path("refresh-runs/<int:run_id>/", runs.RunDetailView.as_view(), name="run-detail"),
    path("refresh-runs/<int:run_id>/cancel", runs.RunCancelView.as_view(), name="run-cancel"),
]
