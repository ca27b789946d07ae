"""Subscriptions to a materialized table's or a namespace's events, the last state each was
told about each table (one message per change), and every delivery of a message."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from alerts.core.events import Event
from catalog.models import Namespace, Table
from refresh.models import MaterializedTable


class Subscription(models.Model):
    """Who is told about one materialized table, or about every table of a namespace (and of
    the namespaces inside it): an email address, or a webhook URL with its signing secret."""

    class Channel(models.TextChoices):
        EMAIL = "EMAIL"
        WEBHOOK = "WEBHOOK"

    materialized_table = models.ForeignKey(
        MaterializedTable,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="subscriptions",
    )
    namespace = models.ForeignKey(
        Namespace, null=True, blank=True, on_delete=models.CASCADE, related_name="subscriptions"
    )
    channel = models.CharField(max_length=8, choices=Channel.choices)
    #: The email address, or the webhook's URL.
    address = models.TextField()
    #: Signs each webhook request (alerts.core.signing); empty for email.
    secret = models.CharField(max_length=100, blank=True, default="")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["id"]
        constraints = [
            models.CheckConstraint(
                name="subscription_on_a_table_or_a_namespace",
                condition=(
                    models.Q(materialized_table__isnull=False, namespace__isnull=True)
                    | models.Q(materialized_table__isnull=True, namespace__isnull=False)
                ),
            )
        ]

    def __str__(self) -> str:
        return f"{self.address} on {self.subject}"

    @property
    def subject(self) -> str:
        if self.materialized_table_id is not None:
            return f"materialized table {self.materialized_table.table}"
        return f"namespace {self.namespace}"


class NotificationState(models.Model):
    """The last state a subscription was told about, per table and topic
    (alerts.core.events): a change of state is a message, the same state again is not."""

    subscription = models.ForeignKey(Subscription, on_delete=models.CASCADE, related_name="states")
    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="+")
    topic = models.CharField(max_length=16)
    state = models.CharField(max_length=16)
    changed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["subscription", "table", "topic"], name="one_state_per_topic"
            )
        ]
        indexes = [models.Index(fields=["table", "topic", "state"])]

    def __str__(self) -> str:
        return f"{self.topic} of table {self.table_id}: {self.state}"


class Delivery(models.Model):
    """One message to one subscription, with every attempt's outcome: PENDING until it is
    delivered or given up on (FAILED)."""

    class Status(models.TextChoices):
        PENDING = "PENDING"
        DELIVERED = "DELIVERED"
        FAILED = "FAILED"

    subscription = models.ForeignKey(
        Subscription, on_delete=models.CASCADE, related_name="deliveries"
    )
    event = models.CharField(max_length=24, choices=[(e.value, e.value) for e in Event])
    table_name = models.TextField(blank=True, default="")
    #: The JSON body a webhook receives (and what an email says), fixed when it is made.
    payload = models.JSONField(default=dict)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    response_code = models.IntegerField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    #: When the next attempt is due; during an attempt, when it counts as abandoned.
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["status", "next_attempt_at"])]

    def __str__(self) -> str:
        return f"{self.event} {self.table_name} to {self.subscription.address}: {self.status}"
