"""A bounded cache of what reading a table's metadata costs: the metadata JSON (parsed),
manifest lists and manifests (decoded), and the files a preview planned (the same snapshot,
schema and filter always plan the same files), for previews and file listings.
Django-free.

Scope. Every entry belongs to one *table state*: the metadata file's location and a hash of
its content (`fingerprint`). `MetadataCache.load` reads the metadata file every time (one
small read, the only way to know it is still the same file), hashes it, and
- hands back the parsed metadata from the cache when the content is the one it knows;
- otherwise parses it, makes the new state the table's current one and drops every entry of
  the table's previous state (entries are keyed by fingerprint as well, so even an entry
  that outlived its state could never be served to another one).
So when a writer commits a new metadata file the old entries go, and a table deleted and
recreated at the same location, with the same metadata file name (`v1.metadata.json`) and
even the same manifest paths, is never read from the old table's entries: its content, and
so its fingerprint, differ. ("The table" is the folder holding `metadata/`.)

Size. The bound (`max_bytes`) is on memory, estimated: a file's bytes times what its decoded
form was measured to take on pyiceberg 0.12 (metadata JSON parsed into a dict and
pyiceberg's `TableMetadata`: about 7x; Avro manifests and manifest lists, which are
compressed, decoded into pyiceberg's records: about 15x). Least recently used entries are
evicted first; an entry larger than the whole bound is not kept. Decoded objects are cached,
not bytes, because decoding is the cost (about 40 ms per 1,000 manifest entries, 15 ms to
parse metadata with 300 snapshots) while reading a local file is not. The cached objects are
shared between readers and must not be changed.

pyiceberg's own process-wide `ManifestFile` cache (`pyiceberg.manifest._manifest_cache`,
used by `Snapshot.manifests()`) is keyed by the manifest's path alone: a table recreated
with the same manifest paths gets the old table's `ManifestFile` records (partition
summaries, sequence numbers, file counts), and so wrong pruning and wrong delete
application. It only deduplicates objects (the manifest list is read on every call anyway),
so `disable_pyiceberg_manifest_cache()` turns it off for the process; making a
`MetadataCache` does so. The readers here never go through it.

Thread-safe: one lock guards the entries and figures; decoding happens outside it (two
threads missing the same manifest both decode it, and the second store wins)."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pyiceberg.avro.file import AvroFile
from pyiceberg.io import FileIO, InputFile, InputStream, OutputFile
from pyiceberg.manifest import (
    DATA_FILE_TYPE,
    MANIFEST_ENTRY_SCHEMAS,
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    _inherit_from_manifest,
    read_manifest_list,
)
from pyiceberg.table.metadata import TableMetadata, TableMetadataUtil

from catalog.core import metadata_io
from catalog.core.errors import InvalidMetadata, NotFound

#: 256 MiB by default: the decoded metadata of a few hundred ordinary tables.
DEFAULT_MAX_BYTES = 256 * 1024 * 1024

#: Memory a decoded file takes per byte of the file (measured on pyiceberg 0.12, see above).
METADATA_FACTOR = 8
#: For an Avro file, per byte of its records; its header (the schema as JSON, several KB,
#: decoded into objects shared by every record) costs about its own size. A manifest of one
#: data file is mostly header: charged 16 bytes a byte whole it counted 70 KB where it takes
#: 10 KB, and a table of 2,000 small manifests did not fit a 64 MiB cache.
AVRO_FACTOR = 16

T = TypeVar("T")


def disable_pyiceberg_manifest_cache() -> None:
    """Turn off pyiceberg's process-wide ManifestFile cache keyed by path (see the module's
    docstring): it would hand a recreated table the old table's manifest records."""
    from pyiceberg import manifest

    cache = manifest._manifest_cache
    with cache._lock:
        cache._cache = None
        cache.maxsize = 0


@dataclass(frozen=True)
class CacheStats:
    """Figures since the cache was made (hits, misses, evictions) and now (entries, bytes)."""

    hits: int
    misses: int
    evictions: int
    entries: int
    bytes: int
    max_bytes: int
    #: Entries per kind: "metadata", "manifest-list", "manifest", "plan" (a preview's
    #: planned files), "bytes" (Avro files served to other readers).
    kinds: Mapping[str, int]

    @property
    def hit_ratio(self) -> float:
        looked_up = self.hits + self.misses
        return self.hits / looked_up if looked_up else 0.0


@dataclass(frozen=True)
class CachedTable:
    """A table state as `MetadataCache.load` found it."""

    metadata_location: str
    #: Location and content hash of the metadata file: the scope of every cached entry.
    fingerprint: str
    #: The metadata JSON, as a dict (shared: do not change it).
    document: Mapping[str, Any]
    metadata: TableMetadata
    #: A FileIO reading through the cache, scoped to this state (pass it to the readers).
    io: CachingFileIO


def _table_folder(metadata_location: str) -> str:
    folder = metadata_location.rsplit("/", 1)[0]
    return folder[: -len("/metadata")] if folder.endswith("/metadata") else folder


class MetadataCache:
    """A bounded LRU of decoded metadata, scoped to table states (see the module)."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must not be negative")
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        #: (fingerprint, kind, path) -> (value, charged bytes), least recently used first.
        self._entries: OrderedDict[tuple[str, str, str], tuple[Any, int]] = OrderedDict()
        #: table folder -> the fingerprint of its state last loaded; and those fingerprints.
        self._states: dict[str, str] = {}
        self._live: set[str] = set()
        self._bytes = 0
        self._hits = 0
        self._misses = 0
        self._evictions = 0
        disable_pyiceberg_manifest_cache()

    # -- figures -----------------------------------------------------------------------

    def stats(self) -> CacheStats:
        with self._lock:
            kinds: dict[str, int] = {}
            for _, kind, _ in self._entries:
                kinds[kind] = kinds.get(kind, 0) + 1
            return CacheStats(
                hits=self._hits,
                misses=self._misses,
                evictions=self._evictions,
                entries=len(self._entries),
                bytes=self._bytes,
                max_bytes=self.max_bytes,
                kinds=kinds,
            )

    def clear(self) -> None:
        """Forget every entry (the figures stay)."""
        with self._lock:
            self._entries.clear()
            self._states.clear()
            self._live.clear()
            self._bytes = 0

    # -- table states ----------------------------------------------------------------------

    def load(
        self, metadata_location: str, *, io: FileIO, content: bytes | None = None
    ) -> CachedTable:
        """The table state whose metadata file is `metadata_location`: read (or `content`,
        when the caller already read the file's bytes), hashed, parsed unless this content
        is cached. A new state of the table drops the entries of its previous one.

        NotFound when the file cannot be read, InvalidMetadata when it is not metadata."""
        if content is None:
            try:
                with io.new_input(metadata_location).open() as stream:
                    content = stream.read()
            except OSError as error:  # FileNotFoundError included
                raise NotFound(f"Cannot read metadata file {metadata_location}: {error}") from error
        digest = hashlib.blake2b(content, digest_size=16).hexdigest()
        fingerprint = f"{metadata_location}#{digest}"
        folder = _table_folder(metadata_location)
        with self._lock:
            previous = self._states.get(folder)
            if previous != fingerprint:
                self._states[folder] = fingerprint
                self._live.add(fingerprint)
                if previous is not None:
                    self._live.discard(previous)
                    self._drop_scope(previous)
        key = (fingerprint, "metadata", metadata_location)
        parsed = self._get(key)
        if parsed is None:
            parsed = _parse_metadata(metadata_location, content)
            self._put(key, parsed, len(content) * METADATA_FACTOR)
        document, metadata = parsed
        return CachedTable(
            metadata_location=metadata_location,
            fingerprint=fingerprint,
            document=document,
            metadata=metadata,
            io=CachingFileIO(io, self, fingerprint),
        )

    # -- entries -------------------------------------------------------------------------

    def cached(
        self, fingerprint: str, kind: str, path: str, produce: Callable[[], tuple[T, int]]
    ) -> T:
        """The entry (fingerprint, kind, path), made by `produce` (value, charged bytes) on
        a miss, outside the lock."""
        key = (fingerprint, kind, path)
        value = self._get(key)
        if value is None:
            value, size = produce()
            self._put(key, value, size)
        return value

    def _get(self, key: tuple[str, str, str]) -> Any:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                self._misses += 1
                return None
            self._entries.move_to_end(key)
            self._hits += 1
            return found[0]

    def _put(self, key: tuple[str, str, str], value: Any, size: int) -> None:
        with self._lock:
            if key[0] not in self._live:
                return  # its state was replaced while this was decoded: never stored
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            if size > self.max_bytes:
                return
            self._entries[key] = (value, size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, evicted) = self._entries.popitem(last=False)
                self._bytes -= evicted
                self._evictions += 1

    def _drop_scope(self, fingerprint: str) -> None:
        # Called with the lock held.
        for key in [key for key in self._entries if key[0] == fingerprint]:
            self._bytes -= self._entries.pop(key)[1]


def _parse_metadata(location: str, content: bytes) -> tuple[dict[str, Any], TableMetadata]:
    from pydantic import ValidationError

    try:
        document = metadata_io.decode_json(content)
    except ValueError as error:
        raise InvalidMetadata(f"Metadata file {location} is not valid JSON: {error}") from error
    if not isinstance(document, dict):
        raise InvalidMetadata(f"Metadata file {location} is not a JSON object")
    try:
        metadata = TableMetadataUtil.parse_obj(document)
    except (ValidationError, ValueError, TypeError, KeyError) as error:
        raise InvalidMetadata(
            f"Metadata file {location} is not Iceberg table metadata: {str(error)[:300]}"
        ) from error
    return document, metadata


# -- FileIO ---------------------------------------------------------------------------------


class _BytesInputStream:
    """A seekable stream over bytes in memory (pyiceberg's Avro reader reads a whole file)."""

    def __init__(self, content: bytes) -> None:
        import io

        self._buffer = io.BytesIO(content)

    def read(self, size: int = -1) -> bytes:
        return self._buffer.read(size if size and size > 0 else -1)

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._buffer.seek(offset, whence)

    def tell(self) -> int:
        return self._buffer.tell()

    def close(self) -> None:
        self._buffer.close()

    @property
    def closed(self) -> bool:
        return self._buffer.closed

    def __enter__(self) -> _BytesInputStream:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class _CachedAvroFile(InputFile):
    """An Avro metadata file (manifest list, manifest) whose bytes come from the cache."""

    def __init__(self, location: str, io: CachingFileIO) -> None:
        super().__init__(location)
        self._io = io

    def _content(self) -> bytes:
        return self._io._bytes_of(self.location)

    def __len__(self) -> int:
        return len(self._content())

    def exists(self) -> bool:
        try:
            self._content()
        except FileNotFoundError:
            return False
        return True

    def open(self, seekable: bool = True) -> InputStream:
        return _BytesInputStream(self._content())  # type: ignore[return-value]


class CachingFileIO(FileIO):
    """A FileIO over another, for one table state: Avro metadata files (manifest lists and
    manifests, `*.avro`) are served from the cache as bytes to any reader, and
    `manifest_list` / `manifest_entries` return them decoded, cached; everything else (data
    and delete files, writes) goes to the wrapped FileIO untouched."""

    def __init__(self, io: FileIO, cache: MetadataCache, fingerprint: str) -> None:
        super().__init__(io.properties)
        self.wrapped = io
        self.cache = cache
        self.fingerprint = fingerprint

    def new_input(self, location: str) -> InputFile:
        if location.endswith(".avro"):
            return _CachedAvroFile(location, self)
        return self.wrapped.new_input(location)

    def new_output(self, location: str) -> OutputFile:
        return self.wrapped.new_output(location)

    def delete(self, location: str | InputFile | OutputFile) -> None:
        self.wrapped.delete(location)

    def _read(self, location: str) -> bytes:
        # Checked on a miss only: a cached file was checked when it was read.
        metadata_io.check_regular_file(location)
        with self.wrapped.new_input(location).open() as stream:
            return stream.read()

    def _bytes_of(self, location: str) -> bytes:
        def produce() -> tuple[bytes, int]:
            content = self._read(location)
            return content, len(content)

        return self.cache.cached(self.fingerprint, "bytes", location, produce)

    def manifest_list(self, location: str) -> tuple[ManifestFile, ...]:
        """The manifests a manifest list names, decoded (pyiceberg's `read_manifest_list`,
        never its path-keyed cache)."""

        def produce() -> tuple[tuple[ManifestFile, ...], int]:
            content = self._read(location)
            manifests = tuple(read_manifest_list(_MemoryFile(location, content)))
            return manifests, avro_charge(content, records=len(manifests))

        return self.cache.cached(self.fingerprint, "manifest-list", location, produce)

    def manifest_entries(self, manifest: ManifestFile) -> tuple[ManifestEntry, ...]:
        """`read_manifest_entries`, cached."""

        def produce() -> tuple[tuple[ManifestEntry, ...], int]:
            content = self._read(manifest.manifest_path)
            entries = read_manifest_entries(_MemoryFile(manifest.manifest_path, content), manifest)
            return entries, avro_charge(content, records=len(entries))

        return self.cache.cached(self.fingerprint, "manifest", manifest.manifest_path, produce)


#: At least this much per decoded record (a data file's entry with its statistics takes
#: about 3 KB decoded, whatever the compression of the file it came from).
AVRO_RECORD_BYTES = 4096


def avro_charge(content: bytes, *, records: int) -> int:
    """The bytes an Avro file (a manifest or manifest list) of `records` records is charged
    once decoded: its header at its size, its records at AVRO_FACTOR per byte or
    AVRO_RECORD_BYTES each, whichever is more."""
    header = _avro_header_size(content)
    return header + max((len(content) - header) * AVRO_FACTOR, records * AVRO_RECORD_BYTES)


def _avro_header_size(content: bytes) -> int:
    """The length of an Avro object container file's header (magic, the metadata map, the
    sync marker), or 0 where it does not read as one (then all of it is charged as records)."""
    from pyiceberg.avro.decoder import new_decoder

    if not content.startswith(b"Obj\x01"):
        return 0
    try:
        decoder = new_decoder(content)
        decoder.read(4)
        while count := decoder.read_int():
            if count < 0:  # a block with its byte size first
                decoder.read_int()
                count = -count
            for _ in range(count * 2):  # a key and its value
                decoder.read_bytes()
        return min(decoder.tell() + 16, len(content))
    except (ValueError, EOFError, IndexError):
        return 0


class _MemoryFile(InputFile):
    def __init__(self, location: str, content: bytes) -> None:
        super().__init__(location)
        self._content = content

    def __len__(self) -> int:
        return len(self._content)

    def exists(self) -> bool:
        return True

    def open(self, seekable: bool = True) -> InputStream:
        return _BytesInputStream(self._content)  # type: ignore[return-value]


# -- manifests ------------------------------------------------------------------------------

#: Where `referenced_data_file` sits in a DataFile read with the v3 schema.
_REFERENCED_DATA_FILE = [f.name for f in DATA_FILE_TYPE[3].fields].index("referenced_data_file")


def read_manifest_entries(
    input_file: InputFile, manifest: ManifestFile
) -> tuple[ManifestEntry, ...]:
    """A manifest's live entries (deleted ones left out), with sequence numbers, snapshot
    ids and spec id inherited from `manifest`, as pyiceberg's `fetch_manifest_entry` reads
    them, but with the v3 entry schema: pyiceberg 0.12 reads with the v2 one, which drops
    `referenced_data_file`, the data file a deletion vector belongs to (older files simply
    lack the v3 fields, read as None)."""
    with AvroFile[ManifestEntry](
        input_file,
        MANIFEST_ENTRY_SCHEMAS[3],
        read_types={-1: ManifestEntry, 2: DataFile},
        read_enums={0: ManifestEntryStatus, 101: FileFormat, 134: DataFileContent},
    ) as reader:
        return tuple(
            _inherit_from_manifest(entry, manifest)
            for entry in reader
            if entry.status != ManifestEntryStatus.DELETED
        )


_CONTENT_OFFSET = [f.name for f in DATA_FILE_TYPE[3].fields].index("content_offset")


def content_offset(data_file: DataFile) -> int | None:
    """Where a deletion vector starts in its Puffin file (vectors of one commit share one)."""
    values = data_file._data
    return values[_CONTENT_OFFSET] if len(values) > _CONTENT_OFFSET else None


def referenced_data_file(data_file: DataFile) -> str | None:
    """The one data file a delete file applies to (deletion vectors, file-scoped position
    deletes), when the manifest says so."""
    values = data_file._data
    return values[_REFERENCED_DATA_FILE] if len(values) > _REFERENCED_DATA_FILE else None
