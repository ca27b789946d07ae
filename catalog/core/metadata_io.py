"""Reading and writing metadata files, and keeping locations inside the warehouse.

File IO goes through pyiceberg's FileIO, so the same code writes to a local folder or to
object storage. Metadata files are named like Iceberg's Java catalogs name them:
`metadata/NNNNN-<uuid>.metadata.json`, NNNNN counting up from the base file.

Locations are checked in the form they are then used in. The layers below read one string
in different ways (measured on pyiceberg 0.12 and pyarrow 26):

- pyiceberg's `PyArrowFileIO.parse_location` gives a plain path to `os.path.abspath` (`.`,
  `..`, `//` and a trailing slash resolved as text; a leading `//` kept; a relative path
  joined to the process's working folder) and splits anything else with urllib's
  `urlsplit`, which drops tabs and newlines anywhere, strips leading control characters and
  spaces, and cuts `?query` and `#fragment`; a `file:` URI's path is then used as it is
  (`..` unresolved, `%2e` literal) and `file://host/x` becomes the *relative* path `host/x`.
- pyarrow's `FileSystem.from_uri` (and engines that read locations as URIs) percent-decodes
  the path once (`%2e%2e` -> `..`, `%2f` -> `/`, `%00` -> NUL, `%252e` -> `%2e`) and takes
  options from the query (`?endpoint_override=` for s3).
- pyarrow's `LocalFileSystem` passes a path to the operating system unchanged: `..` is then
  resolved physically (through symbolic links), `//` and `.` ignored, backslashes literal.

So a location is refused when any of these layers could read it as a different place, and
otherwise normalised only in ways every layer reads as the same place (`//`, `.`, a trailing
slash, `file:` for a plain path, symbolic links below the warehouse). That matters because
not every caller stores the normal form: a commit's `set-location` and a registered file
keep the location as written, and pyiceberg and Java then read it literally. So a location
with a percent-escape (`a%2fb`: one folder to pyiceberg and Java, two to pyarrow's
`from_uri`), a `file://localhost/` URI (a relative path to pyiceberg) or surrounding
whitespace is refused, never rewritten."""

from __future__ import annotations

import functools
import gzip
import json
import os
import posixpath
import re
import stat
import unicodedata
import uuid
import zlib
from typing import Any
from urllib.parse import SplitResult, unquote, urlsplit

from pyiceberg.io import FileIO, load_file_io

from catalog.core.errors import InvalidInput, InvalidMetadata

_SEQUENCE = re.compile(r"^(\d+)-[0-9a-fA-F-]+\.metadata\.json$")

_PYARROW_IO = {"py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO"}

#: C0 and C1 control characters and DEL: urllib drops some of them silently, so "file:///w/.\t./x"
#: would be read as "/w/../x".
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f]")

#: Object stores whose authority is "container@account"; elsewhere a user part is refused.
_USER_IN_AUTHORITY = frozenset({"abfs", "abfss", "wasb", "wasbs"})

#: Shown in messages: enough of a hostile location to recognise it, not a megabyte of it.
_SHOWN = 300


#: FileIO properties for object stores (pyiceberg's names: `s3.endpoint`,
#: `s3.access-key-id`, ...), set once per process by `configure` (FILE_IO_PROPERTIES).
_properties: dict[str, str] = {}


def configure(properties: dict[str, str]) -> None:
    """The FileIO properties every non-local read and write uses from now on."""
    _properties.clear()
    _properties.update({str(k): str(v) for k, v in properties.items()})
    _remote_io.cache_clear()


def file_io(location: str) -> FileIO:
    # Local files need no per-call FileIO resolution (pyiceberg logs each one it makes).
    if _is_local(location):
        return _local_io()
    return _remote_io(_split(location, location).scheme)


@functools.cache
def _remote_io(scheme: str) -> FileIO:
    return load_file_io(properties={**_PYARROW_IO, **_properties}, location=f"{scheme}://")


def filesystem(location: str) -> tuple[Any, str]:
    """A pyarrow FileSystem for `location` configured like `file_io`'s, and the path in it
    (listing folders, which pyiceberg's FileIO cannot do)."""
    from pyarrow import fs
    from pyiceberg.io.pyarrow import PyArrowFileIO

    if _is_local(location):
        return fs.LocalFileSystem(), location.removeprefix("file://")
    io = file_io(location)
    if not isinstance(io, PyArrowFileIO):  # pragma: no cover - _PYARROW_IO asks for it
        io = PyArrowFileIO(properties=_properties)
    scheme, netloc, path = PyArrowFileIO.parse_location(location, _properties)
    return io.fs_by_scheme(scheme, netloc), path


@functools.cache
def _local_io() -> FileIO:
    return load_file_io(properties=_PYARROW_IO, location="/")


def _is_local(location: str) -> bool:
    if location.startswith("/"):
        return True
    scheme = _split(location, location).scheme
    if not scheme:
        raise InvalidInput(f"Location is not absolute: {location[:_SHOWN]}", field="location")
    return scheme == "file"


# -- normal forms ---------------------------------------------------------------------------


def _refuse(message: str, location: str) -> InvalidInput:
    return InvalidInput(f"{message}: {location[:_SHOWN]!r}", field="location")


def _check_characters(text: str, location: str) -> None:
    """Characters some layer reads as something else: refused, never interpreted."""
    if "\x00" in text:
        raise InvalidInput("Location contains a NUL character", field="location")
    if CONTROL_CHARACTERS.search(text):
        raise _refuse("Location must not contain control characters", location)
    if "\\" in text:
        raise _refuse(
            "Location must not contain backslashes (some filesystems read them as '/')",
            location,
        )
    if "?" in text or "#" in text:
        raise _refuse(
            "Location must not contain '?' or '#' (URI readers cut the path there, and "
            "pyarrow takes filesystem options from a query)",
            location,
        )


def _split(text: str, location: str) -> SplitResult:
    try:
        return urlsplit(text)
    except ValueError as error:  # an unbalanced IPv6 bracket, an invalid port
        raise _refuse(f"Location is not a valid URI ({error})", location) from error


def _parse(text: str, location: str) -> tuple[str, str, str]:
    """(scheme, authority, path) as pyiceberg's `PyArrowFileIO.parse_location` splits `text`
    (urllib's `urlsplit`), with "file" and "" for plain paths and local `file:` URIs."""
    if text.startswith("/"):
        return "file", "", text
    parts = _split(text, location)
    if not parts.scheme:
        raise _refuse("Location is not absolute", location)
    if parts.scheme == "file":
        # PyArrowFileIO reads file://host/x, "localhost" too, as the relative path "host/x".
        if parts.netloc:
            raise _refuse(
                "A file: location must not name a host (write file:///path or /path)", location
            )
        if not parts.path.startswith("/"):
            raise _refuse("Location is not absolute", location)
        return "file", "", parts.path
    if not parts.netloc:
        raise _refuse(f"A {parts.scheme}: location needs a bucket or host", location)
    if "%" in parts.netloc:
        raise _refuse("Location must not percent-encode its bucket or host", location)
    if "@" in parts.netloc and parts.scheme not in _USER_IN_AUTHORITY:
        raise _refuse("Location must not carry a user name or password", location)
    # Host names are case-insensitive and bucket names lower-case: one spelling per place.
    return parts.scheme, parts.netloc.lower(), parts.path


def _segments(path: str, location: str, *, strict_names: bool) -> list[str]:
    """The path's folder names, with the empty ones and `.` dropped (every layer reads `a//b`
    and `a/./b` as `a/b`, or the normal form chooses that reading for an object store)."""
    segments = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        # `..` climbs out; so may `...`, `. .` or fullwidth `．．` on filesystems that drop
        # trailing dots and spaces (Windows, SMB) or fold compatibility characters (NFKC).
        if not unicodedata.normalize("NFKC", segment).strip(". "):
            raise _refuse("Location must not contain '..' or names made only of dots", location)
        if strict_names and segment[-1] in ". ":
            # Such filesystems would read "orders." as "orders": another object's folder.
            raise _refuse(
                "A folder name in a location must not end with a dot or a space", location
            )
        segments.append(segment)
    return segments


def _assemble(scheme: str, authority: str, segments: list[str]) -> str:
    path = "/" + "/".join(segments)
    if scheme == "file":
        return path
    return f"{scheme}://{authority}" + (path if segments else "")


def normalize_location(location: str) -> str:
    """The one form a location is checked, stored and used in: `file:` URIs as plain paths,
    no `.` segments, no `//`, no trailing slash, scheme and host in lower case. Each of these
    is read as the same place by every layer, so a caller that keeps the location as written
    (a commit's `set-location`) touches the place that was checked.

    Refused (InvalidInput, field "location") instead of interpreted: a location that is not
    absolute or has surrounding whitespace, NUL and other control characters, backslashes,
    `?` and `#`, any percent-escape (pyiceberg and Java read `%2e` literally, pyarrow's
    `from_uri` decodes it: the message says what the decoded reading would be, `..` for
    `%2e%2e`), `..` and names made only of dots, names ending with a dot or a space, names
    not in Unicode NFC (two spellings of one name), and a `file:` URI naming a host."""
    if not isinstance(location, str) or not location.strip():
        raise InvalidInput("A location is required", field="location")
    _check_characters(location, location)
    if location != location.strip():
        raise _refuse(
            "Location must not begin or end with spaces (pyiceberg reads ' /x' as a relative path)",
            location,
        )
    scheme, authority, path = _parse(location, location)
    if "%" in path:
        # Name the decoded reading's problem when it has one (a climb out reads better as
        # "'..'" than as "percent-escape"), then refuse the escape itself either way.
        try:
            decoded = unquote(path, errors="strict")
        except UnicodeDecodeError as error:
            raise _refuse("Location has percent-escapes that are not UTF-8", location) from error
        if "%" in decoded:
            raise _refuse(
                "Location must not contain '%' once decoded (double-encoded escapes such as "
                "%252e are read differently by each layer that decodes)",
                location,
            )
        _check_characters(decoded, location)
        _segments(decoded, location, strict_names=True)
        raise _refuse(
            "Location must not contain percent-escapes (pyiceberg and Java read them "
            "literally, pyarrow decodes them: two places); write the characters themselves",
            location,
        )
    if unicodedata.normalize("NFC", path) != path:
        raise _refuse("Location must be in Unicode NFC (one spelling per name)", location)
    return _assemble(scheme, authority, _segments(path, location, strict_names=True))


def normal_form(location: str) -> str:
    """`location` as pyiceberg's PyArrowFileIO would touch it, percent-escapes kept literal
    (a data file's path may hold them: pyiceberg and Spark write partition values with
    `quote_plus`, so `v=a%2Fb` is one folder). Checked like `normalize_location`, but
    percent signs, names in any Unicode form and names ending with a dot or a space are
    allowed: this is the exact file that is named. catalog.core.purge checks the decoded
    readings of such a path separately."""
    if not isinstance(location, str) or not location:
        raise InvalidInput("A location is required", field="location")
    _check_characters(location, location)
    scheme, authority, path = _parse(location, location)
    return _assemble(scheme, authority, _segments(path, location, strict_names=False))


# -- containment ----------------------------------------------------------------------------


def _same_or_below(location: str, root: str) -> bool:
    return location == root or location.startswith(root.rstrip("/") + "/")


def resolved(path: str) -> str:
    """A local absolute path with the symbolic links of its longest existing prefix resolved
    (what the operating system will reach), the rest kept as written."""
    head, tail = path, []
    while head != "/" and not os.path.lexists(head):
        head, name = os.path.split(head)
        tail.append(name)
    # realpath follows a dangling link too: a link to a folder not yet made still points out.
    return posixpath.join(os.path.realpath(head), *reversed(tail))


def is_inside(location: str, root: str, *, strictly: bool = False) -> bool:
    """Whether normalized `location` is `root` or below it (strictly: below only). Local
    paths must be inside both as written and where they really lead, so a symbolic link
    inside the root that points elsewhere does not count as inside."""
    if not _same_or_below(location, root) or (strictly and location == root):
        return False
    if location.startswith("/"):
        real, real_root = resolved(location), resolved(root)
        if not _same_or_below(real, real_root) or (strictly and real == real_root):
            return False
    return True


def _canonical_below(location: str, root: str, original: str) -> str:
    """`location` (normalized, inside `root` as written) with the symbolic links below
    `root` resolved, under `root` as written: so two spellings of one folder compare equal,
    and what is checked is the folder that is then touched."""
    if not location.startswith("/"):
        return location
    real, real_root = resolved(location), resolved(root)
    if real == real_root:
        return root
    if not _same_or_below(real, real_root):
        raise InvalidInput(
            f"Location {original[:_SHOWN]} leads outside the warehouse through a symbolic link",
            field="location",
        )
    rest = real[len(real_root.rstrip("/")) :]
    canonical = _assemble("file", "", _segments(root + rest, original, strict_names=True))
    if "%" in canonical:
        raise _refuse("Location leads through a symbolic link to a name with '%'", original)
    _check_characters(canonical, original)
    return canonical


def ensure_within(location: str, warehouse: str, *, strictly: bool = False) -> str:
    """The normalized location (see `normalize_location`; local symbolic links below the
    warehouse resolved), or InvalidInput when it lies outside the warehouse (with
    `strictly`, the warehouse itself is refused too: no object may own all of it)."""
    normalized = normalize_location(location)
    root = normalize_location(warehouse)
    if not _same_or_below(normalized, root):
        raise InvalidInput(
            f"Location {location[:_SHOWN]} is outside the warehouse {warehouse}",
            field="location",
        )
    canonical = _canonical_below(normalized, root, location)
    if strictly and canonical == root:
        raise InvalidInput(
            f"Location {location[:_SHOWN]} is the warehouse itself; an object needs a folder "
            "of its own inside it",
            field="location",
        )
    return canonical


def ensure_strictly_within(location: str, warehouse: str) -> str:
    """An object's location: normalized and strictly inside the warehouse (the warehouse
    itself would make the object own, and a purge of it empty, every other object's files)."""
    return ensure_within(location, warehouse, strictly=True)


def _comparable_forms(location: str) -> set[str]:
    """Every form `location` could be compared in: decoded, literal, as written, each
    percent-decoded reading with `..` resolved as text (a location stored before these rules
    may hold `%2e%2e`) and, for a local path, where it really leads. A form that cannot be
    made is left out."""
    if not isinstance(location, str):
        return set()
    forms = {location.rstrip("/") or "/"}
    for normalize in (normalize_location, normal_form):
        try:
            forms.add(normalize(location))
        except InvalidInput:
            continue
    current = location
    while True:
        try:
            scheme, authority, path = _parse(current, location)
        except InvalidInput:
            break
        textual = posixpath.normpath("/" + path.lstrip("/"))
        forms.add(_assemble(scheme, authority, [name for name in textual.split("/") if name]))
        if (decoded := unquote(current)) == current:
            break
        current = decoded
    forms |= {resolved(form) for form in forms if form.startswith("/")}
    return forms


def locations_overlap(left: str, right: str) -> bool:
    """Whether two locations are the same folder or one holds the other, compared in every
    form either could be read in (so a stored location from before a rule changed is still
    compared, and `/wh/a` and `/wh/ab` do not overlap). Never raises: two live objects must
    not own overlapping locations, and the safe answer for an odd one is to compare more."""
    left_forms, right_forms = _comparable_forms(left), _comparable_forms(right)
    return any(
        _same_or_below(a, b) or _same_or_below(b, a) for a in left_forms for b in right_forms
    )


# -- metadata files -------------------------------------------------------------------------


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


#: The largest metadata file (JSON, manifest list, manifest) the app reads into memory; real
#: ones are KiB to a few MiB.
MAX_METADATA_FILE_BYTES = 256 * 1024 * 1024


#: What reading a file that is not the Avro file metadata names raises: it is missing, or
#: pyiceberg's decoder read whatever bytes it holds (a negative length is a SystemError).
UNREADABLE_METADATA = (
    OSError,
    ValueError,
    EOFError,
    SystemError,
    KeyError,
    IndexError,
    TypeError,
    OverflowError,
)


def check_regular_file(path: str, *, max_bytes: int | None = MAX_METADATA_FILE_BYTES) -> None:
    """OSError unless a local `path` is a regular file of at most `max_bytes` (None: any
    size): metadata names its files, and an engine that writes into the warehouse can
    commit a FIFO (whose read waits forever, a server thread lost per reader), a device or
    a huge file as one. Object stores have only objects; their paths pass."""
    if not path.startswith("/"):
        if not _is_local(path):
            return
        path = urlsplit(path).path
    status = os.stat(path)  # FileNotFoundError for a missing one, as the read would say
    if not stat.S_ISREG(status.st_mode):
        raise OSError(f"Not a regular file: {path[:_SHOWN]}")
    if max_bytes is not None and status.st_size > max_bytes:
        raise OSError(f"Larger than {max_bytes} bytes: {path[:_SHOWN]}")


def decode_json(raw: bytes) -> Any:
    """A metadata file's bytes as JSON, gzip-compressed or not: by content, not by name (Java
    names such files `.gz.metadata.json`, others `.metadata.json.gz`, and attached tables are
    written by other systems). ValueError for bytes that are neither: bad or corrupt gzip,
    bad UTF-8, bad JSON, or arrays nested deeper than Python's decoder recurses (a writer
    may put any file where metadata points; no metadata nests so deep)."""
    try:
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        return json.loads(raw)
    except ValueError:
        raise
    except (OSError, EOFError, zlib.error, RecursionError) as error:
        # zlib.error: a gzip header over corrupt data (it is neither an OSError nor a
        # ValueError, and was a 500 on every reader).
        raise ValueError(str(error)) from error


def read_json(path: str) -> dict[str, Any]:
    try:
        check_regular_file(path)
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
        document = decode_json(raw)
    except ValueError as error:
        raise InvalidMetadata(
            f"Metadata file is not valid JSON: {path}: {error}", field="metadata_location"
        ) from error
    if not isinstance(document, dict):
        raise InvalidMetadata(
            f"Metadata file is not a JSON object: {path}", field="metadata_location"
        )
    return document
