"""Failed sign-ins kept as one row per failure with both its account and its address
(catalog/throttle.py), instead of one row per key: an address is now throttled by how many
accounts failed from it, which needs the pair. The rows are a few minutes' to hours' worth
of failures, not history: the old ones are dropped."""

from django.db import migrations, models


def forget_failures(apps, schema_editor):
    apps.get_model("catalog", "FailedLogin").objects.all().delete()


class Migration(migrations.Migration):
    dependencies = [("catalog", "0019_object_visibility_index")]

    operations = [
        migrations.RunPython(forget_failures, migrations.RunPython.noop),
        migrations.RemoveIndex(model_name="failedlogin", name="catalog_fai_scope_84c766_idx"),
        migrations.RemoveField(model_name="failedlogin", name="key"),
        migrations.AddField(
            model_name="failedlogin",
            name="account",
            field=models.CharField(default="", max_length=64),
        ),
        migrations.AddField(
            model_name="failedlogin",
            name="address",
            field=models.CharField(default="", max_length=64),
        ),
        migrations.AddIndex(
            model_name="failedlogin",
            index=models.Index(fields=["account", "at"], name="failed_login_account"),
        ),
        migrations.AddIndex(
            model_name="failedlogin",
            index=models.Index(fields=["address", "at"], name="failed_login_address"),
        ),
        migrations.AddIndex(
            model_name="failedlogin",
            index=models.Index(fields=["at"], name="failed_login_at"),
        ),
    ]
