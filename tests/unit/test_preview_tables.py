"""Iceberg tables written into a folder for the preview and metadata-cache tests (no tests
here): pyiceberg writes them, committed as Iceberg's Hadoop tables name their metadata
(`metadata/vN.metadata.json`), with no catalog service, no database and no Spark.

Each data file is written by the test itself (one `write` call, one Parquet file with
Iceberg field ids), so a test knows which rows every file holds and can count the files a
filter must skip without asking the code under test. pyiceberg has no API that writes
delete files: `add_position_deletes` and `add_equality_deletes` write the Parquet file and a
delete manifest with pyiceberg's own writers, which is what Spark's merge-on-read commits
contain; `add_deletion_vector` writes a Puffin deletion vector as Java's v3 writers do."""

from __future__ import annotations

import itertools
import json
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.avro.file import AvroOutputFile
from pyiceberg.catalog.noop import NoopCatalog
from pyiceberg.io.pyarrow import (
    PyArrowFileIO,
    compute_statistics_plan,
    data_file_statistics_from_parquet_metadata,
    parquet_path_to_id_mapping,
    schema_to_pyarrow,
)
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriterV2,
)
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.serializers import ToOutputFile
from pyiceberg.table import CommitTableResponse, Table
from pyiceberg.table.metadata import TableMetadata, new_table_metadata
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.table.update import TableRequirement, TableUpdate, update_table_metadata
from pyiceberg.table.update.snapshot import _FastAppendFiles
from pyiceberg.typedef import Record
from pyroaring import BitMap

IO = PyArrowFileIO()


class FolderCatalog(NoopCatalog):
    """Commits by writing the next `vN.metadata.json` beside the last one (Iceberg's
    HadoopTableOperations' names): enough of a catalog for pyiceberg's writers."""

    def __init__(self) -> None:
        super().__init__("folder")

    def commit_table(
        self,
        table: Table,
        requirements: tuple[TableRequirement, ...],
        updates: tuple[TableUpdate, ...],
    ) -> CommitTableResponse:
        for requirement in requirements:
            requirement.validate(table.metadata)
        metadata = update_table_metadata(
            table.metadata, updates, metadata_location=table.metadata_location
        )
        version = int(Path(table.metadata_location).name.split(".")[0].removeprefix("v")) + 1
        location = f"{metadata.location}/metadata/v{version}.metadata.json"
        # The table's own FileIO: the folder may be in an object store.
        ToOutputFile.table_metadata(metadata, table.io.new_output(location))
        return CommitTableResponse(metadata=metadata, metadata_location=location)


CATALOG = FolderCatalog()
_FILE_NUMBERS = itertools.count()


def create_table(
    location: Path | str,
    schema: Schema,
    spec: PartitionSpec = UNPARTITIONED_PARTITION_SPEC,
    *,
    properties: dict[str, str] | None = None,
) -> Table:
    """A new table at `location` with `metadata/v1.metadata.json` (no snapshot yet)."""
    location = str(location)
    metadata = new_table_metadata(
        schema, spec, UNSORTED_SORT_ORDER, location, {"format-version": "2", **(properties or {})}
    )
    metadata_location = f"{location}/metadata/v1.metadata.json"
    ToOutputFile.table_metadata(metadata, IO.new_output(metadata_location))
    return Table(("test", Path(location).name), metadata, metadata_location, IO, CATALOG)


def parquet_file(table: Table, rows: Sequence[dict[str, Any]], name: str | None = None) -> str:
    """A Parquet file of `rows` under the table's data folder, with the field ids of the
    table's current schema (as engines write them), in the order given."""
    schema = schema_to_pyarrow(table.schema(), include_field_ids=True)
    arrow = pa.Table.from_pylist(list(rows), schema=schema)
    path = f"{table.location()}/data/{name or f'{next(_FILE_NUMBERS):05d}'}.parquet"
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(arrow, path)
    return path


def write(
    table: Table, *files: Sequence[dict[str, Any]], names: Sequence[str] | None = None
) -> list[str]:
    """One append commit adding one data file per group of rows given (named `names`, or
    numbered); the partition of each file comes from its rows (all of a file's rows must
    share one partition). Returns the files' paths in the order given."""
    paths = [
        parquet_file(table, rows, names[number] if names else None)
        for number, rows in enumerate(files)
    ]
    with (
        table.transaction() as transaction,
        transaction.update_snapshot().fast_append() as append,
    ):
        for path, rows in zip(paths, files, strict=True):
            append.append_data_file(_data_file(transaction.table_metadata, path, rows))
    return paths


def _data_file(metadata: TableMetadata, path: str, rows: Sequence[dict[str, Any]]) -> DataFile:
    """What pyiceberg's `parquet_file_to_data_file` makes of the file (its column
    statistics from the Parquet footer), with the partition computed from the rows by
    pyiceberg's transforms (it infers only order-preserving ones from the statistics)."""
    parquet_metadata = pq.read_metadata(path)
    schema = metadata.schema()
    statistics = data_file_statistics_from_parquet_metadata(
        parquet_metadata=parquet_metadata,
        stats_columns=compute_statistics_plan(schema, metadata.properties),
        parquet_column_mapping=parquet_path_to_id_mapping(schema),
    )
    spec = metadata.spec()
    values = []
    for partition_field in spec.fields:
        source = schema.find_field(partition_field.source_id)
        transform = partition_field.transform.transform(source.field_type)
        found = {transform(_iceberg_value(item[source.name])) for item in rows}
        assert len(found) == 1, f"rows of one file span partitions {found}"
        values.append(found.pop())
    return DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=Record(*values),
        file_size_in_bytes=Path(path).stat().st_size,
        sort_order_id=None,
        spec_id=spec.spec_id,
        equality_ids=None,
        key_metadata=None,
        **statistics.to_serialized_dict(),
    )


def _iceberg_value(value: Any) -> Any:
    """A Python value as Iceberg's transforms take it (days, microseconds)."""
    import datetime

    from pyiceberg.utils.datetime import date_to_days, datetime_to_micros

    if isinstance(value, datetime.datetime):
        return datetime_to_micros(value)
    if isinstance(value, datetime.date):
        return date_to_days(value)
    return value


class _DeleteManifestWriter(ManifestWriterV2):
    """pyiceberg's v2 manifest writer, for a manifest of delete files."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class _V3DeleteManifestWriter(_DeleteManifestWriter):
    """Writes entries with the v3 data file fields (`referenced_data_file`, content offset
    and size), which pyiceberg's v2 writer leaves out."""

    def new_writer(self) -> AvroOutputFile[ManifestEntry]:
        return AvroOutputFile[ManifestEntry](
            output_file=self._output_file,
            file_schema=self._with_partition(3),
            record_schema=self._with_partition(3),
            schema_name="manifest_entry",
            metadata=self._meta,
        )


class _AddDeletes(_FastAppendFiles):
    """A commit that keeps every manifest and adds one manifest of delete files."""

    delete_files: list[DataFile]

    def _manifests(self) -> list[ManifestFile]:
        spec = self._transaction.table_metadata.spec()
        writer = _V3DeleteManifestWriter(
            spec, self.schema(), self.new_manifest_output(), self._snapshot_id, "deflate"
        )
        with writer:
            for delete_file in self.delete_files:
                writer.add(
                    ManifestEntry.from_args(
                        status=ManifestEntryStatus.ADDED,
                        snapshot_id=self._snapshot_id,
                        sequence_number=None,
                        file_sequence_number=None,
                        data_file=delete_file,
                    )
                )
        return [*super()._manifests(), writer.to_manifest_file()]


def _commit_deletes(table: Table, delete_files: list[DataFile]) -> None:
    with table.transaction() as transaction:
        producer = _AddDeletes(operation=Operation.DELETE, transaction=transaction, io=IO)
        producer.delete_files = delete_files
        producer.commit()


def _delete_file(
    table: Table,
    path: str,
    content: DataFileContent,
    arrow: pa.Table,
    partition: Record,
    **extra: Any,
) -> DataFile:
    pq.write_table(arrow, path)
    data_file = DataFile.from_args(
        _table_format_version=3,
        content=content,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=partition,
        record_count=arrow.num_rows,
        file_size_in_bytes=Path(path).stat().st_size,
        **extra,
    )
    data_file.spec_id = table.spec().spec_id
    return data_file


def add_position_deletes(
    table: Table, deletes: dict[str, Iterable[int]], *, partition: Record | None = None
) -> str:
    """One commit adding one position delete file that deletes, in each data file named, the
    rows at the positions given (0-based, as the spec counts them). Returns its path."""
    pairs = sorted(
        (path, position) for path, positions in deletes.items() for position in positions
    )
    arrow = pa.table(
        {
            "file_path": pa.array([path for path, _ in pairs], pa.string()),
            "pos": pa.array([position for _, position in pairs], pa.int64()),
        }
    )
    path = f"{table.location()}/data/deletes-{next(_FILE_NUMBERS):05d}.parquet"
    delete_file = _delete_file(
        table, path, DataFileContent.POSITION_DELETES, arrow, partition or Record()
    )
    _commit_deletes(table, [delete_file])
    return path


def add_equality_deletes(
    table: Table, column: str, values: Sequence[Any], *, partition: Record | None = None
) -> str:
    """One commit adding one equality delete file on `column` (rows whose value is among
    `values` are deleted). Returns its path."""
    field = table.schema().find_field(column)
    arrow = pa.table({column: pa.array(list(values))})
    path = f"{table.location()}/data/eq-deletes-{next(_FILE_NUMBERS):05d}.parquet"
    delete_file = _delete_file(
        table,
        path,
        DataFileContent.EQUALITY_DELETES,
        arrow,
        partition or Record(),
        equality_ids=[field.field_id],
    )
    _commit_deletes(table, [delete_file])
    return path


_DV_MAGIC = b"\xd1\xd3\x39\x64"
_PUFFIN_MAGIC = b"PFA1"


def add_deletion_vector(
    table: Table, data_file: str, positions: Iterable[int], *, partition: Record | None = None
) -> str:
    """One commit adding a deletion vector: a Puffin file with one `deletion-vector-v1`
    blob (Iceberg's framing: big-endian length, magic, portable 64-bit Roaring bitmap,
    big-endian CRC-32) for `data_file`, in a manifest entry that names its data file, as
    Java's v3 writers make them (here in a v2 table: pyiceberg writes no v3 snapshots).
    Returns its path."""
    positions = sorted(positions)
    bitmap = (1).to_bytes(8, "little") + (0).to_bytes(4, "little") + BitMap(positions).serialize()
    framed = _DV_MAGIC + bitmap
    blob = len(framed).to_bytes(4, "big") + framed + zlib.crc32(framed).to_bytes(4, "big")
    footer = json.dumps(
        {
            "blobs": [
                {
                    "type": "deletion-vector-v1",
                    "fields": [2147483645],
                    "snapshot-id": -1,
                    "sequence-number": -1,
                    "offset": len(_PUFFIN_MAGIC),
                    "length": len(blob),
                    "properties": {
                        "referenced-data-file": data_file,
                        "cardinality": str(len(positions)),
                    },
                }
            ]
        }
    ).encode()
    path = f"{table.location()}/data/dv-{next(_FILE_NUMBERS):05d}.puffin"
    Path(path).write_bytes(
        _PUFFIN_MAGIC + blob + _PUFFIN_MAGIC + footer
        + len(footer).to_bytes(4, "little") + bytes(4) + _PUFFIN_MAGIC
    )  # fmt: skip
    delete_file = DataFile.from_args(
        _table_format_version=3,
        content=DataFileContent.POSITION_DELETES,
        file_path=path,
        file_format=FileFormat.PUFFIN,
        partition=partition or Record(),
        record_count=len(positions),
        file_size_in_bytes=Path(path).stat().st_size,
        referenced_data_file=data_file,
        content_offset=len(_PUFFIN_MAGIC),
        content_size_in_bytes=len(blob),
    )
    delete_file.spec_id = table.spec().spec_id
    _commit_deletes(table, [delete_file])
    return path
