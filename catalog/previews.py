"""Browsing a table's data for pages and the API: previews, files and schemas at a snapshot.

Tables (ours, materialized tables' and attached ones alike) are read in the web process by
`catalog.core.preview`, `catalog.core.table_files` and `catalog.core.read_state`
(pyiceberg), through one process-wide metadata cache (`catalog.core.metadata_cache`,
METADATA_CACHE_BYTES) whose entries belong to the exact metadata file they came from. These
are reads: the caller (a page, an API view) has already followed an attached table to its
newest metadata file (`services.follow_attached`), once per request. Two reads go to a
refresh worker's Spark instead (`refresh.analysis.preview_with_spark`): a table whose read
meets equality deletes, which pyiceberg cannot apply, and a view, whose rows must be exactly
the rows Spark gives. Inputs (columns, filter, snapshot or timestamp) are checked here
first, in the same words either way, so Spark only ever gets a read that is known to be
valid."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from catalog.core import metadata_io
from catalog.core import preview as core
from catalog.core.attached import state_at
from catalog.core.errors import InvalidInput, NeedsWorker
from catalog.core.metadata_cache import CachedTable, CacheStats, MetadataCache
from catalog.core.read_state import SchemaAt, schema_at
from catalog.core.row_filters import choose_columns, parse_row_filter
from catalog.core.table_files import FileListing, files_at
from catalog.core.view_metadata import current_version, read_view_metadata
from catalog.models import Table, View

#: Reads a preview with a worker's Spark (keyword arguments: identifier, snapshot_id,
#: columns, row_filter, limit; answers {"columns": [[name, type]], "rows": [...]}), for what
#: neither sqlglot nor pyiceberg reads: registered by the refresh app, which owns Spark
#: (refresh.analysis.preview_with_spark). Outside a worker it raises NeedsWorker.
SPARK_READER: Callable[..., dict[str, Any]] | None = None

_cache: MetadataCache | None = None
_cache_lock = threading.Lock()


def metadata_cache() -> MetadataCache:
    """The process's cache (made on first use, METADATA_CACHE_BYTES large)."""
    global _cache
    with _cache_lock:
        if _cache is None:
            _cache = MetadataCache(max_bytes=settings.METADATA_CACHE_BYTES)
        return _cache


@dataclass(frozen=True)
class Result:
    """A preview, whoever read it."""

    #: (name, Iceberg type) per column.
    columns: tuple[tuple[str, str], ...]
    #: Typed Python values for pages (pyiceberg's reads), else the JSON-safe values.
    rows: tuple[tuple[Any, ...], ...]
    json_rows: list[list[Any]]
    #: Whether more rows match than were returned (None: Spark read it, not counted).
    truncated: bool | None
    snapshot_id: int | None
    schema_id: int | None
    #: What planning skipped; None when Spark read it (Spark plans by itself).
    pruning: core.Pruning | None
    read_by: str  # "pyiceberg" or "spark"
    #: Why Spark read it, when it did.
    note: str
    metadata_location: str | None
    cache: CacheStats


def load(table: Table) -> CachedTable:
    """The table's current metadata file, through the process's cache."""
    location = table.metadata_location
    return metadata_cache().load(location, io=metadata_io.file_io(location))


def _checked_int(value: Any, field: str) -> int | None:
    if value in (None, ""):
        return None
    if isinstance(value, bool):
        raise InvalidInput(f"{field} must be a whole number", field=field)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InvalidInput(
            f"{field} must be a whole number, not {str(value)[:40]!r}", field=field
        ) from None


def preview_table(
    table: Table,
    *,
    columns: Sequence[str] | None = None,
    row_filter: str | None = None,
    snapshot_id: Any = None,
    timestamp_ms: Any = None,
    limit: int = 100,
) -> Result:
    """The first `limit` rows of `table` (see the module for who reads them)."""
    snapshot_id = _checked_int(snapshot_id, "snapshot_id")
    timestamp_ms = _checked_int(timestamp_ms, "timestamp_ms")
    state = load(table)
    path = table.location
    try:
        found = core.preview(
            state.metadata,
            state.metadata_location,
            io=state.io,
            table_path=path,
            columns=columns or None,
            row_filter=row_filter or None,
            snapshot_id=snapshot_id,
            timestamp_ms=timestamp_ms,
            limit=limit,
        )
    except core.NeedsSpark as needs:
        # Read at the snapshot the rules chose (a timestamp resolved by state_at, as above).
        snapshot = state_at(
            state.document, table_path=path, snapshot_id=snapshot_id, timestamp_ms=timestamp_ms
        ).snapshot_id
        return _spark(
            [table.namespace.name, table.name],
            snapshot_id=snapshot,
            columns=columns,
            row_filter=row_filter,
            limit=limit,
            note=needs.message,
            metadata_location=state.metadata_location,
        )
    json_rows = found.json_rows()
    return Result(
        columns=tuple((c.name, c.type) for c in found.columns),
        rows=found.rows,
        json_rows=json_rows,
        truncated=found.truncated,
        snapshot_id=found.snapshot_id,
        schema_id=found.schema_id,
        pruning=found.pruning,
        read_by="pyiceberg",
        note="",
        metadata_location=found.metadata_location,
        cache=metadata_cache().stats(),
    )


def preview_view(
    view: View,
    *,
    columns: Sequence[str] | None = None,
    row_filter: str | None = None,
    limit: int = 100,
) -> Result:
    """The first `limit` rows of the view's query, as Spark gives them (a refresh worker
    runs it; Unavailable when none answers). Columns and filter are checked against the
    view's schema first."""
    metadata = read_view_metadata(view.metadata_location)
    version = current_version(metadata)
    schema = next(s for s in metadata.schemas if s.schema_id == version.schema_id)
    choose_columns(columns or None, schema)
    parse_row_filter(row_filter or None, schema)
    return _spark(
        [*view.namespace.name.split("."), view.name],
        snapshot_id=None,
        columns=columns,
        row_filter=row_filter,
        limit=limit,
        note="A view's rows are read by Spark, which runs its query.",
        metadata_location=view.metadata_location,
        schema_id=version.schema_id,
    )


def _spark(
    identifier: list[str],
    *,
    snapshot_id: int | None,
    columns: Sequence[str] | None,
    row_filter: str | None,
    limit: int,
    note: str,
    metadata_location: str | None,
    schema_id: int | None = None,
) -> Result:
    if SPARK_READER is None:
        raise NeedsWorker("Spark reads the preview")
    answer = SPARK_READER(
        identifier=identifier,
        snapshot_id=snapshot_id,
        columns=list(columns) if columns else None,
        row_filter=row_filter or None,
        limit=limit,
    )
    rows = answer["rows"]
    return Result(
        columns=tuple((name, kind) for name, kind in answer["columns"]),
        rows=tuple(tuple(row) for row in rows),
        json_rows=rows,
        truncated=None,
        snapshot_id=snapshot_id,
        schema_id=schema_id,
        pruning=None,
        read_by="spark",
        note=note,
        metadata_location=metadata_location,
        cache=metadata_cache().stats(),
    )


def files_of(table: Table, *, snapshot_id: Any = None, limit: int = 200) -> FileListing:
    """The data and delete files of the table's current snapshot, or of `snapshot_id`."""
    snapshot_id = _checked_int(snapshot_id, "snapshot_id")
    state = load(table)
    return files_at(
        state.metadata, io=state.io, table_path=table.location, snapshot_id=snapshot_id, limit=limit
    )


def schema_of(table: Table, *, snapshot_id: Any = None) -> SchemaAt:
    """The schema a read at `snapshot_id` uses (the snapshot's own), or the current one."""
    snapshot_id = _checked_int(snapshot_id, "snapshot_id")
    state = load(table)
    return schema_at(state.metadata, table_path=table.location, snapshot_id=snapshot_id)


def body(result: Result) -> dict[str, Any]:
    """The preview as the API answers it (and a job keeps it)."""
    pruning = result.pruning
    return {
        "columns": [{"name": name, "type": kind} for name, kind in result.columns],
        "rows": result.json_rows,
        "truncated": result.truncated,
        "snapshot_id": result.snapshot_id,
        "schema_id": result.schema_id,
        "read_by": result.read_by,
        "note": result.note,
        "metadata_location": result.metadata_location,
        "pruning": dataclasses.asdict(pruning) if pruning is not None else None,
        "cache": {"hits": result.cache.hits, "misses": result.cache.misses},
    }
