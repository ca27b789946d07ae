"""A purge deletes the files its table's own metadata names, inside the table's location, and
nothing else. Real tables are written by pyiceberg into a temporary local warehouse (beside
another table, a view's folder and stray files); every file under the temporary folder is
hashed before and after, so "nothing else changed" is checked byte for byte."""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.noop import NoopCatalog
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestWriterV2,
    write_manifest_list,
)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableResponse, Table
from pyiceberg.table.metadata import TableMetadata, new_table_metadata
from pyiceberg.table.snapshots import MetadataLogEntry, Operation, Snapshot, Summary
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER
from pyiceberg.table.statistics import PartitionStatisticsFile, StatisticsFile
from pyiceberg.table.update import (
    AddSnapshotUpdate,
    SetPartitionStatisticsUpdate,
    SetSnapshotRefUpdate,
    SetStatisticsUpdate,
    TableRequirement,
    TableUpdate,
    update_table_metadata,
)
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import LongType, NestedField, StringType

from catalog.core import metadata_io, purge
from catalog.core.errors import InvalidInput

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "region", StringType(), required=False),
)
BY_REGION = PartitionSpec(
    PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region")
)
# Partition values pyiceberg writes with quote_plus: "a/b" -> "region=a%2Fb", "%2e%2e" ->
# "region=%252e%252e". Real data file paths hold '%', and a purge must still delete them.
ROWS = pa.table(
    {
        "id": pa.array([1, 2, 3, 4], pa.int64()),
        "region": pa.array(["eu", "a/b", "%2e%2e", "x y"]),
    }
)


class FolderCatalog(NoopCatalog):
    """Just enough of a catalog for pyiceberg to write real tables into a local folder: a
    commit applies the updates and writes the next metadata file, as the app's kernel does."""

    def __init__(self) -> None:
        super().__init__("folder")

    def create(self, location: Path, spec: PartitionSpec = BY_REGION) -> Table:
        metadata = new_table_metadata(SCHEMA, spec, UNSORTED_SORT_ORDER, str(location), {})
        path = metadata_io.new_metadata_location(metadata.location, None)
        metadata_io.write_json(path, metadata.model_dump_json(by_alias=True, exclude_none=True))
        return Table((location.parent.name, location.name), metadata, path, _io(), self)

    def commit_table(
        self,
        table: Table,
        requirements: tuple[TableRequirement, ...],
        updates: tuple[TableUpdate, ...],
    ) -> CommitTableResponse:
        for requirement in requirements:
            requirement.validate(table.metadata)
        metadata = update_table_metadata(
            table.metadata, tuple(updates), metadata_location=table.metadata_location
        )
        path = metadata_io.new_metadata_location(metadata.location, table.metadata_location)
        metadata_io.write_json(path, metadata.model_dump_json(by_alias=True, exclude_none=True))
        return CommitTableResponse(metadata=metadata, metadata_location=path)

    def commit(self, table: Table, *updates: TableUpdate) -> None:
        response = self.commit_table(table, (), updates)
        table.metadata, table.metadata_location = response.metadata, response.metadata_location


def _io():
    return metadata_io.file_io("/")


class DeleteManifestWriter(ManifestWriterV2):
    """pyiceberg 0.12 writes data manifests only; a delete manifest differs by its content."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


def content_file(
    path: str | Path,
    content: DataFileContent = DataFileContent.DATA,
    file_format: FileFormat = FileFormat.PARQUET,
    partition: Record | None = None,
) -> DataFile:
    data_file = DataFile.from_args(
        content=content,
        file_path=str(path),
        file_format=file_format,
        partition=partition if partition is not None else Record("eu"),
        record_count=1,
        file_size_in_bytes=1,
        equality_ids=[1] if content == DataFileContent.EQUALITY_DELETES else None,
    )
    data_file.spec_id = 0
    return data_file


def add_snapshot(
    catalog: FolderCatalog,
    table: Table,
    files: Iterable[DataFile],
    *,
    deletes: bool,
    manifest_list: str | None = None,
) -> None:
    """Commit a snapshot whose manifest list holds the current snapshot's manifests and one
    new manifest of `files` (or, with `manifest_list`, a snapshot naming that list as is)."""
    snapshot_id = uuid.uuid4().int & (1 << 62) - 1
    parent = table.metadata.current_snapshot()
    sequence_number = table.metadata.next_sequence_number()
    if manifest_list is None:
        folder = f"{table.location()}/metadata"
        manifest_path = f"{folder}/{uuid.uuid4()}-m0.avro"
        writer_class = DeleteManifestWriter if deletes else ManifestWriterV2
        writer = writer_class(
            BY_REGION, SCHEMA, table.io.new_output(manifest_path), snapshot_id, "null"
        )
        with writer:
            for data_file in files:
                writer.add_entry(
                    ManifestEntry.from_args(
                        status=ManifestEntryStatus.ADDED,
                        snapshot_id=snapshot_id,
                        sequence_number=None,
                        file_sequence_number=None,
                        data_file=data_file,
                    )
                )
        manifest_list = f"{folder}/snap-{snapshot_id}-0-{uuid.uuid4()}.avro"
        with write_manifest_list(
            2,
            table.io.new_output(manifest_list),
            snapshot_id,
            parent.snapshot_id if parent else None,
            sequence_number,
            "null",
        ) as list_writer:
            kept = parent.manifests(table.io) if parent else []
            list_writer.add_manifests([*kept, writer.to_manifest_file()])
    snapshot = Snapshot(
        snapshot_id=snapshot_id,
        parent_snapshot_id=parent.snapshot_id if parent else None,
        sequence_number=sequence_number,
        timestamp_ms=int(time.time() * 1000),
        manifest_list=manifest_list,
        summary=Summary(Operation.OVERWRITE if deletes else Operation.APPEND),
        schema_id=table.metadata.current_schema_id,
    )
    catalog.commit(
        table,
        AddSnapshotUpdate(snapshot=snapshot),
        SetSnapshotRefUpdate(ref_name="main", type="branch", snapshot_id=snapshot_id),
    )


def write(path: Path, data: bytes = b"bytes") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def fingerprint(root: Path) -> dict[str, str]:
    """Every entry under `root`: files by SHA-256, symbolic links by target (never followed),
    folders as markers, so a removed empty folder shows too."""
    state: dict[str, str] = {}
    for folder, folders, files in os.walk(root, followlinks=False):
        for name in folders + files:
            path = Path(folder, name)
            relative = str(path.relative_to(root))
            if path.is_symlink():
                state[relative] = f"link -> {os.readlink(path)}"
            elif path.is_dir():
                state[relative] = "folder"
            elif not path.is_file():
                state[relative] = "special"  # a FIFO: reading it would block
            else:
                state[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
    return state


@pytest.fixture
def catalog() -> FolderCatalog:
    return FolderCatalog()


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    """A warehouse with the table to purge, a neighbour table, a view's folder, stray files,
    and a folder outside the warehouse."""
    wh = tmp_path / "wh"
    write(tmp_path / "outside" / "precious.txt", b"outside the warehouse")
    write(wh / "root.txt", b"in the warehouse root")
    write(wh / "ns" / "reader" / "metadata" / f"00001-{uuid.uuid4()}.metadata.json", b"{}")
    write(wh / "ns" / "doomed_sibling.txt", b"beside the table")
    write(wh / "ns" / "doomedx" / "file.parquet", b"a folder whose name starts the same")
    return wh


def real_table(catalog: FolderCatalog, location: Path) -> Table:
    """Appends twice, then a row delete (so a manifest holds DELETED entries)."""
    table = catalog.create(location)
    table.append(ROWS)
    table.append(ROWS)
    table.delete("region == 'eu'")
    return table


def local_paths(paths: Iterable[str]) -> set[Path]:
    return {Path(metadata_io.normal_form(path)) for path in paths}


def purge_doomed(table: Table, warehouse: Path) -> purge.PurgeResult:
    location = purge.check_purgeable(table.metadata.location, str(warehouse))
    return purge.purge_table_files(
        table.metadata, table.metadata_location, table_location=location, warehouse=str(warehouse)
    )


def test_a_purge_deletes_exactly_the_files_the_tables_metadata_names_and_nothing_else(
    catalog: FolderCatalog, warehouse: Path, tmp_path: Path
) -> None:
    doomed_folder = warehouse / "ns" / "doomed"
    doomed = real_table(catalog, doomed_folder)
    neighbour = real_table(catalog, warehouse / "ns" / "neighbour")
    # Delete files of every kind, and statistics, in the table's own folders.
    data = doomed_folder / "data" / "region=eu"
    deletes = [
        content_file(write(data / "pos-deletes.parquet"), DataFileContent.POSITION_DELETES),
        content_file(write(data / "eq-deletes.parquet"), DataFileContent.EQUALITY_DELETES),
        content_file(
            write(data / "dv.puffin"), DataFileContent.POSITION_DELETES, FileFormat.PUFFIN
        ),
    ]
    add_snapshot(catalog, doomed, deletes, deletes=True)
    snapshot_id = doomed.metadata.current_snapshot_id
    stats = write(doomed_folder / "metadata" / "stats.puffin")
    partition_stats = write(doomed_folder / "metadata" / "partition-stats.parquet")
    catalog.commit(
        doomed,
        SetStatisticsUpdate(
            statistics=StatisticsFile(
                snapshot_id=snapshot_id,
                statistics_path=str(stats),
                file_size_in_bytes=5,
                file_footer_size_in_bytes=1,
                blob_metadata=[],
            )
        ),
        SetPartitionStatisticsUpdate(
            partition_statistics=PartitionStatisticsFile(
                snapshot_id=snapshot_id, statistics_path=str(partition_stats), file_size_in_bytes=5
            )
        ),
    )
    # Files inside the table's folder that its metadata does not name.
    write(doomed_folder / "notes.txt", b"not the table's")
    write(doomed_folder / "data" / "region=eu" / "orphan.parquet", b"left by a failed writer")

    referenced = purge.referenced_files(doomed.metadata, doomed.metadata_location)
    named = local_paths(referenced)
    assert {p.suffix for p in named} >= {".json", ".avro", ".parquet", ".puffin"}
    assert {stats, partition_stats} | {Path(d.file_path) for d in deletes} <= named
    assert any("%25" in str(p) for p in named) and any("%2F" in str(p) for p in named)
    assert (
        len([p for p in named if p.name.endswith(".metadata.json")])
        == len(doomed.metadata.metadata_log) + 1
    )
    assert all(p.exists() and doomed_folder in p.parents for p in named)
    before = fingerprint(tmp_path)

    result = purge_doomed(doomed, warehouse)

    after = fingerprint(tmp_path)
    assert (result.deleted, result.missing) == (len(named), 0)
    assert (result.outside, result.unreadable, result.kept, result.failed) == ([], [], [], [])
    assert set(after) <= set(before), "nothing was created"
    assert all(after[k] == before[k] for k in after), "nothing left was changed"
    gone = set(before) - set(after)
    gone_files = {k for k in gone if before[k] != "folder"}
    assert gone_files == {str(p.relative_to(tmp_path)) for p in named}
    gone_folders = {k for k in gone if before[k] == "folder"}
    assert gone_folders == {
        "wh/ns/doomed/metadata",
        "wh/ns/doomed/data/region=a%2Fb",
        "wh/ns/doomed/data/region=%252e%252e",
        "wh/ns/doomed/data/region=x+y",
    }
    assert result.removed_folders == len(gone_folders)
    # The stray files keep their folders; the table's folder stays because of them.
    assert sorted(str(p.relative_to(doomed_folder)) for p in doomed_folder.rglob("*")) == [
        "data",
        "data/region=eu",
        "data/region=eu/orphan.parquet",
        "notes.txt",
    ]
    assert neighbour.scan().to_arrow().num_rows == 6


def test_a_table_folder_left_empty_is_removed_but_never_the_folder_above_it(
    catalog: FolderCatalog, warehouse: Path
) -> None:
    doomed = real_table(catalog, warehouse / "ns" / "doomed")

    result = purge_doomed(doomed, warehouse)

    assert result.deleted > 0 and result.removed_folders > 0
    assert not (warehouse / "ns" / "doomed").exists()
    assert (warehouse / "ns").is_dir() and (warehouse / "ns" / "doomed_sibling.txt").exists()


def test_an_empty_folder_the_purge_did_not_empty_is_left_and_keeps_the_table_folder(
    catalog: FolderCatalog, warehouse: Path
) -> None:
    doomed = real_table(catalog, warehouse / "ns" / "doomed")
    (warehouse / "ns" / "doomed" / "someone's").mkdir()

    purge_doomed(doomed, warehouse)

    assert sorted(p.name for p in (warehouse / "ns" / "doomed").iterdir()) == ["someone's"]


def test_files_the_metadata_names_outside_the_table_or_through_escapes_are_kept(
    catalog: FolderCatalog, warehouse: Path, tmp_path: Path
) -> None:
    """Hostile metadata: it names another table's files, files outside the warehouse, the
    same through '..', percent-escapes (once and twice encoded), file: URIs, a symbolic link
    out of the table, a folder, a neighbour whose name starts the same; and a manifest list
    of the neighbour. Each is kept and reported, and nothing but the table's own files goes."""
    doomed_folder = warehouse / "ns" / "doomed"
    doomed = real_table(catalog, doomed_folder)
    neighbour = real_table(catalog, warehouse / "ns" / "neighbour")
    victim = next((warehouse / "ns" / "neighbour" / "data").rglob("*.parquet"))
    precious = tmp_path / "outside" / "precious.txt"
    (doomed_folder / "data" / "link").symlink_to(tmp_path / "outside")
    d = str(doomed_folder)
    relative_victim = victim.relative_to(warehouse / "ns")
    hostile = [
        str(victim),
        str(precious),
        f"{d}/../neighbour/{relative_victim.relative_to('neighbour')}",
        f"{d}/%2e%2e/{relative_victim}",
        f"{d}/%2E%2e/{relative_victim}",
        f"{d}/.%2e/{relative_victim}",
        f"{d}/data/%252e%252e/%252e%252e/%252e%252e/{relative_victim}",
        f"{d}/data/..%2F..%2F..%2F{relative_victim}",
        f"{d}/data/..%5C..%5C..%5C{relative_victim}",
        f"file://{d}/%2e%2e/%2e%2e/%2e%2e/outside/precious.txt",
        f"file://localhost{d}/../../../outside/precious.txt",
        f"file://otherhost{d}/data/x.parquet",
        f"{d}/data/link/precious.txt",
        f"{d}/data/%00/x.parquet",
        f"{d}/data/\x00x.parquet",
        f"{d}/data/x.parquet?/../../../../outside/precious.txt",
        f"{d}/data/x%3F/../../../../../outside/precious.txt",
        f"{d}/data",
        d,
        f"{d}x/file.parquet",
        str(warehouse / "ns" / "doomedx" / "file.parquet"),
    ]
    add_snapshot(catalog, doomed, [content_file(p) for p in hostile], deletes=False)
    add_snapshot(
        catalog, doomed, [], deletes=False, manifest_list=neighbour.current_snapshot().manifest_list
    )
    metadata = doomed.metadata.model_copy(
        update={
            "metadata_log": [
                *doomed.metadata.metadata_log,
                MetadataLogEntry(metadata_file=neighbour.metadata_location, timestamp_ms=1),
            ],
            "statistics": [
                StatisticsFile(
                    snapshot_id=doomed.metadata.current_snapshot_id,
                    statistics_path=f"{d}/%2e%2e/%2e%2e/%2e%2e/outside/precious.txt",
                    file_size_in_bytes=1,
                    file_footer_size_in_bytes=1,
                    blob_metadata=[],
                )
            ],
        }
    )
    before = fingerprint(tmp_path)

    result = purge.purge_table_files(
        metadata, doomed.metadata_location, table_location=d, warehouse=str(warehouse)
    )

    after = fingerprint(tmp_path)
    changed = {k for k in before if after.get(k) != before[k]}
    assert all(k.startswith("wh/ns/doomed/") for k in changed), sorted(changed)
    assert set(after) <= set(before)
    assert precious.read_bytes() == b"outside the warehouse"
    assert neighbour.scan().to_arrow().num_rows == 6
    assert (doomed_folder / "data" / "link").is_symlink()
    for path in [*hostile, neighbour.metadata_location, neighbour.current_snapshot().manifest_list]:
        if path != f"{d}/data":
            assert path in result.outside, path
    assert neighbour.current_snapshot().manifest_list in result.unreadable
    # The data folder was named as a file: deleting it failed, and nothing in it went but
    # the table's own files.
    assert f"{d}/data" in result.failed
    assert result.deleted > 0


def test_a_manifest_that_cannot_be_read_is_kept_with_what_leads_to_it(
    catalog: FolderCatalog, warehouse: Path, tmp_path: Path
) -> None:
    doomed = real_table(catalog, warehouse / "ns" / "doomed")
    manifests = doomed.current_snapshot().manifests(doomed.io)
    broken = Path(manifests[0].manifest_path)
    lists_naming_it = [
        s.manifest_list
        for s in doomed.metadata.snapshots
        if str(broken) in {m.manifest_path for m in s.manifests(doomed.io)}
    ]
    broken.write_bytes(b"not avro")
    fifo = warehouse / "ns" / "doomed" / "metadata" / "fifo.avro"
    os.mkfifo(fifo)  # opening it would block the purge for ever
    add_snapshot(catalog, doomed, [], deletes=False, manifest_list=str(fifo))
    before = fingerprint(tmp_path)

    result = purge_doomed(doomed, warehouse)

    assert set(result.unreadable) == {str(broken), str(fifo)}
    assert str(broken) in result.kept and doomed.metadata_location in result.kept
    assert broken.exists() and Path(doomed.metadata_location).exists()
    assert lists_naming_it and all(Path(p).exists() for p in lists_naming_it)
    after = fingerprint(tmp_path)
    assert all(after.get(k) == v for k, v in before.items() if not k.startswith("wh/ns/doomed/"))


@pytest.mark.parametrize(
    ("path", "owned"),
    [
        ("{t}/data/region=a%2Fb/f.parquet", "{t}/data/region=a%2Fb/f.parquet"),
        ("{t}/data/region=%252e%252e/f.parquet", "{t}/data/region=%252e%252e/f.parquet"),
        ("file://{t}/data/f.parquet", "{t}/data/f.parquet"),
        ("file:{t}//data/./f.parquet", "{t}/data/f.parquet"),
        ("{t}/data/region=%2F..%2F..%2F..%2Fx/f.parquet", None),
        ("{t}/%2e%2e/other/f.parquet", None),
        ("{t}/data/%2e%2e/%2e%2e/other/f.parquet", None),
        ("{t}/data/%25252e%25252e/%25252e%25252e/f", None),
        ("{t}/data/％２ｅ％２ｅ/％２ｅ％２ｅ/％２ｅ％２ｅ/f", None),
        ("{t}/data/％２ｅ％２ｅ/f", "{t}/data/％２ｅ％２ｅ/f"),
        ("{t}/data/．．/．．/f", None),
        ("{t}/data/...", None),
        ("{t}", None),
        ("{t}/", None),
        ("{t}/.", None),
        ("{t}x/f.parquet", None),
        ("relative/f.parquet", None),
        (" {t}/data/f.parquet", None),
    ],
)
def test_a_path_is_owned_only_if_every_reading_lies_strictly_inside_the_table(
    tmp_path: Path, path: str, owned: str | None
) -> None:
    table = str(tmp_path / "wh" / "ns" / "t")
    assert purge.owned_path(path.format(t=table), table) == (
        owned.format(t=table) if owned else None
    )


def test_object_store_paths_are_owned_only_as_spelled() -> None:
    table = "s3://bucket/wh/ns/t"
    assert purge.owned_path(f"{table}/data/f.parquet", table) == f"{table}/data/f.parquet"
    assert purge.owned_path(f"{table}/data//f.parquet", table) is None
    assert purge.owned_path(f"{table}/./data/f.parquet", table) is None
    assert purge.owned_path("s3://other/wh/ns/t/data/f.parquet", table) is None
    assert purge.owned_path(f"{table}/data/f.parquet?endpoint_override=evil", table) is None


@pytest.mark.parametrize("location", ["{wh}", "{wh}/.", "{wh}/%2e", "{wh}/ns/..", "{wh}/../x"])
def test_a_purge_of_the_warehouse_or_above_it_is_refused(
    catalog: FolderCatalog, warehouse: Path, location: str
) -> None:
    doomed = real_table(catalog, warehouse / "ns" / "doomed")
    before = fingerprint(warehouse)

    with pytest.raises(InvalidInput) as refused:
        purge.purge_table_files(
            doomed.metadata,
            doomed.metadata_location,
            table_location=location.format(wh=warehouse),
            warehouse=str(warehouse),
        )

    assert refused.value.field == "location"
    assert fingerprint(warehouse) == before


@pytest.mark.parametrize("location", ["/", "file:///", "s3://bucket", "s3://bucket/"])
def test_a_purge_without_a_warehouse_still_refuses_a_whole_filesystem_or_bucket(
    location: str,
) -> None:
    metadata: TableMetadata = new_table_metadata(
        SCHEMA, BY_REGION, UNSORTED_SORT_ORDER, "/nowhere/t", {}
    )
    with pytest.raises(InvalidInput, match="own folder"):
        purge.purge_table_files(metadata, "/nowhere/t/m.json", table_location=location)


def test_files_already_gone_are_counted_as_missing(catalog: FolderCatalog, warehouse: Path) -> None:
    doomed = real_table(catalog, warehouse / "ns" / "doomed")
    data_file = next((warehouse / "ns" / "doomed" / "data").rglob("*.parquet"))
    data_file.unlink()

    result = purge_doomed(doomed, warehouse)

    assert result.missing == 1
    assert "1 already gone" in result.summary()


def test_an_empty_folder_reached_through_a_symbolic_link_is_never_removed(
    tmp_path: Path,
) -> None:
    """As if a folder of the table were swapped for a link after its files were checked."""
    table = tmp_path / "wh" / "ns" / "t"
    (table / "data").mkdir(parents=True)
    (tmp_path / "outside" / "empty").mkdir(parents=True)
    (table / "data" / "link").symlink_to(tmp_path / "outside")

    removed = purge._remove_empty_folders(str(table), {f"{table}/data/link/empty"})

    assert (tmp_path / "outside" / "empty").is_dir()
    assert (table / "data" / "link").is_symlink()
    assert removed == 0
