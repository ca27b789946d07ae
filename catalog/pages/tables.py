"""Pages for Iceberg tables: what engines made through the REST catalog, read-only here.

Everything shown comes from the mirror (schema history, partition specs, properties,
snapshots, metadata log), which every commit updates with the pointer."""

from __future__ import annotations

from collections import defaultdict

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_http_methods

from catalog.models import CatalogEvent, Table
from catalog.pages.formatting import time_of
from catalog.pages.views import HISTORY_LENGTH, catalog_page


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def table_detail(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    table = get_object_or_404(
        Table.objects.select_related("namespace"), namespace__name=namespace, name=name
    )
    schemas: dict[int, list] = defaultdict(list)
    for field in table.fields.order_by("schema_id", "position"):
        schemas[field.schema_id].append(field)
    snapshots = [
        {
            "row": s,
            "time": time_of(s.timestamp_ms),
            "current": s.snapshot_id == table.current_snapshot_id,
        }
        for s in table.snapshots.order_by("-timestamp_ms", "-snapshot_id")
    ]
    metadata_log = [
        {"file": e.metadata_file, "time": time_of(e.timestamp_ms)}
        for e in table.metadata_log.order_by("-position")
    ]
    context = {
        "table": table,
        "namespace": table.namespace,
        "current_fields": schemas.get(table.current_schema_id, []),
        "schema_history": sorted(schemas.items(), reverse=True),
        "default_spec": table.default_spec(),
        "properties": sorted(table.properties.items()),
        "snapshots": snapshots,
        "metadata_log": metadata_log,
        "last_updated": time_of(table.last_updated_ms),
        "history": CatalogEvent.objects.for_object(table)[:HISTORY_LENGTH],
    }
    return render(request, "catalog/table_detail.html", context)
