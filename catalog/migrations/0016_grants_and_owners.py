"""Grants and their changes, owners of namespaces and objects, narrowed credentials.

On SQLite, removing a foreign key (unapplying this) rebuilds the tables, which the name
search's triggers (migration 0007) would break mid-way: they are dropped around the
change and made again."""

import importlib

import django.db.models.deletion
import django.db.models.functions.comparison
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

_names = importlib.import_module("catalog.migrations.0007_object_name_search_index")
NAME_TRIGGERS = [sql for sql in _names.SQLITE_FORWARD if sql.startswith("CREATE TRIGGER")]
NAME_TRIGGER_DROPS = [sql for sql in _names.SQLITE_BACKWARD if sql.startswith("DROP TRIGGER")]


def drop_name_triggers(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for statement in NAME_TRIGGER_DROPS:
            schema_editor.execute(statement)


def create_name_triggers(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        for statement in NAME_TRIGGERS:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("catalog", "0015_name_prefix_indexes"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunPython(drop_name_triggers, create_name_triggers),
        migrations.AddField(
            model_name="catalogclient",
            name="narrowed",
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name="catalogobject",
            name="owner",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="namespace",
            name="owner",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.CreateModel(
            name="GrantChange",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "occurred_at",
                    models.DateTimeField(db_index=True, default=django.utils.timezone.now),
                ),
                ("actor_name", models.CharField(blank=True, default="", max_length=150)),
                (
                    "action",
                    models.CharField(
                        choices=[
                            ("grant", "Grant"),
                            ("revoke", "Revoke"),
                            ("transfer_owner", "Transfer"),
                        ],
                        max_length=16,
                    ),
                ),
                ("privilege", models.CharField(max_length=16)),
                ("principal_type", models.CharField(max_length=8)),
                ("principal_name", models.CharField(max_length=255)),
                ("securable_type", models.CharField(max_length=16)),
                ("securable_name", models.TextField()),
                ("object_uuid", models.UUIDField(blank=True, null=True)),
                ("previous_owner", models.CharField(blank=True, default="", max_length=150)),
                (
                    "actor",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["-occurred_at", "-id"],
            },
        ),
        migrations.CreateModel(
            name="Grant",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "privilege",
                    models.CharField(
                        choices=[
                            ("read_metadata", "Read Metadata"),
                            ("read_data", "Read Data"),
                            ("write_data", "Write Data"),
                            ("create", "Create"),
                            ("manage", "Manage"),
                        ],
                        max_length=16,
                    ),
                ),
                ("granted_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "client",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="grants",
                        to="catalog.catalogclient",
                    ),
                ),
                (
                    "granted_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "group",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="auth.group",
                    ),
                ),
                (
                    "namespace",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="grants",
                        to="catalog.namespace",
                    ),
                ),
                (
                    "object",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="grants",
                        to="catalog.catalogobject",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["granted_at", "id"],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(
                            models.Q(
                                ("client__isnull", True),
                                ("group__isnull", True),
                                ("user__isnull", False),
                            ),
                            models.Q(
                                ("client__isnull", True),
                                ("group__isnull", False),
                                ("user__isnull", True),
                            ),
                            models.Q(
                                ("client__isnull", False),
                                ("group__isnull", True),
                                ("user__isnull", True),
                            ),
                            _connector="OR",
                        ),
                        name="grant_one_principal",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(
                            ("namespace__isnull", True), ("object__isnull", True), _connector="OR"
                        ),
                        name="grant_one_securable",
                    ),
                    models.UniqueConstraint(
                        models.F("privilege"),
                        django.db.models.functions.comparison.Coalesce("user", 0),
                        django.db.models.functions.comparison.Coalesce("group", 0),
                        django.db.models.functions.comparison.Coalesce("client", 0),
                        django.db.models.functions.comparison.Coalesce("namespace", 0),
                        django.db.models.functions.comparison.Coalesce("object", 0),
                        name="one_grant_per_privilege",
                    ),
                ],
            },
        ),
        migrations.RunPython(create_name_triggers, drop_name_triggers),
    ]
