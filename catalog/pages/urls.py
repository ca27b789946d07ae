"""The catalog's page URLs: namespaces, search, audit, views, tables, uploads, credentials and
jobs."""

from django.urls import path

from catalog import converters  # noqa: F401 - registers <version_id:...>
from catalog.pages import (
    attach,
    audit,
    credentials,
    jobs,
    manage,
    namespaces,
    permissions,
    search,
    sql_views,
    tables,
    uploads,
)

app_name = "catalog"

view_prefix = "namespaces/<str:namespace>/views/<str:name>/"

urlpatterns = [
    path("", namespaces.namespace_list, name="namespace-list"),
    path("search/", search.search, name="search"),
    # every change to the catalog (catalog/pages/audit.py)
    path("audit/", audit.audit_page, name="audit"),
    path("audit/export.csv", audit.audit_export, name="audit-export"),
    # Spark jobs: what a request that needed a worker's Spark became (catalog/jobs.py)
    path("jobs/<int:job_id>/", jobs.job_page, name="job"),
    path("jobs/<int:job_id>/cancel", jobs.job_cancel, name="job-cancel"),
    path("namespaces/<str:namespace>/", namespaces.namespace_detail, name="namespace-detail"),
    path("namespaces/<str:namespace>/views/new", sql_views.view_create, name="view-create"),
    path(view_prefix, sql_views.view_detail, name="view-detail"),
    path(f"{view_prefix}diff", sql_views.view_diff, name="view-diff"),
    path(f"{view_prefix}replace", sql_views.view_replace, name="view-replace"),
    path(
        f"{view_prefix}rollback/<version_id:version_id>",
        sql_views.view_rollback,
        name="view-rollback",
    ),
    path(f"{view_prefix}properties", sql_views.view_properties, name="view-properties"),
    path(f"{view_prefix}drop", sql_views.view_drop, name="view-drop"),
    # the Permissions panel, filled in once a page has loaded (catalog/pages/permissions.py)
    path(
        "namespaces/<str:namespace>/permissions",
        permissions.namespace_section,
        name="namespace-permissions",
    ),
    path(f"{view_prefix}permissions", permissions.view_section, name="view-permissions"),
    path(
        "namespaces/<str:namespace>/tables/<str:name>/permissions",
        permissions.table_section,
        name="table-permissions",
    ),
    path("namespaces/<str:namespace>/tables/<str:name>/", tables.table_detail, name="table-detail"),
    path(
        "namespaces/<str:namespace>/tables/<str:name>/snapshots",
        tables.table_snapshots,
        name="table-snapshots",
    ),
    # attached tables (catalog/pages/attach.py)
    path("namespaces/<str:namespace>/attach", attach.attach, name="table-attach"),
    path(
        "namespaces/<str:namespace>/tables/<str:name>/detach",
        attach.detach,
        name="table-detach",
    ),
    # a file becomes a table, in two steps (catalog/pages/uploads.py)
    path("namespaces/<str:namespace>/upload", uploads.upload, name="upload"),
    path(
        "namespaces/<str:namespace>/upload/<str:token>/",
        uploads.upload_review,
        name="upload-review",
    ),
    path(
        "namespaces/<str:namespace>/upload/<str:token>/discard",
        uploads.upload_discard,
        name="upload-discard",
    ),
    # what only the API could do before (catalog/pages/manage.py, namespaces.py)
    path(f"{view_prefix}rename", manage.view_rename, name="view-rename"),
    path(f"{view_prefix}dialects/new", manage.view_add_dialect, name="view-add-dialect"),
    path("namespaces/<str:namespace>/register", manage.register, name="register"),
    path(
        "namespaces/<str:namespace>/properties",
        namespaces.namespace_properties,
        name="namespace-properties",
    ),
    path("namespaces/<str:namespace>/drop", namespaces.namespace_drop, name="namespace-drop"),
    path(
        "namespaces/<str:namespace>/dropped/",
        namespaces.namespace_dropped,
        name="namespace-dropped",
    ),
    # engine credentials (catalog/pages/credentials.py)
    path("credentials/", credentials.credentials, name="credentials"),
    path(
        "credentials/<str:client_id>/revoke",
        credentials.credential_revoke,
        name="credential-revoke",
    ),
]
