from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("refresh", "0016_expectations"),
    ]

    operations = [
        migrations.AddField(
            model_name="query",
            name="reads",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
