"""Indexes for completing names by their first letters (`catalog.completions`): objects by
(namespace, lower-cased name) and namespaces by lower-cased name, in code point order.

A prefix then reads one range of an index and stops at the page's end, however many names
the namespace holds: `lower(name) >= lower(prefix) AND lower(name) < lower(prefix) || U+10FFFF`
in that order. PostgreSQL compares with the "C" collation, the order of the code points,
so that every name starting with the prefix lies in the range whatever the database's
collation (a linguistic one orders "order_lines" and "order" apart from their bytes).
SQLite's default (BINARY) is that order already.

Django does not know these indexes: a later migration that makes SQLite rebuild either table
(an altered field) must create them again, as 0014 does for the name search's triggers."""

from django.db import migrations

OBJECTS = "catalog_catalogobject"
NAMESPACES = "catalog_namespace"
OBJECT_INDEX = "catalog_object_name_prefix"
NAMESPACE_INDEX = "catalog_namespace_name_prefix"

FORWARD = {
    "sqlite": [
        f"CREATE INDEX IF NOT EXISTS {OBJECT_INDEX} ON {OBJECTS} (namespace_id, lower(name))",
        f"CREATE INDEX IF NOT EXISTS {NAMESPACE_INDEX} ON {NAMESPACES} (lower(name))",
    ],
    "postgresql": [
        f"CREATE INDEX IF NOT EXISTS {OBJECT_INDEX} ON {OBJECTS} "
        '(namespace_id, lower(name) COLLATE "C")',
        f'CREATE INDEX IF NOT EXISTS {NAMESPACE_INDEX} ON {NAMESPACES} (lower(name) COLLATE "C")',
    ],
}
BACKWARD = [f"DROP INDEX IF EXISTS {OBJECT_INDEX}", f"DROP INDEX IF EXISTS {NAMESPACE_INDEX}"]


def forward(apps, schema_editor):
    for statement in FORWARD.get(schema_editor.connection.vendor, []):
        schema_editor.execute(statement)


def backward(apps, schema_editor):
    if schema_editor.connection.vendor in FORWARD:
        for statement in BACKWARD:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0014_namespace_counts"),
    ]

    operations = [migrations.RunPython(forward, backward)]
