"""The Django admin, for operators.

A view's state lives in its metadata files; the rows here mirror them. So the mirror is shown
read-only: the pointer (metadata_location), the UUID and every version, schema and log row
change only through the service functions, which write a new metadata file and swap the
pointer. Namespaces are added and their properties edited here through the services too,
so each change is recorded in the history like any other."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from catalog import models, services
from catalog.core.errors import CatalogError
from catalog.core.inputs import check_namespace_name
from catalog.services.credentials import create_client


class ReadOnlyAdminMixin:
    """Rows that only the catalog writes: viewable, never added, changed or deleted here."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ReadOnlyInline(ReadOnlyAdminMixin, admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = False


class NamespaceForm(forms.ModelForm):
    class Meta:
        model = models.Namespace
        fields = ["name", "properties"]

    def clean_name(self) -> str:
        try:
            return check_namespace_name(self.cleaned_data["name"])
        except CatalogError as error:
            raise forms.ValidationError(error.message) from error

    def clean_properties(self) -> dict[str, str]:
        value = self.cleaned_data.get("properties") or {}
        if not isinstance(value, dict):
            raise forms.ValidationError('Properties are a JSON object: {"key": "value"}')
        return {str(k): str(v) for k, v in value.items()}


@admin.register(models.Namespace)
class NamespaceAdmin(admin.ModelAdmin):
    form = NamespaceForm
    list_display = ["name", "view_count", "updated_at"]
    search_fields = ["name"]
    readonly_fields = ["created_at", "updated_at"]

    @admin.display(description="views")
    def view_count(self, obj: models.Namespace) -> int:
        return models.View.objects.filter(namespace=obj).count()

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        # A namespace is not renamed: its views' locations and default namespaces name it.
        return [*self.readonly_fields, "name"] if obj is not None else self.readonly_fields

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(
        self, request: HttpRequest, obj: models.Namespace, form: Any, change: bool
    ) -> None:
        if change:
            before = models.Namespace.objects.get(pk=obj.pk).properties
            updates = {k: v for k, v in obj.properties.items() if before.get(k) != v}
            removals = [k for k in before if k not in obj.properties]
            if not updates and not removals:
                return
            saved = services.update_namespace_properties(
                name=obj.name, updates=updates, removals=removals, actor=request.user
            )
        else:
            saved = services.create_namespace(
                name=obj.name, properties=obj.properties, actor=request.user
            )
        obj.pk, obj.created_at, obj.updated_at = saved.pk, saved.created_at, saved.updated_at


class ViewVersionInline(ReadOnlyInline):
    model = models.ViewVersion
    fields = ["version_link", "schema_id", "timestamp_ms", "default_catalog", "default_namespace"]
    readonly_fields = fields

    @admin.display(description="version")
    def version_link(self, obj: models.ViewVersion) -> str:
        url = reverse("admin:catalog_viewversion_change", args=[obj.pk])
        return format_html('<a href="{}">v{}</a>', url, obj.version_id)


class ViewVersionLogInline(ReadOnlyInline):
    model = models.ViewVersionLogEntry
    fields = ["position", "version_id", "timestamp_ms"]
    readonly_fields = fields


class ViewSchemaFieldInline(ReadOnlyInline):
    model = models.ViewSchemaField
    fields = ["schema_id", "position", "field_id", "name", "type", "required", "doc"]
    readonly_fields = fields


@admin.register(models.View)
class ViewAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["__str__", "namespace", "name", "current_version_id", "updated_at"]
    list_filter = ["namespace"]
    search_fields = ["name", "namespace__name", "uuid", "metadata_location"]
    list_select_related = ["namespace"]
    inlines = [ViewVersionInline, ViewVersionLogInline, ViewSchemaFieldInline]
    # Every column mirrors the metadata file or is the pointer to it: change (or drop) a view
    # through the web pages or the API, which write a new metadata file and swap the pointer.
    readonly_fields = [f.name for f in models.View._meta.fields if f.name != "catalogobject_ptr"]


class ViewRepresentationInline(ReadOnlyInline):
    model = models.ViewRepresentation
    fields = ["dialect", "is_original", "sql"]
    readonly_fields = fields


@admin.register(models.ViewVersion)
class ViewVersionAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["__str__", "version_id", "schema_id", "timestamp_ms", "default_catalog"]
    list_filter = ["view__namespace"]
    search_fields = ["view__name", "view__namespace__name", "representations__sql"]
    list_select_related = ["view__namespace"]
    inlines = [ViewRepresentationInline]
    readonly_fields = [f.name for f in models.ViewVersion._meta.fields if f.name != "id"]


@admin.register(models.ViewVersionLogEntry)
class ViewVersionLogEntryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["__str__", "position", "version_id", "timestamp_ms"]
    search_fields = ["view__name", "view__namespace__name"]
    list_select_related = ["view__namespace"]


@admin.register(models.ViewSchemaField)
class ViewSchemaFieldAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["__str__", "view", "schema_id", "position", "field_id", "required"]
    list_filter = ["type", "required"]
    search_fields = ["name", "view__name", "view__namespace__name"]
    list_select_related = ["view__namespace"]


class TableSchemaFieldInline(ReadOnlyInline):
    model = models.TableSchemaField
    fields = ["schema_id", "position", "field_id", "name", "type", "required", "doc"]


class TableSnapshotInline(ReadOnlyInline):
    model = models.TableSnapshot
    fields = ["snapshot_id", "parent_snapshot_id", "timestamp_ms", "operation", "summary"]


class TableMetadataLogInline(ReadOnlyInline):
    model = models.TableMetadataLogEntry
    fields = ["position", "timestamp_ms", "metadata_file"]


@admin.register(models.Table)
class TableAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["__str__", "namespace", "name", "format_version", "location", "updated_at"]
    list_filter = ["namespace", "format_version"]
    search_fields = ["name", "namespace__name", "uuid", "location"]
    list_select_related = ["namespace"]
    inlines = [TableSchemaFieldInline, TableSnapshotInline, TableMetadataLogInline]


@admin.register(models.TableMetricsReport)
class TableMetricsReportAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["received_at", "table_name", "report_type"]
    list_filter = ["report_type"]
    search_fields = ["table_name"]


class CatalogClientForm(forms.ModelForm):
    class Meta:
        model = models.CatalogClient
        fields = ["name", "user"]


@admin.register(models.CatalogClient)
class CatalogClientAdmin(admin.ModelAdmin):
    """Engines' credentials. Adding one shows its secret once; revoking is unticking active."""

    list_display = ["name", "client_id", "user", "active", "created_at"]
    list_filter = ["active"]
    search_fields = ["name", "client_id", "user__username"]

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs):
        if obj is None:
            kwargs["form"] = CatalogClientForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return ["name", "user"] if obj is None else ["name", "client_id", "user", "active"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [] if obj is None else ["client_id", "user"]

    def save_model(
        self, request: HttpRequest, obj: models.CatalogClient, form, change: bool
    ) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        client, secret = create_client(name=obj.name, user=obj.user, actor=request.user)
        obj.pk = client.pk
        obj.client_id = client.client_id
        self.message_user(
            request,
            f"Credential for engines (shown once): credential={client.client_id}:{secret}",
        )


@admin.register(models.AccessToken)
class AccessTokenAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["client", "created_at", "expires_at"]
    search_fields = ["client__name", "client__client_id"]

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return True  # revoking a token is deleting it


@admin.register(models.CatalogEvent)
class CatalogEventAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["occurred_at", "actor", "action_shown", "object_type", "object_name", "result"]
    list_filter = ["result", "action", "object_type"]
    search_fields = [
        "object_name",
        "object_uuid",
        "message",
        "metadata_location",
        "actor__username",
    ]
    list_select_related = ["actor"]
    date_hierarchy = "occurred_at"
    readonly_fields = [f.name for f in models.CatalogEvent._meta.fields if f.name != "id"]

    @admin.display(description="action", ordering="action")
    def action_shown(self, event: models.CatalogEvent) -> str:
        """A folded row's action with its count, "commit_table ×720" (history.fold_commits)."""
        return event.action_display


@admin.register(models.Grant)
class GrantAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Grants change through /api/grants/, which checks who may and records each change."""

    list_display = ("privilege", "principal_label", "securable_label", "granted_by", "granted_at")
    list_filter = ("privilege",)
    list_select_related = ("user", "group", "client", "namespace", "object__namespace")
    search_fields = ("user__username", "group__name", "client__client_id", "namespace__name")


@admin.register(models.GrantChange)
class GrantChangeAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = (
        "occurred_at",
        "actor_name",
        "action",
        "privilege",
        "principal_type",
        "principal_name",
        "securable_name",
    )
    list_filter = ("action", "privilege", "principal_type", "securable_type")
    search_fields = ("actor_name", "principal_name", "securable_name")
    date_hierarchy = "occurred_at"
