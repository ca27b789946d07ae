"""Reading and writing metadata files, and keeping locations inside the warehouse.

File IO goes through pyiceberg's FileIO, so the same code writes to a local folder or to
object storage. Metadata files are named like Iceberg's Java catalogs name them:
`metadata/NNNNN-<uuid>.metadata.json`, NNNNN counting up from the base file."""

from __future__ import annotations

import functools
import json
import os
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
    """The one form a location is checked, stored and used in: no trailing slash, no `.`
    segments, `file:` URIs as plain paths.

    Filesystem layers disagree on what a location means: pyiceberg's FileIO takes `%2e`
    literally, pyarrow's `FileSystem.from_uri` and Hadoop decode it to `.`. So anything they
    could read differently is refused rather than interpreted: NUL, backslashes, percent
    escapes, and `..` segments (never resolved: a location cannot climb out of its folder)."""
    if isinstance(location, str) and "%" in location:
        raise InvalidInput(
            "Location must not contain percent-escapes (filesystems read them differently): "
            f"{location[:300]}",
            field="location",
        )
    return normal_form(location)


def normal_form(location: str) -> str:
    """`location` normalized as `normalize_location` does, percent signs allowed (a data
    file's path may hold them; see catalog.core.purge, which checks both readings)."""
    if not isinstance(location, str) or not location.strip():
        raise InvalidInput("A location is required", field="location")
    if "\x00" in location:
        raise InvalidInput("Location contains a NUL character", field="location")
    if "\\" in location:
        raise InvalidInput(
            f"Location must not contain backslashes: {location[:300]}", field="location"
        )
    scheme, path = _split_scheme(location.strip())
    if ".." in path.split("/"):
        raise InvalidInput(f"Location must not contain '..': {location[:300]}", field="location")
    path = posixpath.normpath(path).rstrip("/") or "/"
    if scheme == "file" and path.startswith("//"):
        path = "/" + path.lstrip("/")  # POSIX keeps a leading "//"; the filesystem does not
    return path if scheme == "file" else f"{scheme}://{path}"


def is_inside(location: str, root: str, *, strictly: bool = False) -> bool:
    """Whether normalized `location` is `root` or below it (strictly: below only). Local
    paths are compared by where they really lead, so a symbolic link inside the root that
    points elsewhere does not count as inside."""
    if location == root:
        return not strictly
    if not location.startswith(root.rstrip("/") + "/"):
        return False
    if location.startswith("/"):
        real, real_root = os.path.realpath(location), os.path.realpath(root)
        return real != real_root and real.startswith(real_root.rstrip("/") + "/")
    return True


def ensure_within(location: str, warehouse: str, *, strictly: bool = False) -> str:
    """The normalized location, or InvalidInput when it lies outside the warehouse (with
    `strictly`, the warehouse itself is refused too: no object may own all of it)."""
    normalized = normalize_location(location)
    root = normalize_location(warehouse)
    if strictly and normalized == root:
        raise InvalidInput(
            f"Location {location[:300]} is the warehouse itself; an object needs a folder of "
            "its own inside it",
            field="location",
        )
    if not is_inside(normalized, root):
        raise InvalidInput(
            f"Location {location[:300]} is outside the warehouse {warehouse}", field="location"
        )
    return normalized


def locations_overlap(left: str, right: str) -> bool:
    """Whether two normalized locations are the same folder or one holds the other."""
    left, right = left.rstrip("/"), right.rstrip("/")
    return left == right or left.startswith(right + "/") or right.startswith(left + "/")


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
