"""The watch every piece of Spark work a worker runs has beside it (a Spark job,
catalog.jobs; a refresh run, refresh.runner; a maintenance run, maintenance.runner): a
thread that says the worker is alive every MT_HEARTBEAT_SECONDS and, given a way to cancel
the work's Spark jobs, stops them once someone asks, the work passes its time limit, or the
warehouse's disk falls below its floor (`warehouse_floor`): a runaway query writing
terabytes would otherwise fill the disk every other table and the database live on.

It looks every LOOK_SECONDS and, once stopping, cancels again at every look: Spark cancels
only the jobs running at the time, and work asked to stop between two Spark jobs (while
Spark plans the next statement) would otherwise run the next one. `ended_by` then says
why ("cancel", "timeout" or "disk", with `why` in words), for the caller's record."""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections, connection

logger = logging.getLogger(__name__)

#: How often work that can be stopped looks whether it was asked to stop.
LOOK_SECONDS = 1.0


class Watch(threading.Thread):
    def __init__(
        self,
        name: str,
        *,
        beat: Callable[[], object],
        asked: Callable[[], bool] | None = None,
        cancel: Callable[[], object] | None = None,
        limit: float | None = None,
        room: Callable[[], str | None] | None = None,
        what: str = "",
    ) -> None:
        """`beat` says the work's worker is alive; `asked` whether someone asked the work
        to stop; `cancel` stops its Spark jobs (without it, the watch only beats); `limit`
        is the most seconds the work may run (None: no limit); `room` says why there is no
        more room to write (`warehouse_floor`), if so; `what` names the work in the log."""
        super().__init__(name=name, daemon=True)
        self.beat, self.asked, self.cancel, self.limit = beat, asked, cancel, limit
        self.room = room
        self.why = ""
        self.what = what or name
        self.stopped = threading.Event()
        self.started = time.monotonic()
        self.ended_by: str | None = None

    def run(self) -> None:
        beat_every = settings.MT_HEARTBEAT_SECONDS
        every = min(LOOK_SECONDS, beat_every) if self.cancel else beat_every
        last_beat = time.monotonic()
        try:
            while not self.stopped.wait(every):
                close_old_connections()
                if time.monotonic() - last_beat >= beat_every - every / 2:
                    self.beat()
                    last_beat = time.monotonic()
                if self.cancel is not None:
                    self._look(self.cancel)
        finally:
            # This thread's database connection is its own; it ends with the thread.
            connection.close()

    def _look(self, cancel: Callable[[], object]) -> None:
        if self.ended_by is None:
            if self.asked is not None and self.asked():
                self.ended_by = "cancel"
            elif self.limit is not None and self.seconds() > self.limit:
                self.ended_by = "timeout"
            elif self.room is not None and (why := self.room()) is not None:
                self.ended_by, self.why = "disk", why
            else:
                return
            logger.warning("Stopping %s: %s %s", self.what, self.ended_by, self.why)
        cancel()

    def seconds(self) -> float:
        return time.monotonic() - self.started

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=10)


def warehouse_floor() -> str | None:
    """Why work writing to the warehouse must stop now: its file system has less free space
    than WAREHOUSE_MIN_FREE_BYTES (else None). An object store's warehouse, or a floor of 0,
    has no such bound here."""
    from catalog.core.metadata_io import filesystem

    floor = settings.WAREHOUSE_MIN_FREE_BYTES
    warehouse = str(settings.WAREHOUSE)
    if floor <= 0 or not (warehouse.startswith("/") or warehouse.startswith("file:")):
        return None
    try:
        folder = Path(filesystem(warehouse)[1])
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent  # not made yet: the file system it will be made on
        free = shutil.disk_usage(folder).free
    except (OSError, ValueError):  # not a path this machine can look at
        return None
    if free >= floor:
        return None
    return (
        f"the warehouse's disk has {_size(free)} free, under its floor of {_size(floor)} "
        "(WAREHOUSE_MIN_FREE_BYTES)"
    )


def _size(count: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if count < 1024 or unit == "TiB":
            return f"{count:.0f} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024  # type: ignore[assignment]
    raise AssertionError("unreachable")
