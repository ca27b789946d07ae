"""The recorder of access events (the audit of reads and refusals), free of Django: one
`Recorder` per process writes each event twice.

1. At once, in the caller's thread: one JSON line on the logger `lakeview.access` (the
   SIEM's copy; the settings give that logger a handler of its own that writes the line
   alone, with no prefix: the JSON holds its time). The line is serialized once
   (`json.dumps`, the C encoder, escaping every control character and non-ASCII one) and
   handed to logging as it is, with no further formatting.
2. Later, in the database: the event is queued, and a background thread (the flusher)
   writes the queue in batches, every `interval` seconds or as soon as `batch` events
   wait, with one bulk insert each. A request never waits for the database.

The queue is bounded (`capacity`): when the flusher cannot keep up (the database is down or
slow), the oldest events are dropped, counted (`dropped`, the Prometheus counter
lakeview_access_events_dropped) and said in a warning on the logger; a batch the database
refuses is dropped and counted the same way. Their log lines were written all the same.

What a crash can lose: the queue is written at the process's ordinary exit (`atexit`, and
`stop`), but a SIGKILL (or an out-of-memory kill, or os._exit) loses what waited in it, at
most the last `interval` seconds of events (or `capacity`); their log lines are already out,
so the SIEM's copy is whole, and the database's is short by that window.

`interval=0` writes each event in the caller's thread, at once (the tests' mode: the row is
in the caller's transaction, and no thread holds a database connection)."""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

#: The SIEM's logger: one JSON object per line.
LOGGER = logging.getLogger("lakeview.access")
logger = logging.getLogger(__name__)

#: The fields of an event, in the order of the log line's keys.
FIELDS = (
    "at",
    "actor",
    "actor_id",
    "credential",
    "channel",
    "action",
    "object_type",
    "object",
    "object_uuid",
    "tables",
    "outcome",
    "status",
    "reason",
)

Writer = Callable[[list[dict[str, Any]]], None]


#: A JSON string of any text, every character past ASCII and every control one escaped
#: (json's own C function): no user's text in a name or a reason can start a second line.
_quote = json.encoder.encode_basestring_ascii


def _text(value: Any) -> str:
    return "null" if value is None else _quote(str(value))


def line(event: dict[str, Any]) -> str:
    """The event's log line: a JSON object with FIELDS' keys, on one line. Written key by
    key (a third of json.dumps' time on a dict: the line is made on every load)."""
    at = event["at"]
    tables = event["tables"]
    actor_id = event["actor_id"]
    return (
        f'{{"at":{_quote(at.isoformat() if isinstance(at, datetime) else str(at))},'
        f'"actor":{_quote(event["actor"])},'
        f'"actor_id":{"null" if actor_id is None else int(actor_id)},'
        f'"credential":{_quote(event["credential"])},'
        # channel, action, object_type and outcome are the app's own words (a-z and "-").
        f'"channel":"{event["channel"]}",'
        f'"action":"{event["action"]}",'
        f'"object_type":"{event["object_type"]}",'
        f'"object":{_quote(event["object"])},'
        f'"object_uuid":{_text(event["object_uuid"])},'
        f'"tables":{"null" if tables is None else "[" + ",".join(map(_quote, tables)) + "]"},'
        f'"outcome":"{event["outcome"]}",'
        f'"status":{int(event["status"])},'
        f'"reason":{_quote(event["reason"])}}}'
    )


def log(text: str) -> None:
    """Write a line on LOGGER: straight to its handlers when each one takes a line already
    made (infra.logs.LineHandler, as the settings configure it), else as a record."""
    if not LOGGER.isEnabledFor(logging.INFO):
        return
    handlers = LOGGER.handlers
    if handlers and not LOGGER.propagate and all(hasattr(h, "write_line") for h in handlers):
        for handler in handlers:
            handler.write_line(text)
    else:
        LOGGER.info(text)


class Recorder:
    """Writes each event's log line at once and its row through `write` (a list of events)
    from a background thread; see the module. `on_thread_exit` runs in the flusher thread
    as it ends (closing its database connection)."""

    def __init__(
        self,
        write: Writer,
        *,
        interval: float = 1.0,
        batch: int = 500,
        capacity: int = 10_000,
        on_drop: Callable[[int], None] | None = None,
        on_thread_exit: Callable[[], None] | None = None,
    ) -> None:
        self.write = write
        self.interval = interval
        self.batch = max(1, batch)
        self.capacity = max(1, capacity)
        self.dropped = 0
        self._on_drop = on_drop
        self._on_thread_exit = on_thread_exit
        self._queue: deque[dict[str, Any]] = deque()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._pid = 0
        # Serializes the writes of the flusher and of `flush` (a test's, or atexit's).
        self._writing = threading.Lock()

    # -- recording ---------------------------------------------------------------------------

    def record(self, event: dict[str, Any]) -> None:
        """Log the event's line, then queue its row (or write it now when `interval` is 0)."""
        log(line(event))
        if self.interval <= 0:
            self._write([event])
            return
        with self._lock:
            if len(self._queue) >= self.capacity:
                self._queue.popleft()
                self._count_drop(1)
            self._queue.append(event)
            waiting = len(self._queue)
        if self._pid != os.getpid():
            self._start()
        if waiting >= self.batch:
            self._wake.set()

    def _count_drop(self, count: int) -> None:
        self.dropped += count
        if self._on_drop is not None:
            self._on_drop(count)
        # Once per hundred, not per event: a flood of drops must not flood the log too.
        if self.dropped % 100 == count % 100 or count >= 100:
            logger.warning(
                "access events dropped before the database: %d so far (their log lines "
                "were written)",
                self.dropped,
            )

    # -- flushing ----------------------------------------------------------------------------

    def _take(self) -> list[dict[str, Any]]:
        with self._lock:
            count = min(len(self._queue), self.batch)
            return [self._queue.popleft() for _ in range(count)]

    def flush(self) -> int:
        """Write everything queued now, in the caller's thread; how many were written."""
        written = 0
        while taken := self._take():
            written += self._write(taken)
        return written

    def _write(self, events: list[dict[str, Any]]) -> int:
        with self._writing:
            try:
                self.write(events)
            except Exception:
                logger.exception("could not write %d access events", len(events))
                self._count_drop(len(events))
                return 0
        return len(events)

    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def _start(self) -> None:
        with self._lock:
            if self._pid == os.getpid():
                return
            # A forked child (gunicorn's workers) has the queue's copy but not the thread.
            self._pid = os.getpid()
            self._stopping = False
            self._thread = threading.Thread(
                target=self._run, name="access-events-flusher", daemon=True
            )
            self._thread.start()
        atexit.register(self.stop)

    def _run(self) -> None:
        try:
            while not self._stopping:
                self._wake.wait(self.interval)
                self._wake.clear()
                self.flush()
            self.flush()
        finally:
            if self._on_thread_exit is not None:
                self._on_thread_exit()

    def stop(self, timeout: float = 5.0) -> None:
        """Write what is queued and end the flusher (at exit; tests)."""
        thread = self._thread
        self._stopping = True
        self._wake.set()
        if thread is not None and thread.is_alive() and thread is not threading.current_thread():
            thread.join(timeout)
        self.flush()
        with self._lock:
            self._pid = 0
            self._thread = None


def now() -> datetime:
    return datetime.now(UTC)
