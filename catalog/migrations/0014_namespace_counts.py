"""Each namespace's counts of views, tables and materialized tables (catalog.counts), filled
from the rows. On SQLite, adding a column rebuilds the namespaces' table, which the name
search's triggers (0007) name: they are dropped before and made again after."""

import importlib

from django.db import migrations, models
from django.db.models import Count

NAME_INDEX = importlib.import_module("catalog.migrations.0007_object_name_search_index")
TRIGGERS = [s for s in NAME_INDEX.SQLITE_FORWARD if s.startswith("CREATE TRIGGER")]
NO_TRIGGERS = [s for s in NAME_INDEX.SQLITE_BACKWARD if s.startswith("DROP TRIGGER")]


def _on_sqlite(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "sqlite":
            for statement in statements:
                schema_editor.execute(statement)

    return run


def count_objects(apps, schema_editor):
    """Each namespace's views and tables, from its rows (catalog.counts keeps them after)."""
    Namespace = apps.get_model("catalog", "Namespace")
    CatalogObject = apps.get_model("catalog", "CatalogObject")
    found = {}
    rows = CatalogObject.objects.order_by().values_list("namespace_id", "kind")
    for namespace_id, kind, n in rows.annotate(n=Count("pk")):
        field = "view_total" if kind == "view" else "table_total"
        found.setdefault(namespace_id, {})[field] = n
    for namespace_id, fields in found.items():
        Namespace.objects.filter(pk=namespace_id).update(**fields)


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0013_page_indexes"),
    ]

    operations = [
        migrations.RunPython(_on_sqlite(NO_TRIGGERS), _on_sqlite(TRIGGERS)),
        migrations.AddField(
            model_name="namespace",
            name="materialized_total",
            field=models.IntegerField(default=0),
        ),
        migrations.AddField(
            model_name="namespace",
            name="table_total",
            field=models.IntegerField(default=0),
        ),
        migrations.AddField(
            model_name="namespace",
            name="view_total",
            field=models.IntegerField(default=0),
        ),
        migrations.RunPython(_on_sqlite(TRIGGERS), _on_sqlite(NO_TRIGGERS)),
        migrations.RunPython(count_objects, migrations.RunPython.noop),
    ]
