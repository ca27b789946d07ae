"""A Spark job is a run (infra.runs.Run): its "created_at" is the run's queued_at, in the
same column (no change in the database), and its cancel flag becomes the run's
cancel_requested_at and cancel_requested_by. A job asked to stop keeps being asked: its
flag becomes the moment of its last heartbeat (or now), asked by nobody known. Every row
stays; backwards, a job is asked to stop when it has a cancel_requested_at."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models
from django.db.models.functions import Coalesce


def flag_to_moment(apps, schema_editor):
    SparkJob = apps.get_model("catalog", "SparkJob")
    SparkJob.objects.filter(cancel_requested=True).update(
        cancel_requested_at=Coalesce("heartbeat_at", "started_at", "queued_at")
    )


def moment_to_flag(apps, schema_editor):
    SparkJob = apps.get_model("catalog", "SparkJob")
    SparkJob.objects.filter(cancel_requested_at__isnull=False).update(cancel_requested=True)


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0021_idempotency_keys"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="sparkjob",
            options={"ordering": ["-queued_at", "-id"]},
        ),
        migrations.AlterField(
            model_name="sparkjob",
            name="created_at",
            field=models.DateTimeField(
                db_column="created_at", db_index=True, default=django.utils.timezone.now
            ),
        ),
        migrations.RenameField(
            model_name="sparkjob",
            old_name="created_at",
            new_name="queued_at",
        ),
        migrations.AddField(
            model_name="sparkjob",
            name="cancel_requested_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="sparkjob",
            name="cancel_requested_by",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.RunPython(flag_to_moment, moment_to_flag),
        migrations.RemoveField(
            model_name="sparkjob",
            name="cancel_requested",
        ),
    ]
