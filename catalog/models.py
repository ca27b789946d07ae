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


class TableQuerySet(models.QuerySet):
    def search(self, text: str) -> TableQuerySet:
        if not text:
            return self
        return self.filter(
            models.Q(name__icontains=text) | models.Q(namespace__name__icontains=text)
        )


class Table(models.Model):
    """An Iceberg table: the pointer to its current metadata file, and a mirror of it."""

    namespace = models.ForeignKey(Namespace, on_delete=models.PROTECT, related_name="tables")
    name = models.CharField(max_length=255)
    table_uuid = models.UUIDField(null=True, blank=True)
    location = models.CharField(max_length=1024)
    #: The pointer: the metadata file that is this table's current state.
    metadata_location = models.CharField(max_length=1024, null=True, blank=True)
    format_version = models.IntegerField(default=2)
    current_schema_id = models.IntegerField(default=0)
    current_snapshot_id = models.BigIntegerField(null=True, blank=True)
    default_spec_id = models.IntegerField(default=0)
    last_updated_ms = models.BigIntegerField(default=0)
    partition_specs = models.JSONField(default=list, blank=True)
    sort_orders = models.JSONField(default=list, blank=True)
    properties = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = TableQuerySet.as_manager()

    class Meta:
        ordering = ["namespace__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["namespace", "name"], name="unique_table_name")
        ]

    def __str__(self) -> str:
        return f"{self.namespace.name}.{self.name}"

    def schema_fields(self, schema_id: int | None = None) -> models.QuerySet[TableSchemaField]:
        wanted = self.current_schema_id if schema_id is None else schema_id
        return self.fields.filter(schema_id=wanted).order_by("position")

    def default_spec(self) -> dict:
        return next(
            (s for s in self.partition_specs if s.get("spec-id") == self.default_spec_id), {}
        )


class TableSchemaField(models.Model):
    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="fields")
    schema_id = models.IntegerField()
    position = models.IntegerField()
    field_id = models.IntegerField()
    name = models.CharField(max_length=255)
    type = models.CharField(max_length=1024)
    required = models.BooleanField(default=False)
    doc = models.TextField(null=True, blank=True)

    class Meta:
        ordering = ["table", "schema_id", "position"]

    def __str__(self) -> str:
        return f"{self.name} {self.type}"


class TableSnapshot(models.Model):
    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="snapshots")
    snapshot_id = models.BigIntegerField()
    parent_snapshot_id = models.BigIntegerField(null=True, blank=True)
    sequence_number = models.BigIntegerField(null=True, blank=True)
    timestamp_ms = models.BigIntegerField()
    operation = models.CharField(max_length=32, blank=True, default="")
    summary = models.JSONField(default=dict, blank=True)
    manifest_list = models.CharField(max_length=1024, blank=True, default="")
    schema_id = models.IntegerField(null=True, blank=True)

    class Meta:
        ordering = ["table", "timestamp_ms", "snapshot_id"]

    def __str__(self) -> str:
        return f"{self.table} @{self.snapshot_id}"


class TableMetadataLogEntry(models.Model):
    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="metadata_log")
    position = models.IntegerField()
    timestamp_ms = models.BigIntegerField()
    metadata_file = models.CharField(max_length=1024)

    class Meta:
        ordering = ["table", "position"]

    def __str__(self) -> str:
        return self.metadata_file


class TableMetricsReport(models.Model):
    """A scan or commit report an engine sent (POST .../metrics): kept for operators."""

    table = models.ForeignKey(
        Table, null=True, blank=True, on_delete=models.SET_NULL, related_name="metrics_reports"
    )
    table_name = models.CharField(max_length=512)
    report_type = models.CharField(max_length=64)
    report = models.JSONField()
    received_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-received_at", "-id"]

    def __str__(self) -> str:
        return f"{self.report_type} {self.table_name}"


class CatalogClient(models.Model):
    """Credentials for the Iceberg REST protocol's client-credentials flow.

    Engines are configured with `credential=<client_id>:<secret>`; they exchange it at
    /iceberg/v1/oauth/tokens for a bearer token. The secret is stored hashed."""

    name = models.CharField(max_length=255)
    client_id = models.CharField(max_length=64, unique=True)
    secret_hash = models.CharField(max_length=255)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.name} ({self.client_id})"


class AccessToken(models.Model):
    """A bearer token issued to a client; only its SHA-256 digest is stored."""

    client = models.ForeignKey(CatalogClient, on_delete=models.CASCADE, related_name="tokens")
    digest = models.CharField(max_length=64, unique=True)
    expires_at = models.DateTimeField(db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"token for {self.client}"


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
