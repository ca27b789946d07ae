"""The Iceberg REST catalog's Idempotency-Keys (catalog/iceberg_rest/idempotency.py): one row
per key and principal, holding the first request's digest and, once it finished, its answer.
Rows live for ICEBERG_IDEMPOTENCY_KEY_LIFETIME; the hourly token sweep deletes them."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0020_failed_logins_by_account_and_address"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="IdempotencyKey",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("key", models.UUIDField()),
                ("fingerprint", models.CharField(max_length=64)),
                ("claim", models.UUIDField()),
                ("claimed_at", models.DateTimeField()),
                ("expires_at", models.DateTimeField(db_index=True)),
                ("status", models.PositiveSmallIntegerField(blank=True, null=True)),
                ("headers", models.JSONField(default=dict)),
                ("body", models.BinaryField(default=b"")),
                (
                    "client",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="catalog.catalogclient",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("user", "client", "key"),
                        name="catalog_idempotency_key_per_principal",
                    )
                ],
            },
        ),
    ]
