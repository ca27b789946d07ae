"""Reading an Iceberg table that another system writes, straight from its folder, as
ClickHouse's Iceberg table engine reads it (the third seed; groundwork for attached tables).

Which metadata file is the table (ClickHouse's rules, plus gzip):
1. an explicit path, relative to the table folder, wins (no `..`, no NUL, never outside);
2. else, with a table UUID, only the `*.metadata.json` files of `metadata/` whose
   `table-uuid` matches it (case-insensitively) are candidates;
3. else every `*.metadata.json` of `metadata/` is.
Among candidates the newest is the highest version parsed from the name (`V.metadata.json`,
`vV.metadata.json`, `V-uuid.metadata.json`, `NNNNN-uuid.metadata.json`), or, by option, the
highest `last-updated-ms`. Gzip-compressed files are candidates too, named as Java's writers
name them (`NNNNN-uuid.gz.metadata.json`, `vV.gz.metadata.json`) or `.metadata.json.gz`,
which ClickHouse never lists. A file whose name follows none of these patterns, or whose JSON
cannot be read, is reported, not guessed at.

Time travel (ClickHouse's rules and words): a snapshot id, or a timestamp resolved through
the `snapshot-log` to the newest snapshot at or before it; both at once, a timestamp before
the first snapshot, and an unknown snapshot id are errors. A read at a snapshot uses that
snapshot's schema. Django-free."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from catalog.core import metadata_io
from catalog.core.errors import InvalidInput, InvalidMetadata, NotFound
from catalog.core.metadata_io import normalize_location

_VERSIONED = re.compile(
    r"^v?(?P<version>\d+)(?:-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}"
    r"-[0-9a-fA-F]{12})?(?:\.gz)?\.metadata\.json(?:\.gz)?$"
)
_METADATA_SUFFIXES = (".metadata.json", ".metadata.json.gz")


@dataclass(frozen=True)
class Candidate:
    location: str
    version: int | None
    document: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class Resolution:
    """The metadata file chosen, and what else was seen."""

    location: str
    version: int | None
    document: Mapping[str, Any]
    candidates: int
    #: (file, why it was left out): unknown name patterns, unreadable JSON.
    reported: list[tuple[str, str]] = field(default_factory=list)


def metadata_version(filename: str) -> int | None:
    """The version a metadata file's name carries, or None for a name of no known pattern."""
    found = _VERSIONED.match(filename)
    return int(found.group("version")) if found else None


def read_document(location: str, *, filesystem: Any = None) -> dict[str, Any]:
    """A metadata file's JSON, gzip-compressed or not."""
    filesystem, path = _filesystem(location, filesystem)
    try:
        # No compression guessed by pyarrow from the name: it is decompressed below.
        with filesystem.open_input_stream(path, compression=None) as stream:
            raw = stream.read()
    except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError
        raise NotFound(f"Cannot read metadata file {location}: {error}") from error
    try:
        document = metadata_io.decode_json(raw)
    except ValueError as error:
        raise InvalidMetadata(f"Metadata file {location} is not valid JSON: {error}") from error
    if not isinstance(document, dict):
        raise InvalidMetadata(f"Metadata file {location} is not a JSON object")
    return document


def _filesystem(location: str, filesystem: Any) -> tuple[Any, str]:
    # Object stores are reached as every other read reaches them (FILE_IO_PROPERTIES).
    found, path = metadata_io.filesystem(location)
    return (filesystem if filesystem is not None else found), path


def relative_path(path: str) -> str:
    """An explicit metadata path relative to the table folder, refused when it could
    leave it."""
    if not isinstance(path, str) or not path.strip():
        raise InvalidInput("The metadata file path is empty", field="metadata_file_path")
    if "\x00" in path or "\\" in path or path.startswith("/") or "://" in path:
        raise InvalidInput(
            "The metadata file path must be relative to the table folder",
            field="metadata_file_path",
        )
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if not parts or any(part == ".." for part in parts):
        raise InvalidInput(
            "The metadata file path must not contain '..'", field="metadata_file_path"
        )
    return "/".join(parts)


def resolve_metadata_file(
    table_location: str,
    *,
    metadata_file_path: str | None = None,
    table_uuid: str | None = None,
    by_last_updated_ms: bool = False,
    filesystem: Any = None,
) -> Resolution:
    """The metadata file that is the table now, by the rules in this module's docstring."""
    root = normalize_location(table_location)
    if metadata_file_path is not None:
        location = posixpath.join(root, relative_path(metadata_file_path))
        name = location.rsplit("/", 1)[-1]
        return Resolution(
            location, metadata_version(name), read_document(location, filesystem=filesystem), 1
        )
    from pyarrow import fs

    filesystem, folder = _filesystem(f"{root}/metadata", filesystem)
    try:
        entries = filesystem.get_file_info(fs.FileSelector(folder, recursive=False))
    except (OSError, ValueError) as error:
        raise NotFound(
            f"{table_location} is not an Iceberg table: it has no metadata folder ({error})"
        ) from error
    candidates: list[Candidate] = []
    reported: list[tuple[str, str]] = []
    for entry in entries:
        if entry.type != fs.FileType.File or not entry.base_name.endswith(_METADATA_SUFFIXES):
            continue
        location = f"{root}/metadata/{entry.base_name}"
        version = metadata_version(entry.base_name)
        if version is None and not by_last_updated_ms:
            reported.append((entry.base_name, "the name follows no known version pattern"))
            continue
        document = None
        if table_uuid is not None or by_last_updated_ms:
            try:
                document = read_document(location, filesystem=filesystem)
            except InvalidMetadata as error:
                reported.append((entry.base_name, error.message))
                continue
            wanted = (table_uuid or "").lower()
            if table_uuid is not None and str(document.get("table-uuid", "")).lower() != wanted:
                continue
        candidates.append(Candidate(location, version, document))
    if not candidates:
        what = f"with table-uuid {table_uuid} " if table_uuid else ""
        raise NotFound(
            f"{table_location} is not an Iceberg table: no metadata file {what}in its "
            "metadata folder"
            + (
                f" ({len(reported)} files left out: {reported[0][0]}: {reported[0][1]})"
                if reported
                else ""
            )  # fmt: skip
        )
    if by_last_updated_ms:
        newest = max(candidates, key=lambda c: int(c.document.get("last-updated-ms", -1)))
    else:
        newest = max(candidates, key=lambda c: c.version)
    document = newest.document or read_document(newest.location, filesystem=filesystem)
    return Resolution(newest.location, newest.version, document, len(candidates), reported)


# -- time travel ---------------------------------------------------------------------------


class TableState(NamedTuple):
    """What a read sees: a snapshot (None for a table with no data yet) and its schema."""

    snapshot_id: int | None
    schema_id: int


def state_at(
    document: Mapping[str, Any],
    *,
    table_path: str,
    snapshot_id: int | None = None,
    timestamp_ms: int | None = None,
) -> TableState:
    """The snapshot and schema a read at `snapshot_id` or `timestamp_ms` (or now) uses:
    a time-travel read uses the snapshot's own schema, a current read the table's."""
    if snapshot_id is not None and timestamp_ms is not None:
        raise InvalidInput(
            f"Time travel with timestamp and snapshot id for iceberg table by path "
            f"{table_path} cannot be changed simultaneously",
            field="snapshot_id",
        )
    if timestamp_ms is not None:
        log = document.get("snapshot-log")
        if log is None:
            raise InvalidInput(
                f"No snapshot log found in metadata for iceberg table {table_path} so it is "
                "impossible to get relevant snapshot id using timestamp",
                field="timestamp_ms",
            )
        closest = None
        for entry in log:
            moment = int(entry["timestamp-ms"])
            if moment <= timestamp_ms and (closest is None or moment > closest[0]):
                closest = (moment, int(entry["snapshot-id"]))
        if closest is None:
            raise InvalidInput(
                "No snapshot found in snapshot log before requested timestamp for iceberg "
                f"table {table_path}",
                field="timestamp_ms",
            )
        snapshot_id = closest[1]
    if snapshot_id is not None:
        for snapshot in document.get("snapshots") or []:
            if int(snapshot["snapshot-id"]) == snapshot_id:
                schema = snapshot.get("schema-id", document.get("current-schema-id", 0))
                return TableState(snapshot_id, int(schema))
        raise NotFound(f"No snapshot found for id `{snapshot_id}`", field="snapshot_id")
    current = document.get("current-snapshot-id")
    current = None if current is None or int(current) < 0 else int(current)
    return TableState(current, int(document.get("current-schema-id", 0)))
