"""Reading a snapshot's manifest list and manifests, through the metadata cache when the
FileIO is a `CachingFileIO`, and refusing a file the metadata names that is not a regular,
readable Iceberg file (an engine may commit any path) with an InvalidMetadata that names
it. Shared by the preview, the file listing and server-side scan planning. Django-free."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from pyiceberg.io import FileIO
from pyiceberg.manifest import DataFileContent, ManifestEntry, ManifestFile, read_manifest_list
from pyiceberg.table.snapshots import Snapshot

from catalog.core import metadata_io
from catalog.core.errors import InvalidMetadata
from catalog.core.metadata_cache import CachingFileIO, read_manifest_entries


def _unreadable(what: str, location: str) -> InvalidMetadata:
    """The table's metadata names a file that is not what it says (an engine may commit any
    path as a manifest list): a 400 that names it, and says nothing of what the file holds
    or whether it exists."""
    return InvalidMetadata(
        f"The table's metadata cannot be read: its {what} {location[:300]} is not a readable "
        "Iceberg file"
    )


def check_data_file(path: str) -> None:
    """A data or delete file is read only if it is a regular file (a FIFO there made a
    viewer's preview wait forever); a missing one is left to the read, which says so."""
    try:
        metadata_io.check_regular_file(path, max_bytes=None)
    except FileNotFoundError:
        return
    except OSError:
        raise _unreadable("data file", path) from None


def manifest_list(io: FileIO, snapshot: Snapshot) -> tuple[ManifestFile, ...]:
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


def all_entries(io: FileIO, manifests: Sequence[ManifestFile]) -> list[Sequence[ManifestEntry]]:
    """Each manifest's live entries, read in parallel when there are several (object
    stores answer slowly; a local read is quick either way)."""
    if len(manifests) < 2:
        return [_entries(io, manifest) for manifest in manifests]
    from pyiceberg.utils.concurrent import ExecutorFactory

    return list(ExecutorFactory.get_or_create().map(lambda m: _entries(io, m), manifests))


def data_entries(io: FileIO, manifests: Sequence[ManifestFile]) -> Iterator[ManifestEntry]:
    """The live entries of data files (not of delete files) the manifests list."""
    for entries in all_entries(io, manifests):
        for entry in entries:
            if entry.data_file.content == DataFileContent.DATA:
                yield entry


def live_files(io: FileIO, manifest: ManifestFile) -> int:
    """How many live files `manifest` lists: by the manifest list's counts when it has
    them (the manifest is not read), else by reading it."""
    if manifest.added_files_count is not None and manifest.existing_files_count is not None:
        return manifest.added_files_count + manifest.existing_files_count
    return len(_entries(io, manifest))  # v1 lists may leave the counts out
