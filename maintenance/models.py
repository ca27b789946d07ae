"""Maintenance runs and the health samples the table pages chart."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from catalog.models import Table
from maintenance.core.policy import Action


class MaintenanceRun(models.Model):
    """One maintenance action on one table: queued, claimed by one worker (a conditional
    update, never while another run of the table is running), finished with its figures."""

    class Trigger(models.TextChoices):
        SCHEDULED = "SCHEDULED"
        MANUAL = "MANUAL"
        API = "API"

    class State(models.TextChoices):
        QUEUED = "QUEUED"
        RUNNING = "RUNNING"
        SUCCEEDED = "SUCCEEDED"
        FAILED = "FAILED"
        CANCELLED = "CANCELLED"

    ACTIVE = (State.QUEUED, State.RUNNING)
    FINISHED = (State.SUCCEEDED, State.FAILED, State.CANCELLED)

    table = models.ForeignKey(
        Table, null=True, blank=True, on_delete=models.SET_NULL, related_name="maintenance_runs"
    )
    #: The table's name at the time: runs outlive a dropped table.
    table_name = models.TextField()
    action = models.CharField(max_length=40, choices=[(a.value, a.value) for a in Action])
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    queued_at = models.DateTimeField(default=timezone.now, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    worker = models.TextField(blank=True, default="")
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    #: Live data and delete files, and their bytes, in the current snapshot before and after.
    files_before = models.BigIntegerField(null=True, blank=True)
    files_after = models.BigIntegerField(null=True, blank=True)
    bytes_before = models.BigIntegerField(null=True, blank=True)
    bytes_after = models.BigIntegerField(null=True, blank=True)
    snapshots_before = models.IntegerField(null=True, blank=True)
    snapshots_after = models.IntegerField(null=True, blank=True)
    snapshots_expired = models.IntegerField(null=True, blank=True)
    files_rewritten = models.IntegerField(null=True, blank=True)
    files_added = models.IntegerField(null=True, blank=True)
    #: Files the app deleted (expired or orphaned), orphans found, and paths it refused to
    #: delete because they lie outside the table's location.
    files_deleted = models.IntegerField(null=True, blank=True)
    orphans_removed = models.IntegerField(null=True, blank=True)
    files_outside = models.JSONField(default=list, blank=True)
    details = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True, default="")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    #: A cancel asked while the run was RUNNING (services.cancel_run): its worker cancels
    #: the run's Spark jobs at its next look (about a second).
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    cancel_requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-queued_at", "-id"]
        indexes = [
            models.Index(fields=["table", "state"]),
            models.Index(fields=["table", "action", "-queued_at"]),
            # The table's runs newest first (its page's last runs).
            models.Index(fields=["table", "-queued_at", "-id"], name="maintenance_run_newest"),
        ]

    def __str__(self) -> str:
        return f"{self.action} of {self.table_name}: {self.state}"

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


class HealthSample(models.Model):
    """A table's health at one moment: what the page charts over time. Taken by the sweep
    (at most every HEALTH_SAMPLE_SECONDS per table) and before and after each run; pruned
    after MAINTENANCE_KEEP_DAYS."""

    table = models.ForeignKey(Table, on_delete=models.CASCADE, related_name="health_samples")
    taken_at = models.DateTimeField(default=timezone.now)
    data_files = models.BigIntegerField(default=0)
    data_bytes = models.BigIntegerField(default=0)
    delete_files = models.BigIntegerField(default=0)
    snapshots = models.IntegerField(default=0)
    manifests = models.IntegerField(null=True, blank=True)
    metadata_bytes = models.BigIntegerField(null=True, blank=True)
    metadata_files = models.IntegerField(null=True, blank=True)
    #: The run this sample was taken for, if any (the chart marks it).
    run = models.ForeignKey(
        MaintenanceRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["table", "taken_at"]
        indexes = [models.Index(fields=["table", "taken_at"])]

    def __str__(self) -> str:
        return f"{self.table_id} at {self.taken_at}"

    @property
    def average_file_bytes(self) -> int | None:
        return self.data_bytes // self.data_files if self.data_files else None
