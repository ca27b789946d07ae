"""The database side of the catalog.

The metadata files are the interoperable truth; the database holds the pointer to each
object's current metadata file (swapped with a compare-and-swap, see services.py) and a
queryable mirror of what that file says, kept in the same transaction as the swap."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from functools import reduce
from operator import or_

from django.conf import settings
from django.db import models
from django.db.models.functions import Concat
from django.utils import timezone

# Every model of the app is importable from here (Django's convention): engine credentials
# and grants are written in modules of their own.
from catalog.access_event_models import AccessEvent  # noqa: F401
from catalog.core.sql import ENGINE_CATALOG_PATTERN, SESSION_CATALOG
from catalog.credential_models import AccessToken, CatalogClient, IdempotencyKey  # noqa: F401
from catalog.grant_models import Grant, GrantChange  # noqa: F401
from catalog.policy_models import ColumnMask, RowFilter  # noqa: F401
from infra.runs import Run


class Namespace(models.Model):
    #: Levels joined by "." ("sales" or "sales.eu"); a level itself holds no dot.
    name = models.CharField(max_length=1024, unique=True)
    properties = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    #: How many views and tables (materialized ones included) it holds, and how many of its
    #: tables are materialized: kept with the objects (catalog.counts).
    view_total = models.IntegerField(default=0)
    table_total = models.IntegerField(default=0)
    materialized_total = models.IntegerField(default=0)
    #: Holds every privilege on the namespace and everything under it (catalog.access):
    #: its creator, until an administrator transfers it; none for namespaces made before
    #: owners were kept and no event named their creator.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def levels(self) -> list[str]:
        return self.name.split(".")


class CatalogObjectQuerySet(models.QuerySet):
    def located_in(self, folder: str) -> CatalogObjectQuerySet:
        """Objects whose location is `folder` (in its normal form) or lies inside it."""
        folder = folder.rstrip("/")
        return self.filter(models.Q(location=folder) | models.Q(location__startswith=folder + "/"))

    def search(self, text: str) -> CatalogObjectQuerySet:
        """Objects whose qualified name contains `text` ("sales.region" finds
        sales.region_revenue), or whose name or namespace does.

        Written without concatenating the two columns (which costs every row a string
        build): the qualified name `<namespace>.<name>` contains `text` when the namespace
        or the name does, or when `text` spans the separator, i.e. for some "." in `text`
        the namespace ends with what is before it and the name starts with what follows."""
        if not text:
            return self
        # Namespaces are few: each condition on them is a subquery run once, not a join
        # evaluated for every object.
        namespaces = Namespace.objects.order_by().values("pk")
        found = models.Q(name__icontains=text) | models.Q(
            namespace__in=namespaces.filter(name__icontains=text)
        )
        for position, character in enumerate(text):
            if character == ".":
                found |= models.Q(
                    namespace__in=namespaces.filter(name__iendswith=text[:position]),
                    name__istartswith=text[position + 1 :],
                )
        return self.filter(found)


class CatalogObject(models.Model):
    """What every object of the catalog has, whatever its kind.

    One row per name: the unique constraint spans views and tables (and, next, materialized
    tables), so two writers creating a view and a table of one name cannot both win. The
    *pointer* (`metadata_location`) moves only by the compare-and-swap in
    `catalog.services.kernel`; `uuid`, `location` and `properties` mirror the metadata file
    and are written only by `catalog.mirror`. History (`CatalogEvent`) follows `uuid`."""

    class Kind(models.TextChoices):
        VIEW = "view"
        TABLE = "table"

    kind = models.CharField(max_length=16, choices=Kind.choices)
    namespace = models.ForeignKey(
        Namespace, on_delete=models.PROTECT, related_name="catalog_objects"
    )
    name = models.CharField(max_length=255)
    #: The view-uuid or table-uuid of the metadata: the object's identity across renames.
    uuid = models.UUIDField(db_index=True)
    location = models.TextField()
    #: The pointer: the metadata file that is this object's current state.
    metadata_location = models.TextField()
    properties = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    #: Set by every commit, rename and property change (the kernel writes it).
    updated_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    #: Holds every privilege on the object (catalog.access): its creator, until an
    #: administrator transfers it.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    objects = CatalogObjectQuerySet.as_manager()

    class Meta:
        ordering = ["namespace__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["namespace", "name"], name="one_object_per_name")
        ]
        indexes = [
            # Counting a namespace's tables (the home page) reads its tables' entries alone.
            models.Index(fields=["namespace", "kind"], name="catalog_object_ns_kind"),
            # A list in name order for a user who sees part of the catalog (a search) walks
            # the names in order and tests each one's visibility (catalog.access: its id,
            # namespace or owner) on the index's entry: without the owner in it, SQLite
            # read every object and sorted them (40 ms at 11,000 objects, against 1.3).
            models.Index(fields=["namespace", "name", "owner"], name="catalog_object_visible"),
        ]

    def __str__(self) -> str:
        return f"{self.namespace.name}.{self.name}"

    @property
    def comment(self) -> str:
        return self.properties.get("comment", "")


class ViewQuerySet(CatalogObjectQuerySet):
    def reading(self, namespace: str, name: str) -> ViewQuerySet:
        """The views whose current version reads `namespace.name` of this catalog (over
        `ViewRead`'s index)."""
        return self.filter(
            pk__in=ViewRead.objects.of_this_catalog().targets([(namespace, name)]).values("view_id")
        )


class View(CatalogObject):
    # Every column of a kind has a default: the kernel inserts the row, then the mirror
    # fills it from the metadata in the same transaction.
    current_version_id = models.IntegerField(default=0)
    #: Tables and views the current version reads, as [catalog, *namespace, name] lists.
    dependencies = models.JSONField(default=list, blank=True)

    objects = ViewQuerySet.as_manager()

    class Meta:
        ordering = ["namespace__name", "name"]

    def current_version(self) -> ViewVersion | None:
        return self.versions.filter(version_id=self.current_version_id).first()

    def schema_fields(self, schema_id: int) -> models.QuerySet[ViewSchemaField]:
        return self.fields.filter(schema_id=schema_id).order_by("position")


class ViewReadQuerySet(models.QuerySet):
    def of_this_catalog(self) -> ViewReadQuerySet:
        """Reads of this catalog's objects: the SQL named no catalog, this one, or an
        engine's own name for it (catalog.selectors.engine_catalogs)."""
        # Per row, on the rows `targets` finds by index: the name is no first level of a
        # namespace here (catalog.selectors.catalogs_meaning_this says the same in Python).
        nested = Namespace.objects.filter(
            models.Q(name=models.OuterRef("catalog"))
            | models.Q(name__startswith=Concat(models.OuterRef("catalog"), models.Value(".")))
        )
        engine_name = models.Q(catalog__regex=ENGINE_CATALOG_PATTERN) & ~models.Exists(nested)
        return self.exclude(catalog=SESSION_CATALOG).filter(
            models.Q(catalog__in=("", settings.CATALOG_NAME)) | engine_name
        )

    def targets(self, names: Iterable[tuple[str, str]]) -> ViewReadQuerySet:
        """Reads of any of the (namespace, name) pairs `names`: one lookup of the index each."""
        wanted = [models.Q(namespace=namespace, name=name) for namespace, name in names]
        if not wanted:
            return self.none()
        return self.filter(reduce(or_, wanted))


class ViewRead(models.Model):
    """One entry of `View.dependencies` as a row: a table or view the view's current version
    reads, by name. "Which views read X" (a table's page, a drop's refusal, the lineage) is
    then a lookup on the (namespace, name) index, whatever the number of views, where a
    search of every view's `dependencies` list would read them all. Written by
    `catalog.mirror` alone, beside `dependencies`."""

    view = models.ForeignKey(View, on_delete=models.CASCADE, related_name="reads")
    #: As the SQL names it: "" when it names none (this one is meant); an engine's own name
    #: for this catalog (`lake`) is read as this one (catalog.selectors).
    catalog = models.TextField(blank=True, default="")
    #: Levels joined by "." as in `Namespace.name`.
    namespace = models.TextField()
    name = models.TextField()

    objects = ViewReadQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["namespace", "name"], name="catalog_viewread_target")]

    def __str__(self) -> str:
        return f"{self.view_id} reads {self.namespace}.{self.name}"


class ViewVersionQuerySet(models.QuerySet):
    def with_sql(self) -> ViewVersionQuerySet:
        """Versions with their SQL representations loaded."""
        return self.prefetch_related("representations")


class ViewVersion(models.Model):
    view = models.ForeignKey(View, on_delete=models.CASCADE, related_name="versions")
    version_id = models.IntegerField()
    schema_id = models.IntegerField()
    timestamp_ms = models.BigIntegerField()
    summary = models.JSONField(default=dict, blank=True)
    default_catalog = models.TextField(null=True, blank=True)
    default_namespace = models.JSONField(default=list)
    #: Why sqlglot cannot read the version's original SQL (blank when it can). Such SQL is
    #: stored as the engine sent it, not transpiled to other dialects, its sources unknown.
    sql_error = models.TextField(blank=True, default="")

    objects = ViewVersionQuerySet.as_manager()

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
    dialect = models.TextField()
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


class SchemaField(models.Model):
    """One field of one schema (views and tables keep every schema, as their metadata does).
    Only top-level fields are rows; a nested type is shown whole in `type`."""

    schema_id = models.IntegerField()
    position = models.IntegerField()
    field_id = models.IntegerField()
    name = models.TextField()
    type = models.TextField()
    required = models.BooleanField(default=False)
    doc = models.TextField(null=True, blank=True)

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.name} {self.type}"


class ViewSchemaField(SchemaField):
    view = models.ForeignKey(View, on_delete=models.CASCADE, related_name="fields")

    class Meta:
        ordering = ["view", "schema_id", "position"]


class ViewVersionLogEntry(models.Model):
    view = models.ForeignKey(View, on_delete=models.CASCADE, related_name="log_entries")
    position = models.IntegerField()
    timestamp_ms = models.BigIntegerField()
    version_id = models.IntegerField()

    class Meta:
        ordering = ["view", "position"]

    def __str__(self) -> str:
        return f"{self.view} -> v{self.version_id}"


class Table(CatalogObject):
    """An Iceberg table: the pointer to its current metadata file, and a mirror of it."""

    format_version = models.IntegerField(default=2)
    current_schema_id = models.IntegerField(default=0)
    current_snapshot_id = models.BigIntegerField(null=True, blank=True)
    default_spec_id = models.IntegerField(default=0)
    last_updated_ms = models.BigIntegerField(default=0)
    partition_specs = models.JSONField(default=list, blank=True)
    sort_orders = models.JSONField(default=list, blank=True)
    #: Branches and tags: {name: {"snapshot-id", "type", retention...}} (maintenance keeps
    #: what they reference).
    refs = models.JSONField(default=dict, blank=True)

    objects = CatalogObjectQuerySet.as_manager()

    class Meta:
        ordering = ["namespace__name", "name"]

    def schema_fields(self, schema_id: int | None = None) -> models.QuerySet[TableSchemaField]:
        wanted = self.current_schema_id if schema_id is None else schema_id
        return self.fields.filter(schema_id=wanted).order_by("position")

    def default_spec(self) -> dict:
        return next(
            (s for s in self.partition_specs if s.get("spec-id") == self.default_spec_id), {}
        )


class Attachment(models.Model):
    """A table attached read-only from a folder another system writes (Spark, Flink, another
    catalog). Its Table row is the pointer to the metadata file chosen by ClickHouse's rules
    (`catalog.core.attached`) and the mirror of it; the row's `location` is the attached
    folder. These options choose the file; `checked_at` is when the app last looked."""

    class NewestBy(models.TextChoices):
        VERSION = "version", "highest version in the file name"
        LAST_UPDATED = "last-updated-ms", "highest last-updated-ms"

    table = models.OneToOneField(
        Table, on_delete=models.CASCADE, primary_key=True, related_name="attachment"
    )
    #: Relative to the folder; when set, this file is the table (ClickHouse's first rule).
    metadata_file_path = models.TextField(blank=True, default="")
    #: When set, only metadata files with this table-uuid are candidates.
    table_uuid = models.UUIDField(null=True, blank=True)
    newest_by = models.CharField(max_length=16, choices=NewestBy.choices, default="version")
    checked_at = models.DateTimeField(default=timezone.now)
    #: What the last look could not use: [[file, why], ...], and why it failed, if it did.
    reported = models.JSONField(default=list, blank=True)
    check_error = models.TextField(blank=True, default="")

    def __str__(self) -> str:
        return f"{self.table} (attached from {self.table.location})"


class TableSchemaField(SchemaField):
    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="fields")

    class Meta:
        ordering = ["table", "schema_id", "position"]


class TableSnapshot(models.Model):
    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="snapshots")
    snapshot_id = models.BigIntegerField()
    parent_snapshot_id = models.BigIntegerField(null=True, blank=True)
    sequence_number = models.BigIntegerField(null=True, blank=True)
    timestamp_ms = models.BigIntegerField()
    operation = models.CharField(max_length=32, blank=True, default="")
    summary = models.JSONField(default=dict, blank=True)
    manifest_list = models.TextField(blank=True, default="")
    schema_id = models.IntegerField(null=True, blank=True)

    class Meta:
        ordering = ["table", "timestamp_ms", "snapshot_id"]

    def __str__(self) -> str:
        return f"{self.table} @{self.snapshot_id}"


class TableMetadataLogEntry(models.Model):
    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="metadata_log")
    position = models.IntegerField()
    timestamp_ms = models.BigIntegerField()
    metadata_file = models.TextField()

    class Meta:
        ordering = ["table", "position"]

    def __str__(self) -> str:
        return self.metadata_file


class TableMetricsReport(models.Model):
    """A scan or commit report an engine sent (POST .../metrics): kept for operators."""

    table = models.ForeignKey(
        Table, null=True, blank=True, on_delete=models.SET_NULL, related_name="metrics_reports"
    )
    table_name = models.TextField()
    report_type = models.TextField()
    report = models.JSONField()
    received_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-received_at", "-id"]

    def __str__(self) -> str:
        return f"{self.report_type} {self.table_name}"


class CatalogEventQuerySet(models.QuerySet):
    def for_object(self, obj: CatalogObject) -> CatalogEventQuerySet:
        """The object's history by identity: it survives renames, and a new object given a
        dropped one's name starts with a history of its own."""
        return self.filter(object_uuid=obj.uuid).select_related("actor")


class CatalogEvent(models.Model):
    """History: who did what to which object, when, and how it ended (failures included)."""

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
    #: The object's identity (its metadata UUID); empty for namespaces and clients, and for
    #: a failed create that never made an object.
    object_uuid = models.UUIDField(null=True, blank=True, db_index=True)
    #: The object's name when this happened, for display.
    object_name = models.TextField()
    metadata_location = models.TextField(blank=True, default="")
    result = models.CharField(max_length=16, choices=Result.choices, default=Result.OK)
    message = models.TextField(blank=True, default="")
    #: Events this row stands for: successful commits older than HISTORY_FOLD_COMMITS_AFTER
    #: are folded per object, actor, action and hour (catalog.history.fold_commits) into
    #: the newest of them, which keeps its time and metadata location.
    count = models.PositiveIntegerField(default=1)
    #: A folded row's oldest event (null for a single event: `occurred_at`).
    first_occurred_at = models.DateTimeField(null=True, blank=True)

    objects = CatalogEventQuerySet.as_manager()

    class Meta:
        ordering = ["-occurred_at", "-id"]
        # The drops a namespace's "Recently dropped" page lists, newest first.
        indexes = [
            models.Index(fields=["action", "-occurred_at"], name="catalog_event_action"),
            # An object's recent history (its page), however many commits it has had.
            models.Index(
                fields=["object_uuid", "-occurred_at", "-id"], name="catalog_event_object"
            ),
            # The audit by actor (catalog.audit); by name, migration 0018's own index.
            models.Index(fields=["actor", "-occurred_at", "-id"], name="catalog_event_actor"),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.object_name}: {self.result}"

    @property
    def action_display(self) -> str:
        """The action as lists show it: "commit_table ×720" for a folded row."""
        return f"{self.action} ×{self.count}" if self.count > 1 else self.action


class FailedLogin(models.Model):
    """One failed sign-in (a page login, an API token request, an engine's token request),
    kept for a while so that an account's failures, and an address's failures over many
    accounts, can be throttled (catalog/throttle.py). Rows older than the window are deleted
    as failures come, and at most throttle.MAX_ROWS are kept."""

    #: Which door: "page", "api" or "oauth".
    scope = models.CharField(max_length=16)
    #: SHA-256 of the account tried ("user:<name>" or "client:<client id>"), never the name.
    account = models.CharField(max_length=64, default="")
    #: SHA-256 of the client's address (infra/proxies.py decides it), never the address.
    address = models.CharField(max_length=64, default="")
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [
            models.Index(fields=["account", "at"], name="failed_login_account"),
            models.Index(fields=["address", "at"], name="failed_login_address"),
            models.Index(fields=["at"], name="failed_login_at"),
        ]

    def __str__(self) -> str:
        return f"{self.scope} {self.account[:8]} {self.address[:8]} {self.at:%Y-%m-%d %H:%M:%S}"


class SparkJob(Run):
    """An operation that needs a worker's Spark (a schema to derive, a preview to read, a
    console data change), asked for by a web request that does not wait for it: the request
    answers with the job at once, and the job's page or API URL shows its state and result.
    A run (infra.runs: claimed by one worker with a conditional update, as refresh runs
    are; a worker that goes silent fails its jobs)."""

    #: What to do (catalog.jobs.KINDS) and with what (JSON keyword arguments).
    kind = models.CharField(max_length=40)
    arguments = models.JSONField(default=dict, blank=True)
    #: What it does, in words ("Preview of view sales.v").
    summary = models.TextField(blank=True, default="")
    #: Same kind, same arguments, same user: a repeated preview reuses the job.
    key = models.CharField(max_length=64, db_index=True, blank=True, default="")
    #: When it was asked for: its column is the one it had before it was a Run.
    queued_at = models.DateTimeField(default=timezone.now, db_index=True, db_column="created_at")
    #: The answer the request would have given (its HTTP status and body); a console
    #: script's results grow here as its statements finish.
    status = models.PositiveSmallIntegerField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    #: {"message", "type", "field", "line", "column"} when it failed.
    error = models.JSONField(null=True, blank=True)

    class Meta:
        # Born in the refresh app; moved here (state only) when the job queue became the
        # catalog's, below materialized tables.
        db_table = "refresh_sparkjob"
        ordering = ["-queued_at", "-id"]
        indexes = [models.Index(fields=["state", "requested_by"])]

    def __str__(self) -> str:
        return f"job {self.pk} ({self.kind}): {self.state}"

    # The job's API and page say "created_at" and "cancel_requested", as they did before
    # jobs were runs.
    @property
    def created_at(self) -> datetime:
        return self.queued_at

    @property
    def cancel_requested(self) -> bool:
        return self.cancel_requested_at is not None
