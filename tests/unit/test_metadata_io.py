"""Metadata files: names, locations, reading and writing.

Locations are the catalog's first defence against losing data: a location that any layer
below (pyiceberg's FileIO, pyarrow's filesystems, an engine reading it as a URI) could read as
a place outside the warehouse, or as the warehouse itself, must be refused; a location that
is accepted is returned in the one form every later read, write and delete uses."""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from urllib.parse import quote

import pyarrow.fs
import pytest
from pyiceberg.io.pyarrow import PyArrowFileIO

from catalog.core import metadata_io
from catalog.core.errors import InvalidInput, InvalidMetadata


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    """A real warehouse folder, with a namespace folder and a folder outside it to protect."""
    (tmp_path / "wh" / "ns").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "precious.txt").write_text("keep me")
    return tmp_path / "wh"


@pytest.mark.parametrize(
    ("location", "inside"),
    [
        ("/wh/ns/view", True),
        ("file:///wh/ns/view", True),
        ("/wh", True),
        ("/whx/view", False),
        ("/other/view", False),
        ("s3://bucket/view", False),
    ],
)
def test_locations_are_checked_against_the_warehouse(location: str, inside: bool) -> None:
    if inside:
        assert metadata_io.ensure_within(location, "/wh").startswith("/wh")
    else:
        with pytest.raises(InvalidInput, match="outside the warehouse"):
            metadata_io.ensure_within(location, "/wh")


# Every escape an outside test tried, and their relatives: each must be refused with a
# message about the location. "{wh}" is a real warehouse folder, "{wh}/../outside" a real
# folder beside it.
ESCAPES = {
    "{wh}/ns/../../outside": "'..'",
    "{wh}/ns/%2e%2e/%2e%2e/outside": "'..'",
    "{wh}/ns/%2E%2e/%2e%2E/outside": "'..'",
    "{wh}/ns/.%2e/.%2e/outside": "'..'",
    "{wh}/ns/%2e./%2e./outside": "'..'",
    "{wh}/ns/%252e%252e/%252e%252e/outside": "'%' once decoded",
    "{wh}/ns/%25252e%25252e/outside": "'%' once decoded",
    "file://{wh}/ns/%2e%2e/%2e%2e/outside": "'..'",
    "file:{wh}/ns/%2e%2e/%2e%2e/outside": "'..'",
    "file://localhost{wh}/ns/%2e%2e/%2e%2e/outside": "must not name a host",
    "file://{wh}/ns/%252e%252e/outside": "'%' once decoded",
    "FILE://{wh}/ns/%2E%2E/%2E%2E/outside": "'..'",
    "file://{wh}/ns/..%2f..%2foutside": "'..'",
    "{wh}/ns/...": "only of dots",
    "{wh}/ns/. ./outside": "only of dots",
    "{wh}/ns/\uff0e\uff0e/\uff0e\uff0e/outside": "only of dots",
    "{wh}/ns/a\\..\\..\\outside": "backslashes",
    "{wh}/ns/a%5c..%5c..%5coutside": "backslashes",
    "{wh}/ns/a%00b": "NUL",
    "{wh}/ns/a\x00b": "NUL",
    "file://{wh}/ns/.\t./.\t./outside": "control characters",
    "{wh}/ns/.%09./outside": "control characters",
    "{wh}/ns/t?/../../outside": "'?' or '#'",
    "file://{wh}/ns/t#/../../outside": "'?' or '#'",
    "{wh}/ns/t%3f/x": "'?' or '#'",
    "file://otherhost{wh}/ns/t": "must not name a host",
    "{wh}/ns/%ff": "not UTF-8",
    "{wh}/ns/orders.": "end with a dot",
    "{wh}/ns/orders%20": "end with a dot or a space",
    "{wh}/../outside": "'..'",
    "{wh}x/t": "outside the warehouse",
    "{wh}/%2e%2e/outside": "'..'",
    "{wh}": "the warehouse itself",
    "{wh}/": "the warehouse itself",
    "{wh}/.": "the warehouse itself",
    "{wh}/%2e": "percent-escapes",
    "{wh}/%2E/": "percent-escapes",
    "{wh}//./": "the warehouse itself",
    "file://{wh}": "the warehouse itself",
    "file://{wh}/%2e": "percent-escapes",
    # Read as one place by some layers and another by others, and kept as written by a
    # commit's set-location: refused, never rewritten.
    "{wh}/ns/a%2fb": "percent-escapes",
    "{wh}%2fns/t": "percent-escapes",  # pyiceberg and Java: beside the warehouse
    "{wh}/ns/a%20b": "percent-escapes",
    "{wh}/ns/%2e/t": "percent-escapes",
    "file://localhost{wh}/ns/t": "must not name a host",  # pyiceberg: a relative path
    "File://LOCALHOST{wh}/ns/t": "must not name a host",
    " {wh}/ns/t": "begin or end with spaces",  # pyiceberg: relative to the working folder
    "{wh}/ns/t ": "begin or end with spaces",
    "  {wh}/ns/t\n": "control characters",
    "{wh}/ns/cafe\u0301": "NFC",  # "caf\u00e9" is another file name on Linux
    "{wh}/ns/..": "'..'",
    "ns/t": "not absolute",
    "file:ns/t": "not absolute",
    "": "required",
    "   ": "required",
}


@pytest.mark.parametrize(("location", "message"), ESCAPES.items())
def test_a_location_that_could_escape_the_warehouse_or_be_all_of_it_is_refused(
    warehouse: Path, location: str, message: str
) -> None:
    location = location.format(wh=warehouse)

    with pytest.raises(InvalidInput, match=message) as refused:
        metadata_io.ensure_strictly_within(location, str(warehouse))

    assert refused.value.field == "location"
    assert (warehouse.parent / "outside" / "precious.txt").read_text() == "keep me"


@pytest.mark.parametrize(
    ("location", "normal"),
    [
        ("{wh}/ns/t", "{wh}/ns/t"),
        ("{wh}/ns/t/", "{wh}/ns/t"),
        ("{wh}//ns/./t//", "{wh}/ns/t"),
        ("/{wh}/ns/t", "{wh}/ns/t"),  # a leading "//": POSIX may keep it, Linux does not
        ("file://{wh}/ns/t", "{wh}/ns/t"),
        ("file:{wh}/ns/t", "{wh}/ns/t"),
        ("file:///{wh}/ns/t", "{wh}/ns/t"),
        ("FILE:///{wh}/ns/t", "{wh}/ns/t"),
        ("{wh}/ns/a b", "{wh}/ns/a b"),
        ("{wh}/ns/caf\u00e9", "{wh}/ns/caf\u00e9"),
    ],
)
def test_an_accepted_location_is_returned_in_the_one_form_that_is_then_used(
    warehouse: Path, location: str, normal: str
) -> None:
    result = metadata_io.ensure_strictly_within(location.format(wh=warehouse), str(warehouse))

    assert result == normal.format(wh=warehouse)
    assert metadata_io.normalize_location(result) == result, "normalizing is idempotent"
    # What was checked is what pyiceberg touches: its own reading of the result is the result.
    assert PyArrowFileIO.parse_location(result) == ("file", "", result)
    # ... so is its reading of the location as written, and a decoding reader's (pyarrow's
    # from_uri) of the result given as a URI.
    assert os.path.realpath(PyArrowFileIO.parse_location(location.format(wh=warehouse))[2]) == (
        os.path.realpath(result)
    )
    assert "%" not in result
    assert pyarrow.fs.FileSystem.from_uri(f"file://{quote(result)}")[1] == result


def test_a_file_written_at_an_accepted_location_lands_inside_the_warehouse(
    warehouse: Path,
) -> None:
    tmp = warehouse.parent
    before = {p for p in tmp.rglob("*") if not p.is_relative_to(warehouse)}
    for location in ["file://{wh}/ns/a/b", "{wh}/ns/./c", "file:{wh}//ns/d/"]:
        checked = metadata_io.ensure_strictly_within(location.format(wh=warehouse), str(warehouse))
        metadata_io.write_json(metadata_io.join(checked, "f.json"), "{}")

    assert {p for p in tmp.rglob("*") if not p.is_relative_to(warehouse)} == before
    assert sorted(str(p.relative_to(warehouse)) for p in warehouse.rglob("f.json")) == [
        "ns/a/b/f.json",
        "ns/c/f.json",
        "ns/d/f.json",
    ]


def test_a_metadata_file_path_is_checked_as_written(warehouse: Path) -> None:
    """ensure_within (not strictly) is for metadata files: the warehouse itself is allowed,
    a percent-escape is not (the kernel registers the file at the path as written)."""
    assert metadata_io.ensure_within(f"{warehouse}/.", str(warehouse)) == str(warehouse)
    assert metadata_io.ensure_within(
        f"file://{warehouse}/ns/t/metadata/00001-a-b.json", str(warehouse)
    ) == (f"{warehouse}/ns/t/metadata/00001-a-b.json")
    with pytest.raises(InvalidInput, match="percent-escapes"):
        metadata_io.ensure_within(f"{warehouse}/ns/t/metadata/00001-a%2Db.json", str(warehouse))
    with pytest.raises(InvalidInput, match="'..'"):
        metadata_io.ensure_within(
            f"{warehouse}/ns/t/metadata/%2e%2e/%2e%2e/%2e%2e/%2e%2e/outside/precious.txt",
            str(warehouse),
        )


def test_a_symbolic_link_inside_the_warehouse_that_points_outside_is_refused(
    warehouse: Path,
) -> None:
    (warehouse / "ns" / "link").symlink_to(warehouse.parent / "outside")

    for location in [f"{warehouse}/ns/link", f"{warehouse}/ns/link/t", f"{warehouse}/ns/link/a/b"]:
        with pytest.raises(InvalidInput, match="symbolic link") as refused:
            metadata_io.ensure_strictly_within(location, str(warehouse))
        assert refused.value.field == "location"
    assert not metadata_io.is_inside(f"{warehouse}/ns/link/t", str(warehouse))
    assert metadata_io.is_inside(f"{warehouse}/ns/real/t", str(warehouse))


def test_a_dangling_symbolic_link_that_points_outside_is_refused(warehouse: Path) -> None:
    """A link to a folder not made yet: the first write through it would make it outside."""
    (warehouse / "ns" / "later").symlink_to(warehouse.parent / "not-yet")

    with pytest.raises(InvalidInput, match="symbolic link"):
        metadata_io.ensure_strictly_within(f"{warehouse}/ns/later/t", str(warehouse))


def test_a_symbolic_link_to_the_warehouse_itself_is_the_warehouse_itself(
    warehouse: Path,
) -> None:
    (warehouse / "ns" / "up").symlink_to(warehouse)

    with pytest.raises(InvalidInput, match="the warehouse itself"):
        metadata_io.ensure_strictly_within(f"{warehouse}/ns/up", str(warehouse))


def test_a_symbolic_link_within_the_warehouse_is_resolved_to_the_folder_it_leads_to(
    warehouse: Path,
) -> None:
    """So two spellings of one folder are one location, and the overlap check sees them."""
    (warehouse / "ns" / "orders").mkdir()
    (warehouse / "alias").symlink_to(warehouse / "ns")

    assert metadata_io.ensure_strictly_within(f"{warehouse}/alias/orders/x", str(warehouse)) == (
        f"{warehouse}/ns/orders/x"
    )
    assert metadata_io.locations_overlap(f"{warehouse}/alias/orders", f"{warehouse}/ns/orders")


def test_a_warehouse_reached_through_a_symbolic_link_keeps_its_own_spelling(
    tmp_path: Path,
) -> None:
    (tmp_path / "real-wh" / "ns").mkdir(parents=True)
    (tmp_path / "linked-wh").symlink_to(tmp_path / "real-wh")
    linked = f"{tmp_path}/linked-wh"

    assert metadata_io.ensure_strictly_within(f"{linked}/ns/t", linked) == f"{linked}/ns/t"
    with pytest.raises(InvalidInput, match="outside the warehouse"):
        metadata_io.ensure_strictly_within(f"{tmp_path}/real-wh/ns/t", linked)


@pytest.mark.parametrize(
    ("location", "normal"),
    [
        ("s3://bucket/wh/ns/t/", "s3://bucket/wh/ns/t"),
        ("S3://Bucket/wh//ns/./t", "s3://bucket/wh/ns/t"),
        ("s3://bucket/wh/ns/a b", "s3://bucket/wh/ns/a b"),
    ],
)
def test_object_store_locations_are_normalized_the_same_way(location: str, normal: str) -> None:
    assert metadata_io.ensure_strictly_within(location, "s3://bucket/wh") == normal


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("s3://bucket/wh/ns/%2e%2e/%2e%2e/other", "'..'"),
        ("s3://bucket/wh/ns/a%20b", "percent-escapes"),  # S3FileIO: the key 'a%20b'
        ("s3://bucket/wh/ns/t?endpoint_override=evil.example", "'?' or '#'"),
        ("s3://bucket%2fother/wh/ns/t", "percent-encode"),
        ("s3://user:secret@bucket/wh/ns/t", "user name"),
        ("s3:///wh/ns/t", "bucket or host"),
        ("s3://other-bucket/wh/ns/t", "outside the warehouse"),
        ("s3://bucket/wh", "the warehouse itself"),
    ],
)
def test_object_store_locations_that_could_escape_are_refused(location: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        metadata_io.ensure_strictly_within(location, "s3://bucket/wh")


def test_the_literal_form_keeps_percent_signs_that_a_data_file_path_may_hold() -> None:
    path = "/wh/t/data/region=a%2Fb/x%20y.parquet"
    assert metadata_io.normal_form(path) == path
    assert metadata_io.normal_form("file:" + path) == path
    with pytest.raises(InvalidInput):
        metadata_io.normal_form(" " + path)  # pyiceberg would read it relative to the cwd


@pytest.mark.parametrize(
    ("left", "right", "overlap"),
    [
        ("/wh/a", "/wh/a", True),
        ("/wh/a", "/wh/a/b", True),
        ("/wh/a/b", "/wh/a", True),
        ("/wh/a", "/wh/ab", False),
        ("/wh/ab", "/wh/a", False),
        ("/wh/a/", "/wh/a", True),
        ("file:///wh/a", "/wh/a/b", True),
        ("/wh/./a", "/wh/a", True),
        ("/wh/a%2fb", "/wh/a/b/c", True),
        ("/wh/a%20b", "/wh/a b", True),
        ("/wh", "/wh/ns/t", True),
        ("/", "/wh/ns/t", True),
        ("/wh/a", "/wh/b", False),
        ("s3://b/wh/a", "s3://b/wh/a/x", True),
        ("s3://B/wh/a", "s3://b/wh/a", True),
        ("s3://b/wh/a", "s3://c/wh/a", False),
        ("s3://b/wh/a", "/wh/a", False),
        ("/wh/%2e%2e", "/x", True),  # stored before '..' was refused: still compared
        ("not a location", "/wh/a", False),
    ],
)
def test_locations_overlap_when_one_holds_the_other(left: str, right: str, overlap: bool) -> None:
    assert metadata_io.locations_overlap(left, right) is overlap
    assert metadata_io.locations_overlap(right, left) is overlap


def test_metadata_file_names_count_up_from_the_previous_file() -> None:
    first = metadata_io.new_metadata_location("/wh/v", None)
    assert first.startswith("/wh/v/metadata/00001-") and first.endswith(".metadata.json")
    second = metadata_io.new_metadata_location("/wh/v", first)
    assert second.startswith("/wh/v/metadata/00002-")


def test_a_metadata_file_is_never_overwritten(tmp_path: Path) -> None:
    path = str(tmp_path / "f.json")
    metadata_io.write_json(path, "{}")
    with pytest.raises(FileExistsError):
        metadata_io.write_json(path, "{}")


def test_reading_a_file_that_is_not_json_names_the_problem(tmp_path: Path) -> None:
    path = tmp_path / "broken.metadata.json"
    path.write_text("{not json")
    with pytest.raises(InvalidMetadata, match="not valid JSON"):
        metadata_io.read_json(str(path))
    with pytest.raises(InvalidMetadata, match="does not exist"):
        metadata_io.read_json(str(tmp_path / "missing.metadata.json"))


@pytest.mark.parametrize(
    "content",
    [
        b"[" * 100_000,  # deeper than Python's decoder recurses
        gzip.compress(b'{"format-version": 2}' * 50)[:40],  # gzip cut short: EOFError
        # A gzip header over corrupt deflate data: zlib.error, which is neither an OSError
        # nor a ValueError.
        gzip.compress(b'{"format-version": 2}' * 50)[:10] + b"\x00garbage" * 5,
    ],
    ids=["nested too deep", "gzip cut short", "gzip over corrupt data"],
)
def test_a_file_no_json_decoder_can_read_is_invalid_metadata(tmp_path: Path, content) -> None:
    path = tmp_path / "odd.metadata.json"
    path.write_bytes(content)
    with pytest.raises(InvalidMetadata, match="not valid JSON"):
        metadata_io.read_json(str(path))


# -- what the layers below do: the assumptions the rules above rest on -----------------------
# If a pyiceberg or pyarrow upgrade changes one of these, the rules must be looked at again.


def test_pyiceberg_reads_plain_paths_through_abspath_and_file_uris_literally() -> None:
    parse = PyArrowFileIO.parse_location
    assert parse("/wh/ns/../x") == ("file", "", "/wh/x")
    assert parse("/wh/ns/%2e%2e/x") == ("file", "", "/wh/ns/%2e%2e/x")
    assert parse("//wh/x") == ("file", "", "//wh/x")
    assert parse("file:///wh/ns/%2e%2e/x") == ("file", "", "/wh/ns/%2e%2e/x")
    assert parse("file:///wh/ns/../x") == ("file", "", "/wh/ns/../x")
    assert parse("file:///wh/t?x#y") == ("file", "", "/wh/t")
    assert parse("file:///wh/.\t./x") == ("file", "", "/wh/../x")  # urllib drops the tab
    assert parse("file://host/wh/x") == ("file", "host", "host/wh/x")  # relative!
    assert parse("s3://b/a/%2e%2e/c") == ("s3", "b", "b/a/%2e%2e/c")
    assert parse("relative/x")[2] == os.path.abspath("relative/x")


def test_pyarrow_decodes_percent_escapes_in_uris_once_and_not_in_plain_paths() -> None:
    from_uri = pyarrow.fs.FileSystem.from_uri
    assert from_uri("file:///wh/ns/%2e%2e/x")[1] == "/wh/ns/../x"
    assert from_uri("file:///wh/ns/%2E%2e/x")[1] == "/wh/ns/../x"
    assert from_uri("file:///wh/ns/a%2fb")[1] == "/wh/ns/a/b"
    assert from_uri("file:///wh/ns/%252e")[1] == "/wh/ns/%2e"
    assert from_uri("file:///wh/ns/a%00b")[1] == "/wh/ns/a\x00b"
    assert from_uri("/wh/ns/%2e%2e/x")[1] == "/wh/ns/%2e%2e/x"


def test_pyarrows_local_filesystem_leaves_dot_dot_to_the_operating_system(
    tmp_path: Path,
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "f").write_text("x")
    local = pyarrow.fs.LocalFileSystem()
    assert local.get_file_info(f"{tmp_path}/a/../f").type == pyarrow.fs.FileType.File
    assert local.get_file_info(f"{tmp_path}/a/%2e%2e/f").type == pyarrow.fs.FileType.NotFound
