"""The catalog's part of the management API (webapp/api_urls.py mounts it at /api/ beside
refresh's and maintenance's; the Iceberg REST protocol lives elsewhere)."""

from __future__ import annotations

from django.urls import path

from catalog import converters  # noqa: F401 - registers <version_id:...> and <dotted:...>
from catalog.api import (
    audit,
    completions,
    grants,
    jobs,
    namespaces,
    policies,
    root,
    sql_views,
    tables,
)
from catalog.api.docs import docs, schema

VIEW = "namespaces/<dotted:namespace>/views/<str:name>"

TABLE = "namespaces/<dotted:namespace>/tables/<str:name>"

urlpatterns = [
    path("", root.ApiRootView.as_view(), name="root"),
    path("token/", root.TokenView.as_view(), name="token"),
    path("schema/", schema, name="schema"),
    path("docs/", docs, name="docs"),
    path("history/", audit.HistoryView.as_view(), name="history"),
    path("audit/", audit.AuditView.as_view(), name="audit"),
    path("audit/export", audit.AuditExportView.as_view(), name="audit-export"),
    path("grants/", grants.GrantListView.as_view(), name="grant-list"),
    path("grants/owner", grants.OwnerView.as_view(), name="grant-owner"),
    path("completions/", completions.CompletionsView.as_view(), name="completions"),
    path("namespaces/", namespaces.NamespaceListView.as_view(), name="namespace-list"),
    path(
        "namespaces/<dotted:namespace>/",
        namespaces.NamespaceDetailView.as_view(),
        name="namespace-detail",
    ),
    path(
        "namespaces/<dotted:namespace>/properties",
        namespaces.NamespacePropertiesView.as_view(),
        name="namespace-properties",
    ),
    path(
        "namespaces/<dotted:namespace>/views/",
        sql_views.ViewListView.as_view(),
        name="view-list",
    ),
    path(
        "namespaces/<dotted:namespace>/dropped/",
        namespaces.DroppedListView.as_view(),
        name="dropped-list",
    ),
    path(
        "namespaces/<dotted:namespace>/dropped/<str:uuid>/restore",
        namespaces.DroppedRestoreView.as_view(),
        name="dropped-restore",
    ),
    path(
        "namespaces/<dotted:namespace>/views/register",
        sql_views.ViewRegisterView.as_view(),
        name="view-register",
    ),
    path(f"{VIEW}/", sql_views.ViewDetailView.as_view(), name="view-detail"),
    path(f"{VIEW}/versions/", sql_views.ViewVersionListView.as_view(), name="view-versions"),
    path(
        f"{VIEW}/versions/<version_id:version_id>/",
        sql_views.ViewVersionDetailView.as_view(),
        name="view-version-detail",
    ),
    path(f"{VIEW}/log/", sql_views.ViewLogView.as_view(), name="view-log"),
    path(f"{VIEW}/preview", sql_views.ViewPreviewView.as_view(), name="view-preview"),
    path(f"{VIEW}/metadata", sql_views.ViewMetadataView.as_view(), name="view-metadata"),
    path(f"{VIEW}/rollback", sql_views.ViewRollbackView.as_view(), name="view-rollback"),
    path(f"{VIEW}/properties", sql_views.ViewPropertiesView.as_view(), name="view-properties"),
    path(
        f"{VIEW}/representations",
        sql_views.ViewRepresentationView.as_view(),
        name="view-representations",
    ),
    path(f"{VIEW}/rename", sql_views.ViewRenameView.as_view(), name="view-rename"),
    path(
        "namespaces/<dotted:namespace>/tables/",
        tables.TableListView.as_view(),
        name="table-list",
    ),
    path(
        "namespaces/<dotted:namespace>/tables/attach",
        tables.TableAttachView.as_view(),
        name="table-attach",
    ),
    path(
        "namespaces/<dotted:namespace>/tables/upload",
        tables.TableUploadView.as_view(),
        name="table-upload",
    ),
    path(f"{TABLE}/", tables.TableDetailView.as_view(), name="table-detail"),
    path(f"{TABLE}/detach", tables.TableDetachView.as_view(), name="table-detach"),
    path(f"{TABLE}/preview", tables.TablePreviewView.as_view(), name="table-preview"),
    path(f"{TABLE}/files", tables.TableFilesView.as_view(), name="table-files"),
    path(f"{TABLE}/policies", policies.TablePoliciesView.as_view(), name="table-policies"),
    path(f"{TABLE}/row-filter", policies.RowFilterView.as_view(), name="table-row-filter"),
    path(
        f"{TABLE}/columns/<str:column>/mask",
        policies.ColumnMaskView.as_view(),
        name="table-column-mask",
    ),
    # Spark jobs and the workers that run them (catalog/jobs.py)
    path("jobs/", jobs.JobListView.as_view(), name="job-list"),
    path("jobs/<int:job_id>/", jobs.JobDetailView.as_view(), name="job-detail"),
    path("jobs/<int:job_id>/cancel", jobs.JobCancelView.as_view(), name="job-cancel"),
    path("workers/", jobs.WorkerListView.as_view(), name="worker-list"),
]
