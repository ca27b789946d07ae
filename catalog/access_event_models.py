"""The database side of the audit of reads and refusals: one `AccessEvent` per load of a
table or view through the REST catalog, console query, preview, download, and refused
request (a 403, or the 404 that hides an object). Written by catalog.access_log's flusher
alone (in batches, off the request's path); read by catalog.audit. Importable from
catalog.models, as every model of the app is."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class AccessEvent(models.Model):
    class Channel(models.TextChoices):
        REST = "rest"  # the Iceberg REST catalog (engines)
        API = "api"
        PAGE = "page"
        CONSOLE = "console"  # a console query's web request
        WORKER = "worker"  # what a worker read for a console query

    class Outcome(models.TextChoices):
        ALLOWED = "allowed"
        REFUSED = "refused"

    occurred_at = models.DateTimeField(default=timezone.now)
    #: The same event repeated within one flush (an engine loading a table again and
    #: again): one row, its `count`, from `first_occurred_at` to `occurred_at`. The log
    #: has a line for each.
    count = models.PositiveIntegerField(default=1)
    first_occurred_at = models.DateTimeField(null=True, blank=True)
    #: Who: the account (kept while it exists) and its name at the time.
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        # The flusher writes rows later, in batches: a deleted account must not fail one.
        # No index of its own: the audit finds an actor by the name kept beside it.
        db_constraint=False,
        db_index=False,
    )
    actor_name = models.CharField(max_length=150, blank=True, default="")
    #: Which credential: an engine client's id, "session" (a browser or the API with a
    #: session or token of the user), or "console" (a worker running the user's query).
    credential = models.CharField(max_length=100, blank=True, default="")
    channel = models.CharField(max_length=10, choices=Channel.choices)
    #: load-table, load-view, preview, download, query, refused.
    action = models.CharField(max_length=32)
    #: table, view, namespace, query (a download's), or "" when the path names nothing.
    object_type = models.CharField(max_length=20, blank=True, default="")
    #: The object's full name ("sales.orders"), a namespace's, or the path's.
    object_name = models.TextField(blank=True, default="")
    object_uuid = models.UUIDField(null=True, blank=True)
    #: A console query's reads: the tables and views its plan read, as names.
    tables = models.JSONField(null=True, blank=True)
    outcome = models.CharField(max_length=8, choices=Outcome.choices)
    status = models.PositiveSmallIntegerField(default=200)
    #: Why: a refusal's message, "hidden: ..." for a 404 that hides an object.
    reason = models.TextField(blank=True, default="")

    class Meta:
        indexes = [
            models.Index(fields=["-occurred_at", "-id"], name="catalog_access_time"),
            models.Index(fields=["actor_name", "-occurred_at", "-id"], name="catalog_access_actor"),
            # Refusals alone (a partial index): the many reads' inserts do not maintain it,
            # and `kind=reads` walks the time index, where nearly every row is one.
            models.Index(
                fields=["-occurred_at", "-id"],
                name="catalog_access_refused",
                condition=models.Q(outcome="refused"),
            ),
            # By name: migration 0023's own index (catalog.audit.NameKey's expression).
        ]

    def __str__(self) -> str:
        return f"{self.actor_name or '?'} {self.action} {self.object_name}: {self.outcome}"
