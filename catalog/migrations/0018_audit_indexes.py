"""Indexes for the audit (catalog.audit): catalog events by actor and time, grant changes by
the actor's name and time, and both by name and time.

The name indexes hold each name's first 200 characters (catalog.audit.NAME_KEY: a whole
name can be longer than PostgreSQL indexes, a third of a page) in code point order, so that
a name, the names under it (`sales` and `sales.*`) and a prefix are each one range of them:
PostgreSQL compares in the "C" collation there whatever the database's collation (a
linguistic one orders "sales.x" and "salesx" apart from their code points); SQLite's
default (BINARY) is that order already. The expressions are those catalog.audit.NameKey
writes, so that the planners match the queries' to them.

Django does not know these two indexes: a later migration that makes SQLite rebuild either
table (an altered field) must create them again, as 0015 says of its own."""

from django.db import migrations, models

NAME_KEY = 200  # catalog.audit.NAME_KEY, as it was when this ran
TABLES = {
    "catalog_event_name": ("catalog_catalogevent", "object_name"),
    "catalog_grant_change_name": ("catalog_grantchange", "securable_name"),
}


def forward(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor not in ("sqlite", "postgresql"):
        return
    for index, (table, column) in TABLES.items():
        if vendor == "postgresql":
            key = f'(SUBSTR({column}, 1, {NAME_KEY})) COLLATE "C"'
        else:
            key = f"SUBSTR({column}, 1, {NAME_KEY})"
        schema_editor.execute(f"CREATE INDEX IF NOT EXISTS {index} ON {table} ({key}, occurred_at)")


def backward(apps, schema_editor):
    if schema_editor.connection.vendor in ("sqlite", "postgresql"):
        for index in TABLES:
            schema_editor.execute(f"DROP INDEX IF EXISTS {index}")


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0017_roles_become_grants"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="catalogevent",
            index=models.Index(fields=["actor", "-occurred_at", "-id"], name="catalog_event_actor"),
        ),
        migrations.AddIndex(
            model_name="grantchange",
            index=models.Index(
                fields=["actor_name", "-occurred_at", "-id"], name="catalog_grant_change_actor"
            ),
        ),
        migrations.RunPython(forward, backward),
    ]
