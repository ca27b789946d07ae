"""The database side of the catalog.

The metadata files are the interoperable truth; the database holds the pointer to each
object's current metadata file (swapped with a compare-and-swap, see services.py) and a
queryable mirror of what that file says, kept in the same transaction as the swap."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Namespace(models.Model):
    #: Levels joined by "." ("sales" or "sales.eu"); a level itself holds no dot.
    name = models.CharField(max_length=255, unique=True)
    properties = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def levels(self) -> list[str]:
        return self.name.split(".")


class ViewQuerySet(models.QuerySet):
    def search(self, text: str) -> ViewQuerySet:
        if not text:
            return self
        return self.filter(
            models.Q(name__icontains=text)
            | models.Q(namespace__name__icontains=text)
            | models.Q(versions__representations__sql__icontains=text)
        ).distinct()

    def named(self, namespace: str, name: str) -> ViewQuerySet:
        return self.filter(namespace__name=namespace, name=name)


class View(models.Model):
    namespace = models.ForeignKey(Namespace, on_delete=models.PROTECT, related_name="views")
    name = models.CharField(max_length=255)
    view_uuid = models.UUIDField()
    location = models.CharField(max_length=1024)
    #: The pointer: the metadata file that is this view's current state.
    metadata_location = models.CharField(max_length=1024)
    current_version_id = models.IntegerField()
    properties = models.JSONField(default=dict, blank=True)
    #: Tables and views the current version reads, as [catalog, *namespace, name] lists.
    dependencies = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    objects = ViewQuerySet.as_manager()

    class Meta:
        ordering = ["namespace__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["namespace", "name"], name="unique_view_name")
        ]

    def __str__(self) -> str:
        return f"{self.namespace.name}.{self.name}"

    @property
    def comment(self) -> str:
        return self.properties.get("comment", "")

    def current_version(self) -> ViewVersion | None:
        return self.versions.filter(version_id=self.current_version_id).first()

    def schema_fields(self, schema_id: int) -> models.QuerySet[ViewSchemaField]:
        return self.fields.filter(schema_id=schema_id).order_by("position")


class ViewVersion(models.Model):
    view = models.ForeignKey(View, on_delete=models.CASCADE, related_name="versions")
    version_id = models.IntegerField()
    schema_id = models.IntegerField()
    timestamp_ms = models.BigIntegerField()
    summary = models.JSONField(default=dict, blank=True)
    default_catalog = models.CharField(max_length=255, null=True, blank=True)
    default_namespace = models.JSONField(default=list)

    class Meta:
        ordering = ["view", "version_id"]
        constraints = [
            models.UniqueConstraint(fields=["view", "version_id"], name="unique_view_version")
        ]

    def __str__(self) -> str:
        return f"{self.view} v{self.version_id}"

    @property
    def original_dialect(self) -> str | None:
        original = next((r for r in self.representations.all() if r.is_original), None)
        return original.dialect if original else None


class ViewRepresentation(models.Model):
    version = models.ForeignKey(
        ViewVersion, on_delete=models.CASCADE, related_name="representations"
    )
    dialect = models.CharField(max_length=64)
    sql = models.TextField()
    #: The one the user wrote; the others were transpiled from it.
    is_original = models.BooleanField(default=False)

    class Meta:
        ordering = ["-is_original", "dialect"]
        constraints = [
            models.UniqueConstraint(fields=["version", "dialect"], name="one_sql_per_dialect")
        ]

    def __str__(self) -> str:
        return f"{self.version} {self.dialect}"


class ViewSchemaField(models.Model):
    view = models.ForeignKey(View, on_delete=models.CASCADE, related_name="fields")
    schema_id = models.IntegerField()
    position = models.IntegerField()
    field_id = models.IntegerField()
    name = models.CharField(max_length=255)
    type = models.CharField(max_length=255)
    required = models.BooleanField(default=False)
    doc = models.TextField(null=True, blank=True)

    class Meta:
        ordering = ["view", "schema_id", "position"]

    def __str__(self) -> str:
        return f"{self.name} {self.type}"


class ViewVersionLogEntry(models.Model):
    view = models.ForeignKey(View, on_delete=models.CASCADE, related_name="log_entries")
    position = models.IntegerField()
    timestamp_ms = models.BigIntegerField()
    version_id = models.IntegerField()

    class Meta:
        ordering = ["view", "position"]

    def __str__(self) -> str:
        return f"{self.view} -> v{self.version_id}"


class Table(models.Model):
    """An Iceberg table's pointer. Tables arrive with the REST catalog; views need to know
    their names already, since a table and a view never share one."""

    namespace = models.ForeignKey(Namespace, on_delete=models.PROTECT, related_name="tables")
    name = models.CharField(max_length=255)
    table_uuid = models.UUIDField(null=True, blank=True)
    location = models.CharField(max_length=1024)
    metadata_location = models.CharField(max_length=1024, null=True, blank=True)
    properties = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["namespace__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["namespace", "name"], name="unique_table_name")
        ]

    def __str__(self) -> str:
        return f"{self.namespace.name}.{self.name}"


class CatalogEvent(models.Model):
    """History: who did what to which object, when, and how it ended."""

    class Result(models.TextChoices):
        OK = "ok"
        CONFLICT = "conflict"
        FAILED = "failed"

    occurred_at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    action = models.CharField(max_length=64)
    object_type = models.CharField(max_length=32)
    object_name = models.CharField(max_length=512)
    metadata_location = models.CharField(max_length=1024, blank=True, default="")
    result = models.CharField(max_length=16, choices=Result.choices, default=Result.OK)
    message = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-occurred_at", "-id"]

    def __str__(self) -> str:
        return f"{self.action} {self.object_name}: {self.result}"
