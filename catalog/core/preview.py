"""A preview of a table: its first rows (a column choice, a row filter, at the current
snapshot or back in time) with the figures of what pruning did. Django-free.

Planning is done here, over the snapshot's manifests (`catalog.core.manifests`), with
pyiceberg's own evaluators (`catalog.core.pruning`), so that every file is counted where it
is ruled out:
1. a data manifest whose partition summaries cannot match the filter's inclusive partition
   projection (`manifest_evaluator`) is not read: its files are *skipped by partition*;
2. in the manifests read, a file whose partition tuple cannot match the projection
   (`expression_evaluator`) is *skipped by partition*, and one whose column statistics
   (bounds, null and NaN counts) cannot match the filter (`_InclusiveMetricsEvaluator`) is
   *skipped by column statistics*; the rest are *scanned*;
3. delete manifests are read only when some data file is scanned, and not when they are older
   than every scanned file (`catalog.core.deletes`); position delete files and v3 deletion
   vectors are matched to the scanned files by pyiceberg's `DeleteFileIndex` (a deletion
   vector only to the file it names); an equality delete file that applies to a scanned file
   stops the read with `NeedsSpark`, since pyiceberg cannot apply those and a preview must
   not show deleted rows;
4. each scanned file gets its residual (what of the filter its partition does not already
   decide) and is read as pyiceberg's `ArrowScan` reads it, one file after another, until
   `limit` rows are found: a preview of 100 rows opens as few files as that takes, and
   decodes a Parquet file a few thousand rows at a time (`READ_BATCH_ROWS`), not a whole
   row group, so it stops early within a file too.

The read's schema is the table's current one, or, for a read at a snapshot id or a timestamp,
the snapshot's own (`catalog.core.read_state`): columns and the filter
(`catalog.core.row_filters`) are checked against it, and files are projected onto it by
field id, so added, dropped, renamed and re-added columns read as they were then.

`Preview.rows` holds typed Python values and `Preview.json_rows()` the same values as JSON
carries them exactly (`catalog.core.row_values`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyiceberg.expressions import AlwaysFalse, AlwaysTrue, BooleanExpression
from pyiceberg.expressions.visitors import _InclusiveMetricsEvaluator, bind
from pyiceberg.io import FileIO
from pyiceberg.manifest import (
    INITIAL_SEQUENCE_NUMBER,
    DataFile,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestFile,
)
from pyiceberg.schema import Schema
from pyiceberg.table import FileScanTask
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot

from catalog.core.deletes import Deletes
from catalog.core.errors import CatalogError, InvalidInput
from catalog.core.manifests import check_data_file, data_entries, live_files, manifest_list
from catalog.core.metadata_cache import CachingFileIO, content_offset
from catalog.core.pruning import SpecFilters
from catalog.core.read_state import resolve
from catalog.core.row_filters import choose_columns, parse_row_filter
from catalog.core.row_values import json_value, typed_rows

#: Most rows one preview returns.
MAX_LIMIT = 10_000


class NeedsSpark(CatalogError):
    """The read needs equality deletes applied, which pyiceberg cannot do: read the table
    through Spark instead (the web side does)."""

    iceberg_type = "UnsupportedOperationException"


# -- results --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    name: str
    #: The Iceberg type as Iceberg writes it: "long", "decimal(10, 2)", "struct<...>".
    type: str
    field_id: int
    required: bool


@dataclass(frozen=True)
class Pruning:
    """What planning did with the snapshot's files. `data_files` = `files_scanned` +
    `skipped_by_partition` + `skipped_by_stats`; `files_read` <= `files_scanned` is how many
    the preview opened before it had its rows."""

    manifests: int = 0
    #: Data manifests not read: their partition summaries rule the filter out.
    manifests_skipped: int = 0
    data_files: int = 0
    #: Data files the filter could not rule out: a full read would read them all.
    files_scanned: int = 0
    skipped_by_partition: int = 0
    skipped_by_stats: int = 0
    #: Position delete files and deletion vectors that apply to the scanned files.
    delete_files_applied: int = 0
    files_read: int = 0


@dataclass(frozen=True)
class Preview:
    columns: tuple[Column, ...]
    #: Typed Python values, one tuple per row, in `columns` order (`row_values`).
    rows: tuple[tuple[Any, ...], ...]
    #: Whether more rows match beyond the ones returned.
    truncated: bool
    #: The snapshot read (None: the table has no snapshot yet) and the schema used.
    snapshot_id: int | None
    schema_id: int
    metadata_location: str
    pruning: Pruning
    #: The rows read as Arrow gave them, one more than `rows` when `truncated` (a console
    #: query keeps them as they are: refresh.queries).
    arrow: pa.Table | None = field(default=None, compare=False, repr=False)

    def json_rows(self) -> list[list[Any]]:
        """The rows with JSON-safe values (`row_values.json_value`)."""
        return [[json_value(value) for value in row] for row in self.rows]


# -- planning -------------------------------------------------------------------------------


@dataclass
class _Plan:
    tasks: list[FileScanTask]
    pruning: Pruning


def _plan(
    metadata: TableMetadata,
    snapshot: Snapshot,
    schema: Schema,
    row_filter: BooleanExpression,
    io: FileIO,
    *,
    table_path: str,
) -> _Plan:
    filters = SpecFilters(metadata, schema, row_filter)
    manifests = manifest_list(io, snapshot)
    data_manifests = [m for m in manifests if m.content == ManifestContent.DATA]
    delete_manifests = [m for m in manifests if m.content == ManifestContent.DELETES]

    kept: list[ManifestFile] = []
    skipped_by_partition = 0
    for manifest in data_manifests:
        if filters.manifest_may_match(manifest):
            kept.append(manifest)
        else:
            skipped_by_partition += live_files(io, manifest)
    manifests_skipped = len(data_manifests) - len(kept)
    data_files = skipped_by_partition
    skipped_by_stats = 0
    metrics = _InclusiveMetricsEvaluator(schema, row_filter).eval if filters.filtered else None

    scanned: list[ManifestEntry] = []
    for entry in data_entries(io, kept):
        data_files += 1
        if not filters.partition_may_match(entry.data_file):
            skipped_by_partition += 1
        elif metrics is not None and not metrics(entry.data_file):
            skipped_by_stats += 1
        else:
            scanned.append(entry)

    tasks: list[FileScanTask] = []
    # Deletion vectors of one commit share a Puffin file: each vector (path and offset) counts.
    applied: set[tuple[str, int | None]] = set()
    if scanned:
        oldest = min(entry.sequence_number or INITIAL_SEQUENCE_NUMBER for entry in scanned)
        deletes_of = Deletes.read(io, delete_manifests, oldest, filters)
        for entry in scanned:
            data_file = entry.data_file
            residual = filters.residual(data_file)
            if isinstance(residual, AlwaysFalse):
                skipped_by_partition += 1
                continue
            sequence = entry.sequence_number or INITIAL_SEQUENCE_NUMBER
            deletes = _applied_deletes(deletes_of, data_file, sequence, table_path)
            applied.update((delete.file_path, content_offset(delete)) for delete in deletes)
            tasks.append(FileScanTask(data_file, delete_files=deletes, residual=residual))

    return _Plan(
        tasks,
        Pruning(
            manifests=len(manifests),
            manifests_skipped=manifests_skipped,
            data_files=data_files,
            files_scanned=len(tasks),
            skipped_by_partition=skipped_by_partition,
            skipped_by_stats=skipped_by_stats,
            delete_files_applied=len(applied),
        ),
    )


#: What a cached plan is charged per planned file (its FileScanTask and residual; the
#: DataFile records themselves are the cached manifests').
_PLAN_BYTES_PER_TASK = 300


def _cached_plan(io: FileIO, key: str, plan: Callable[[], _Plan]) -> _Plan:
    """`plan()`, kept in the metadata cache under `key` (snapshot, schema and filter) when
    `io` reads through one: a table state's files never change, so the same snapshot,
    schema and filter plan the same files, and a repeated preview (a reload, another column
    choice) skips evaluating every file."""
    if not isinstance(io, CachingFileIO):
        return plan()

    def produce() -> tuple[_Plan, int]:
        made = plan()
        return made, 1024 + _PLAN_BYTES_PER_TASK * len(made.tasks)

    return io.cache.cached(io.fingerprint, "plan", key, produce)


def _applied_deletes(
    deletes: Deletes, data_file: DataFile, sequence: int, table_path: str
) -> set[DataFile]:
    """What a preview applies to `data_file`: its position deletes and deletion vectors;
    NeedsSpark when an equality delete applies to it."""
    for delete in deletes.equality_for(data_file, sequence):
        raise NeedsSpark(
            f"The table {table_path} has equality deletes that apply to this read "
            f"({delete.file_path}); pyiceberg cannot apply equality deletes, so the table "
            "must be read through Spark"
        )
    return deletes.positional_for(data_file, sequence)


# -- reading --------------------------------------------------------------------------------


def _check_limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_LIMIT:
        raise InvalidInput(
            f"The number of rows must be a whole number from 0 to {MAX_LIMIT}", field="limit"
        )
    return limit


def preview(
    metadata: TableMetadata | Mapping[str, Any],
    metadata_location: str,
    *,
    io: FileIO,
    table_path: str,
    columns: Sequence[str] | None = None,
    row_filter: str | None = None,
    snapshot_id: int | None = None,
    timestamp_ms: int | None = None,
    limit: int = 100,
) -> Preview:
    """The first `limit` rows of the table (those matching `row_filter`, with `columns`),
    at the current snapshot, at `snapshot_id` or at `timestamp_ms`, with the pruning
    figures (see the module). `io` reads the files: a `CachingFileIO` (from
    `MetadataCache.load`) serves manifests from the cache.

    Raises InvalidInput for a bad column, filter, limit or time-travel pair, NotFound for
    an unknown snapshot, NeedsSpark when equality deletes apply to the read."""
    limit = _check_limit(limit)
    parsed, snapshot, schema = resolve(
        metadata, table_path=table_path, snapshot_id=snapshot_id, timestamp_ms=timestamp_ms
    )
    projected = choose_columns(columns, schema)
    expression = parse_row_filter(row_filter, schema)
    result_columns = tuple(
        Column(
            name=column.name,
            type=str(column.field_type),
            field_id=column.field_id,
            required=column.required,
        )
        for column in projected.columns
    )
    if snapshot is None:
        return Preview(
            result_columns, (), False, None, schema.schema_id, metadata_location, Pruning()
        )
    plan = _cached_plan(
        io,
        f"{snapshot.snapshot_id}/{schema.schema_id}/{expression!r}",
        lambda: _plan(parsed, snapshot, schema, expression, io, table_path=table_path),
    )
    # ArrowScan reads with the metadata's current schema: for a read at an older snapshot,
    # the snapshot's own schema is made current in a copy.
    if parsed.current_schema_id != schema.schema_id:
        parsed = parsed.model_copy(update={"current_schema_id": schema.schema_id})
    table, files_read = _read(parsed, io, projected, plan.tasks, limit)
    rows = typed_rows(table, limit)
    pruning = dataclasses.replace(plan.pruning, files_read=files_read)
    return Preview(
        result_columns,
        rows,
        table.num_rows > limit,
        snapshot.snapshot_id,
        schema.schema_id,
        metadata_location,
        pruning,
        arrow=table,
    )


#: Rows decoded at a time from a Parquet data file. A preview stops after the batch that
#: completes its rows, so it decodes 4,096 rows of a file, not its whole row group (a 50,000-
#: row group of ten columns: 5 ms instead of 19); a file read to its end in batches of this
#: size costs what one read of it does.
READ_BATCH_ROWS = 4096


def _read(
    metadata: TableMetadata,
    io: FileIO,
    projected: Schema,
    tasks: Sequence[FileScanTask],
    limit: int,
) -> tuple[pa.Table, int]:
    """Up to `limit` + 1 rows (one more tells whether there are more), reading the planned
    files one after another and stopping as soon as there are enough."""
    from pyiceberg.io.pyarrow import ArrowScan, schema_to_pyarrow

    wanted = limit + 1
    scans: dict[str, ArrowScan] = {}
    batches: list[pa.RecordBatch] = []
    found = 0
    files_read = 0
    for task in tasks:
        if found >= wanted:
            break
        # One scan per distinct residual: a file whose partition decides the whole filter
        # is read without one (and without reading the filter's columns).
        key = repr(task.residual)
        scan = scans.get(key)
        if scan is None:
            scan = scans[key] = ArrowScan(metadata, io, projected, task.residual, True, wanted)
        files_read += 1
        for batch in _task_batches(scan, task):
            batches.append(batch)
            found += batch.num_rows
            if found >= wanted:
                break
    target = schema_to_pyarrow(projected, include_field_ids=False)
    if not batches:
        return target.empty_table(), files_read
    table = pa.concat_tables(
        (pa.Table.from_batches([batch]) for batch in batches), promote_options="permissive"
    )
    return table.slice(0, wanted), files_read


def _task_batches(scan: Any, task: FileScanTask) -> Iterator[pa.RecordBatch]:
    """The rows of one planned file, as `ArrowScan.to_record_batches([task])` gives them,
    but for a Parquet file decoded READ_BATCH_ROWS at a time, in this thread, so that the
    caller can stop after the first batches. pyiceberg's own read (`_task_to_record_batches`)
    decodes a whole row group before its first row, in its thread pool; this is that
    function with `ParquetFile.iter_batches` in place of a dataset scanner, and pyiceberg's
    own helpers for everything else (the file's schema by field id or name mapping, columns
    missing from the file, the residual's translation, positional deletes, the projection
    onto the read's schema). Other formats go through ArrowScan."""
    for path in (task.file.file_path, *(d.file_path for d in task.delete_files)):
        check_data_file(path)
    if task.file.file_format != FileFormat.PARQUET:
        yield from scan.to_record_batches([task])
        return
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq
    from pyiceberg.expressions.visitors import translate_column_names
    from pyiceberg.io.pyarrow import (
        ONE_MEGABYTE,
        _combine_positional_deletes,
        _get_column_projection_values,
        _read_all_delete_files,
        _to_requested_schema,
        expression_to_pyarrow,
        pyarrow_to_schema,
    )
    from pyiceberg.schema import prune_columns

    metadata: TableMetadata = scan._table_metadata
    deletes = _read_all_delete_files(scan._io, [task]).get(task.file.file_path)
    version = metadata.format_version
    downcast = scan._downcast_ns_timestamp_to_us
    downcast = downcast if downcast is not None else version <= 2
    with scan._io.new_input(task.file.file_path).open() as stream:
        parquet = pq.ParquetFile(stream, pre_buffer=True, buffer_size=8 * ONE_MEGABYTE)
        file_schema = pyarrow_to_schema(
            parquet.schema_arrow,
            metadata.name_mapping(),
            downcast_ns_timestamp_to_us=downcast,
            format_version=version,
        )
        missing = _get_column_projection_values(
            task.file,
            scan._projected_schema,
            metadata.schema(),
            metadata.specs().get(task.file.spec_id),
            file_schema.field_ids,
        )
        row_filter = None
        if scan._bound_row_filter is not AlwaysTrue():
            translated = translate_column_names(
                scan._bound_row_filter,
                file_schema,
                case_sensitive=scan._case_sensitive,
                projected_field_values=missing,
            )
            row_filter = expression_to_pyarrow(
                bind(file_schema, translated, case_sensitive=scan._case_sensitive), file_schema
            )
        file_projection = prune_columns(file_schema, scan._projected_field_ids, False)
        row_groups = list(range(parquet.num_row_groups))
        if row_filter is not None and not deletes and len(row_groups) > 1:
            # Row groups whose statistics rule the filter out are skipped, as the dataset
            # scanner does (not with deletes: their positions count every row).
            fragment = ds.ParquetFileFormat().make_fragment(stream)
            subset = fragment.subset(row_filter, schema=parquet.schema_arrow)
            row_groups = [group.id for group in subset.row_groups]
        position = 0
        for batch in parquet.iter_batches(
            batch_size=READ_BATCH_ROWS,
            row_groups=row_groups,
            columns=[column.name for column in file_projection.columns],
        ):
            start, position = position, position + batch.num_rows
            if deletes:
                batch = batch.take(_combine_positional_deletes(deletes, start, position))
            if row_filter is not None:
                batch = batch.filter(row_filter)
            if batch.num_rows:
                yield _to_requested_schema(
                    scan._projected_schema,
                    file_projection,
                    batch,
                    downcast_ns_timestamp_to_us=downcast,
                    projected_missing_fields=missing,
                    allow_timestamp_tz_mismatch=True,
                )
