"""An index of the objects by (namespace, name, owner): a list in name order for a user who
sees part of the catalog walks it and tests each object's visibility on its entry."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0018_audit_indexes"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name="catalogobject",
            index=models.Index(
                fields=["namespace", "name", "owner"], name="catalog_object_visible"
            ),
        ),
    ]
