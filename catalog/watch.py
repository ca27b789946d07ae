"""The watch every piece of Spark work a worker runs has beside it (a Spark job,
catalog.jobs; a refresh run, refresh.runner; a maintenance run, maintenance.runner): a
thread that says the worker is alive every MT_HEARTBEAT_SECONDS and, given a way to cancel
the work's Spark jobs, stops them once someone asks or the work passes its time limit.

It looks every LOOK_SECONDS and, once stopping, cancels again at every look: Spark cancels
only the jobs running at the time, and work asked to stop between two Spark jobs (while
Spark plans the next statement) would otherwise run the next one. `ended_by` then says
why ("cancel" or "timeout"), for the caller's record."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

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
        what: str = "",
    ) -> None:
        """`beat` says the work's worker is alive; `asked` whether someone asked the work
        to stop; `cancel` stops its Spark jobs (without it, the watch only beats); `limit`
        is the most seconds the work may run (None: no limit); `what` names the work in
        the log."""
        super().__init__(name=name, daemon=True)
        self.beat, self.asked, self.cancel, self.limit = beat, asked, cancel, limit
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
            else:
                return
            logger.warning("Stopping %s: %s", self.what, self.ended_by)
        cancel()

    def seconds(self) -> float:
        return time.monotonic() - self.started

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=10)
