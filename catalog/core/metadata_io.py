"""Reading and writing metadata files, and keeping locations inside the warehouse.

File IO goes through pyiceberg's FileIO, so the same code writes to a local folder or to
object storage. Metadata files are named like Iceberg's Java catalogs name them:
`metadata/NNNNN-<uuid>.metadata.json`, NNNNN counting up from the base file."""

from __future__ import annotations

import functools
import json
import posixpath
import re
import uuid
from typing import Any
from urllib.parse import urlparse

from pyiceberg.io import FileIO, load_file_io

from catalog.core.errors import InvalidInput, InvalidMetadata

_SEQUENCE = re.compile(r"^(\d+)-[0-9a-fA-F-]+\.metadata\.json$")


_PYARROW_IO = {"py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO"}


def file_io(location: str) -> FileIO:
    # Local files need no per-call FileIO resolution (pyiceberg logs each one it makes).
    scheme, _ = _split_scheme(location)
    if scheme == "file":
        return _local_io()
    return load_file_io(properties={}, location=location)


@functools.cache
def _local_io() -> FileIO:
    return load_file_io(properties=_PYARROW_IO, location="/")


def _split_scheme(location: str) -> tuple[str, str]:
    """("file", "/abs/path") for local paths and file: URIs; (scheme, rest) otherwise."""
    if location.startswith("/"):
        return "file", location
    parsed = urlparse(location)
    if parsed.scheme == "file":
        return "file", parsed.path
    if not parsed.scheme:
        raise InvalidInput(f"Location is not absolute: {location}", field="location")
    return parsed.scheme, f"{parsed.netloc}{parsed.path}"


def normalize_location(location: str) -> str:
    """A canonical form for comparing locations: no trailing slash, no `.` segments.

    Refuses NUL bytes and `..` segments outright rather than resolving them, so a location
    can never climb out of the folder it names."""
    if "\x00" in location:
        raise InvalidInput("Location contains a NUL byte", field="location")
    scheme, path = _split_scheme(location.strip())
    if ".." in path.split("/"):
        raise InvalidInput(f"Location must not contain '..': {location}", field="location")
    path = posixpath.normpath(path).rstrip("/") or "/"
    return path if scheme == "file" else f"{scheme}://{path}"


def ensure_within(location: str, warehouse: str) -> str:
    """The normalized location, or InvalidInput when it lies outside the warehouse."""
    normalized = normalize_location(location)
    root = normalize_location(warehouse)
    if normalized != root and not normalized.startswith(root.rstrip("/") + "/"):
        raise InvalidInput(
            f"Location {location} is outside the warehouse {warehouse}", field="location"
        )
    return normalized


def join(location: str, *parts: str) -> str:
    return "/".join([location.rstrip("/"), *parts])


def sequence_of(metadata_location: str | None) -> int:
    """The NNNNN counter of a metadata file name; 0 when the name carries none."""
    if not metadata_location:
        return 0
    match = _SEQUENCE.match(posixpath.basename(metadata_location))
    return int(match.group(1)) if match else 0


def new_metadata_location(location: str, previous_metadata_location: str | None) -> str:
    sequence = sequence_of(previous_metadata_location) + 1
    return join(location, "metadata", f"{sequence:05d}-{uuid.uuid4()}.metadata.json")


def write_json(path: str, document: str) -> None:
    """Write a new file; never overwrite one, since a metadata file is immutable once named."""
    output = file_io(path).new_output(path)
    with output.create(overwrite=False) as stream:
        stream.write(document.encode("utf-8"))


def delete_file(path: str) -> None:
    file_io(path).delete(path)


def read_json(path: str) -> dict[str, Any]:
    try:
        with file_io(path).new_input(path).open() as stream:
            raw = stream.read()
    except FileNotFoundError as error:
        raise InvalidMetadata(
            f"Metadata file does not exist: {path}", field="metadata_location"
        ) from error
    except OSError as error:
        # A folder, an unreadable file, a broken mount: not a metadata file either way.
        raise InvalidMetadata(
            f"Cannot read metadata file {path}: {error}", field="metadata_location"
        ) from error
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InvalidMetadata(
            f"Metadata file is not valid JSON: {path}: {error}", field="metadata_location"
        ) from error
    if not isinstance(document, dict):
        raise InvalidMetadata(
            f"Metadata file is not a JSON object: {path}", field="metadata_location"
        )
    return document
