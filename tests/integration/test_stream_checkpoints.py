"""The streaming process removes only checkpoint folders it made, inside the warehouse: a
dropped table's `<location>.checkpoints`, or one checkpoint a manual refresh left behind,
and never one another object lives in."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from catalog.models import Namespace, Table
from refresh.streams.checkpoints import delete_checkpoint, delete_table_checkpoints

pytestmark = pytest.mark.django_db


@pytest.fixture
def warehouse(tmp_path: Path, settings) -> Path:
    settings.WAREHOUSE = str(tmp_path / "warehouse")
    table = tmp_path / "warehouse" / "sales" / "daily.checkpoints"
    (table / "v1-1" / "offsets").mkdir(parents=True)
    (table / "v1-2" / "offsets").mkdir(parents=True)
    return tmp_path / "warehouse"


def test_a_manual_refresh_removes_its_old_checkpoint_and_keeps_the_new_one(warehouse):
    folder = warehouse / "sales" / "daily.checkpoints"
    delete_checkpoint(str(folder / "v1-1"))
    assert not (folder / "v1-1").exists() and (folder / "v1-2" / "offsets").is_dir()


def test_a_dropped_tables_checkpoints_go_together(warehouse):
    delete_table_checkpoints(str(warehouse / "sales" / "daily.checkpoints" / "v1-2"))
    assert not (warehouse / "sales" / "daily.checkpoints").exists()
    assert (warehouse / "sales").is_dir()


@pytest.mark.parametrize(
    "path",
    [
        "sales",  # not a checkpoints folder
        "sales/daily.checkpoints/v1-1/offsets",  # too deep
        "sales/daily.checkpoints/../daily.checkpoints/v1-1",  # dot segments are refused
        "relative/daily.checkpoints/v1-1",
    ],
)
def test_anything_else_is_left_alone(warehouse, path):
    target = path if path.startswith("relative") else str(warehouse / path)
    delete_checkpoint(target)
    assert (warehouse / "sales" / "daily.checkpoints" / "v1-1" / "offsets").is_dir()


def test_a_checkpoints_folder_outside_the_warehouse_is_left_alone(warehouse, tmp_path):
    outside = tmp_path / "elsewhere" / "t.checkpoints" / "v1-1"
    outside.mkdir(parents=True)
    delete_checkpoint(str(outside))
    assert outside.is_dir()


def test_a_checkpoints_folder_another_object_lives_in_is_kept(warehouse):
    """The catalog now refuses a location inside a `.checkpoints` folder, but an object made
    before that rule may live in one: dropping the continuous table beside it must not
    delete that object's files."""
    folder = warehouse / "sales" / "daily.checkpoints"
    squatter = folder / "early"
    (squatter / "metadata").mkdir(parents=True)
    Table.objects.create(
        kind=Table.Kind.TABLE,
        namespace=Namespace.objects.create(name="sales"),
        name="early",
        uuid=uuid.uuid4(),
        location=str(squatter),
        metadata_location=f"{squatter}/metadata/00000-a.metadata.json",
    )

    delete_table_checkpoints(str(folder / "v1-2"))

    assert (squatter / "metadata").is_dir() and (folder / "v1-1" / "offsets").is_dir()
    # The neighbour of an object named alike is no one's: its folder still goes.
    other = warehouse / "sales" / "ear.checkpoints" / "v1-1"
    other.mkdir(parents=True)
    delete_table_checkpoints(str(other))
    assert not other.parent.exists()
