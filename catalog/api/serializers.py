"""Shapes of the management API's requests and responses.

Request serializers check types and required fields only; the catalog's rules (names,
dialects, SQL, locations) are checked by the service functions, which raise `CatalogError`."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from catalog.models import (
    Attachment,
    CatalogEvent,
    Namespace,
    SparkJob,
    Table,
    TableSchemaField,
    TableSnapshot,
    View,
    ViewRepresentation,
    ViewSchemaField,
    ViewVersion,
    ViewVersionLogEntry,
)

# -- requests -----------------------------------------------------------------------------


def _properties_field(**kwargs: Any) -> serializers.DictField:
    return serializers.DictField(child=serializers.CharField(allow_blank=True), **kwargs)


def _sql_field(**kwargs: Any) -> serializers.CharField:
    # Whitespace is kept, so the line and column of a SQL error match what the user wrote.
    return serializers.CharField(trim_whitespace=False, **kwargs)


class NamespaceCreateSerializer(serializers.Serializer):
    name = serializers.CharField(help_text='Levels joined by ".", e.g. "sales.eu".')
    properties = _properties_field(required=False, default=dict)


class PropertiesUpdateSerializer(serializers.Serializer):
    updates = _properties_field(required=False, default=dict)
    removals = serializers.ListField(child=serializers.CharField(), required=False, default=list)


class _ViewDefinitionSerializer(serializers.Serializer):
    sql = _sql_field()
    dialect = serializers.CharField(required=False, default="spark")
    column_aliases = serializers.ListField(
        child=serializers.CharField(), required=False, default=list
    )
    column_comments = serializers.ListField(
        child=serializers.CharField(allow_blank=True, allow_null=True),
        required=False,
        default=list,
    )
    default_catalog = serializers.CharField(required=False, allow_null=True, default=None)
    default_namespace = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        default=list,
        help_text="Namespace levels; the view's own namespace when empty.",
    )
    allow_unknown_sources = serializers.BooleanField(
        required=False,
        default=False,
        help_text="The view is created before the tables and views it reads: unknown ones "
        "are accepted (their column types are unknown) instead of refused.",
    )


class ViewCreateSerializer(_ViewDefinitionSerializer):
    name = serializers.CharField()
    comment = serializers.CharField(required=False, allow_blank=True, allow_null=True)
    properties = _properties_field(required=False, default=dict)
    location = serializers.CharField(
        required=False,
        allow_null=True,
        default=None,
        help_text="Inside the warehouse; by default <warehouse>/<namespace levels>/<name>.",
    )


class ViewReplaceSerializer(_ViewDefinitionSerializer):
    comment = serializers.CharField(
        required=False,
        allow_blank=True,
        allow_null=True,
        default=None,
        help_text="Omitted or null: unchanged; empty: removed.",
    )
    expected_metadata_location = serializers.CharField(
        required=False,
        allow_null=True,
        default=None,
        help_text="Refuse the change (409) unless the view's pointer is still this file.",
    )


class RollbackSerializer(serializers.Serializer):
    version_id = serializers.IntegerField()
    expected_metadata_location = serializers.CharField(
        required=False, allow_null=True, default=None
    )


class RepresentationCreateSerializer(serializers.Serializer):
    dialect = serializers.CharField()
    sql = _sql_field()


class RenameSerializer(serializers.Serializer):
    namespace = serializers.CharField(help_text="The target namespace (it must exist).")
    name = serializers.CharField(help_text="The new view name.")


class RegisterSerializer(serializers.Serializer):
    name = serializers.CharField()
    metadata_location = serializers.CharField(
        help_text="An existing view metadata file inside the warehouse."
    )


class TableUploadSerializer(serializers.Serializer):
    file = serializers.FileField(
        allow_empty_file=True,
        help_text="A CSV (with a header row; UTF-8; delimiter , ; tab or |), Parquet or JSON "
        "lines file, at most UPLOAD_MAX_BYTES. Its name's extension says its format unless "
        "`format` does; the name is used for nothing else.",
    )
    table = serializers.CharField(help_text="The table to create, or to append to.")
    mode = serializers.ChoiceField(
        choices=["create", "append"],
        default="create",
        help_text="create: a new table with the file's columns (types inferred from its first "
        "rows); append: the file's rows added to an existing table with the same columns.",
    )
    format = serializers.ChoiceField(
        choices=["csv", "parquet", "jsonl"],
        required=False,
        allow_null=True,
        default=None,
        help_text="The file's format, when its name does not say it (.csv, .tsv, .parquet, "
        ".jsonl, .ndjson, .json).",
    )
    dry_run = serializers.BooleanField(
        default=False,
        help_text="Only show what would be written (columns, types, first rows): nothing is "
        "written.",
    )


class UploadColumnSerializer(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.CharField(help_text="The Iceberg type (long, decimal(10, 2), ...).")


class UploadPreviewSerializer(serializers.Serializer):
    dry_run = serializers.BooleanField()
    namespace = serializers.CharField()
    table = serializers.CharField()
    mode = serializers.CharField()
    format = serializers.CharField()
    columns = UploadColumnSerializer(many=True)
    preview_rows = serializers.ListField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="The file's first rows, as text, in the columns' order.",
    )


class UploadResultSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    table = serializers.CharField()
    mode = serializers.CharField()
    format = serializers.CharField()
    rows_written = serializers.IntegerField()
    columns = UploadColumnSerializer(many=True)
    snapshot_id = serializers.IntegerField(allow_null=True)
    url = serializers.CharField(help_text="The table in this API.")


class AttachSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="The table's name here (ours; its files keep theirs).")
    location = serializers.CharField(
        help_text="The table's folder (or URI), inside one of ATTACH_LOCATIONS."
    )
    metadata_file_path = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="A metadata file relative to the folder: when given, it is the table.",
    )
    table_uuid = serializers.CharField(
        required=False,
        allow_blank=True,
        allow_null=True,
        default=None,
        help_text="Only metadata files with this table-uuid are candidates.",
    )
    newest_by = serializers.ChoiceField(
        choices=["version", "last-updated-ms"],
        default="version",
        help_text="Among candidates, the highest version in the file name, or the highest "
        "last-updated-ms.",
    )


# -- responses ----------------------------------------------------------------------------


class ErrorSerializer(serializers.Serializer):
    """The body of a 4xx raised by the catalog's rules."""

    error = serializers.CharField()
    type = serializers.CharField()
    field = serializers.CharField(required=False)
    line = serializers.IntegerField(required=False)
    column = serializers.IntegerField(required=False, allow_null=True)
    row = serializers.IntegerField(
        required=False, help_text="An uploaded file's row at fault (from 1; not the header)."
    )
    column_name = serializers.CharField(
        required=False, help_text="An uploaded file's column at fault."
    )


class TokenSerializer(serializers.Serializer):
    token = serializers.CharField()


class NamespaceSerializer(serializers.ModelSerializer):
    properties = _properties_field(read_only=True)

    class Meta:
        model = Namespace
        fields = ["name", "properties", "created_at", "updated_at"]
        read_only_fields = fields


class RepresentationSerializer(serializers.ModelSerializer):
    class Meta:
        model = ViewRepresentation
        fields = ["dialect", "sql", "is_original"]
        read_only_fields = fields


class VersionSerializer(serializers.ModelSerializer):
    representations = RepresentationSerializer(many=True, read_only=True)
    transpiled = serializers.SerializerMethodField(
        help_text="False when sqlglot cannot read the original SQL: it is stored as the "
        "engine sent it and no other dialect is generated from it (sql_error says why)."
    )

    class Meta:
        model = ViewVersion
        fields = [
            "version_id",
            "schema_id",
            "timestamp_ms",
            "summary",
            "default_catalog",
            "default_namespace",
            "representations",
            "transpiled",
            "sql_error",
        ]
        read_only_fields = fields

    def get_transpiled(self, version: ViewVersion) -> bool:
        return not version.sql_error


class SchemaFieldSerializer(serializers.ModelSerializer):
    id = serializers.IntegerField(source="field_id")

    class Meta:
        model = ViewSchemaField
        fields = ["id", "name", "type", "required", "doc"]
        read_only_fields = fields


class LogEntrySerializer(serializers.ModelSerializer):
    class Meta:
        model = ViewVersionLogEntry
        fields = ["position", "timestamp_ms", "version_id"]
        read_only_fields = fields


# What a list says of each view or table first: where it is and which metadata is its. (A
# comment, not a docstring: drf-spectacular would describe every subclass with it.)
class ObjectSummarySerializer(serializers.ModelSerializer):
    namespace = serializers.CharField(source="namespace.name")
    uuid = serializers.UUIDField()

    FIELDS = ["namespace", "name", "uuid", "location", "metadata_location"]


class ViewSummarySerializer(ObjectSummarySerializer):
    class Meta:
        model = View
        fields = [
            *ObjectSummarySerializer.FIELDS,
            "current_version_id",
            "comment",
            "updated_at",
        ]
        read_only_fields = fields


class CurrentSchemaSerializer(serializers.Serializer):
    schema_id = serializers.IntegerField()
    fields = SchemaFieldSerializer(many=True)


class ViewDetailSerializer(ViewSummarySerializer):
    properties = _properties_field(read_only=True)
    dependencies = serializers.ListField(
        child=serializers.ListField(child=serializers.CharField()),
        read_only=True,
        help_text="Tables and views the current version reads, as [catalog, *namespace, name].",
    )
    schema = serializers.SerializerMethodField(help_text="The current version's schema.")
    current_version = serializers.SerializerMethodField()

    class Meta(ViewSummarySerializer.Meta):
        fields = [
            *ViewSummarySerializer.Meta.fields,
            "properties",
            "dependencies",
            "schema",
            "current_version",
            "created_at",
        ]
        read_only_fields = fields

    def _current(self, view: View) -> ViewVersion | None:
        cache = self.context.setdefault("_current_versions", {})
        if view.pk not in cache:
            cache[view.pk] = (
                view.versions.prefetch_related("representations")
                .filter(version_id=view.current_version_id)
                .first()
            )
        return cache[view.pk]

    @extend_schema_field(CurrentSchemaSerializer(allow_null=True))
    def get_schema(self, view: View) -> dict[str, Any] | None:
        version = self._current(view)
        if version is None:
            return None
        fields = SchemaFieldSerializer(view.schema_fields(version.schema_id), many=True).data
        return {"schema_id": version.schema_id, "fields": fields}

    @extend_schema_field(VersionSerializer(allow_null=True))
    def get_current_version(self, view: View) -> dict[str, Any] | None:
        version = self._current(view)
        return VersionSerializer(version).data if version else None


class CatalogEventSerializer(serializers.ModelSerializer):
    actor = serializers.CharField(
        source="actor.username", read_only=True, allow_null=True, default=None
    )
    count = serializers.IntegerField(
        read_only=True,
        help_text="Events this row stands for: successful commits older than a day "
        "(HISTORY_FOLD_COMMITS_AFTER_SECONDS) are folded per object, actor, action and hour "
        "into the newest, whose time and metadata location the row keeps.",
    )
    first_occurred_at = serializers.DateTimeField(
        read_only=True,
        allow_null=True,
        help_text="A folded row's first event (null for a single event).",
    )

    class Meta:
        model = CatalogEvent
        fields = [
            "id",
            "occurred_at",
            "actor",
            "action",
            "object_type",
            "object_uuid",
            "object_name",
            "metadata_location",
            "result",
            "message",
            "count",
            "first_occurred_at",
        ]
        read_only_fields = fields


class DroppedSerializer(serializers.Serializer):
    """A table or view dropped with its files kept: its drop, from the history."""

    uuid = serializers.UUIDField(source="object_uuid")
    kind = serializers.SerializerMethodField()
    name = serializers.SerializerMethodField()
    dropped_at = serializers.DateTimeField(source="occurred_at")
    dropped_by = serializers.CharField(
        source="actor.username", read_only=True, allow_null=True, default=None
    )
    metadata_location = serializers.CharField()

    def get_kind(self, event: CatalogEvent) -> str:
        return "table" if event.action == "drop_table" else "view"

    def get_name(self, event: CatalogEvent) -> str:
        return event.object_name.rpartition(".")[2]


class RestoreSerializer(serializers.Serializer):
    name = serializers.CharField(
        required=False, help_text="The name to come back as (default: the name it had)."
    )


# -- tables -------------------------------------------------------------------------------


class TableSummarySerializer(ObjectSummarySerializer):
    materialized = serializers.SerializerMethodField(
        help_text="Whether this table holds a materialized table's data."
    )

    class Meta:
        model = Table
        fields = [
            *ObjectSummarySerializer.FIELDS,
            "format_version",
            "current_snapshot_id",
            "materialized",
            "updated_at",
        ]
        read_only_fields = fields

    def get_materialized(self, table: Table) -> bool:
        if hasattr(table, "materialized_id"):  # annotated by the list: no query per row
            return table.materialized_id is not None
        return hasattr(table, "materialized")


class TableSchemaFieldSerializer(SchemaFieldSerializer):
    class Meta(SchemaFieldSerializer.Meta):
        model = TableSchemaField


class SnapshotSerializer(serializers.ModelSerializer):
    class Meta:
        model = TableSnapshot
        fields = [
            "snapshot_id",
            "parent_snapshot_id",
            "sequence_number",
            "timestamp_ms",
            "operation",
            "summary",
            "manifest_list",
            "schema_id",
        ]
        read_only_fields = fields


class TableCurrentSchemaSerializer(serializers.Serializer):
    schema_id = serializers.IntegerField()
    fields = TableSchemaFieldSerializer(many=True)


class AttachmentSerializer(serializers.ModelSerializer):
    location = serializers.CharField(source="table.location")
    metadata_location = serializers.CharField(
        source="table.metadata_location", help_text="The metadata file read now."
    )
    checked_at = serializers.DateTimeField(
        help_text="When the app last looked for a newer metadata file."
    )
    check_error = serializers.CharField(help_text="Why the last look failed; empty if it did not.")
    reported = serializers.ListField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="Files of the metadata folder left out at the last look: [file, why].",
    )

    class Meta:
        model = Attachment
        fields = [
            "location",
            "metadata_location",
            "metadata_file_path",
            "table_uuid",
            "newest_by",
            "checked_at",
            "check_error",
            "reported",
        ]
        read_only_fields = fields


class TableDetailSerializer(TableSummarySerializer):
    properties = _properties_field(read_only=True)
    attachment = serializers.SerializerMethodField(
        help_text="For a table attached read-only from another system's folder: how its "
        "metadata file is chosen and when the app last looked; null otherwise."
    )
    schema = serializers.SerializerMethodField(help_text="The current schema.")
    current_snapshot = serializers.SerializerMethodField(
        help_text="The current snapshot; null for a table without data."
    )
    partition_spec = serializers.SerializerMethodField(
        help_text="The default partition spec, as in the metadata file."
    )
    partition_specs = serializers.ListField(child=serializers.DictField(), read_only=True)
    sort_orders = serializers.ListField(child=serializers.DictField(), read_only=True)

    class Meta(TableSummarySerializer.Meta):
        fields = [
            *TableSummarySerializer.Meta.fields,
            "properties",
            "schema",
            "current_snapshot",
            "partition_spec",
            "partition_specs",
            "sort_orders",
            "last_updated_ms",
            "created_at",
            "attachment",
        ]
        read_only_fields = fields

    @extend_schema_field(AttachmentSerializer(allow_null=True))
    def get_attachment(self, table: Table) -> dict[str, Any] | None:
        attachment = getattr(table, "attachment", None)
        return AttachmentSerializer(attachment).data if attachment is not None else None

    @extend_schema_field(TableCurrentSchemaSerializer)
    def get_schema(self, table: Table) -> dict[str, Any]:
        fields = TableSchemaFieldSerializer(table.schema_fields(), many=True).data
        return {"schema_id": table.current_schema_id, "fields": fields}

    @extend_schema_field(SnapshotSerializer(allow_null=True))
    def get_current_snapshot(self, table: Table) -> dict[str, Any] | None:
        if table.current_snapshot_id is None:
            return None
        snapshot = table.snapshots.filter(snapshot_id=table.current_snapshot_id).first()
        return SnapshotSerializer(snapshot).data if snapshot else None

    @extend_schema_field(serializers.DictField())
    def get_partition_spec(self, table: Table) -> dict[str, Any]:
        return table.default_spec()


class ApiRootSerializer(serializers.Serializer):
    name = serializers.CharField()
    docs = serializers.CharField()
    schema = serializers.CharField()
    endpoints = serializers.DictField(child=serializers.CharField())


class SparkJobSerializer(serializers.ModelSerializer):
    """A Spark job: its state, and when finished the answer the request would have given
    (`status` and `result`), or `error`."""

    requested_by = serializers.CharField(
        source="requested_by.username", read_only=True, allow_null=True, default=None
    )
    url = serializers.SerializerMethodField()
    page_url = serializers.SerializerMethodField()
    cancel_url = serializers.SerializerMethodField()

    class Meta:
        model = SparkJob
        fields = [
            "id",
            "kind",
            "summary",
            "state",
            "requested_by",
            "created_at",
            "started_at",
            "finished_at",
            "worker",
            "cancel_requested",
            "status",
            "result",
            "error",
            "url",
            "page_url",
            "cancel_url",
        ]
        read_only_fields = fields

    def to_representation(self, job: SparkJob) -> dict[str, Any]:
        """The job; an answer its reader may no longer see (catalog.jobs.withheld, given in
        the context) is left out, with the 403 the request would answer now."""
        data = super().to_representation(job)
        reason = self.context.get("withheld", {}).get(job.pk)
        if reason is not None:
            data["status"], data["result"] = 403, None
            data["error"] = {"message": reason, "type": "Forbidden", "status": 403}
        return data

    def get_url(self, job: SparkJob) -> str:
        return reverse("api:job-detail", kwargs={"job_id": job.pk})

    def get_page_url(self, job: SparkJob) -> str:
        return reverse("catalog:job", kwargs={"job_id": job.pk})

    def get_cancel_url(self, job: SparkJob) -> str:
        return reverse("api:job-cancel", kwargs={"job_id": job.pk})


class JobAcceptedSerializer(serializers.Serializer):
    """202: the operation runs as a Spark job."""

    job = SparkJobSerializer()


class WorkerSerializer(serializers.Serializer):
    name = serializers.CharField()
    started_at = serializers.DateTimeField()
    seen_at = serializers.DateTimeField()
    alive = serializers.BooleanField()


# -- grants -------------------------------------------------------------------------------

_PRINCIPAL_TYPES = ["user", "group", "client"]
_SECURABLE_TYPES = ["catalog", "namespace", "object"]


class GrantRequestSerializer(serializers.Serializer):
    """A grant (POST) or its revoke (DELETE): who, what, on what."""

    privilege = serializers.CharField(
        help_text="read_metadata, read_data, write_data, create (catalog and namespaces) or manage."
    )
    principal_type = serializers.ChoiceField(choices=_PRINCIPAL_TYPES)
    principal = serializers.CharField(
        help_text="A username, a group's name, or an engine credential's client id."
    )
    securable_type = serializers.ChoiceField(choices=_SECURABLE_TYPES)
    namespace = serializers.CharField(
        required=False, default=None, help_text='For a namespace or an object: "sales.eu".'
    )
    name = serializers.CharField(
        required=False, default=None, help_text="For an object: the table's or view's name."
    )


class GrantSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    privilege = serializers.CharField()
    principal_type = serializers.CharField()
    principal = serializers.CharField(source="principal_label")
    securable_type = serializers.CharField()
    namespace = serializers.SerializerMethodField()
    name = serializers.SerializerMethodField()
    granted_by = serializers.CharField(source="granted_by.username", allow_null=True, default=None)
    granted_at = serializers.DateTimeField()

    def get_namespace(self, grant) -> str | None:
        if grant.object_id:
            return grant.object.namespace.name
        return grant.namespace.name if grant.namespace_id else None

    def get_name(self, grant) -> str | None:
        return grant.object.name if grant.object_id else None


class OwnerTransferSerializer(serializers.Serializer):
    securable_type = serializers.ChoiceField(choices=["namespace", "object"])
    namespace = serializers.CharField()
    name = serializers.CharField(required=False, default=None)
    owner = serializers.CharField(help_text="The new owner's username.")


class OwnerSerializer(serializers.Serializer):
    securable_type = serializers.CharField()
    securable = serializers.CharField()
    owner = serializers.CharField()
