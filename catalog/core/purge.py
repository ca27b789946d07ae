"""Purging a dropped table: delete the files its own metadata names, and nothing else.

A purge never deletes a path recursively. It lists what the table's metadata references
(as Iceberg's `CatalogUtil.dropTableData` does: every metadata file in the metadata log and
the current one, every snapshot's manifest list, every manifest in them, every data and
delete file they list, deletion vectors included, and the statistics files), deletes each
one that lies strictly inside the table's own location, then removes the table's folders
bottom-up only where they are empty. A file outside the location (another table's, or
anywhere else) is left alone and reported."""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass, field
from urllib.parse import unquote

from pyiceberg.table.metadata import TableMetadata

from catalog.core import metadata_io
from catalog.core.errors import InvalidInput

logger = logging.getLogger(__name__)


@dataclass
class PurgeResult:
    deleted: int = 0
    missing: int = 0
    #: Files the metadata names outside the table's location: never deleted.
    outside: list[str] = field(default_factory=list)
    #: Manifest lists or manifests that could not be read (their files are kept).
    unreadable: list[str] = field(default_factory=list)
    removed_folders: int = 0

    def summary(self) -> str:
        parts = [f"deleted {self.deleted} files", f"{self.missing} already gone"]
        if self.outside:
            parts.append(f"kept {len(self.outside)} files outside the table's location")
        if self.unreadable:
            parts.append(f"could not read {len(self.unreadable)} manifests")
        return "; ".join(parts)


def referenced_files(metadata: TableMetadata, metadata_location: str) -> tuple[set[str], list[str]]:
    """Every file the table's metadata references, and the manifest (list) files that could
    not be read to list theirs."""
    io = metadata_io.file_io(metadata.location)
    files = {metadata_location, *(entry.metadata_file for entry in metadata.metadata_log)}
    unreadable: list[str] = []
    for snapshot in metadata.snapshots:
        if not snapshot.manifest_list:
            continue
        files.add(snapshot.manifest_list)
        try:
            manifests = snapshot.manifests(io)
        except Exception:  # noqa: BLE001 - any unreadable file: keep what it would name
            unreadable.append(snapshot.manifest_list)
            continue
        for manifest in manifests:
            files.add(manifest.manifest_path)
            try:
                entries = manifest.fetch_manifest_entry(io, discard_deleted=False)
            except Exception:  # noqa: BLE001
                unreadable.append(manifest.manifest_path)
                continue
            files.update(entry.data_file.file_path for entry in entries)
    files.update(s.statistics_path for s in metadata.statistics)
    files.update(s.statistics_path for s in metadata.partition_statistics)
    return files, unreadable


def _owned(path: str, table_location: str) -> bool:
    """Whether `path` lies strictly inside the table's location however a filesystem layer
    reads it: literally (pyiceberg) and percent-decoded (pyarrow, Hadoop)."""
    for reading in {path, unquote(path)}:
        try:
            normal = metadata_io.normal_form(reading)
        except InvalidInput:
            return False
        if not metadata_io.is_inside(normal, table_location, strictly=True):
            return False
    return True


def purge_table_files(
    metadata: TableMetadata, metadata_location: str, *, table_location: str
) -> PurgeResult:
    """Delete what `referenced_files` names inside `table_location` (already normalized and
    checked to be strictly inside the warehouse), then the empty folders it leaves."""
    result = PurgeResult()
    files, result.unreadable = referenced_files(metadata, metadata_location)
    io = metadata_io.file_io(table_location)
    for path in sorted(files):
        if not _owned(path, table_location):
            result.outside.append(path)
            continue
        try:
            io.delete(path)
        except FileNotFoundError:
            result.missing += 1
        except OSError as error:
            logger.warning("Purge could not delete %s: %s", path[:300], error)
        else:
            result.deleted += 1
    if table_location.startswith("/"):
        result.removed_folders = _remove_empty_folders(table_location)
    return result


def _remove_empty_folders(root: str) -> int:
    """Remove empty folders under and including `root`, deepest first; a folder holding
    anything (a file the metadata does not name, a symbolic link) stays."""
    removed = 0
    if not os.path.isdir(root) or os.path.islink(root):
        return 0
    for folder, _, _ in sorted(os.walk(root, followlinks=False), key=lambda w: -len(w[0])):
        with contextlib.suppress(OSError):  # not empty, or gone: either way, leave it
            os.rmdir(folder)
            removed += 1
    return removed


def check_purgeable(table_location: str, warehouse: str) -> str:
    """The table's location, normalized, if a purge may touch it: strictly inside the
    warehouse. InvalidInput otherwise."""
    return metadata_io.ensure_within(table_location, warehouse, strictly=True)
