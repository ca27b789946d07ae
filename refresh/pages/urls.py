"""Materialized tables' page URLs: the console, queries, monitoring and a table's page and its
actions."""

from django.urls import path

from catalog import converters  # noqa: F401 - registers <version_id:...>
from refresh.pages import monitoring, queries, views

app_name = "refresh"

MT = "namespaces/<str:namespace>/materialized-tables/<str:name>/"

urlpatterns = [
    path("console/", views.console_page, name="console"),
    path("queries/<int:query_id>/", queries.query_page, name="query"),
    path("monitoring/", monitoring.monitoring_page, name="monitoring"),
    path("namespaces/<str:namespace>/materialized-tables/", views.mt_list, name="mt-list"),
    path(MT, views.mt_detail, name="mt-detail"),
    path(f"{MT}charts", views.mt_charts, name="mt-charts"),
    path(f"{MT}suspend", views.mt_suspend, name="mt-suspend"),
    path(f"{MT}resume", views.mt_resume, name="mt-resume"),
    path(f"{MT}refresh", views.mt_refresh, name="mt-refresh"),
    path(f"{MT}runs/<int:run_id>/cancel", views.mt_run_cancel, name="mt-run-cancel"),
    path(f"{MT}verify", views.mt_verify, name="mt-verify"),
    path(f"{MT}drop", views.mt_drop, name="mt-drop"),
    path(f"{MT}diff", views.mt_diff, name="mt-diff"),
    path(f"{MT}alter", views.mt_alter, name="mt-alter"),
    path(f"{MT}rollback/<version_id:version_id>", views.mt_rollback, name="mt-rollback"),
    path("lineage/<str:namespace>/<str:name>/", views.lineage_page, name="lineage"),
    path(
        "lineage/<str:namespace>/<str:name>/readers/",
        views.lineage_readers_page,
        name="lineage-readers",
    ),
]
