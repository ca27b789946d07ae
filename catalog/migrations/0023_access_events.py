"""Access events (catalog.access_event_models): the audit of reads and refusals, with
indexes for its filters: time, actor's name with time, refusals' time (partial), and
(below, as 0018 makes its own) the name's first 200 characters in code point order with
time."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

NAME_KEY = 200  # catalog.audit.NAME_KEY


def forward(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor not in ("sqlite", "postgresql"):
        return
    key = f"SUBSTR(object_name, 1, {NAME_KEY})"
    if vendor == "postgresql":
        key = f'({key}) COLLATE "C"'
    schema_editor.execute(
        "CREATE INDEX IF NOT EXISTS catalog_access_name "
        f"ON catalog_accessevent ({key}, occurred_at)"
    )


def backward(apps, schema_editor):
    if schema_editor.connection.vendor in ("sqlite", "postgresql"):
        schema_editor.execute("DROP INDEX IF EXISTS catalog_access_name")


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0022_sparkjob_is_a_run"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="AccessEvent",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("occurred_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("actor_name", models.CharField(blank=True, default="", max_length=150)),
                ("credential", models.CharField(blank=True, default="", max_length=100)),
                (
                    "channel",
                    models.CharField(
                        choices=[
                            ("rest", "Rest"),
                            ("api", "Api"),
                            ("page", "Page"),
                            ("console", "Console"),
                            ("worker", "Worker"),
                        ],
                        max_length=10,
                    ),
                ),
                ("action", models.CharField(max_length=32)),
                ("object_type", models.CharField(blank=True, default="", max_length=20)),
                ("object_name", models.TextField(blank=True, default="")),
                ("object_uuid", models.UUIDField(blank=True, null=True)),
                ("tables", models.JSONField(blank=True, null=True)),
                (
                    "outcome",
                    models.CharField(
                        choices=[("allowed", "Allowed"), ("refused", "Refused")], max_length=8
                    ),
                ),
                ("status", models.PositiveSmallIntegerField(default=200)),
                ("reason", models.TextField(blank=True, default="")),
                (
                    "actor",
                    models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(fields=["-occurred_at", "-id"], name="catalog_access_time"),
                    models.Index(
                        fields=["actor_name", "-occurred_at", "-id"], name="catalog_access_actor"
                    ),
                    models.Index(
                        condition=models.Q(("outcome", "refused")),
                        fields=["-occurred_at", "-id"],
                        name="catalog_access_refused",
                    ),
                ],
            },
        ),
        migrations.RunPython(forward, backward),
    ]
