"""What every run on a worker needs of the worker, whatever its kind (a refresh, a maintenance
action): its name, the threads refreshes and maintenance may hold (`refresh_slots`: the
others stay free for Spark jobs), a heartbeat that also stops the run's Spark jobs on a
cancel, a time limit or a full disk (`Heartbeat`), what a stopped run says (`stopped`) and
an error as a user reads it (`describe`)."""

from __future__ import annotations

import os
import socket
import threading
import traceback
from collections.abc import Callable
from typing import Any

from django.conf import settings

from catalog.watch import Watch, warehouse_floor
from infra import runs as run_rows
from runtime import engine


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.current_thread().name}"


def refresh_slots() -> threading.BoundedSemaphore:
    """The worker threads refreshes may hold at once: all but WORKER_INTERACTIVE_THREADS,
    which stay free for Spark jobs (catalog.jobs)."""
    global _slots
    with _slots_lock:
        if _slots is None:
            threads = int(settings.CELERY_WORKER_CONCURRENCY)
            _slots = threading.BoundedSemaphore(
                max(1, threads - int(settings.WORKER_INTERACTIVE_THREADS))
            )
        return _slots


_slots: threading.BoundedSemaphore | None = None
_slots_lock = threading.Lock()


def describe(error: Exception) -> str:
    """The error as a user reads it: the message first (a Spark job's root cause), then
    where it came from."""
    if getattr(error, "java_exception", None) is not None:
        from runtime.spark.errors import failure_message

        return failure_message(error)
    message = getattr(error, "message", None) or str(error) or type(error).__name__
    detail = "".join(traceback.format_exception_only(type(error), error)).strip()
    lost = engine.lost_jvm_message(error)
    if lost is not None:
        return f"{lost}\n{detail}"
    return message if message in detail else f"{message}\n{detail}"


class Heartbeat(Watch):
    """A run's watch (catalog.watch): says every few seconds that the run's worker is alive
    (infra.runs.beat), and with a Spark job group (`watch`, cancelled through the worker's
    session; or `cancel`, for another session's) stops the run's Spark jobs once someone
    asks the run to stop (infra.runs.request_cancel), the run passes its time limit or the
    warehouse's disk its floor; `ended_by` then says why."""

    def __init__(
        self,
        run: Any,
        beat: Callable[[], None] | None = None,
        *,
        watch: str | None = None,
        limit: float | None = None,
        asked: Callable[[], bool] | None = None,
        cancel: Callable[[], object] | None = None,
    ) -> None:
        if cancel is None and watch is not None:
            # Looked up at each cancel: engine's session may be a new one by then.
            cancel = lambda: engine.cancel_group(watch)  # noqa: E731
        super().__init__(
            f"heartbeat-{run.pk}",
            beat=beat or (lambda: run_rows.beat(type(run), pk=run.pk)),
            asked=asked or (lambda: run_rows.cancel_asked(type(run), pk=run.pk)),
            cancel=cancel,
            limit=limit,
            room=warehouse_floor,
            what=str(run),
        )
        self.run_row = run


def stopped(run: Any, beating: Heartbeat, *, limit_from: str) -> tuple[str, str] | None:
    """For a refresh or maintenance run (an infra.runs.Run): CANCELLED with who asked and
    after how long, FAILED "Timed out" naming where the limit comes from, or FAILED for the
    warehouse's disk at its floor; None when its heartbeat did not stop it."""
    if beating.ended_by == "cancel":
        who = run_rows.cancelled_by(type(run), pk=run.pk)
        by = f" by {who}" if who else ""
        return "CANCELLED", (
            f"Cancelled{by} after {beating.seconds():.0f} s; the table is unchanged"
        )
    if beating.ended_by == "timeout":
        return "FAILED", (
            f"Timed out: stopped after {beating.limit:.0f} s, the longest such a run may "
            f"take ({limit_from}); the table is unchanged"
        )
    if beating.ended_by == "disk":
        return "FAILED", (
            f"Stopped after {beating.seconds():.0f} s: {beating.why}. Spark aborted the "
            "write; the table is unchanged"
        )
    return None
