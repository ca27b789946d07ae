"""Choosing the metadata file of a table read from its folder, and time travel, by the rules
of ClickHouse's Iceberg engine (the third seed), on metadata files of real shape."""

from __future__ import annotations

import gzip
import json
import uuid
from pathlib import Path

import pytest

from catalog.core.attached import metadata_version, resolve_metadata_file, state_at
from catalog.core.errors import InvalidInput, NotFound

TABLE_UUID = str(uuid.uuid4())


def document(*, version: int, updated: int, table_uuid: str = TABLE_UUID) -> dict:
    return {
        "format-version": 2,
        "table-uuid": table_uuid,
        "location": "/somewhere",
        "last-updated-ms": updated,
        "current-schema-id": 1,
        "schemas": [],
        "current-snapshot-id": 20,
        "snapshots": [
            {"snapshot-id": 10, "timestamp-ms": 1000, "schema-id": 0},
            {"snapshot-id": 20, "timestamp-ms": 2000, "schema-id": 1},
        ],
        "snapshot-log": [
            {"snapshot-id": 10, "timestamp-ms": 1000},
            {"snapshot-id": 20, "timestamp-ms": 2000},
        ],
        "marker": version,
    }


def write(folder: Path, name: str, content: dict | bytes) -> None:
    (folder / "metadata").mkdir(parents=True, exist_ok=True)
    raw = content if isinstance(content, bytes) else json.dumps(content).encode()
    if name.endswith(".gz") or ".gz." in name:
        raw = gzip.compress(raw)
    (folder / "metadata" / name).write_bytes(raw)


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("3.metadata.json", 3),
        ("v12.metadata.json", 12),
        (f"00007-{uuid.uuid4()}.metadata.json", 7),
        (f"5-{uuid.uuid4()}.metadata.json.gz", 5),
        (f"00004-{uuid.uuid4()}.gz.metadata.json", 4),
        ("v2.gz.metadata.json", 2),
        ("latest.metadata.json", None),
        ("00007-notauuid.metadata.json", None),
    ],
)
def test_versions_are_read_from_the_known_name_patterns_only(name, version):
    assert metadata_version(name) == version


def test_the_highest_version_wins_gzip_included_and_odd_names_are_reported(tmp_path):
    write(tmp_path, "v1.metadata.json", document(version=1, updated=300))
    write(tmp_path, f"00002-{uuid.uuid4()}.metadata.json", document(version=2, updated=200))
    write(tmp_path, "3.metadata.json.gz", document(version=3, updated=100))
    write(tmp_path, "2.gz.metadata.json", document(version=2, updated=90))
    write(tmp_path, "copy-of-latest.metadata.json", document(version=99, updated=999))

    resolved = resolve_metadata_file(str(tmp_path))

    assert resolved.location.endswith("3.metadata.json.gz") and resolved.version == 3
    assert resolved.document["marker"] == 3 and resolved.candidates == 4
    assert resolved.reported == [
        ("copy-of-latest.metadata.json", "the name follows no known version pattern")
    ]


def test_by_last_updated_ms_the_most_recently_updated_file_wins(tmp_path):
    write(tmp_path, "v1.metadata.json", document(version=1, updated=300))
    write(tmp_path, "v2.metadata.json", document(version=2, updated=200))
    resolved = resolve_metadata_file(str(tmp_path), by_last_updated_ms=True)
    assert resolved.document["marker"] == 1


def test_a_table_uuid_filters_the_candidates_case_insensitively(tmp_path):
    write(tmp_path, "v1.metadata.json", document(version=1, updated=1))
    write(
        tmp_path, "v2.metadata.json", document(version=2, updated=2, table_uuid=str(uuid.uuid4()))
    )
    write(tmp_path, "v3.metadata.json", b"{not json")

    resolved = resolve_metadata_file(str(tmp_path), table_uuid=TABLE_UUID.upper())

    assert resolved.document["marker"] == 1
    assert [name for name, _ in resolved.reported] == ["v3.metadata.json"]


def test_an_explicit_path_wins_and_may_not_leave_the_table_folder(tmp_path):
    write(tmp_path, "v1.metadata.json", document(version=1, updated=1))
    write(tmp_path, "v2.metadata.json", document(version=2, updated=2))
    resolved = resolve_metadata_file(str(tmp_path), metadata_file_path="metadata/v1.metadata.json")
    assert resolved.document["marker"] == 1
    for hostile in ("../other/metadata/v1.metadata.json", "/etc/passwd", "metadata/\x00x", "a\\b"):
        with pytest.raises(InvalidInput) as refused:
            resolve_metadata_file(str(tmp_path), metadata_file_path=hostile)
        assert refused.value.field == "metadata_file_path"


def test_a_folder_without_metadata_is_not_an_iceberg_table(tmp_path):
    with pytest.raises(NotFound, match="is not an Iceberg table"):
        resolve_metadata_file(str(tmp_path))


def test_time_travel_by_timestamp_walks_the_snapshot_log_and_uses_that_snapshots_schema():
    meta = document(version=1, updated=1)
    assert state_at(meta, table_path="t", timestamp_ms=1500) == (10, 0)
    assert state_at(meta, table_path="t", timestamp_ms=2000) == (20, 1)
    assert state_at(meta, table_path="t", snapshot_id=10) == (10, 0)
    assert state_at(meta, table_path="t") == (20, 1)


def test_time_travel_refusals_are_worded_as_clickhouse_words_them():
    meta = document(version=1, updated=1)
    with pytest.raises(InvalidInput, match="cannot be changed simultaneously"):
        state_at(meta, table_path="t", snapshot_id=10, timestamp_ms=1500)
    with pytest.raises(InvalidInput, match="No snapshot found in snapshot log before requested"):
        state_at(meta, table_path="t", timestamp_ms=999)
    with pytest.raises(NotFound, match="No snapshot found for id `42`"):
        state_at(meta, table_path="t", snapshot_id=42)
