"""Pages for Iceberg tables: our own (made by engines through the REST catalog), materialized
tables' data, and tables attached read-only from a folder another system writes.

What every load shows comes from the mirror (schemas, snapshots and their summaries,
partition specs, properties, metadata log), which every commit updates with the pointer; an
attached table is first checked for a newer metadata file (`services.follow_attached`).
Manifests are read only when a section asks for them through the query string: the file
listing (`?files=1`) and the preview (`?preview=1`), so that the page stays a few queries
whatever the table holds."""

from __future__ import annotations

import html
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.defaultfilters import filesizeformat
from django.urls import reverse
from django.utils.dateparse import parse_datetime
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_http_methods

from catalog import access_events, jobs, policies, previews, redaction, services
from catalog.core.access import MANAGE, READ_DATA, READ_METADATA
from catalog.core.errors import CatalogError, NeedsWorker, TooManyJobs, Unavailable
from catalog.core.inputs import whole_number
from catalog.models import (
    CatalogEvent,
    Table,
    TableMetadataLogEntry,
    TableSchemaField,
    TableSnapshot,
    View,
)
from catalog.pages import access as page_access
from catalog.pages import permissions
from catalog.pages.access import catalog_page
from catalog.pages.formatting import linker, moment, time_of
from catalog.pages.forms import SnapshotChoiceForm, TablePreviewForm
from catalog.pages.paging import HISTORY_LENGTH
from catalog.pages.previewing import job_preview, shown_preview
from catalog.prepared import Prepared


@dataclass(frozen=True)
class Panel:
    """A section another app adds to every table's page: the template that draws it, and
    `context(request, table)`, which the template reads as `name`."""

    name: str
    template: str
    context: Callable[[HttpRequest, Table], Any]


#: The sections other apps add (maintenance/apps.py adds the maintenance section), shown in
#: this order between the preview and the snapshots. The catalog knows none of them.
PANELS: list[Panel] = []

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
#: The summary columns that are sizes in bytes (shown as kB, MB, GB...).
BYTE_COLUMNS = {"added-files-size", "total-files-size"}
#: Newest snapshots listed in the table of snapshots and offered in the snapshot choices
#: (the chart draws all of them, up to CHART_POINTS).
SNAPSHOTS_LISTED = 100
SNAPSHOTS_OFFERED = 500
CHART_POINTS = 5000
#: Files listed at a snapshot; the totals always count every file.
FILES_LISTED = 200
#: Rows a preview shows.
PREVIEW_ROWS = 100

#: A file kind's label in the list, and in the totals.
FILE_KIND_LABELS = {
    "data": ("data", "Data files"),
    "position_deletes": ("position deletes", "Position delete files"),
    "deletion_vector": ("deletion vector", "Deletion vectors"),
    "equality_deletes": ("equality deletes", "Equality delete files"),
}

#: How a partition transform reads, and what it does.
TRANSFORM_WORDS = {
    "identity": "the value itself",
    "year": "the year",
    "month": "the month",
    "day": "the day",
    "hour": "the hour",
    "void": "always null (a dropped partition field)",
}


def _number(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


#: The table page lists this many of the views that read the table, and counts the rest.
READERS_LISTED = 50


_READERS = Prepared(
    lambda namespace, name: View.objects.reading(namespace, name)
    .order_by("namespace__name", "name")
    .values_list("namespace__name", "name"),
    namespace="lakeview sample namespace",
    name="lakeview sample name",
)


def readers_of(table: Table, visible: Any = None) -> dict[str, Any]:
    """The first READERS_LISTED views whose current version reads `table` (over
    `ViewRead`'s index), as {"listed": [{"name", "url"}], "count": all of them}; only those
    `visible` holds (catalog.access.objects_condition), when given."""
    namespace, name = table.namespace.name, table.name
    reading = View.objects.reading(namespace, name)
    if visible is None:
        found = _READERS.rows(namespace=namespace, name=name, limit=READERS_LISTED + 1)
    else:
        reading = reading.filter(visible)
        ordered = reading.order_by("namespace__name", "name")
        found = list(ordered.values_list("namespace__name", "name")[: READERS_LISTED + 1])
    count = len(found)
    if count > READERS_LISTED:
        # Compiled once too: the ORM took longer to build the count than to run it (about
        # half the page at 100 readers).
        count = (
            _READERS.count(namespace=namespace, name=name) if visible is None else reading.count()
        )
    link = linker()
    return {
        "listed": [
            {"name": f"{namespace}.{name}", "url": link("catalog:view-detail", namespace, name)}
            for namespace, name in found[:READERS_LISTED]
        ],
        "count": count,
    }


# -- partition specs ----------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionField:
    name: str
    transform: str
    source_id: int
    source: str | None
    field_id: int | None

    @property
    def expression(self) -> str:
        """As Spark's DDL writes it: `bucket(16, id)`, `day(ts)`, `region`."""
        column = self.source or f"field {self.source_id}"
        kind, _, argument = self.transform.partition("[")
        if kind == "identity":
            return column
        if argument:
            return f"{kind}({argument.rstrip(']')}, {column})"
        return f"{kind}({column})"

    @property
    def meaning(self) -> str:
        kind, _, argument = self.transform.partition("[")
        column = self.source or f"field {self.source_id}"
        if kind == "bucket":
            return f"a hash of {column} into {argument.rstrip(']')} buckets"
        if kind == "truncate":
            return f"{column} truncated to width {argument.rstrip(']')}"
        words = TRANSFORM_WORDS.get(kind)
        return f"{words} of {column}" if words and kind != "void" else (words or kind)


def readable_specs(table: Table, names: dict[int, str]) -> list[dict[str, Any]]:
    """Every partition spec, the default first, its fields with source column names."""
    specs = []
    for spec in table.partition_specs or []:
        fields = [
            PartitionField(
                name=str(field.get("name", "")),
                transform=str(field.get("transform", "")),
                source_id=int(field.get("source-id", field.get("source-ids", [0])[0])),
                source=names.get(int(field.get("source-id", -1))),
                field_id=field.get("field-id"),
            )
            for field in spec.get("fields", [])
        ]
        specs.append(
            {
                "spec_id": spec.get("spec-id"),
                "default": spec.get("spec-id") == table.default_spec_id,
                "fields": fields,
            }
        )
    specs.sort(key=lambda s: (not s["default"], -(s["spec_id"] or 0)))
    return specs


# -- snapshots ----------------------------------------------------------------------------


# The page's reads, built and compiled once per backend (catalog.prepared): building the
# SQL of a table's rows (a child of CatalogObject) took longer than running it.
_NAMESPACE = "lakeview sample namespace"
_NAME = "lakeview sample name"
_ID = 7_654_321
_TABLE = Prepared(
    lambda namespace, name: Table.objects.select_related("namespace", "attachment", "materialized")
    .filter(namespace__name=namespace, name=name)
    .order_by()[:1],
    namespace=_NAMESPACE,
    name=_NAME,
)
_FIELDS = Prepared(
    lambda table_id: TableSchemaField.objects.filter(table_id=table_id).order_by(
        "schema_id", "position"
    ),
    table_id=_ID,
)
_SNAPSHOTS = Prepared(
    lambda table_id: TableSnapshot.objects.filter(table_id=table_id)
    .order_by("-timestamp_ms", "-snapshot_id")
    .values_list("snapshot_id", "timestamp_ms", "operation", "schema_id", "summary"),
    table_id=_ID,
)


_METADATA_LOG = Prepared(
    lambda table_id: TableMetadataLogEntry.objects.filter(table_id=table_id)
    .order_by("-position")
    .values_list("metadata_file", "timestamp_ms"),
    table_id=_ID,
)


_HISTORY = Prepared(
    # CatalogEvent.objects.for_object(table), by the table's uuid.
    lambda object_uuid: CatalogEvent.objects.filter(object_uuid=object_uuid).select_related(
        "actor"
    ),
    object_uuid=uuid.UUID("1a4e5c1e-0000-4000-8000-1a4e5c1e0000"),
)


def _snapshot_rows(table: Table) -> list[dict[str, Any]]:
    known = {key for key, _ in SUMMARY_COLUMNS} | {"operation"}
    rows = _SNAPSHOTS.rows(table_id=table.pk)
    return [
        {
            "summary": summary or {},
            "id": snapshot_id,
            "time": time_of(timestamp_ms),
            "timestamp_ms": timestamp_ms,
            "operation": operation or (summary or {}).get("operation", ""),
            "schema_id": schema_id,
            "current": snapshot_id == table.current_snapshot_id,
            "figures": [_number((summary or {}).get(key)) for key, _ in SUMMARY_COLUMNS],
            "other": sorted((k, v) for k, v in (summary or {}).items() if k not in known),
        }
        for snapshot_id, timestamp_ms, operation, schema_id, summary in rows
    ]


def _figure_cell(key: str, figure: int | None) -> str:
    if figure is None:
        return '<td class="num"><span class="muted">—</span></td>'
    if key in BYTE_COLUMNS:
        # Sizes as people read them (the exact count on hover): eleven digits of bytes in
        # two columns were what pushed the table past its card at 1,400 px.
        shown = html.escape(filesizeformat(figure))
        return f'<td class="num" title="{figure} bytes">{shown}</td>'
    return f'<td class="num">{html.escape(str(figure))}</td>'


def snapshot_rows_html(snapshots: list[dict[str, Any]]) -> SafeString:
    """The rows of the table of snapshots (#snapshot-summaries), written in Python: a table
    keeps up to SNAPSHOTS_LISTED listed snapshots with a dozen summary entries each, and the
    template engine took about 40 ms for sixty of them. Every value is escaped. Each
    snapshot's links (its schema, files and preview) sit under its id, in the first column,
    where they are reached without scrolling the table sideways."""
    span = len(SUMMARY_COLUMNS) + 3
    rows = []
    for snapshot in snapshots:
        sid = html.escape(str(snapshot["id"]))
        current = snapshot["current"]
        moment = snapshot["time"]
        schema = snapshot["schema_id"]
        figures = "".join(
            _figure_cell(key, figure)
            for (key, _), figure in zip(SUMMARY_COLUMNS, snapshot["figures"], strict=True)
        )
        row_class = ' class="current"' if current else ""
        badge = ' <span class="badge">current</span>' if current else ""
        when = f"{moment:%Y-%m-%d %H:%M:%S}" if moment else ""
        rows.append(
            f'<tr{row_class} data-snapshot-id="{sid}"><td><code>{sid}</code>{badge}'
            f'<div class="snapshot-links"><a href="?at={sid}#schema">schema</a> '
            f'<a href="?at={sid}&amp;files=1#files">files</a> '
            f'<a href="?preview=1&amp;snapshot_id={sid}#preview">preview</a></div></td>'
            f"<td>{when}</td><td>{html.escape(str(snapshot['operation']))}</td>"
            f"<td>{'—' if schema is None else html.escape(str(schema))}</td>{figures}</tr>"
        )
        if snapshot["other"]:
            other = "".join(
                f"<tr><th>{html.escape(str(key))}</th><td>{html.escape(str(value))}</td></tr>"
                for key, value in snapshot["other"]
            )
            rows.append(
                f'<tr class="summary-more"><td></td><td colspan="{span}" class="small">'
                f'<table class="props compact">{other}</table></td></tr>'
            )
    return mark_safe("\n".join(rows))  # noqa: S308 - every value above is escaped


def history_rows_html(events: list[CatalogEvent]) -> SafeString:
    """The rows of the table's recent history (#table-history), written as the template
    wrote them (every value escaped): a continuous table's twenty were a tenth of its page."""
    rows = []
    for event in events:
        first = event.first_occurred_at
        when = f"{moment(first)} – " if first else ""
        actor = html.escape(str(event.actor)) if event.actor is not None else ""
        rows.append(
            f"<tr><td>{when}{moment(event.occurred_at)}</td><td>{actor}</td>"
            f'<td class="event-action">{html.escape(event.action_display)}</td>'
            f"<td>{html.escape(str(event.get_result_display()))}</td></tr>"
        )
    return mark_safe("".join(rows))  # noqa: S308 - every value above is escaped


def _chart_data(snapshots: list[dict[str, Any]]) -> dict[str, Any]:
    """Per snapshot, oldest first: time, operation, rows and data files in the table after
    it (from the summaries; None where the writer did not record them)."""
    points = []
    for snapshot in reversed(snapshots[:CHART_POINTS]):
        summary = snapshot["summary"]
        points.append(
            {
                "id": str(snapshot["id"]),
                "t": snapshot["timestamp_ms"],
                "op": snapshot["operation"],
                "records": _number(summary.get("total-records")),
                "files": _number(summary.get("total-data-files")),
                "schema_id": snapshot["schema_id"],
            }
        )
    return {"points": points}


def _snapshot_choices(snapshots: list[dict[str, Any]], extra: Any = None) -> list[tuple]:
    """(value, label) for a snapshot select, newest first, the current one marked; a value
    asked for that is not among them (an unknown id, an old one) is kept as asked."""
    choices = [
        (
            str(s["id"]),
            f"{s['id']} · {_when(s)} · {s['operation'] or 'unknown'}"
            + (" (current)" if s["current"] else ""),
        )
        for s in snapshots[:SNAPSHOTS_OFFERED]
    ]
    if extra not in (None, "") and str(extra) not in {value for value, _ in choices}:
        known = next((s for s in snapshots if str(s["id"]) == str(extra)), None)
        label = f"{extra} · {_when(known)}" if known else str(extra)[:40]
        choices.append((str(extra)[:40], label))
    return choices


def _when(snapshot: dict[str, Any]) -> str:
    """A snapshot's time as the page writes it (its milliseconds when no date holds them)."""
    moment = snapshot["time"]
    return f"{moment:%Y-%m-%d %H:%M:%S}" if moment else f"{snapshot['timestamp_ms']} ms"


# -- the page -----------------------------------------------------------------------------


def _found(namespace: str, name: str) -> tuple[Any, str]:
    """The table (a 404 when missing) and the text a refusal shows as its missing one."""
    found = _TABLE.objects(namespace=namespace, name=name)
    missing = f"Table does not exist: {namespace}.{name}"
    if not found:
        raise Http404(missing)
    return found[0], missing


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def table_snapshots(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    """The table of the snapshots' summaries alone (HTML), which the table's page fetches
    once it has loaded (static/js/later.js): the newest SNAPSHOTS_LISTED snapshots, each with
    its figures and its other summary entries."""
    table, missing = _found(namespace, name)
    page_access.check(request, table, READ_METADATA, missing=missing)
    snapshots = _snapshot_rows(table)[:SNAPSHOTS_LISTED]
    context = {
        "snapshot_rows": snapshot_rows_html(snapshots),
        "summary_headings": [heading for _, heading in SUMMARY_COLUMNS],
    }
    return render(request, "catalog/_snapshot_summaries.html", context)


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def table_detail(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    # The attachment and the materialized table (the page names both) in the same read.
    table, missing = _found(namespace, name)
    # Its schema, snapshots and history are its metadata; its rows and files need
    # read_data, asked for only when a section wants them.
    wants_data = "preview" in request.GET or bool(request.GET.get("files"))
    page_access.check(request, table, READ_DATA if wants_data else READ_METADATA, missing=missing)
    what = "preview" if "preview" in request.GET else "file list"
    if wants_data and (
        refusal := policies.read_refusal(page_access.principal(request), table, what)
    ):
        raise PermissionDenied(refusal)
    attachment = table.attachment if hasattr(table, "attachment") else None
    if attachment is not None:
        # The writer may have written a newer metadata file since the last look.
        table = services.follow_attached(table, actor=request.user)
        attachment.refresh_from_db()

    schemas: dict[int, list] = defaultdict(list)
    for field in _FIELDS.objects(table_id=table.pk):
        schemas[field.schema_id].append(field)
    names = {f.field_id: f.name for _, fields in sorted(schemas.items()) for f in fields}
    names.update({f.field_id: f.name for f in schemas.get(table.current_schema_id, [])})
    snapshots = _snapshot_rows(table)
    by_id = {str(s["id"]): s for s in snapshots}
    current = next((s for s in snapshots if s["current"]), None)
    row_count = _number(current["summary"].get("total-records")) if current else None
    status = 200

    # Which snapshot the schema and the files are shown at (`?at=`; the current one).
    browse = SnapshotChoiceForm(
        request.GET if "at" in request.GET else None,
        choices=_snapshot_choices(snapshots, request.GET.get("at")),
        known=by_id,
    )
    chosen = current
    if browse.is_bound:
        if browse.is_valid():
            chosen = by_id[browse.cleaned_data["at"]] if browse.cleaned_data["at"] else current
        else:
            status = 400
    if chosen is not None and chosen["schema_id"] is not None:
        shown_schema_id = chosen["schema_id"]
    else:
        shown_schema_id = table.current_schema_id
    at_id = chosen["id"] if chosen is not None else None

    files = None
    if request.GET.get("files") and browse.errors == {}:
        files = _files_section(table, None if chosen is current else at_id)

    preview_form, preview = _preview_section(request, table, snapshots, by_id, schemas)
    if preview_form.errors or (preview and preview.get("error")):
        status = 400

    history = _HISTORY.objects(object_uuid=table.uuid, limit=HISTORY_LENGTH)
    metadata_log = [
        {"file": metadata_file, "time": time_of(timestamp_ms)}
        for metadata_file, timestamp_ms in _METADATA_LOG.rows(table_id=table.pk)
    ]
    context = {
        "table": table,
        "namespace": table.namespace,
        "attachment": attachment,
        "shown_fields": schemas.get(shown_schema_id, []),
        "shown_schema_id": shown_schema_id,
        "chosen": chosen,
        "at_current": chosen is current,
        "at_id": at_id,
        "browse_form": browse,
        "schema_history": sorted(schemas.items(), reverse=True),
        "specs": readable_specs(table, names),
        "properties": sorted(
            redaction.properties(page_access.principal(request), table.pk, table.properties).items()
        ),
        "snapshots": snapshots[:SNAPSHOTS_LISTED],
        # The rows (a dozen summary entries each) are fetched once the page has loaded.
        "snapshots_url": reverse("catalog:table-snapshots", args=[namespace, name]),
        "snapshots_hidden": max(0, len(snapshots) - SNAPSHOTS_LISTED),
        "snapshot_count": len(snapshots),
        "chart_data": _chart_data(snapshots),
        "schema_columns": {
            str(schema_id): [f.name for f in fields] for schema_id, fields in schemas.items()
        },
        "current_schema_id": table.current_schema_id,
        "row_count": row_count,
        "has_snapshot": current is not None,
        "files": files,
        "files_listed": FILES_LISTED,
        "preview_form": preview_form,
        "preview": preview,
        "preview_rows": PREVIEW_ROWS,
        "readers": readers_of(table, page_access.visible(request)),
        "can_edit": page_access.holds(request, table, MANAGE),
        "can_read_data": page_access.holds(request, table, READ_DATA),
        "metadata_log": metadata_log,
        "last_updated": time_of(table.last_updated_ms),
        "history": history,
        "history_rows": history_rows_html(history),
        "panel_templates": [panel.template for panel in PANELS],
        "permissions_url": permissions.later(namespace, name),
        "policies": policies.shown(table),
    }
    context.update({panel.name: panel.context(request, table) for panel in PANELS})
    return render(request, "catalog/table_detail.html", context, status=status)


def _files_section(table: Table, snapshot_id: int | None) -> dict[str, Any]:
    """The data and delete files at a snapshot (the first FILES_LISTED, totals of all)."""
    try:
        listing = previews.files_of(table, snapshot_id=snapshot_id, limit=FILES_LISTED)
    except CatalogError as error:
        return {"error": error.message}
    location = table.location.rstrip("/") + "/"
    rows = [
        {
            "kind": file.kind,
            "kind_label": FILE_KIND_LABELS.get(file.kind, (file.kind, file.kind))[0],
            "path": file.path,
            "short_path": _inside(file.path, location),
            "partition": getattr(file, "partition_text", ""),
            "record_count": file.record_count,
            "size_bytes": file.size_bytes,
            "referenced": _inside(file.referenced_data_file, location)
            if getattr(file, "referenced_data_file", None)
            else None,
        }
        for file in listing.files
    ]
    kinds = [
        {"key": key, "label": labels[1], "total": listing.totals[key]}
        for key, labels in FILE_KIND_LABELS.items()
        if key in listing.totals and (key == "data" or listing.totals[key].files)
    ]
    return {"listing": listing, "rows": rows, "kinds": kinds}


def _inside(path: str, location: str) -> str:
    """A file's path relative to the table's folder when it lies inside it."""
    for prefix in (location, f"file://{location}", location.removeprefix("file://")):
        if prefix and path.startswith(prefix):
            return path[len(prefix) :]
    return path


def _snapshot_at(snapshots: list[dict[str, Any]], moment: Any) -> dict[str, Any] | None:
    """The newest snapshot at or before `moment` (milliseconds, or a date and time in
    UTC), for the column choice only (the read itself resolves it by the snapshot log)."""
    if not moment:
        return None
    text = str(moment).strip()
    number = whole_number(text)
    if number is not None:
        milliseconds = number
    else:
        try:
            parsed = parse_datetime(text) if len(text) < 40 else None
        except ValueError:  # well formed, but no such moment (month 13)
            parsed = None
        if parsed is None:
            return None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        milliseconds = int(parsed.timestamp() * 1000)
    return next((s for s in snapshots if s["timestamp_ms"] <= milliseconds), None)


def _preview_section(
    request: HttpRequest,
    table: Table,
    snapshots: list[dict[str, Any]],
    by_id: dict[str, dict[str, Any]],
    schemas: dict[int, list],
) -> tuple[TablePreviewForm, dict[str, Any] | None]:
    """The preview form (columns of the schema at the snapshot it asks for), and, when it
    was submitted (`?preview=1`), the preview or the error the services gave."""
    asked = "preview" in request.GET
    data = request.GET if asked else None
    # The snapshot asked for, or, before a preview, the one the page is browsing (`?at=`).
    snapshot_value = request.GET.get("snapshot_id" if asked else "at") or ""
    chosen = by_id.get(snapshot_value) or _snapshot_at(snapshots, (data or {}).get("timestamp"))
    schema_id = table.current_schema_id
    if chosen is not None and chosen["schema_id"] is not None:
        schema_id = chosen["schema_id"]
    columns = [f.name for f in schemas.get(schema_id, [])]
    form = TablePreviewForm(
        data,
        columns=columns,
        snapshots=_snapshot_choices(snapshots, snapshot_value),
        initial={"snapshot_id": request.GET.get("at", "")},
    )
    if not asked or not form.is_valid():
        return form, None
    arguments = form.arguments()
    access_events.read(request, "preview", "page", table)
    before = previews.metadata_cache().stats()
    try:
        try:
            result = previews.preview_table(table, limit=PREVIEW_ROWS, **arguments)
        except NeedsWorker:
            # Equality deletes: Spark reads it, as a job the page fills in when it ends.
            job = jobs.job_for(
                "preview_table",
                {
                    "namespace": table.namespace.name,
                    "name": table.name,
                    "limit": PREVIEW_ROWS,
                    **arguments,
                    "version": table.metadata_location,
                },
                actor=request.user,
                summary=f"Preview of table {table}",
                reuse=True,
            )
            shown = job_preview(job, arguments)
            if "error" in shown:
                form.add_error(None, shown["error"])
            return form, shown
    except (Unavailable, TooManyJobs) as error:
        # Spark must read it and no worker runs (or too many jobs wait): not the user's error.
        return form, {"unavailable": error.message}
    except CatalogError as error:
        form.add_catalog_error(error)
        return form, {"error": error.message}
    return form, shown_preview(result, arguments, before)
