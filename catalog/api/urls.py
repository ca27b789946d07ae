"""The management API, mounted at /api/ (the Iceberg REST protocol lives elsewhere)."""

from __future__ import annotations

from django.urls import path, re_path, register_converter

from catalog import converters  # noqa: F401 - registers <version_id:...>
from catalog.api import views
from catalog.api.docs import docs, schema
from maintenance import api as maint
from refresh.api import jobs as mt_jobs
from refresh.api import monitoring as mt_monitoring
from refresh.api import views as mt_views
from webapp.middleware import not_found


class DottedNamespaceConverter:
    """A namespace name in one path segment: levels joined by "." ("sales.eu")."""

    regex = r"[^/]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(DottedNamespaceConverter, "dotted")

app_name = "api"

VIEW = "namespaces/<dotted:namespace>/views/<str:name>"
MT = "namespaces/<dotted:namespace>/materialized-tables/<str:name>"

TABLE = "namespaces/<dotted:namespace>/tables/<str:name>"

urlpatterns = [
    path("", views.ApiRootView.as_view(), name="root"),
    path("token/", views.TokenView.as_view(), name="token"),
    path("schema/", schema, name="schema"),
    path("docs/", docs, name="docs"),
    path("history/", views.HistoryView.as_view(), name="history"),
    path("namespaces/", views.NamespaceListView.as_view(), name="namespace-list"),
    path(
        "namespaces/<dotted:namespace>/",
        views.NamespaceDetailView.as_view(),
        name="namespace-detail",
    ),
    path(
        "namespaces/<dotted:namespace>/properties",
        views.NamespacePropertiesView.as_view(),
        name="namespace-properties",
    ),
    path("namespaces/<dotted:namespace>/views/", views.ViewListView.as_view(), name="view-list"),
    path(
        "namespaces/<dotted:namespace>/views/register",
        views.ViewRegisterView.as_view(),
        name="view-register",
    ),
    path(f"{VIEW}/", views.ViewDetailView.as_view(), name="view-detail"),
    path(f"{VIEW}/versions/", views.ViewVersionListView.as_view(), name="view-versions"),
    path(
        f"{VIEW}/versions/<version_id:version_id>/",
        views.ViewVersionDetailView.as_view(),
        name="view-version-detail",
    ),
    path(f"{VIEW}/log/", views.ViewLogView.as_view(), name="view-log"),
    path(f"{VIEW}/preview", views.ViewPreviewView.as_view(), name="view-preview"),
    path(f"{VIEW}/metadata", views.ViewMetadataView.as_view(), name="view-metadata"),
    path(f"{VIEW}/rollback", views.ViewRollbackView.as_view(), name="view-rollback"),
    path(f"{VIEW}/properties", views.ViewPropertiesView.as_view(), name="view-properties"),
    path(
        f"{VIEW}/representations",
        views.ViewRepresentationView.as_view(),
        name="view-representations",
    ),
    path(f"{VIEW}/rename", views.ViewRenameView.as_view(), name="view-rename"),
    path("namespaces/<dotted:namespace>/tables/", views.TableListView.as_view(), name="table-list"),
    path(
        "namespaces/<dotted:namespace>/tables/attach",
        views.TableAttachView.as_view(),
        name="table-attach",
    ),
    path(f"{TABLE}/", views.TableDetailView.as_view(), name="table-detail"),
    path(f"{TABLE}/detach", views.TableDetachView.as_view(), name="table-detach"),
    path(f"{TABLE}/preview", views.TablePreviewView.as_view(), name="table-preview"),
    path(f"{TABLE}/files", views.TableFilesView.as_view(), name="table-files"),
    path(f"{TABLE}/maintenance", maint.PolicyView.as_view(), name="table-maintenance"),
    path(f"{TABLE}/maintenance/runs/", maint.RunListView.as_view(), name="table-maintenance-runs"),
    path(f"{TABLE}/maintenance/health", maint.HealthView.as_view(), name="table-health"),
    path("maintenance-runs/<int:run_id>/", maint.RunDetailView.as_view(), name="maintenance-run"),
    # materialized tables (refresh/api)
    path("statements/", mt_views.StatementsView.as_view(), name="statements"),
    path(
        "namespaces/<dotted:namespace>/materialized-tables/",
        mt_views.MaterializedTableListView.as_view(),
        name="mt-list",
    ),
    path(f"{MT}/", mt_views.MaterializedTableDetailView.as_view(), name="mt-detail"),
    path(f"{MT}/suspend", mt_views.SuspendView.as_view(), name="mt-suspend"),
    path(f"{MT}/resume", mt_views.ResumeView.as_view(), name="mt-resume"),
    path(f"{MT}/refresh", mt_views.RefreshView.as_view(), name="mt-refresh"),
    path(f"{MT}/runs/", mt_views.RunListView.as_view(), name="mt-runs"),
    path(f"{MT}/versions/", mt_views.VersionListView.as_view(), name="mt-versions"),
    path(f"{MT}/definition", mt_views.DefinitionView.as_view(), name="mt-definition"),
    path(f"{MT}/rollback", mt_views.DefinitionRollbackView.as_view(), name="mt-rollback"),
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
    path("lineage/", mt_views.LineageView.as_view(), name="lineage"),
    path("refresh-runs/<int:run_id>/", mt_views.RunDetailView.as_view(), name="run-detail"),
    path("jobs/", mt_jobs.JobListView.as_view(), name="job-list"),
    path("jobs/<int:job_id>/", mt_jobs.JobDetailView.as_view(), name="job-detail"),
    path("jobs/<int:job_id>/cancel", mt_jobs.JobCancelView.as_view(), name="job-cancel"),
    path("workers/", mt_jobs.WorkerListView.as_view(), name="worker-list"),
    re_path(r"^.*$", not_found),
]
