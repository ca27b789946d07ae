"""Materialized tables and their refresh runs in the admin, read-only: they change through
the refresh services (state, schedule) and the workers (runs)."""

from __future__ import annotations

from django.contrib import admin

from catalog.admin import ReadOnlyAdminMixin
from refresh.models import MaterializedTable, RefreshRun


@admin.register(MaterializedTable)
class MaterializedTableAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["__str__", "state", "refresh_mode", "freshness", "consecutive_failures"]
    list_filter = ["state", "refresh_mode"]
    search_fields = ["table__name", "table__namespace__name", "query"]
    list_select_related = ["table__namespace"]


@admin.register(RefreshRun)
class RefreshRunAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["id", "table_name", "trigger", "action", "state", "queued_at", "finished_at"]
    list_filter = ["state", "trigger", "action"]
    search_fields = ["table_name", "error", "worker"]
    date_hierarchy = "queued_at"
