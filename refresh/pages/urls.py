"""Materialized tables' page URLs: the console, queries, monitoring and a table's page and its
actions."""

from django.urls import path

from catalog import converters  # noqa: F401 - registers <version_id:...>
from refresh.pages import actions, console, lineage, listing, monitoring, queries, table, versions

app_name = "refresh"

MT = "namespaces/<str:namespace>/materialized-tables/<str:name>/"

urlpatterns = [
    path("console/", console.console_page, name="console"),
    path("queries/<int:query_id>/", queries.query_page, name="query"),
    path("monitoring/", monitoring.monitoring_page, name="monitoring"),
    path("namespaces/<str:namespace>/materialized-tables/", listing.mt_list, name="mt-list"),
    path(MT, table.mt_detail, name="mt-detail"),
    path(f"{MT}charts", table.mt_charts, name="mt-charts"),
    path(f"{MT}suspend", actions.mt_suspend, name="mt-suspend"),
    path(f"{MT}resume", actions.mt_resume, name="mt-resume"),
    path(f"{MT}refresh", actions.mt_refresh, name="mt-refresh"),
    path(f"{MT}runs/<int:run_id>/cancel", actions.mt_run_cancel, name="mt-run-cancel"),
    path(f"{MT}verify", actions.mt_verify, name="mt-verify"),
    path(f"{MT}drop", actions.mt_drop, name="mt-drop"),
    path(f"{MT}diff", versions.mt_diff, name="mt-diff"),
    path(f"{MT}alter", versions.mt_alter, name="mt-alter"),
    path(f"{MT}rollback/<version_id:version_id>", versions.mt_rollback, name="mt-rollback"),
    path("lineage/<str:namespace>/<str:name>/", lineage.lineage_page, name="lineage"),
    path(
        "lineage/<str:namespace>/<str:name>/readers/",
        lineage.lineage_readers_page,
        name="lineage-readers",
    ),
]
