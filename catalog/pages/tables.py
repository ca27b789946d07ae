"""Pages for Iceberg tables: what engines made through the REST catalog, read-only here.

Everything shown comes from the mirror (schema history, partition specs, properties,
snapshots, metadata log), which every commit updates with the pointer."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_http_methods

from catalog.models import CatalogEvent, Table, View
from catalog.pages.formatting import time_of
from catalog.pages.views import HISTORY_LENGTH, catalog_page

#: Snapshot summary keys shown as columns, in this order, with their headings; the others
#: are listed per snapshot below them.
SUMMARY_COLUMNS = [
    ("added-records", "Rows added"),
    ("deleted-records", "Rows deleted"),
    ("total-records", "Rows"),
    ("added-data-files", "Files added"),
    ("deleted-data-files", "Files deleted"),
    ("total-data-files", "Files"),
    ("added-files-size", "Bytes added"),
    ("total-files-size", "Bytes"),
]


def _number(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def readers_of(table: Table) -> list[View]:
    """The views whose current version reads `table`, by name (View.dependencies)."""
    levels = table.namespace.name.split(".")
    escaped = json.dumps(table.name)[1:-1]
    candidates = View.objects.filter(
        Q(dependencies__icontains=table.name) | Q(dependencies__icontains=escaped)
    ).select_related("namespace")
    found = []
    for view in candidates.order_by("namespace__name", "name"):
        for dependency in view.dependencies or []:
            if not isinstance(dependency, list) or len(dependency) < 2:
                continue
            catalog, *namespace, name = dependency
            if (
                catalog in ("", settings.CATALOG_NAME)
                and namespace == levels
                and name == table.name
            ):
                found.append(view)
                break
    return found


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def table_detail(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    table = get_object_or_404(
        Table.objects.select_related("namespace"), namespace__name=namespace, name=name
    )
    schemas: dict[int, list] = defaultdict(list)
    for field in table.fields.order_by("schema_id", "position"):
        schemas[field.schema_id].append(field)
    known = {key for key, _ in SUMMARY_COLUMNS} | {"operation"}
    snapshots = [
        {
            "row": s,
            "time": time_of(s.timestamp_ms),
            "current": s.snapshot_id == table.current_snapshot_id,
            "figures": [_number((s.summary or {}).get(key)) for key, _ in SUMMARY_COLUMNS],
            "other": sorted((k, v) for k, v in (s.summary or {}).items() if k not in known),
        }
        for s in table.snapshots.order_by("-timestamp_ms", "-snapshot_id")
    ]
    current = next((s for s in snapshots if s["current"]), None)
    row_count = _number((current["row"].summary or {}).get("total-records")) if current else None
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
        "summary_headings": [heading for _, heading in SUMMARY_COLUMNS],
        "row_count": row_count,
        "has_snapshot": current is not None,
        "readers": readers_of(table),
        "metadata_log": metadata_log,
        "last_updated": time_of(table.last_updated_ms),
        "history": CatalogEvent.objects.for_object(table)[:HISTORY_LENGTH],
    }
    return render(request, "catalog/table_detail.html", context)
