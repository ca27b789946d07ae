"""The checkpoint folders of the streams: where a new one goes (beside the table's location,
in `<location>.checkpoints`), and their removal when a stream leaves one for a new one or its
table is dropped, only ever inside the warehouse and never a folder another object lives in."""

from __future__ import annotations

import logging
import os
import shutil
import time

from django.conf import settings

from catalog.core import metadata_io
from catalog.models import CatalogObject
from refresh.models import MaterializedTable

logger = logging.getLogger(__name__)


def new_checkpoint(mt: MaterializedTable, version: int) -> str:
    """A fresh checkpoint folder for the stream of definition `version`, beside the table's
    location (never reused: a load always starts its stream anew)."""
    return f"{mt.table.location}.checkpoints/v{version}-{int(time.time() * 1000)}"


def delete_table_checkpoints(checkpoint: str) -> None:
    """A dropped table's checkpoints: the folder beside its location that this process made
    (`<location>.checkpoints`)."""
    _remove(checkpoint.rsplit("/", 1)[0], depth=0)


def delete_checkpoint(checkpoint: str) -> None:
    """One checkpoint a stream left for a new one (a manual refresh): a folder inside it."""
    _remove(checkpoint, depth=1)


def _remove(path: str, *, depth: int) -> None:
    """Remove `path` once normalised as the filesystem reads it, only if it is the
    `.checkpoints` folder (depth 0) or a folder directly inside one (depth 1), lies strictly
    inside the warehouse, and is not a symbolic link."""
    if not path.startswith("/"):
        return
    try:
        normalized = metadata_io.normalize_location(path)
    except Exception:  # noqa: BLE001 - a path we cannot read safely is left alone
        return
    parts = normalized.rstrip("/").split("/")
    if len(parts) <= depth + 1 or not parts[-1 - depth].endswith(".checkpoints"):
        return
    warehouse = metadata_io.normalize_location(settings.WAREHOUSE)
    if not metadata_io.is_inside(normalized, warehouse, strictly=True):
        return
    if os.path.islink(normalized) or not os.path.isdir(normalized):
        return
    # The catalog refuses locations inside a `.checkpoints` folder (kernel.SIDE_FOLDER), but
    # an object made before that rule may live in one: its files are not ours to delete.
    squatter = CatalogObject.objects.located_in(normalized).first()
    if squatter is not None:
        logger.warning(
            "Kept %s: %s %s lives inside it (%s)",
            normalized,
            squatter.kind,
            squatter,
            squatter.location,
        )
        return
    shutil.rmtree(normalized, ignore_errors=True)
