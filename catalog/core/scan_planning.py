"""Server-side scan planning for the Iceberg REST protocol (planTableScan, fetchScanTasks):
which data files a scan of a table reads, with their delete files and residual filters, in
the protocol's JSON shapes. Django-free: it reads Iceberg metadata only.

Planning is the preview's (`catalog.core.preview`), with the same pieces: the cached
manifests (`catalog.core.manifests`), the filter per partition spec (`catalog.core.pruning`,
pyiceberg's own evaluators) and the delete files (`catalog.core.deletes`): data manifests
ruled out by their partition summaries are not read, files are kept or dropped by partition
and by column statistics, and each kept file gets its residual (what of the filter its
partition does not decide). What differs from a preview:
- equality deletes are planned, not refused: the client applies them (Java does; pyiceberg
  0.12 refuses them itself, in `FileScanTask.from_rest_response`);
- the filter arrives as the protocol's JSON expression, parsed by pyiceberg's own models
  (`BooleanExpression.model_validate`, what pyiceberg's client serialises), and case
  sensitivity is the request's;
- an incremental scan (start-snapshot-id, end-snapshot-id) plans the files appended by the
  snapshots after the start up to the end, as Java's IncrementalAppendScan does.

Pagination is stateless. A plan is cut into *plan tasks*, each a contiguous range of the
snapshot's data manifests (their order in the manifest list, which never changes for a
snapshot) holding about FILES_PER_TASK live files by the manifest list's counts; the
caller signs the range with the request (`PlanTask.payload`) and hands it out as an opaque
token. fetchScanTasks plans just that range again, from the cached manifests: nothing is
kept between requests, so any web process answers, after a restart too. A plan small
enough (INLINE_FILES live files or fewer) is answered at once with its file scan tasks.

Every path in a plan is read from the table's manifests: a token names manifest positions,
never a file."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from pyiceberg.conversions import from_bytes
from pyiceberg.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BooleanExpression,
    LiteralPredicate,
    Not,
    Or,
    Reference,
    SetPredicate,
    UnaryPredicate,
)
from pyiceberg.expressions.visitors import _InclusiveMetricsEvaluator, bind
from pyiceberg.io import FileIO
from pyiceberg.manifest import (
    INITIAL_SEQUENCE_NUMBER,
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
)
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Operation, Snapshot
from pyiceberg.types import (
    BinaryType,
    DateType,
    DecimalType,
    FixedType,
    IcebergType,
    PrimitiveType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

from catalog.core.deletes import Deletes
from catalog.core.errors import InvalidInput, NotFound
from catalog.core.manifests import data_entries, manifest_list
from catalog.core.metadata_cache import content_offset, referenced_data_file
from catalog.core.pruning import SpecFilters

#: A plan of at most this many live data files (by the manifest list's counts, before any
#: file is looked at) is answered at once with its file scan tasks; a larger one with plan
#: tasks. Module attributes, read at each call, so that tests can make them small.
INLINE_FILES = 1000
#: About how many live data files one plan task covers (whole manifests: a manifest larger
#: than this is a task of its own).
FILES_PER_TASK = 1000


class UnsupportedScan(InvalidInput):
    """A scan this server does not plan (the spec's 406)."""

    iceberg_type = "UnsupportedOperationException"
    status = 406


# -- the request ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScanRequest:
    """A PlanTableScanRequest, its fields checked for shape (not yet against the table)."""

    snapshot_id: int | None = None
    select: tuple[str, ...] | None = None
    #: The filter as the client sent it (JSON), kept to be signed into tokens as it came.
    filter_json: Any = None
    filter: BooleanExpression = AlwaysTrue()
    case_sensitive: bool = True
    use_snapshot_schema: bool = False
    start_snapshot_id: int | None = None
    end_snapshot_id: int | None = None
    stats_fields: tuple[str, ...] | None = None

    def payload(self) -> dict[str, Any]:
        """The request as a plan token carries it (only what was given)."""
        found = {
            "snapshot-id": self.snapshot_id,
            "select": list(self.select) if self.select is not None else None,
            "filter": self.filter_json,
            "case-sensitive": None if self.case_sensitive else False,
            "use-snapshot-schema": True if self.use_snapshot_schema else None,
            "start-snapshot-id": self.start_snapshot_id,
            "end-snapshot-id": self.end_snapshot_id,
            "stats-fields": list(self.stats_fields) if self.stats_fields is not None else None,
        }
        return {key: value for key, value in found.items() if value is not None}


def _whole(document: Mapping[str, Any], key: str) -> int | None:
    value = document.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"Invalid request: {key} must be a whole number", field=key)
    return value


def _flag(document: Mapping[str, Any], key: str, default: bool) -> bool:
    value = document.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InvalidInput(f"Invalid request: {key} must be true or false", field=key)
    return value


def _names(document: Mapping[str, Any], key: str) -> tuple[str, ...] | None:
    value = document.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidInput(f"Invalid request: {key} must be a list of field names", field=key)
    return tuple(value)


def parse_filter(value: Any) -> BooleanExpression:
    """The protocol's JSON expression (`{"type": "gt", "term": "id", "value": 5}`, `true`)
    as pyiceberg's unbound expression: pyiceberg's models read the format its client
    writes. InvalidInput (field "filter") for anything else, terms with transforms included
    (pyiceberg has no unbound transform terms)."""
    from pydantic import ValidationError

    if value is None:
        return AlwaysTrue()
    if not isinstance(value, dict | bool):
        raise InvalidInput("Invalid filter: expected a JSON expression object", field="filter")
    try:
        return BooleanExpression.model_validate(value)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        problem = f"{where}: {first['msg']}" if where else first["msg"]
        raise InvalidInput(f"Invalid filter: {problem}"[:500], field="filter") from None
    except (TypeError, ValueError, AttributeError, KeyError, RecursionError) as error:
        # pyiceberg's constructors: an abstract or unknown "type", a missing value.
        text = str(error) or type(error).__name__
        if "abstract class" in text:
            text = f"unknown expression type {str(value.get('type'))[:40]!r}"  # type: ignore[union-attr]
        raise InvalidInput(f"Invalid filter: {text}"[:500], field="filter") from None


def parse_request(document: Mapping[str, Any]) -> ScanRequest:
    """A PlanTableScanRequest body (or a token's payload) as a ScanRequest; InvalidInput
    names the field that is wrong."""
    start = _whole(document, "start-snapshot-id")
    end = _whole(document, "end-snapshot-id")
    snapshot_id = _whole(document, "snapshot-id")
    if start is not None and end is None:
        raise InvalidInput(
            "Invalid request: end-snapshot-id is required with start-snapshot-id",
            field="end-snapshot-id",
        )
    if snapshot_id is not None and (start is not None or end is not None):
        raise InvalidInput(
            "Invalid request: snapshot-id cannot be given with start-snapshot-id or "
            "end-snapshot-id (a point-in-time scan or an incremental one, not both)",
            field="snapshot-id",
        )
    return ScanRequest(
        snapshot_id=snapshot_id,
        select=_names(document, "select"),
        filter_json=document.get("filter"),
        filter=parse_filter(document.get("filter")),
        case_sensitive=_flag(document, "case-sensitive", True),
        use_snapshot_schema=_flag(document, "use-snapshot-schema", False),
        start_snapshot_id=start,
        end_snapshot_id=end,
        stats_fields=_names(document, "stats-fields"),
    )


# -- the scan, against the table -------------------------------------------------------------


@dataclass(frozen=True)
class Scope:
    """A request resolved against the table's metadata."""

    request: ScanRequest
    #: The snapshot read (the end of an incremental scan); None: the table has none yet.
    snapshot: Snapshot | None
    schema: Schema
    #: The filter with each column named as the schema spells it (so that the evaluators,
    #: which match names exactly, serve a case-insensitive request too).
    row_filter: BooleanExpression
    #: Field ids whose statistics the answer carries (stats-fields).
    stats_ids: frozenset[int]
    #: For an incremental scan, the appending snapshots whose added files are read.
    appended_by: frozenset[int] | None = None


def _snapshot(metadata: TableMetadata, snapshot_id: int, key: str) -> Snapshot:
    snapshot = metadata.snapshot_by_id(snapshot_id)
    if snapshot is None:
        # The spec's 404 is for a missing table or namespace: a snapshot the table does not
        # have is a bad request (Java's server answers IllegalArgumentException, a 400).
        raise InvalidInput(f"Cannot find snapshot with ID {snapshot_id}", field=key)
    return snapshot


def _schema_by_id(metadata: TableMetadata, schema_id: int | None) -> Schema:
    for schema in metadata.schemas:
        if schema.schema_id == schema_id:
            return schema
    return metadata.schema()


def _field_id(schema: Schema, name: str, case_sensitive: bool, key: str) -> int:
    try:
        return schema.find_field(name, case_sensitive=case_sensitive).field_id
    except ValueError:
        raise InvalidInput(
            f"Invalid request: {key} names an unknown field {name!r}", field=key
        ) from None


def _canonical(expression: BooleanExpression, schema: Schema) -> BooleanExpression:
    """`expression` (already bound once, so every name resolves) with each column named as
    the schema spells it: a case-insensitive request's `ID` becomes `id`."""
    if isinstance(expression, And):
        return And(_canonical(expression.left, schema), _canonical(expression.right, schema))
    if isinstance(expression, Or):
        return Or(_canonical(expression.left, schema), _canonical(expression.right, schema))
    if isinstance(expression, Not):
        return Not(_canonical(expression.child, schema))
    if isinstance(expression, UnaryPredicate | LiteralPredicate | SetPredicate):
        found = schema.find_field(expression.term.name, case_sensitive=False)
        term = Reference(schema.find_column_name(found.field_id) or found.name)
        if isinstance(expression, LiteralPredicate):
            return type(expression)(term, expression.literal)
        if isinstance(expression, SetPredicate):
            return type(expression)(term, expression.literals)
        return type(expression)(term)
    return expression


def _bound_filter(request: ScanRequest, schema: Schema) -> BooleanExpression:
    try:
        bind(schema, request.filter, case_sensitive=request.case_sensitive)
    except ValueError as error:
        raise InvalidInput(f"Invalid filter: {str(error)[:300]}", field="filter") from None
    except (TypeError, AttributeError, NotImplementedError) as error:
        # A literal the column's type cannot hold: "abc" for a long.
        raise InvalidInput(f"Invalid filter: {str(error)[:300]}", field="filter") from None
    return request.filter if request.case_sensitive else _canonical(request.filter, schema)


def _appending_snapshots(metadata: TableMetadata, start: int | None, end: int) -> frozenset[int]:
    """The append snapshots after `start` (exclusive) up to `end` (inclusive) in `end`'s
    ancestry (Java's IncrementalAppendScan; other operations add no rows to read)."""
    found: set[int] = set()
    current: Snapshot | None = _snapshot(metadata, end, "end-snapshot-id")
    while current is not None and current.snapshot_id != start:
        operation = current.summary.operation if current.summary else None
        if operation == Operation.APPEND:
            found.add(current.snapshot_id)
        parent = current.parent_snapshot_id
        current = metadata.snapshot_by_id(parent) if parent is not None else None
    if start is not None and current is None:
        raise InvalidInput(
            f"Starting snapshot (exclusive) {start} is not a parent ancestor of end snapshot {end}",
            field="start-snapshot-id",
        )
    return frozenset(found)


def resolve(
    metadata: TableMetadata, request: ScanRequest, *, schema_id: int | None = None
) -> Scope:
    """The snapshot, schema and filter a request reads, checked against the table:
    InvalidInput (400) naming the field for an unknown snapshot, column or filter.
    `schema_id`: the schema a plan read when it was made (a plan token's), kept even if
    the table's current schema has changed since."""
    appended_by = None
    if request.end_snapshot_id is not None:
        snapshot: Snapshot | None = _snapshot(metadata, request.end_snapshot_id, "end-snapshot-id")
        if request.start_snapshot_id is not None:
            _snapshot(metadata, request.start_snapshot_id, "start-snapshot-id")
        appended_by = _appending_snapshots(
            metadata, request.start_snapshot_id, request.end_snapshot_id
        )
    elif request.snapshot_id is not None:
        snapshot = _snapshot(metadata, request.snapshot_id, "snapshot-id")
    else:
        snapshot = metadata.current_snapshot()
    schema = metadata.schema()
    if schema_id is not None:
        schema = _schema_by_id(metadata, schema_id)
    elif request.use_snapshot_schema and snapshot is not None:
        schema = _schema_by_id(metadata, snapshot.schema_id)
    for name in request.select or ():
        _field_id(schema, name, request.case_sensitive, "select")
    stats_ids = frozenset(
        _field_id(schema, name, request.case_sensitive, "stats-fields")
        for name in request.stats_fields or ()
    )
    return Scope(
        request=request,
        snapshot=snapshot,
        schema=schema,
        row_filter=_bound_filter(request, schema),
        stats_ids=stats_ids,
        appended_by=appended_by,
    )


# -- planning -------------------------------------------------------------------------------


def _data_manifests(io: FileIO, scope: Scope) -> tuple[list[ManifestFile], list[ManifestFile]]:
    """The snapshot's data manifests in manifest-list order (the positions plan tasks name)
    and its delete manifests; none of the latter for an incremental scan (it reads appended
    rows only)."""
    if scope.snapshot is None:
        return [], []
    manifests = manifest_list(io, scope.snapshot)
    data = [m for m in manifests if m.content == ManifestContent.DATA]
    deletes = [m for m in manifests if m.content == ManifestContent.DELETES]
    return data, ([] if scope.appended_by is not None else deletes)


def _manifest_wanted(scope: Scope, filters: SpecFilters, manifest: ManifestFile) -> bool:
    if scope.appended_by is not None and manifest.added_snapshot_id not in scope.appended_by:
        return False
    return filters.manifest_may_match(manifest)


def _live_count(manifest: ManifestFile, scope: Scope) -> int:
    if scope.appended_by is not None:
        return manifest.added_files_count or 0
    return (manifest.added_files_count or 0) + (manifest.existing_files_count or 0)


@dataclass(frozen=True)
class Outline:
    """What a plan is, before any manifest is read: either small enough to plan at once
    (`ranges` is one range of every data manifest), or cut into plan tasks."""

    data_manifests: int
    live_files: int
    #: [start, stop) positions among the snapshot's data manifests, one per plan task.
    ranges: tuple[tuple[int, int], ...]

    @property
    def inline(self) -> bool:
        return self.live_files <= INLINE_FILES


def outline(metadata: TableMetadata, io: FileIO, scope: Scope) -> Outline:
    """Counts the live files of the manifests the filter may match (from the manifest
    list alone) and cuts them into ranges of about FILES_PER_TASK files."""
    data, _ = _data_manifests(io, scope)
    filters = SpecFilters(metadata, scope.schema, scope.row_filter)
    ranges: list[tuple[int, int]] = []
    total = 0
    start: int | None = None
    in_range = 0
    for position, manifest in enumerate(data):
        if not _manifest_wanted(scope, filters, manifest):
            continue
        count = _live_count(manifest, scope)
        total += count
        if start is None:
            start = position
        in_range += count
        if in_range >= FILES_PER_TASK:
            ranges.append((start, position + 1))
            start, in_range = None, 0
    if start is not None:
        ranges.append((start, len(data)))
    return Outline(len(data), total, tuple(ranges))


@dataclass(frozen=True)
class PlannedTask:
    data_file: DataFile
    deletes: tuple[DataFile, ...]
    residual: BooleanExpression


def plan_range(
    metadata: TableMetadata, io: FileIO, scope: Scope, start: int, stop: int
) -> list[PlannedTask]:
    """The file scan tasks of the data manifests at positions [start, stop) (see the
    module): pruned by partition and statistics, each with its deletes and residual."""
    data, delete_manifests = _data_manifests(io, scope)
    if not 0 <= start <= stop <= len(data):
        raise NotFound(f"No such range of manifests: {start}-{stop}")
    filters = SpecFilters(metadata, scope.schema, scope.row_filter)
    kept = [m for m in data[start:stop] if _manifest_wanted(scope, filters, m)]
    metrics = (
        _InclusiveMetricsEvaluator(scope.schema, scope.row_filter).eval
        if filters.filtered
        else None
    )
    scanned: list[ManifestEntry] = []
    for entry in data_entries(io, kept):
        if scope.appended_by is not None and (
            entry.status != ManifestEntryStatus.ADDED or entry.snapshot_id not in scope.appended_by
        ):
            continue
        data_file = entry.data_file
        if filters.partition_may_match(data_file) and (metrics is None or metrics(data_file)):
            scanned.append(entry)
    if not scanned:
        return []
    oldest = min(entry.sequence_number or INITIAL_SEQUENCE_NUMBER for entry in scanned)
    deletes = Deletes.read(io, delete_manifests, oldest, filters)
    tasks = []
    for entry in scanned:
        residual = filters.residual(entry.data_file)
        if isinstance(residual, AlwaysFalse):
            continue
        sequence = entry.sequence_number or INITIAL_SEQUENCE_NUMBER
        # Equality deletes too: the client applies them (pyiceberg refuses them itself).
        applying = (
            *deletes.positional_for(entry.data_file, sequence),
            *deletes.equality_for(entry.data_file, sequence),
        )
        tasks.append(PlannedTask(entry.data_file, applying, residual))
    return tasks


# -- the protocol's JSON --------------------------------------------------------------------


def single_value(kind: IcebergType, value: Any) -> Any:
    """A value as Iceberg's SingleValueParser writes it (what the spec's PrimitiveTypeValue
    is): dates, times and timestamps as ISO 8601 text, binary and fixed as hex, decimals as
    plain text, UUIDs in their canonical form, numbers and text as themselves."""
    if value is None:
        return None
    if isinstance(kind, DateType) and isinstance(value, int):
        return (datetime.date(1970, 1, 1) + datetime.timedelta(days=value)).isoformat()
    if isinstance(kind, TimeType) and isinstance(value, int):
        moment = datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=value)
        return moment.time().isoformat(timespec="microseconds")
    if isinstance(kind, TimestampType | TimestamptzType) and isinstance(value, int):
        moment = datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=value)
        text = moment.isoformat(timespec="microseconds")
        return text + "+00:00" if isinstance(kind, TimestamptzType) else text
    if isinstance(kind, TimestampNanoType | TimestamptzNanoType) and isinstance(value, int):
        seconds, nanos = divmod(value, 1_000_000_000)
        moment = datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=seconds)
        text = f"{moment.isoformat(timespec='seconds')}.{nanos:09d}"
        return text + "+00:00" if isinstance(kind, TimestamptzNanoType) else text
    if isinstance(kind, UUIDType):
        return str(value if isinstance(value, uuid.UUID) else uuid.UUID(bytes=bytes(value)))
    if isinstance(kind, BinaryType | FixedType) or isinstance(value, bytes | bytearray):
        return bytes(value).hex().upper()
    if isinstance(kind, DecimalType) or isinstance(value, Decimal):
        return format(Decimal(value), "f")
    if isinstance(value, float) and value != value:  # NaN: JSON has no such number
        return "NaN"
    return value


def _partition(data_file: DataFile, metadata: TableMetadata, schema: Schema) -> list[Any]:
    spec = metadata.specs().get(data_file.spec_id or 0)
    if spec is None or spec.is_unpartitioned():
        return []
    try:
        partition_type: StructType = spec.partition_type(schema)
    except (ValueError, KeyError):
        # A spec over a column the read's schema lacks: the table's own schema has it.
        partition_type = spec.partition_type(metadata.schema())
    values = data_file.partition
    return [
        single_value(nested.field_type, values[position] if position < len(values) else None)
        for position, nested in enumerate(partition_type.fields)
    ]


def _counts(values: Mapping[int, int] | None, ids: frozenset[int]) -> dict[str, list] | None:
    if not values:
        return None
    kept = sorted(key for key in values if key in ids)
    return {"keys": kept, "values": [values[key] for key in kept]} if kept else None


def _bounds(values: Mapping[int, bytes] | None, ids: frozenset[int], schema: Schema) -> Any:
    if not values:
        return None
    keys, decoded = [], []
    for key in sorted(values):
        if key not in ids:
            continue
        kind = schema.find_type(key)
        if not isinstance(kind, PrimitiveType):
            continue
        try:
            value = single_value(kind, from_bytes(kind, values[key]))
        except (ValueError, TypeError, ArithmeticError):
            continue  # a bound the writer encoded oddly is left out, never guessed
        keys.append(key)
        decoded.append(value)
    return {"keys": keys, "values": decoded} if keys else None


def _content_file(data_file: DataFile, metadata: TableMetadata, scope: Scope) -> dict[str, Any]:
    """A DataFile or DeleteFile object of the spec (ContentFileParser's fields)."""
    content = {
        DataFileContent.DATA: "data",
        DataFileContent.POSITION_DELETES: "position-deletes",
        DataFileContent.EQUALITY_DELETES: "equality-deletes",
    }[data_file.content]
    document: dict[str, Any] = {
        "spec-id": data_file.spec_id or 0,
        "content": content,
        "file-path": data_file.file_path,
        "file-format": str(data_file.file_format.value).lower(),
        "partition": _partition(data_file, metadata, scope.schema),
        "file-size-in-bytes": data_file.file_size_in_bytes,
        "record-count": data_file.record_count,
    }
    if data_file.key_metadata:
        document["key-metadata"] = bytes(data_file.key_metadata).hex().upper()
    if data_file.split_offsets:
        document["split-offsets"] = list(data_file.split_offsets)
    if data_file.sort_order_id is not None:
        document["sort-order-id"] = data_file.sort_order_id
    if content == "data" and scope.stats_ids:
        ids, schema = scope.stats_ids, scope.schema
        for key, values in (
            ("column-sizes", _counts(data_file.column_sizes, ids)),
            ("value-counts", _counts(data_file.value_counts, ids)),
            ("null-value-counts", _counts(data_file.null_value_counts, ids)),
            ("nan-value-counts", _counts(data_file.nan_value_counts, ids)),
            ("lower-bounds", _bounds(data_file.lower_bounds, ids, schema)),
            ("upper-bounds", _bounds(data_file.upper_bounds, ids, schema)),
        ):
            if values is not None:
                document[key] = values
    elif content == "position-deletes":
        if (target := referenced_data_file(data_file)) is not None:
            document["referenced-data-file"] = target
        if (offset := content_offset(data_file)) is not None:
            document["content-offset"] = offset
            size = getattr(data_file, "content_size_in_bytes", None)
            if size is not None:
                document["content-size-in-bytes"] = size
    elif content == "equality-deletes" and data_file.equality_ids:
        document["equality-ids"] = list(data_file.equality_ids)
    return document


def _residual_json(residual: BooleanExpression) -> Any:
    if isinstance(residual, AlwaysTrue):
        return True
    return residual.model_dump(mode="json", by_alias=True)


def scan_tasks(
    tasks: Iterable[PlannedTask], metadata: TableMetadata, scope: Scope
) -> dict[str, Any]:
    """The spec's ScanTasks fields (delete-files, file-scan-tasks) for planned tasks: each
    delete file once, referenced by its position from every task it applies to."""
    delete_files: list[dict[str, Any]] = []
    positions: dict[tuple[str, int | None], int] = {}
    file_scan_tasks = []
    for task in tasks:
        references = []
        for delete in task.deletes:
            # Deletion vectors of one commit share a Puffin file: path and offset name one.
            key = (delete.file_path, content_offset(delete))
            if key not in positions:
                positions[key] = len(delete_files)
                delete_files.append(_content_file(delete, metadata, scope))
            references.append(positions[key])
        document: dict[str, Any] = {"data-file": _content_file(task.data_file, metadata, scope)}
        if references:
            document["delete-file-references"] = sorted(references)
        if scope.row_filter is not AlwaysTrue():
            # Given even when the partition decides the whole filter (`true`): a client
            # given none must apply the whole filter again (the spec), pyiceberg none.
            document["residual-filter"] = _residual_json(task.residual)
        file_scan_tasks.append(document)
    answer: dict[str, Any] = {"file-scan-tasks": file_scan_tasks}
    if delete_files:
        answer["delete-files"] = delete_files
    return answer
