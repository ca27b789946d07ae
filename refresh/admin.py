"""Materialized tables, their refresh runs and the streaming hosts in the admin, read-only:
they change through the refresh services (state, schedule), the workers (runs) and the
streaming hosts themselves (leases)."""

from __future__ import annotations

from django.contrib import admin

from catalog.admin import ReadOnlyAdminMixin
from refresh.models import MaterializedTable, RefreshRun, StreamHost


@admin.register(MaterializedTable)
class MaterializedTableAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = [
        "__str__",
        "state",
        "refresh_mode",
        "freshness",
        "consecutive_failures",
        "stream_host",
        "stream_host_since",
    ]
    list_filter = ["state", "refresh_mode"]
    search_fields = ["table__name", "table__namespace__name", "query"]
    list_select_related = ["table__namespace", "stream_host"]


@admin.register(RefreshRun)
class RefreshRunAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["id", "table_name", "trigger", "action", "state", "queued_at", "finished_at"]
    list_filter = ["state", "trigger", "action"]
    search_fields = ["table_name", "error", "worker"]
    date_hierarchy = "queued_at"


@admin.register(StreamHost)
class StreamHostAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["name", "token", "started_at", "heartbeat_at"]
    search_fields = ["name"]
