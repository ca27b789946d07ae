"""The files of a table's snapshot, for browsing: its data files and delete files (position
delete files, v3 deletion vectors, equality delete files), the first of them listed with
their sizes, record counts and partitions, and totals per kind over all of them
(`files_at`). Django-free."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyiceberg.io import FileIO
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata

from catalog.core.errors import InvalidInput
from catalog.core.manifests import all_entries, manifest_list
from catalog.core.metadata_cache import referenced_data_file
from catalog.core.read_state import resolve

#: Most files `files_at` lists (its totals always count every file).
DEFAULT_FILES_LIMIT = 1000

DATA = "data"
POSITION_DELETES = "position_deletes"
DELETION_VECTOR = "deletion_vector"
EQUALITY_DELETES = "equality_deletes"
FILE_KINDS = (DATA, POSITION_DELETES, DELETION_VECTOR, EQUALITY_DELETES)


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
    parsed, snapshot, schema = resolve(
        metadata, table_path=table_path, snapshot_id=snapshot_id, timestamp_ms=None
    )
    totals = {kind: [0, 0, 0] for kind in FILE_KINDS}
    if snapshot is None:
        return FileListing(None, (), _totals(totals), False)
    manifests = sorted(manifest_list(io, snapshot), key=lambda m: m.content.value)
    schemas = [schema, parsed.schema(), *parsed.schemas]
    files: list[ContentFile] = []
    for entries in all_entries(io, manifests):
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
