"""The streaming process removes only checkpoint folders it made, inside the warehouse: a
dropped table's `<location>.checkpoints`, or one checkpoint a manual refresh left behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from refresh.streams import _delete_checkpoint, _delete_checkpoints


@pytest.fixture
def warehouse(tmp_path: Path, settings) -> Path:
    settings.WAREHOUSE = str(tmp_path / "warehouse")
    table = tmp_path / "warehouse" / "sales" / "daily.checkpoints"
    (table / "v1-1" / "offsets").mkdir(parents=True)
    (table / "v1-2" / "offsets").mkdir(parents=True)
    return tmp_path / "warehouse"


def test_a_manual_refresh_removes_its_old_checkpoint_and_keeps_the_new_one(warehouse):
    folder = warehouse / "sales" / "daily.checkpoints"
    _delete_checkpoint(str(folder / "v1-1"))
    assert not (folder / "v1-1").exists() and (folder / "v1-2" / "offsets").is_dir()


def test_a_dropped_tables_checkpoints_go_together(warehouse):
    _delete_checkpoints(str(warehouse / "sales" / "daily.checkpoints" / "v1-2"))
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
    _delete_checkpoint(target)
    assert (warehouse / "sales" / "daily.checkpoints" / "v1-1" / "offsets").is_dir()


def test_a_checkpoints_folder_outside_the_warehouse_is_left_alone(warehouse, tmp_path):
    outside = tmp_path / "elsewhere" / "t.checkpoints" / "v1-1"
    outside.mkdir(parents=True)
    _delete_checkpoint(str(outside))
    assert outside.is_dir()
