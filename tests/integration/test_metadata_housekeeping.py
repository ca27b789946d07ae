"""Old metadata files of a table that asks for it (`write.metadata.delete-after-commit.enabled`
with `write.metadata.previous-versions-max`, as Iceberg's own commits honour them) are
deleted by the catalog once a commit is durable: the files the trimmed log no longer names,
and nothing else. Materialized tables ask for it by default (issue 18: a continuous table
commits every few seconds)."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog import services
from catalog.core.metadata_io import read_json
from refresh.core import definition as defs

# The deletes run when the commit is durable (on_commit): real transactions here.
pytestmark = pytest.mark.django_db(transaction=True)

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}


@pytest.fixture
def ns(editor) -> str:
    services.create_namespace(name="hk", actor=editor)
    return "hk"


def commits(name: str, count: int) -> None:
    for i in range(count):
        services.commit_table(
            namespace="hk",
            name=name,
            requirements=[],
            updates=[{"action": "set-properties", "updates": {"n": str(i)}}],
        )


def metadata_files(table_location: str) -> set[str]:
    folder = Path(table_location.removeprefix("file://")) / "metadata"
    return {str(p) for p in folder.glob("*.metadata.json")}


def named(metadata_location: str) -> set[str]:
    metadata = read_json(metadata_location)
    paths = [metadata_location, *(e["metadata-file"] for e in metadata["metadata-log"])]
    return {p.removeprefix("file://") for p in paths}


def test_a_table_that_asks_keeps_only_the_files_its_metadata_log_names(ns):
    table = services.create_table(
        namespace="hk",
        name="kept",
        schema=SCHEMA,
        properties={
            "write.metadata.delete-after-commit.enabled": "true",
            "write.metadata.previous-versions-max": "3",
        },
    ).obj

    commits("kept", 8)

    table.refresh_from_db()
    on_disk = metadata_files(table.location)
    assert on_disk == named(table.metadata_location)
    assert len(on_disk) == 4, "the current file and the three the log keeps"


def test_a_table_that_does_not_ask_keeps_every_metadata_file(ns):
    table = services.create_table(namespace="hk", name="all", schema=SCHEMA).obj

    commits("all", 5)

    table.refresh_from_db()
    assert len(metadata_files(table.location)) == 6


def test_a_log_naming_a_file_outside_the_table_never_deletes_it(ns, tmp_path):
    from pyiceberg.table.metadata import MetadataLogEntry

    from catalog.core import purge
    from catalog.core.tables import read_table_metadata

    outsider = tmp_path / "someone-elses.metadata.json"
    outsider.write_text("{}")
    table = services.create_table(
        namespace="hk",
        name="sly",
        schema=SCHEMA,
        properties={"write.metadata.delete-after-commit.enabled": "true"},
    ).obj
    current = read_table_metadata(table.metadata_location)
    # A log as a writer could have planted it: a file of another place.
    planted = current.model_copy(
        update={"metadata_log": [MetadataLogEntry(metadata_file=str(outsider), timestamp_ms=1)]}
    )

    superseded = purge.superseded_metadata_files(
        planted, table.metadata_location, current, f"{table.location}/metadata/next.json"
    )

    assert superseded == [table.metadata_location.removeprefix("file://")] or superseded == [
        table.metadata_location
    ]


def test_materialized_tables_ask_for_it_unless_their_options_say_otherwise():
    definition = defs.Definition(
        query="SELECT 1 AS x",
        default_namespace="hk",
        freshness=None,  # type: ignore[arg-type]
        refresh_mode=defs.RefreshMode.FULL,
        mode_is_explicit=False,
        primary_key=(),
        constraint_name=None,
        partitioned_by=(),
        options={"write.metadata.previous-versions-max": "100"},
        comment=None,
    )
    properties = defs.table_properties(definition, state="ACTIVATED")
    assert properties["write.metadata.delete-after-commit.enabled"] == "true"
    assert properties["write.metadata.previous-versions-max"] == "100"
