from django.db import migrations

from catalog.roles import EDITOR, VIEWER


def create_role_groups(apps, schema_editor):
    Group = apps.get_model("auth", "Group")
    for name in (VIEWER, EDITOR):
        Group.objects.get_or_create(name=name)


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0001_catalog_kernel"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [migrations.RunPython(create_role_groups, migrations.RunPython.noop)]
