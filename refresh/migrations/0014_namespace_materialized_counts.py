from django.db import migrations
from django.db.models import Count


def count_materialized(apps, schema_editor):
    """Each namespace's materialized tables (catalog.counts keeps the count after)."""
    Namespace = apps.get_model("catalog", "Namespace")
    MaterializedTable = apps.get_model("refresh", "MaterializedTable")
    rows = MaterializedTable.objects.order_by().values_list("table__namespace_id")
    for namespace_id, n in rows.annotate(n=Count("pk")):
        Namespace.objects.filter(pk=namespace_id).update(materialized_total=n)


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0014_namespace_counts"),
        ("refresh", "0013_page_indexes"),
    ]

    operations = [migrations.RunPython(count_materialized, migrations.RunPython.noop)]
