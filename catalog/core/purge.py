"""Purging a dropped table: delete the files its own metadata names, and nothing else.

A purge never deletes a path recursively. It lists what the table's metadata references
(as Iceberg's `CatalogUtil.dropTableData` does: every metadata file in the metadata log and
the current one, every snapshot's manifest list, every manifest in them, every data and
delete file they list (position and equality deletes, deletion vectors), and the statistics
and partition statistics files), deletes each one that lies strictly inside the table's own
location, then removes the table's folders bottom-up only where they are empty.

"Inside" is decided for the path exactly as it is then deleted (its literal reading, the
one pyiceberg's PyArrowFileIO uses) and for every percent-decoded reading of it (the ones
pyarrow's `FileSystem.from_uri`, Hadoop or a later tool could use), each with `..` resolved
as text and through the filesystem's symbolic links. A file that fails any of these is kept
and reported, never deleted. Manifest lists and manifests are read only from inside the
table's location, and one that cannot be read is kept (with the current metadata file and
the manifest lists that lead to it, so the purge can be tried again once it reads)."""

from __future__ import annotations

import logging
import os
import posixpath
import stat
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from pyiceberg.io import FileIO, InputFile, OutputFile
from pyiceberg.table.metadata import TableMetadata

from catalog.core import metadata_io
from catalog.core.errors import InvalidInput

logger = logging.getLogger(__name__)


@dataclass
class PurgeResult:
    deleted: int = 0
    #: Files the metadata names that were already gone.
    missing: int = 0
    #: Files the metadata names outside the table's location (another table's, the
    #: warehouse's, anywhere else), or whose path some layer could read as such: kept.
    outside: list[str] = field(default_factory=list)
    #: Manifest lists or manifests that could not be read (the files they name are unknown).
    unreadable: list[str] = field(default_factory=list)
    #: Files inside the location kept so that a later purge can read what could not be read.
    kept: list[str] = field(default_factory=list)
    #: Files inside the location that could not be deleted (a folder, no permission).
    failed: list[str] = field(default_factory=list)
    removed_folders: int = 0

    @property
    def skipped_outside(self) -> int:
        return len(self.outside)

    def summary(self) -> str:
        parts = [f"deleted {self.deleted} files", f"{self.missing} already gone"]
        if self.outside:
            parts.append(f"kept {len(self.outside)} files outside the table's location")
        if self.unreadable:
            parts.append(f"could not read {len(self.unreadable)} manifests")
        if self.kept:
            parts.append(f"kept {len(self.kept)} files to retry with")
        if self.failed:
            parts.append(f"could not delete {len(self.failed)} files")
        parts.append(f"removed {self.removed_folders} empty folders")
        return "; ".join(parts)


@dataclass
class TableFiles:
    """The files a table's metadata references, by kind, as the metadata spells them."""

    metadata: set[str] = field(default_factory=set)
    manifest_lists: set[str] = field(default_factory=set)
    manifests: set[str] = field(default_factory=set)
    #: Data files, delete files (position, equality, deletion vectors) and statistics.
    content: set[str] = field(default_factory=set)
    #: Manifest list or manifest -> why it could not be read.
    unreadable: dict[str, str] = field(default_factory=dict)
    #: Unreadable files that exist and lie inside the location: a later purge may read them.
    retryable: set[str] = field(default_factory=set)
    #: Manifest -> the manifest lists that name it.
    listed_in: dict[str, set[str]] = field(default_factory=dict)

    def all(self) -> set[str]:
        return self.metadata | self.manifest_lists | self.manifests | self.content

    def in_deletion_order(self) -> Iterator[str]:
        """Content first, metadata last (Java's order): a purge that stops half way leaves
        every remaining file reachable from the files that remain."""
        for kind in (self.content, self.manifests, self.manifest_lists, self.metadata):
            yield from sorted(kind)


# -- which paths a purge may touch ----------------------------------------------------------


def owned_path(path: str, table_location: str) -> str | None:
    """The form of `path` to read or delete, if `path` lies strictly inside the (normalized)
    table location in every reading; None if any reading could reach anything else."""
    try:
        literal = metadata_io.normal_form(path)
    except InvalidInput:
        return None
    if not metadata_io.is_inside(literal, table_location, strictly=True):
        return None
    if not literal.startswith("/") and literal != _object_store_spelling(path):
        # "s3://b/t//x" or "s3://b/t/./x" names another key than its normal form: ambiguous.
        return None
    if not all(_reading_inside(reading, table_location) for reading in _decoded_readings(path)):
        return None
    return literal


def _object_store_spelling(path: str) -> str:
    parts = urlsplit(path)
    return f"{parts.scheme}://{parts.netloc.lower()}{parts.path}".rstrip("/")


def _decoded_readings(path: str) -> Iterator[str]:
    """`path` percent-decoded once, twice, ... until decoding changes nothing (each step
    shortens the text, so this ends): `%252e%252e` is `%2e%2e` to one decoder, `..` to two.
    Also from its NFKC form, where fullwidth `％２ｅ` becomes an escape of its own."""
    folded = unicodedata.normalize("NFKC", path)
    for current in dict.fromkeys((path, folded)):
        if current != path:
            yield current
        while (decoded := unquote(current)) != current:
            yield decoded
            current = decoded


def _reading_inside(reading: str, table_location: str) -> bool:
    """Whether a decoded reading, read the strictest way (compatibility characters folded,
    backslashes as separators, `..` resolved as text and through symbolic links, cut at `?`
    or `#` by URI readers or not), stays strictly inside the table location."""
    if metadata_io.CONTROL_CHARACTERS.search(reading):
        return False  # urllib drops some of them, the OS keeps them: no single reading
    variants = set()
    for form in (reading, unicodedata.normalize("NFKC", reading)):
        text = form.replace("\\", "/")
        variants |= {text, text.split("?", 1)[0].split("#", 1)[0]}
    return all(_variant_inside(variant, table_location) for variant in variants)


def _variant_inside(text: str, table_location: str) -> bool:
    if text.startswith("/"):
        scheme, authority, path = "file", "", text
    else:
        try:
            parts = urlsplit(text)
        except ValueError:
            return False
        scheme, authority, path = parts.scheme, parts.netloc.lower(), parts.path
        if scheme == "file":
            if authority not in ("", "localhost"):
                return False
            authority = ""
    if not path.startswith("/"):
        return False
    names = [name for name in path.split("/") if name not in ("", ".", "..")]
    if any(not name.strip(". ") for name in names):
        return False  # "...", ". ": some filesystems read them as "." or ".."
    textual = posixpath.normpath("/" + path.lstrip("/"))
    candidate = textual if scheme == "file" else f"{scheme}://{authority}{textual}"
    if not metadata_io.is_inside(candidate.rstrip("/"), table_location, strictly=True):
        return False
    if scheme == "file":
        # The OS resolves ".." after following a link, not as text: realpath does the same.
        physical = os.path.realpath(path)
        real_root = metadata_io.resolved(table_location)
        if physical == real_root or not physical.startswith(real_root.rstrip("/") + "/"):
            return False
    return True


# -- reading the table's manifests ----------------------------------------------------------


class _OutsideTable(PermissionError):
    """A manifest (list) the purge will not read: it is not strictly inside the location."""


class _ConfinedIO(FileIO):
    """The FileIO pyiceberg reads manifest lists and manifests with during a purge: it opens
    only regular files strictly inside the table's location, at the form that was checked
    (a FIFO or a device named by hostile metadata would block or never end)."""

    def __init__(self, table_location: str) -> None:
        super().__init__(properties={})
        self._table_location = table_location

    def new_input(self, location: str) -> InputFile:
        path = owned_path(location, self._table_location)
        if path is None:
            raise _OutsideTable(f"Not inside the table's location: {location[:300]}")
        if path.startswith("/") and not stat.S_ISREG(os.stat(path).st_mode):
            raise OSError(f"Not a regular file: {path[:300]}")
        return metadata_io.file_io(path).new_input(path)

    def new_output(self, location: str) -> OutputFile:
        raise PermissionError("A purge writes nothing")

    def delete(self, location: str | InputFile | OutputFile) -> None:
        raise PermissionError("A purge deletes through purge_table_files only")


def scan_table_files(
    metadata: TableMetadata, metadata_location: str, *, table_location: str
) -> TableFiles:
    """Every file the table's metadata references; manifest lists and manifests are read
    only when they lie strictly inside `table_location` (normalized)."""
    io = _ConfinedIO(table_location)
    files = TableFiles()
    files.metadata = {metadata_location, *(entry.metadata_file for entry in metadata.metadata_log)}
    files.content.update(s.statistics_path for s in metadata.statistics)
    files.content.update(s.statistics_path for s in metadata.partition_statistics)
    read_manifests: set[str] = set()
    for snapshot in metadata.snapshots:
        if not snapshot.manifest_list:
            continue
        files.manifest_lists.add(snapshot.manifest_list)
        try:
            manifests = snapshot.manifests(io)
        except Exception as error:  # any failure: the files it would name stay unknown
            _unreadable(files, snapshot.manifest_list, error)
            continue
        for manifest in manifests:
            files.manifests.add(manifest.manifest_path)
            files.listed_in.setdefault(manifest.manifest_path, set()).add(snapshot.manifest_list)
            if manifest.manifest_path in read_manifests:
                continue
            read_manifests.add(manifest.manifest_path)
            try:
                entries = manifest.fetch_manifest_entry(io, discard_deleted=False)
            except Exception as error:
                _unreadable(files, manifest.manifest_path, error)
                continue
            # Deleted entries too: an older snapshot still names those files.
            files.content.update(
                entry.data_file.file_path for entry in entries if entry.data_file.file_path
            )
    return files


def _unreadable(files: TableFiles, path: str, error: Exception) -> None:
    files.unreadable[path] = f"{type(error).__name__}: {error}"[:500]
    # Worth keeping for another try only if it is there, ours, and merely unreadable now.
    if not isinstance(error, (FileNotFoundError, _OutsideTable)):
        files.retryable.add(path)
    logger.warning("Purge could not read %s: %s", path[:300], files.unreadable[path])


def referenced_files(metadata: TableMetadata, metadata_location: str) -> set[str]:
    """Every file the table's metadata references, as it spells them (manifests read from
    inside the table's own location only; see `scan_table_files` for what was unreadable)."""
    table_location = metadata_io.normalize_location(metadata.location)
    return scan_table_files(metadata, metadata_location, table_location=table_location).all()


# -- the purge ------------------------------------------------------------------------------


def superseded_metadata_files(
    base: TableMetadata, base_location: str, new: TableMetadata, new_location: str
) -> list[str]:
    """The metadata files a commit leaves behind when the new metadata asks for it
    (`write.metadata.delete-after-commit.enabled`, as Iceberg's own commits honour it):
    those the base named (its log and itself) that the new metadata's log, trimmed to
    `write.metadata.previous-versions-max`, no longer names. Each one only if it lies
    inside the table's location (`owned_path`); empty when the property is off."""
    enabled = new.properties.get("write.metadata.delete-after-commit.enabled", "false")
    if enabled.strip().lower() != "true":
        return []
    kept = {new_location, *(entry.metadata_file for entry in new.metadata_log)}
    named = [entry.metadata_file for entry in base.metadata_log] + [base_location]
    superseded = []
    for path in named:
        if path in kept:
            continue
        owned = owned_path(path, new.location)
        if owned is not None and owned not in superseded:
            superseded.append(owned)
    return superseded


def check_purgeable(table_location: str, warehouse: str) -> str:
    """The table's location, normalized, if a purge may touch it: strictly inside the
    warehouse. InvalidInput otherwise."""
    return metadata_io.ensure_strictly_within(table_location, warehouse)


def _purge_root(table_location: str, warehouse: str | None) -> str:
    if warehouse is not None:
        return check_purgeable(table_location, warehouse)
    root = metadata_io.normalize_location(table_location)
    if root == "/" or ("://" in root and "/" not in root.split("://", 1)[1]):
        raise InvalidInput(
            f"A purge needs the table's own folder, not {root[:300]}", field="location"
        )
    return root


def purge_table_files(
    metadata: TableMetadata,
    metadata_location: str,
    *,
    table_location: str,
    warehouse: str | None = None,
) -> PurgeResult:
    """Delete what the metadata references strictly inside `table_location` (checked by
    `check_purgeable`; with `warehouse`, checked again here), then the folders of those
    files that are left empty, bottom-up, up to and including `table_location`."""
    root = _purge_root(table_location, warehouse)
    files = scan_table_files(metadata, metadata_location, table_location=root)
    result = PurgeResult(unreadable=sorted(files.unreadable))
    keep = _kept_for_retry(files, metadata_location)
    order = list(files.in_deletion_order())
    result.kept = [p for p in order if p in keep and owned_path(p, root) is not None]
    kept = set(result.kept)
    handled = delete_owned_files(
        [p for p in order if p not in kept], table_location=root, result=result
    )
    if root.startswith("/"):
        result.removed_folders = _remove_empty_folders(
            root, {posixpath.dirname(t) for t in handled}
        )
    return result


def delete_owned_files(
    paths: Iterable[str], *, table_location: str, result: PurgeResult
) -> set[str]:
    """Delete each of `paths` that lies strictly inside `table_location` (`owned_path`),
    counting into `result`; a path outside is listed in `result.outside` and never touched.
    Purges and maintenance (the files an expiry or an orphan scan names) both delete here.
    Returns the normal forms deleted or found gone."""
    outside: set[str] = set(result.outside)
    handled: set[str] = set()
    for path in paths:
        target = owned_path(path, table_location)
        if target is None:
            outside.add(path)
            continue
        if target in handled:
            continue  # one file spelled two ways ("file:/t/x" and "/t/x")
        handled.add(target)
        try:
            metadata_io.file_io(target).delete(target)
        except FileNotFoundError:
            result.missing += 1
        except OSError as error:  # a folder, no permission: never deleted any other way
            logger.warning("Could not delete %s: %s", target[:300], error)
            result.failed.append(path)
        else:
            result.deleted += 1
    result.outside = sorted(outside)
    return handled


def _kept_for_retry(files: TableFiles, metadata_location: str) -> set[str]:
    """When a manifest (list) inside the location could not be read, the files that lead to
    it: itself, the manifest lists that name it and the current metadata file."""
    if not files.retryable:
        return set()
    keep = {metadata_location, *files.retryable}
    for path in files.retryable:
        keep |= files.listed_in.get(path, set())
    return keep


def _remove_empty_folders(root: str, folders: set[str]) -> int:
    """Remove, deepest first, the folders that held the purged files and their parents up to
    and including `root`, each only if empty (`os.rmdir` refuses anything else) and reached
    without a symbolic link (a link's target is never the table's)."""
    candidates: set[str] = set()
    for folder in folders:
        while folder == root or folder.startswith(root.rstrip("/") + "/"):
            candidates.add(folder)
            if folder == root:
                break
            folder = posixpath.dirname(folder)
    real_root = os.path.realpath(root)
    removed = 0
    for folder in sorted(candidates, key=lambda f: f.count("/"), reverse=True):
        if os.path.realpath(folder) != real_root + folder[len(root) :] or os.path.islink(folder):
            continue
        try:
            os.rmdir(folder)
        except OSError:  # not empty, already gone: either way, leave it
            continue
        removed += 1
    return removed
