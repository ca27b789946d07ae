"""Reading a table for browsing: a preview of its first rows (a column choice, a row filter,
at the current snapshot or back in time) with the figures of what pruning did, the data and
delete files of a snapshot, and the schema a snapshot was written with. Django-free.

Planning is done here, over the snapshot's manifests, with pyiceberg's own evaluators, so
that every file is counted where it is ruled out:
1. a data manifest whose partition summaries cannot match the filter's inclusive partition
   projection (`manifest_evaluator`) is not read: its files are *skipped by partition*;
2. in the manifests read, a file whose partition tuple cannot match the projection
   (`expression_evaluator`) is *skipped by partition*, and one whose column statistics
   (bounds, null and NaN counts) cannot match the filter (`_InclusiveMetricsEvaluator`) is
   *skipped by column statistics*; the rest are *scanned*;
3. delete manifests are read only when some data file is scanned, and not when they are older
   than every scanned file; position delete files and v3 deletion vectors are matched to the
   scanned files by pyiceberg's `DeleteFileIndex` (a deletion vector only to the file it
   names); an equality delete file that applies to a scanned file stops the read with
   `NeedsSpark`, since pyiceberg cannot apply those and a preview must not show deleted rows;
4. each scanned file gets its residual (what of the filter its partition does not already
   decide) and is read as pyiceberg's `ArrowScan` reads it, one file after another, until
   `limit` rows are found: a preview of 100 rows opens as few files as that takes, and
   decodes a Parquet file a few thousand rows at a time (`READ_BATCH_ROWS`), not a whole
   row group, so it stops early within a file too.

The read's schema is the table's current one, or, for a read at a snapshot id or a timestamp,
the snapshot's own (`catalog.core.attached.state_at`, ClickHouse's rules and words): columns
and the filter are checked against it, and files are projected onto it by field id, so added,
dropped, renamed and re-added columns read as they were then.

Rows come in two forms: `Preview.rows` holds typed Python values for pages (ints, floats,
`Decimal`, `str`, `bytes`, `uuid.UUID`, `datetime.date`/`time`/`datetime`, timestamptz aware
in UTC, structs as dicts by field name, lists as lists, maps as dicts, or lists of (key,
value) pairs when keys are not hashable; nanosecond timestamps truncated to microseconds),
and `Preview.json_rows()` gives the same values JSON can carry exactly: dates, times and
timestamps as ISO 8601 strings (nanosecond timestamps with all nine digits), decimals as
strings in plain notation, binary and fixed as base64, UUIDs in their canonical form, NaN
and infinities as the strings "NaN", "Infinity" and "-Infinity", map keys as strings (a
non-string key as its JSON text), integers as numbers.

The row filter is pyiceberg's expression language (`id > 5 and name like 'a%'`), parsed by
pyiceberg's parser and bound to the read's schema: it never becomes SQL text."""

from __future__ import annotations

import base64
import dataclasses
import datetime
import functools
import json
import math
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.expressions import AlwaysFalse, AlwaysTrue, BooleanExpression
from pyiceberg.expressions.visitors import (
    _InclusiveMetricsEvaluator,
    bind,
    expression_evaluator,
    inclusive_projection,
    manifest_evaluator,
    residual_evaluator_of,
)
from pyiceberg.io import FileIO
from pyiceberg.manifest import (
    INITIAL_SEQUENCE_NUMBER,
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestFile,
    read_manifest_list,
)
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import FileScanTask
from pyiceberg.table.delete_file_index import DeleteFileIndex
from pyiceberg.table.metadata import TableMetadata, TableMetadataUtil
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.types import IcebergType, NestedField, StructType

from catalog.core import metadata_io
from catalog.core.attached import state_at
from catalog.core.errors import CatalogError, InvalidInput, InvalidMetadata
from catalog.core.metadata_cache import (
    CachingFileIO,
    content_offset,
    read_manifest_entries,
    referenced_data_file,
)

#: Longest row filter accepted (a filter is typed by a person; a megabyte of one is not).
MAX_ROW_FILTER_LENGTH = 2000
#: Most rows one preview returns.
MAX_LIMIT = 10_000
#: Most files `files_at` lists (its totals always count every file).
DEFAULT_FILES_LIMIT = 1000

DATA = "data"
POSITION_DELETES = "position_deletes"
DELETION_VECTOR = "deletion_vector"
EQUALITY_DELETES = "equality_deletes"
FILE_KINDS = (DATA, POSITION_DELETES, DELETION_VECTOR, EQUALITY_DELETES)


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
    #: Typed Python values, one tuple per row, in `columns` order (see the module).
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
        """The rows with JSON-safe values (see the module)."""
        return [[json_value(value) for value in row] for row in self.rows]


@dataclass(frozen=True)
class ContentFile:
    """A data or delete file of a snapshot."""

    kind: str  # one of FILE_KINDS
    path: str
    format: str  # "PARQUET", "AVRO", "ORC", "PUFFIN"
    record_count: int
    size_bytes: int
    #: The partition as (field name, human-readable value) pairs: ("ts_day", "2024-01-01").
    partition: tuple[tuple[str, str], ...]
    spec_id: int
    #: A deletion vector's (or a file-scoped position delete file's) data file.
    referenced_data_file: str | None = None

    @property
    def partition_text(self) -> str:
        return "/".join(f"{name}={value}" for name, value in self.partition)


@dataclass(frozen=True)
class KindTotal:
    files: int = 0
    bytes: int = 0
    records: int = 0


@dataclass(frozen=True)
class FileListing:
    snapshot_id: int | None
    #: At most `limit` files, data files first, in manifest order.
    files: tuple[ContentFile, ...]
    #: Per kind (every one of FILE_KINDS), over all files, even when `files` is cut.
    totals: Mapping[str, KindTotal]
    truncated: bool


@dataclass(frozen=True)
class SchemaField:
    field_id: int
    #: Dotted path for nested fields ("address.city"; list elements "tags.element").
    name: str
    type: str
    required: bool
    doc: str | None
    #: 0 for top-level columns.
    depth: int


@dataclass(frozen=True)
class SchemaAt:
    schema_id: int
    snapshot_id: int | None
    fields: tuple[SchemaField, ...]
    identifier_field_ids: tuple[int, ...]


# -- input ----------------------------------------------------------------------------------


def parse_row_filter(
    text: str | None, schema: Schema, *, case_sensitive: bool = True
) -> BooleanExpression:
    """The row filter `text` (pyiceberg's expression syntax) as an unbound expression that
    binds to `schema`; AlwaysTrue for no filter. InvalidInput (field "row_filter") names
    what is wrong and where: the position of a syntax error, an unknown column, a value that
    does not fit its column's type."""
    if text is None or not text.strip():
        return AlwaysTrue()
    if len(text) > MAX_ROW_FILTER_LENGTH:
        raise InvalidInput(
            f"The row filter is too long ({len(text)} characters, at most {MAX_ROW_FILTER_LENGTH})",
            field="row_filter",
        )
    if "\x00" in text:
        raise InvalidInput("The row filter contains a NUL character", field="row_filter")
    from pyparsing import ParseBaseException

    # Structure first: it is checked in one pass, and pyparsing takes seconds over thousands
    # of nested parentheses.
    problem = _structure_problem(text)
    try:
        if problem is not None:
            raise _Malformed(*problem)
        expression = _parse(text)
    except _Malformed as error:
        raise InvalidInput(
            _where(text, error.position, error.problem), field="row_filter"
        ) from None
    except ParseBaseException as error:
        position, what = _diagnose(text) or (error.loc, "this is not a filter")
        raise InvalidInput(_where(text, position, what), field="row_filter") from error
    except RecursionError as error:
        raise InvalidInput("The row filter is nested too deeply", field="row_filter") from error
    except (ValueError, TypeError) as error:  # raised by pyiceberg's parse actions (LIKE)
        raise InvalidInput(f"Malformed row filter: {error}", field="row_filter") from error
    try:
        bind(schema, expression, case_sensitive=case_sensitive)
    except ValueError as error:
        raise InvalidInput(_binding_problem(error, schema), field="row_filter") from error
    except (TypeError, AttributeError, NotImplementedError) as error:
        # A literal the column's type cannot hold: `id = 'abc'`, `name > 1.5`.
        raise InvalidInput(f"Invalid row filter: {error}", field="row_filter") from error
    return expression


@functools.lru_cache(maxsize=256)
def _parse(text: str) -> BooleanExpression:
    # Parsing takes pyparsing a millisecond or two, a tenth of a warm preview; pages repeat
    # the same filter (paging, time travel), and expressions are immutable.
    from pyiceberg.expressions.parser import parse

    return parse(text)


class _Malformed(Exception):
    def __init__(self, position: int, problem: str) -> None:
        self.position = position
        self.problem = problem


#: Deepest nesting of parentheses accepted.
MAX_FILTER_NESTING = 32

_CONNECTIVE = re.compile(r"(and|or)\b", re.IGNORECASE)
_NOT = re.compile(r"not\b", re.IGNORECASE)
_KEYWORD_HINTS = (
    (re.compile(r"is\b", re.IGNORECASE), "expected null, not null, nan or not nan after 'is'"),
    (re.compile(r"(not\s+)?in\b", re.IGNORECASE), "expected a list of values in parentheses"),
    (re.compile(r"(not\s+)?like\b", re.IGNORECASE), "expected a 'quoted' pattern after 'like'"),
    (re.compile(r"between\b", re.IGNORECASE), "expected 'value and value' after 'between'"),
)


def _where(text: str, position: int, problem: str) -> str:
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    where = f"line {line}, column {column}" if "\n" in text else f"column {column}"
    return f"Malformed row filter at {where}: {problem}"


def _structure_problem(text: str) -> tuple[int, str] | None:
    """Unbalanced quotes and parentheses, and nesting past MAX_FILTER_NESTING."""
    opened: list[int] = []
    quote: tuple[str, int] | None = None
    position = 0
    while position < len(text):
        character = text[position]
        if quote is not None:
            if character == "\\" and quote[0] == '"':
                position += 1  # an escaped character in a quoted column name
            elif character == quote[0]:
                if text.startswith(quote[0] * 2, position):
                    position += 1  # '' inside a text value
                else:
                    quote = None
        elif character in "'\"":
            quote = (character, position)
        elif character == "(":
            opened.append(position)
            if len(opened) > MAX_FILTER_NESTING:
                return position, f"parentheses nest deeper than {MAX_FILTER_NESTING} levels"
        elif character == ")":
            if not opened:
                return position, "')' closes no '('"
            opened.pop()
        position += 1
    if quote is not None:
        return quote[1], f"the quote {quote[0]} is never closed"
    if opened:
        return opened[-1], "'(' is never closed"
    return None


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position].isspace():
        position += 1
    return position


def _match_end(element: Any, text: str, position: int) -> int | None:
    """Where `element` of pyiceberg's grammar ends when it matches at `position`."""
    from pyparsing import ParseBaseException

    try:
        return element.try_parse(text, position)
    except (ParseBaseException, IndexError):
        return None


def _found(text: str, position: int) -> str:
    return f", found {_excerpt(text, position)}"


def _diagnose(text: str) -> tuple[int, str] | None:
    """Where a filter pyparsing refused goes wrong, and what was expected there: pyparsing
    reports the start of the failed alternative (often the whole filter) with its grammar
    as the message. Walks the filter condition by condition with pyiceberg's own grammar
    elements."""
    from pyiceberg.expressions import parser as grammar

    position = 0
    while True:
        # Opening parentheses and negations before a condition.
        while True:
            position = _skip_space(text, position)
            if text.startswith("(", position):
                position += 1
            elif _NOT.match(text, position):
                position += 3
            else:
                break
        if position >= len(text):
            return position, "expected a condition"
        end = _match_end(grammar.predicate, text, position)
        if end is None:
            return _diagnose_condition(text, position, grammar)
        position = _skip_space(text, end)
        while text.startswith(")", position):
            position = _skip_space(text, position + 1)
        if position >= len(text):
            return None
        connective = _CONNECTIVE.match(text, position)
        if connective is None:
            return position, "expected 'and', 'or' or the end of the filter" + _found(
                text, position
            )
        position = connective.end()
        if _skip_space(text, position) >= len(text):
            return position, f"expected a condition after '{connective.group(1)}'"


def _diagnose_condition(text: str, position: int, grammar: Any) -> tuple[int, str]:
    column_end = _match_end(grammar.column, text, position)
    if column_end is None:
        return position, "expected a column name" + _found(text, position)
    column = text[position:column_end].strip()
    after = _skip_space(text, column_end)
    if after >= len(text):
        return after, f"expected an operator after {column}"
    operator_end = _match_end(grammar.comparison_op, text, after)
    if operator_end is not None:
        operator = text[after:operator_end].strip()
        value = _skip_space(text, operator_end)
        return value, (
            f"expected a value (a number, a 'quoted' text, true or false) after {operator}"
            + (_found(text, value) if value < len(text) else "")
        )
    for keyword, hint in _KEYWORD_HINTS:
        found = keyword.match(text, after)
        if found:
            return _skip_space(text, found.end()), hint
    return after, (
        f"expected an operator after {column} (=, !=, <, <=, >, >=, in, not in, is null, "
        "is not null, like, between)" + _found(text, after)
    )


def _excerpt(text: str, position: int) -> str:
    shown = text[position : position + 30]
    return repr(shown + ("..." if len(text) > position + 30 else "")) if shown else "the end"


def _binding_problem(error: ValueError, schema: Schema) -> str:
    message = str(error)
    prefix = "Could not find field with name "
    if message.startswith(prefix):
        name = message[len(prefix) :].split(", case_sensitive")[0]
        return f"Unknown column in the row filter: {name}{_suggestion(name, schema)}"
    return f"Invalid row filter: {message}"


def _suggestion(name: str, schema: Schema) -> str:
    names = [column.name for column in schema.columns]
    same = [candidate for candidate in names if candidate.lower() == name.lower()]
    if same:
        return f" (did you mean {same[0]}?)"
    shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
    return f" (the columns are: {shown})"


def choose_columns(names: Sequence[str] | None, schema: Schema) -> Schema:
    """The read's projection: the top-level columns named, in the order named (duplicates
    once), or every column for None or an empty choice. InvalidInput (field "columns")
    names an unknown column."""
    if not names:
        return schema
    if isinstance(names, str) or not all(isinstance(name, str) for name in names):
        raise InvalidInput("Columns must be a list of column names", field="columns")
    by_name = {column.name: column for column in schema.columns}
    chosen: list[NestedField] = []
    for name in dict.fromkeys(names):
        column = by_name.get(name)
        if column is None:
            raise InvalidInput(
                f"Unknown column: {name}{_suggestion(name, schema)}", field="columns"
            )
        chosen.append(column)
    return Schema(*chosen, schema_id=schema.schema_id)


def _check_limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_LIMIT:
        raise InvalidInput(
            f"The number of rows must be a whole number from 0 to {MAX_LIMIT}", field="limit"
        )
    return limit


# -- metadata and time travel -------------------------------------------------------------


def _table_metadata(metadata: TableMetadata | Mapping[str, Any]) -> TableMetadata:
    if isinstance(metadata, Mapping):
        try:
            return TableMetadataUtil.parse_obj(dict(metadata))
        except (ValueError, TypeError, KeyError) as error:
            raise InvalidMetadata(f"Not Iceberg table metadata: {str(error)[:300]}") from error
    return metadata


def _state_document(
    metadata: TableMetadata, original: Mapping[str, Any] | None, time_travel: bool
) -> Mapping[str, Any]:
    """What `state_at` reads, from the JSON when there is one; otherwise rebuilt from the
    model (the snapshot list only for a time-travel read, where it is needed)."""
    if original is not None:
        return original
    document: dict[str, Any] = {
        "current-snapshot-id": metadata.current_snapshot_id,
        "current-schema-id": metadata.current_schema_id,
    }
    if time_travel:
        document["snapshot-log"] = [
            {"snapshot-id": entry.snapshot_id, "timestamp-ms": entry.timestamp_ms}
            for entry in metadata.snapshot_log
        ]
        document["snapshots"] = [
            {"snapshot-id": snapshot.snapshot_id}
            | ({"schema-id": snapshot.schema_id} if snapshot.schema_id is not None else {})
            for snapshot in metadata.snapshots
        ]
    return document


def _schema(metadata: TableMetadata, schema_id: int) -> Schema:
    for schema in metadata.schemas:
        if schema.schema_id == schema_id:
            return schema
    raise InvalidMetadata(f"The metadata has no schema with id {schema_id}")


def _resolve(
    metadata: TableMetadata | Mapping[str, Any],
    *,
    table_path: str,
    snapshot_id: int | None,
    timestamp_ms: int | None,
) -> tuple[TableMetadata, Snapshot | None, Schema]:
    """The parsed metadata, the snapshot a read sees and its schema (see `state_at`)."""
    original = metadata if isinstance(metadata, Mapping) else None
    parsed = _table_metadata(metadata)
    for name, value in (("snapshot_id", snapshot_id), ("timestamp_ms", timestamp_ms)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise InvalidInput(f"{name} must be a whole number", field=name)
    time_travel = snapshot_id is not None or timestamp_ms is not None
    state = state_at(
        _state_document(parsed, original, time_travel),
        table_path=table_path,
        snapshot_id=snapshot_id,
        timestamp_ms=timestamp_ms,
    )
    snapshot = parsed.snapshot_by_id(state.snapshot_id) if state.snapshot_id is not None else None
    if state.snapshot_id is not None and snapshot is None:
        raise InvalidMetadata(f"The current snapshot {state.snapshot_id} is not in the metadata")
    return parsed, snapshot, _schema(parsed, state.schema_id)


def schema_at(
    metadata: TableMetadata | Mapping[str, Any],
    *,
    table_path: str,
    snapshot_id: int | None = None,
    timestamp_ms: int | None = None,
) -> SchemaAt:
    """The schema a read at `snapshot_id` or `timestamp_ms` uses (the snapshot's own), or
    the table's current schema; every field, nested ones after their parent. Time-travel
    errors as `state_at` words them."""
    parsed, snapshot, schema = _resolve(
        metadata, table_path=table_path, snapshot_id=snapshot_id, timestamp_ms=timestamp_ms
    )
    fields: list[SchemaField] = []

    def walk(struct: Iterable[NestedField], prefix: str, depth: int) -> None:
        for nested in struct:
            name = f"{prefix}{nested.name}"
            fields.append(
                SchemaField(
                    field_id=nested.field_id,
                    name=name,
                    type=str(nested.field_type),
                    required=nested.required,
                    doc=nested.doc,
                    depth=depth,
                )
            )
            kind = nested.field_type
            if isinstance(kind, StructType):
                walk(kind.fields, f"{name}.", depth + 1)
            else:
                walk(_children(kind), f"{name}.", depth + 1)

    walk(schema.fields, "", 0)
    return SchemaAt(
        schema_id=schema.schema_id,
        snapshot_id=snapshot.snapshot_id if snapshot else None,
        fields=tuple(fields),
        identifier_field_ids=tuple(schema.identifier_field_ids),
    )


def _children(kind: IcebergType) -> list[NestedField]:
    from pyiceberg.types import ListType, MapType

    if isinstance(kind, ListType):
        return [kind.element_field]
    if isinstance(kind, MapType):
        return [kind.key_field, kind.value_field]
    return []


# -- planning -------------------------------------------------------------------------------


def _unreadable(what: str, location: str) -> InvalidMetadata:
    """The table's metadata names a file that is not what it says (an engine may commit any
    path as a manifest list): a 400 that names it, and says nothing of what the file holds
    or whether it exists."""
    return InvalidMetadata(
        f"The table's metadata cannot be read: its {what} {location[:300]} is not a readable "
        "Iceberg file"
    )


def _check_data_file(path: str) -> None:
    """A data or delete file is read only if it is a regular file (a FIFO there made a
    viewer's preview wait forever); a missing one is left to the read, which says so."""
    try:
        metadata_io.check_regular_file(path, max_bytes=None)
    except FileNotFoundError:
        return
    except OSError:
        raise _unreadable("data file", path) from None


def _manifest_list(io: FileIO, snapshot: Snapshot) -> tuple[ManifestFile, ...]:
    try:
        if isinstance(io, CachingFileIO):  # which checks the file on a miss
            return io.manifest_list(snapshot.manifest_list)
        metadata_io.check_regular_file(snapshot.manifest_list)
        # Not Snapshot.manifests(): pyiceberg's cache behind it is keyed by path alone.
        return tuple(read_manifest_list(io.new_input(snapshot.manifest_list)))
    except metadata_io.UNREADABLE_METADATA:
        raise _unreadable("manifest list", str(snapshot.manifest_list)) from None


def _entries(io: FileIO, manifest: ManifestFile) -> Sequence[ManifestEntry]:
    try:
        if isinstance(io, CachingFileIO):  # which checks the file on a miss
            return io.manifest_entries(manifest)
        metadata_io.check_regular_file(manifest.manifest_path)
        return read_manifest_entries(io.new_input(manifest.manifest_path), manifest)
    except metadata_io.UNREADABLE_METADATA:
        raise _unreadable("manifest", str(manifest.manifest_path)) from None


def _all_entries(io: FileIO, manifests: Sequence[ManifestFile]) -> list[Sequence[ManifestEntry]]:
    """Each manifest's live entries, read in parallel when there are several (object
    stores answer slowly; a local read is quick either way)."""
    if len(manifests) < 2:
        return [_entries(io, manifest) for manifest in manifests]
    from pyiceberg.utils.concurrent import ExecutorFactory

    return list(ExecutorFactory.get_or_create().map(lambda m: _entries(io, m), manifests))


class _SpecFilters:
    """The filter as each partition spec sees it, built once per spec (pyiceberg's
    evaluators, bound to the read's schema)."""

    def __init__(self, metadata: TableMetadata, schema: Schema, row_filter: BooleanExpression):
        self.metadata = metadata
        self.schema = schema
        self.row_filter = row_filter
        self.filtered = not isinstance(row_filter, AlwaysTrue)
        self._cache: dict[tuple[str, int], Any] = {}

    def _spec(self, spec_id: int) -> PartitionSpec | None:
        return self.metadata.specs().get(spec_id)

    def _built(self, kind: str, spec_id: int, build: Callable[[PartitionSpec], Any]) -> Any:
        key = (kind, spec_id)
        if key not in self._cache:
            spec = self._spec(spec_id)
            try:
                self._cache[key] = build(spec) if spec is not None else None
            except (ValueError, KeyError):
                # A spec over a column the read's schema lacks: no pruning by it (safe).
                self._cache[key] = None
        return self._cache[key]

    def projection(self, spec_id: int) -> BooleanExpression | None:
        return self._built(
            "projection",
            spec_id,
            lambda spec: inclusive_projection(self.schema, spec)(self.row_filter),
        )

    def manifest_may_match(self, manifest: ManifestFile) -> bool:
        if not self.filtered:
            return True
        spec_id = manifest.partition_spec_id

        def build(spec: PartitionSpec) -> Callable[[ManifestFile], bool]:
            projection = self.projection(spec_id)
            return manifest_evaluator(spec, self.schema, projection) if projection else None

        evaluate = self._built("manifest", spec_id, build)
        return evaluate(manifest) if evaluate else True

    def partition_may_match(self, data_file: DataFile) -> bool:
        if not self.filtered:
            return True
        spec_id = data_file.spec_id or 0

        def build(spec: PartitionSpec) -> Callable[[Any], bool] | None:
            projection = self.projection(spec_id)
            if projection is None:
                return None
            partition_schema = Schema(*spec.partition_type(self.schema).fields)
            return expression_evaluator(partition_schema, projection, True)

        evaluate = self._built("partition", spec_id, build)
        return evaluate(data_file.partition) if evaluate else True

    def residual(self, data_file: DataFile) -> BooleanExpression:
        if not self.filtered:
            return self.row_filter
        spec_id = data_file.spec_id or 0
        evaluator = self._built(
            "residual",
            spec_id,
            lambda spec: residual_evaluator_of(spec, self.row_filter, True, self.schema),
        )
        return evaluator.residual_for(data_file.partition) if evaluator else self.row_filter


@dataclass
class _Plan:
    tasks: list[FileScanTask]
    pruning: Pruning


def _live_files(io: FileIO, manifest: ManifestFile) -> int:
    if manifest.added_files_count is not None and manifest.existing_files_count is not None:
        return manifest.added_files_count + manifest.existing_files_count
    return len(_entries(io, manifest))  # v1 lists may leave the counts out


def _plan(
    metadata: TableMetadata,
    snapshot: Snapshot,
    schema: Schema,
    row_filter: BooleanExpression,
    io: FileIO,
    *,
    table_path: str,
) -> _Plan:
    filters = _SpecFilters(metadata, schema, row_filter)
    manifests = _manifest_list(io, snapshot)
    data_manifests = [m for m in manifests if m.content == ManifestContent.DATA]
    delete_manifests = [m for m in manifests if m.content == ManifestContent.DELETES]

    kept: list[ManifestFile] = []
    skipped_by_partition = 0
    for manifest in data_manifests:
        if filters.manifest_may_match(manifest):
            kept.append(manifest)
        else:
            skipped_by_partition += _live_files(io, manifest)
    manifests_skipped = len(data_manifests) - len(kept)
    data_files = skipped_by_partition
    skipped_by_stats = 0
    metrics = _InclusiveMetricsEvaluator(schema, row_filter).eval if filters.filtered else None

    scanned: list[ManifestEntry] = []
    for entries in _all_entries(io, kept):
        for entry in entries:
            data_file = entry.data_file
            if data_file.content != DataFileContent.DATA:
                continue
            data_files += 1
            if not filters.partition_may_match(data_file):
                skipped_by_partition += 1
            elif metrics is not None and not metrics(data_file):
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
            deletes = deletes_of.for_data_file(data_file, sequence, table_path)
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


def _cached_plan(
    metadata: TableMetadata,
    snapshot: Snapshot,
    schema: Schema,
    row_filter: BooleanExpression,
    io: FileIO,
    *,
    table_path: str,
) -> _Plan:
    """`_plan`, kept in the metadata cache when `io` reads through one: a table state's
    files never change, so the same snapshot, schema and filter plan the same files, and a
    repeated preview (a reload, another column choice) skips evaluating every file."""
    if not isinstance(io, CachingFileIO):
        return _plan(metadata, snapshot, schema, row_filter, io, table_path=table_path)

    def produce() -> tuple[_Plan, int]:
        plan = _plan(metadata, snapshot, schema, row_filter, io, table_path=table_path)
        return plan, 1024 + _PLAN_BYTES_PER_TASK * len(plan.tasks)

    key = f"{snapshot.snapshot_id}/{schema.schema_id}/{row_filter!r}"
    return io.cache.cached(io.fingerprint, "plan", key, produce)


@dataclass(frozen=True)
class _EqualityDelete:
    file: DataFile
    sequence: int
    spec_id: int
    partition: Any
    everywhere: bool


@dataclass
class Deletes:
    """The delete files that may apply to the scanned files: position delete files in
    pyiceberg's `DeleteFileIndex` (by partition, or by the path their bounds name),
    deletion vectors and other file-scoped deletes by the data file they name, equality
    deletes listed (a preview refuses them; server-side scan planning hands them on).
    Read once for a scan (`read`) and asked for each data file."""

    index: DeleteFileIndex = field(default_factory=DeleteFileIndex)
    by_data_file: dict[str, list[tuple[int, DataFile]]] = field(default_factory=dict)
    equality: list[_EqualityDelete] = field(default_factory=list)

    @classmethod
    def read(
        cls,
        io: FileIO,
        delete_manifests: Sequence[ManifestFile],
        oldest: int,
        filters: _SpecFilters,
    ) -> Deletes:
        """Only the delete manifests that can hold deletes for the scanned files are read:
        those whose partition summaries may match and that are not older than `oldest`,
        the oldest scanned file's sequence number (a delete applies to data of its own
        sequence number or older)."""
        wanted = [
            manifest
            for manifest in delete_manifests
            if (manifest.sequence_number or INITIAL_SEQUENCE_NUMBER) >= oldest
            and filters.manifest_may_match(manifest)
        ]
        deletes = cls()
        specs = filters.metadata.specs()
        for entries in _all_entries(io, wanted):
            for entry in entries:
                delete = entry.data_file
                if not filters.partition_may_match(delete):
                    continue
                sequence = entry.sequence_number or INITIAL_SEQUENCE_NUMBER
                if delete.content == DataFileContent.POSITION_DELETES:
                    target = referenced_data_file(delete)
                    if target is None:
                        deletes.index.add_delete_file(entry, partition_key=delete.partition)
                    else:
                        deletes.by_data_file.setdefault(target, []).append((sequence, delete))
                elif delete.content == DataFileContent.EQUALITY_DELETES:
                    spec = specs.get(delete.spec_id or 0)
                    deletes.equality.append(
                        _EqualityDelete(
                            file=delete,
                            sequence=sequence,
                            spec_id=delete.spec_id or 0,
                            partition=delete.partition,
                            everywhere=spec is None or spec.is_unpartitioned(),
                        )
                    )
        return deletes

    def positional_for(self, data_file: DataFile, sequence: int) -> set[DataFile]:
        """The position deletes and deletion vectors that apply to `data_file` (of data
        sequence number `sequence`)."""
        found = self.index.for_data_file(sequence, data_file, partition_key=data_file.partition)
        for delete_sequence, delete in self.by_data_file.get(data_file.file_path, ()):
            if delete_sequence >= sequence:
                found.add(delete)
        return found

    def equality_for(self, data_file: DataFile, sequence: int) -> list[DataFile]:
        """The equality deletes that apply to `data_file`. The spec's rule: an equality
        delete applies to data files of an older sequence number, in its partition
        (everywhere, when it was written unpartitioned)."""
        return [
            delete.file
            for delete in self.equality
            if delete.sequence > sequence
            and (
                delete.everywhere
                or (
                    delete.spec_id == (data_file.spec_id or 0)
                    and delete.partition == data_file.partition
                )
            )
        ]

    def for_data_file(self, data_file: DataFile, sequence: int, table_path: str) -> set[DataFile]:
        """What a preview applies to `data_file`: its position deletes and deletion
        vectors; NeedsSpark when an equality delete applies to it."""
        for delete in self.equality_for(data_file, sequence):
            raise NeedsSpark(
                f"The table {table_path} has equality deletes that apply to this read "
                f"({delete.file_path}); pyiceberg cannot apply equality deletes, so the table "
                "must be read through Spark"
            )
        return self.positional_for(data_file, sequence)


# -- reading --------------------------------------------------------------------------------


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
    parsed, snapshot, schema = _resolve(
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
    plan = _cached_plan(parsed, snapshot, schema, expression, io, table_path=table_path)
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
        _check_data_file(path)
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


def typed_rows(table: pa.Table, limit: int) -> tuple[tuple[Any, ...], ...]:
    """The first `limit` rows of an Arrow table as typed Python values, one tuple per row
    (what `Preview.rows` holds, see the module); `json_value` makes each JSON-safe."""
    table = table.slice(0, limit)
    columns = [_typed_values(column) for column in table.columns]
    return tuple(zip(*columns, strict=True)) if columns else ((),) * table.num_rows


def _typed_values(column: pa.ChunkedArray) -> list[Any]:
    kind = column.type
    if pa.types.is_timestamp(kind) and kind.unit == "ns":
        # Python's datetime holds microseconds: the nanoseconds are in json_rows().
        nanos = pc.cast(column, pa.int64()).to_pylist()
        return [_NanoTimestamp(value, kind.tz) if value is not None else None for value in nanos]
    try:
        return column.to_pylist(maps_as_pydicts="strict")
    except (TypeError, ValueError, KeyError):
        return column.to_pylist()  # maps with unhashable keys stay lists of pairs


class _NanoTimestamp(datetime.datetime):
    """A datetime (to the microsecond) that keeps its nanoseconds for JSON."""

    nanos: int

    def __new__(cls, nanos: int, tz: str | None) -> _NanoTimestamp:
        seconds, remainder = divmod(nanos, 1_000_000_000)
        moment = datetime.datetime(1970, 1, 1) + datetime.timedelta(
            seconds=seconds, microseconds=remainder // 1000
        )
        value = super().__new__(
            cls,
            moment.year,
            moment.month,
            moment.day,
            moment.hour,
            moment.minute,
            moment.second,
            moment.microsecond,
            tzinfo=datetime.UTC if tz else None,
        )
        value.nanos = remainder
        return value

    def iso(self) -> str:
        whole = datetime.datetime(
            self.year, self.month, self.day, self.hour, self.minute, self.second, tzinfo=self.tzinfo
        ).isoformat()  # "2024-01-02T03:04:05" and, with a zone, "+00:00"
        return f"{whole[:19]}.{self.nanos:09d}{whole[19:]}"


# -- JSON ---------------------------------------------------------------------------------


def json_value(value: Any) -> Any:
    """A typed value as JSON carries it exactly (see the module)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, _NanoTimestamp):
        return value.iso()
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, Mapping):
        return {_json_key(key): json_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        if value and all(isinstance(item, tuple) and len(item) == 2 for item in value):
            # A map pyarrow left as (key, value) pairs (unhashable keys).
            return {_json_key(key): json_value(item) for key, item in value}
        return [json_value(item) for item in value]
    return str(value)


def _json_key(key: Any) -> str:
    converted = json_value(key)
    return converted if isinstance(converted, str) else json.dumps(converted, sort_keys=True)


# -- files ----------------------------------------------------------------------------------


def _kind(data_file: DataFile) -> str:
    if data_file.content == DataFileContent.DATA:
        return DATA
    if data_file.content == DataFileContent.EQUALITY_DELETES:
        return EQUALITY_DELETES
    if data_file.file_format == FileFormat.PUFFIN:
        return DELETION_VECTOR
    return POSITION_DELETES


def _partition_pairs(
    data_file: DataFile, metadata: TableMetadata, schemas: Sequence[Schema]
) -> tuple[tuple[str, str], ...]:
    spec = metadata.specs().get(data_file.spec_id or 0)
    if spec is None or spec.is_unpartitioned():
        return ()
    pairs = []
    for position, partition_field in enumerate(spec.fields):
        value = data_file.partition[position] if position < len(data_file.partition) else None
        source_type = None
        for schema in schemas:
            try:
                source_type = schema.find_type(partition_field.source_id)
                break
            except ValueError:
                continue
        try:
            shown = partition_field.transform.to_human_string(source_type, value)
        except (TypeError, ValueError, AttributeError):
            shown = "null" if value is None else str(value)
        pairs.append((partition_field.name, shown))
    return tuple(pairs)


def files_at(
    metadata: TableMetadata | Mapping[str, Any],
    *,
    io: FileIO,
    table_path: str = "",
    snapshot_id: int | None = None,
    limit: int = DEFAULT_FILES_LIMIT,
) -> FileListing:
    """The data files and delete files of the current snapshot or `snapshot_id`: the first
    `limit` (data files first, in manifest order) and totals per kind over all of them.
    NotFound for an unknown snapshot (ClickHouse's words)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise InvalidInput("The number of files must be a whole number", field="limit")
    parsed, snapshot, schema = _resolve(
        metadata, table_path=table_path, snapshot_id=snapshot_id, timestamp_ms=None
    )
    totals = {kind: [0, 0, 0] for kind in FILE_KINDS}
    if snapshot is None:
        return FileListing(None, (), _totals(totals), False)
    manifests = sorted(_manifest_list(io, snapshot), key=lambda m: m.content.value)
    schemas = [schema, parsed.schema(), *parsed.schemas]
    files: list[ContentFile] = []
    for entries in _all_entries(io, manifests):
        for entry in entries:
            data_file = entry.data_file
            kind = _kind(data_file)
            total = totals[kind]
            total[0] += 1
            total[1] += data_file.file_size_in_bytes or 0
            total[2] += data_file.record_count or 0
            if len(files) < limit:
                files.append(
                    ContentFile(
                        kind=kind,
                        path=data_file.file_path,
                        format=str(data_file.file_format.value),
                        record_count=data_file.record_count,
                        size_bytes=data_file.file_size_in_bytes,
                        partition=_partition_pairs(data_file, parsed, schemas),
                        spec_id=data_file.spec_id or 0,
                        referenced_data_file=referenced_data_file(data_file),
                    )
                )
    count = sum(total[0] for total in totals.values())
    return FileListing(snapshot.snapshot_id, tuple(files), _totals(totals), count > len(files))


def _totals(totals: Mapping[str, list[int]]) -> Mapping[str, KindTotal]:
    return {kind: KindTotal(*figures) for kind, figures in totals.items()}
