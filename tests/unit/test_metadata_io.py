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
