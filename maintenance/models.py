"""Maintenance runs and the health samples the table pages chart."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from catalog.models import Table
from infra.runs import Run
from maintenance.core.policy import Action


class MaintenanceRun(Run):
    """One maintenance action on one table: a run (infra.runs: queued, claimed by one worker
    with a conditional update, never while another run of the table is running), finished
    with its figures."""

    class Trigger(models.TextChoices):
        SCHEDULED = "SCHEDULED"
        MANUAL = "MANUAL"
        API = "API"

    table = models.ForeignKey(
        Table, null=True, blank=True, on_delete=models.SET_NULL, related_name="maintenance_runs"
    )
    #: The table's name at the time: runs outlive a dropped table.
    table_name = models.TextField()
    action = models.CharField(max_length=40, choices=[(a.value, a.value) for a in Action])
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
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
