"""Writing rows into the catalog's tables with pyiceberg, committed by the catalog itself.

pyiceberg writes the Parquet data files, the manifests and the manifest list, and says what
the commit is (its requirements and updates); `CommitCatalog` is the pyiceberg `Catalog`
whose `commit_table` hands those to the catalog's one commit path as the REST protocol's
JSON, so `Table.append(...)` and `create_table_transaction(...)` work unchanged and a lost
race is the catalog's own CommitConflict. What loads, stages and commits is passed in
(`catalog.services.table_writes` binds them to the services), so this module imports no
Django.

Every file pyiceberg writes goes through a `RecordingFileIO`: when a write fails before its
commit, `discard_written` deletes exactly those files, so nothing half-written stays."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.io import FileIO, InputFile, OutputFile
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionSpec
from pyiceberg.schema import Schema, assign_fresh_schema_ids
from pyiceberg.table import (
    CommitTableResponse,
    CreateTableTransaction,
    StagedTable,
    Table,
    TableProperties,
    Transaction,
)
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER, SortOrder
from pyiceberg.table.update import TableRequirement, TableUpdate
from pyiceberg.typedef import EMPTY_DICT, Identifier, Properties

from catalog.core.errors import CatalogError

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Loaded:
    """A table as the catalog holds it: its metadata and the file that holds it."""

    metadata: TableMetadata
    metadata_location: str


#: (namespace, name) -> the table; raises the catalog's NotFound when there is none.
LoadFn = Callable[[str, str], Loaded]
#: (namespace, name, schema, spec, order, properties) -> what a create would make (nothing
#: written): the catalog's location, fresh ids and default properties.
StageFn = Callable[[str, str, Schema, PartitionSpec, SortOrder, Mapping[str, str]], TableMetadata]
#: (namespace, name, requirements, updates) -> the table after the commit; the REST
#: protocol's JSON objects in, the catalog's CatalogError out.
CommitFn = Callable[[str, str, list[dict[str, Any]], list[dict[str, Any]]], Loaded]


class RecordingFileIO(FileIO):
    """A FileIO that remembers every file it opened for writing."""

    def __init__(self, inner: FileIO) -> None:
        super().__init__(properties=inner.properties)
        self._inner = inner
        self.written: list[str] = []

    def new_input(self, location: str) -> InputFile:
        return self._inner.new_input(location)

    def new_output(self, location: str) -> OutputFile:
        self.written.append(location)
        return self._inner.new_output(location)

    def delete(self, location: str | InputFile | OutputFile) -> None:
        self._inner.delete(location)


def as_json(model: Any) -> dict[str, Any]:
    """A pyiceberg model as the JSON its REST client sends (by alias, without nulls)."""
    return json.loads(model.model_dump_json())


class CommitCatalog(Catalog):
    """pyiceberg's view of one catalog, for writing: load, create (with its first rows in the
    same commit) and commit tables. Everything else a catalog does goes through the
    catalog's own services, not through this class."""

    def __init__(
        self,
        name: str,
        *,
        load: LoadFn,
        stage: StageFn,
        commit: CommitFn,
        io: FileIO,
    ) -> None:
        super().__init__(name)
        self._load = load
        self._stage = stage
        self._commit = commit
        self.io = RecordingFileIO(io)
        #: Set when a commit failed in a way that leaves its outcome unknown (anything but
        #: the catalog's own refusal): the files written may be referenced, so they stay.
        self.outcome_unknown = False

    # -- what writing needs ------------------------------------------------------------------

    @staticmethod
    def _parts(identifier: str | Identifier) -> tuple[str, str]:
        parts = Catalog.identifier_to_tuple(identifier)
        if len(parts) < 2:
            raise ValueError(f"A table identifier has a namespace and a name: {identifier!r}")
        return ".".join(parts[:-1]), parts[-1]

    def load_table(self, identifier: str | Identifier) -> Table:
        namespace, name = self._parts(identifier)
        loaded = self._load(namespace, name)
        return Table(
            identifier=(*namespace.split("."), name),
            metadata=loaded.metadata,
            metadata_location=loaded.metadata_location,
            io=self.io,
            catalog=self,
        )

    def table_exists(self, identifier: str | Identifier) -> bool:
        from catalog.core.errors import NotFound

        try:
            self.load_table(identifier)
        except NotFound:
            return False
        return True

    def create_table_transaction(
        self,
        identifier: str | Identifier,
        schema: Schema | pa.Schema,
        location: str | None = None,
        partition_spec: PartitionSpec = UNPARTITIONED_PARTITION_SPEC,
        sort_order: SortOrder = UNSORTED_SORT_ORDER,
        properties: Properties = EMPTY_DICT,
    ) -> CreateTableTransaction:
        """A table that exists once its transaction commits, with whatever the transaction
        wrote (`txn.append(...)`): the table and its first snapshot are one commit."""
        if location is not None:
            raise ValueError("Tables written here live at the catalog's default location")
        namespace, name = self._parts(identifier)
        version = int(
            properties.get(TableProperties.FORMAT_VERSION, TableProperties.DEFAULT_FORMAT_VERSION)
        )
        iceberg_schema = self._convert_schema_if_needed(schema, version)
        if isinstance(schema, pa.Schema):
            iceberg_schema = assign_fresh_schema_ids(iceberg_schema)
        metadata = self._stage(
            namespace, name, iceberg_schema, partition_spec, sort_order, dict(properties)
        )
        staged = StagedTable(
            identifier=(*namespace.split("."), name),
            metadata=metadata,
            metadata_location="",
            io=self.io,
            catalog=self,
        )
        return CreateTableTransaction(staged)

    def create_table(self, *args: Any, **kwargs: Any) -> Table:
        """The table `create_table_transaction` (the same arguments) makes, committed at
        once, with no rows."""
        return self.create_table_transaction(*args, **kwargs).commit_transaction()

    def commit_table(
        self,
        table: Table,
        requirements: tuple[TableRequirement, ...],
        updates: tuple[TableUpdate, ...],
    ) -> CommitTableResponse:
        namespace, name = self._parts(table.name())
        try:
            loaded = self._commit(
                namespace, name, [as_json(r) for r in requirements], [as_json(u) for u in updates]
            )
        except CatalogError:
            raise  # refused: nothing was committed
        except BaseException:
            self.outcome_unknown = True
            raise
        # Referenced now: no longer this write's to discard.
        self.io.written.clear()
        return CommitTableResponse(
            metadata=loaded.metadata, metadata_location=loaded.metadata_location
        )

    @staticmethod
    def _delete_old_metadata(io: FileIO, base: TableMetadata, metadata: TableMetadata) -> None:
        """The catalog's kernel deletes superseded metadata files once a commit is durable."""

    # -- the rest of pyiceberg's Catalog: not this class's job ---------------------------------

    def _unsupported(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("CommitCatalog only loads, creates and commits tables")

    view_exists = namespace_exists = register_table = drop_table = purge_table = _unsupported
    rename_table = create_namespace = drop_namespace = list_tables = list_namespaces = _unsupported
    list_views = load_view = load_namespace_properties = update_namespace_properties = _unsupported
    register_view = drop_view = create_view = _unsupported

    def supports_server_side_planning(self) -> bool:
        return False

    # -- cleaning up -------------------------------------------------------------------------

    def discard_written(self) -> int:
        """Delete every file written through this catalog (a failed write's data files,
        manifests and manifest list, none of which a commit references); returns how many.
        Missing files are skipped: a writer may fail before it creates its file."""
        deleted = 0
        for path in self.io.written:
            try:
                self.io.delete(path)
            except FileNotFoundError:
                continue
            except OSError as error:
                logger.warning(
                    "A file of a failed write could not be deleted: %s (%s)", path, error
                )
                continue
            deleted += 1
        self.io.written.clear()
        return deleted


@contextmanager
def all_or_nothing(catalog: CommitCatalog) -> Iterator[CommitCatalog]:
    """Run a write; if it fails before its commit (or the catalog refused the commit), delete
    the files it wrote. When the outcome of a commit is unknown they stay: they may be the
    table's now (an orphan is safer than a missing file)."""
    try:
        yield catalog
    except BaseException:
        if not catalog.outcome_unknown:
            catalog.discard_written()
        raise


#: Rows are written to Parquet files of about this many bytes of Arrow data each (pyiceberg
#: holds one file's rows in memory while writing it; its default is 512 MiB).
WRITE_CHUNK_BYTES = 64 * 1024 * 1024


def _chunks(
    batches: Iterator[pa.RecordBatch] | Sequence[pa.RecordBatch], schema: pa.Schema, size: int
) -> Iterator[pa.Table]:
    """The batches gathered into tables of about `size` bytes each."""
    chunk: list[pa.RecordBatch] = []
    held = 0
    for batch in batches:
        chunk.append(batch)
        held += batch.nbytes
        if held >= size:
            yield pa.Table.from_batches(chunk, schema)
            chunk, held = [], 0
    if chunk:
        yield pa.Table.from_batches(chunk, schema)


def append_batches(
    transaction: Transaction,
    io: FileIO,
    schema: pa.Schema,
    batches: Iterator[pa.RecordBatch] | Sequence[pa.RecordBatch],
    *,
    chunk_bytes: int | None = None,
    snapshot_properties: Mapping[str, str] = EMPTY_DICT,
) -> None:
    """Append a stream of record batches to the transaction's table as one snapshot, holding
    at most about `chunk_bytes` (default WRITE_CHUNK_BYTES) of them in memory: pyiceberg's
    own writer, given the rows a chunk at a time (its streaming append takes no partitioned
    table, and bins by the table's target file size, 512 MiB of Arrow data by default)."""
    import itertools

    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    size = chunk_bytes or WRITE_CHUNK_BYTES
    metadata = transaction.table_metadata
    writing = metadata.model_copy(
        update={
            "properties": {
                **metadata.properties,
                TableProperties.WRITE_TARGET_FILE_SIZE_BYTES: str(size),
            }
        }
    )
    counter = itertools.count(0)  # file numbers go on across chunks
    with transaction.update_snapshot(
        snapshot_properties=dict(snapshot_properties)
    ).fast_append() as append_files:
        for chunk in _chunks(batches, schema, size):
            for data_file in _dataframe_to_data_files(
                table_metadata=writing,
                write_uuid=append_files.commit_uuid,
                df=chunk,
                io=io,
                counter=counter,
            ):
                append_files.append_data_file(data_file)
