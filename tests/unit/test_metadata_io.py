"""Metadata files: names, locations, reading and writing."""

from __future__ import annotations

import pytest

from catalog.core import metadata_io
from catalog.core.errors import InvalidInput, InvalidMetadata


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
def test_locations_are_checked_against_the_warehouse(location, inside):
    if inside:
        assert metadata_io.ensure_within(location, "/wh").startswith("/wh")
    else:
        with pytest.raises(InvalidInput, match="outside the warehouse"):
            metadata_io.ensure_within(location, "/wh")


@pytest.mark.parametrize("location", ["/wh/../etc/passwd", "/wh/a\x00b", "relative/path"])
def test_locations_that_climb_out_or_are_malformed_are_refused(location):
    with pytest.raises(InvalidInput):
        metadata_io.ensure_within(location, "/wh")


def test_metadata_file_names_count_up_from_the_previous_file():
    first = metadata_io.new_metadata_location("/wh/v", None)
    assert first.startswith("/wh/v/metadata/00001-") and first.endswith(".metadata.json")
    second = metadata_io.new_metadata_location("/wh/v", first)
    assert second.startswith("/wh/v/metadata/00002-")


def test_a_metadata_file_is_never_overwritten(tmp_path):
    path = str(tmp_path / "f.json")
    metadata_io.write_json(path, "{}")
    with pytest.raises(FileExistsError):
        metadata_io.write_json(path, "{}")


def test_reading_a_file_that_is_not_json_names_the_problem(tmp_path):
    path = tmp_path / "broken.metadata.json"
    path.write_text("{not json")
    with pytest.raises(InvalidMetadata, match="not valid JSON"):
        metadata_io.read_json(str(path))
    with pytest.raises(InvalidMetadata, match="does not exist"):
        metadata_io.read_json(str(tmp_path / "missing.metadata.json"))


@pytest.mark.parametrize(
    "location",
    ["/wh/ns/%2e%2e/x", "/wh/%2e", "file:///wh/a%252e", "/wh/a\\..\\b", "/wh/a\x00b", ""],
)
def test_a_location_a_filesystem_could_read_differently_is_refused(location):
    with pytest.raises(InvalidInput):
        metadata_io.normalize_location(location)


def test_the_warehouse_itself_is_refused_for_an_object():
    with pytest.raises(InvalidInput, match="warehouse itself"):
        metadata_io.ensure_within("/wh/.", "/wh", strictly=True)
    assert metadata_io.ensure_within("//wh/t/", "/wh", strictly=True) == "/wh/t"


@pytest.mark.parametrize(
    ("left", "right", "overlap"),
    [
        ("/wh/a", "/wh/a", True),
        ("/wh/a", "/wh/a/b", True),
        ("/wh/a/b", "/wh/a", True),
        ("/wh/a", "/wh/ab", False),
        ("/wh/ab", "/wh/a", False),
        ("s3://b/wh/a", "s3://b/wh/a/x", True),
    ],
)
def test_locations_overlap_when_one_holds_the_other(left, right, overlap):
    assert metadata_io.locations_overlap(left, right) is overlap


def test_a_symbolic_link_out_of_the_warehouse_is_not_inside_it(tmp_path):
    warehouse, outside = tmp_path / "wh", tmp_path / "outside"
    warehouse.mkdir()
    outside.mkdir()
    (warehouse / "link").symlink_to(outside)
    assert not metadata_io.is_inside(f"{warehouse}/link/t", str(warehouse))
    assert metadata_io.is_inside(f"{warehouse}/real/t", str(warehouse))
