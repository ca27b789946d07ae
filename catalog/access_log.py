"""The recorder of access events (the audit of reads and refusals), free of Django: one
`Recorder` per process writes each event twice, both from a background thread (the
flusher), every `interval` seconds or as soon as `batch` events wait:

1. One JSON line on the logger `lakeview.access` (the SIEM's copy; the settings give that
   logger a handler of its own that writes lines alone, with no prefix: the JSON holds the
   event's time). Each line is serialized once (`line`, the C encoder escaping every
   control character and non-ASCII one); a batch's lines are one write.
2. The rows in the database, one bulk insert a batch, an event repeated within the batch
   (an engine loading one table again and again) one row with its count and first time.

The request's thread only appends the event to a queue: what a load-table pays for its
audit is the event's making and one append (bench/rest_load.py's load-unrecorded side by
side). The queue is bounded (`capacity`): when the flusher cannot keep up (the database is
down or slow), the oldest events' rows are dropped (their lines written), counted
(`dropped`, the Prometheus counter lakeview_access_events_dropped) and said in a warning on
the logger; a batch the database refuses is dropped and counted the same way (its lines
were written first).

What a crash can lose: the queue is written at the process's ordinary exit (`atexit`, and
`stop`), but a SIGKILL (or an out-of-memory kill, or os._exit) loses what waited in it: at
most the last `interval` seconds of events (or `capacity`), from both copies.

`interval=0` writes each event in the caller's thread, at once (the tests' mode: the row is
in the caller's transaction, and no thread holds a database connection)."""

from __future__ import annotations

import atexit
import json
import logging
import operator
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
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

#: Writes a batch's rows: its events, each repeated one once (`fold`).
Writer = Callable[[list["Folded"]], None]


#: A JSON string of any text, every character past ASCII and every control one escaped
#: (json's own C function): no user's text in a name or a reason can start a second line.
_quote = json.encoder.encode_basestring_ascii


def _text(value: Any) -> str:
    return "null" if value is None else _quote(str(value))


#: The line's text up to an event's second, for the last second seen: an event's time is
#: written from it and the nanoseconds (datetime.isoformat is most of a line's cost).
_SECOND: dict[int, str] = {}


def _head(at: Any) -> str:
    if isinstance(at, int):  # `now`'s nanoseconds since the epoch
        seconds, nanos = divmod(at, 1_000_000_000)
        prefix = _SECOND.get(seconds)
        if prefix is None:
            _SECOND.clear()
            prefix = _SECOND[seconds] = time.strftime(
                '{"at":"%Y-%m-%dT%H:%M:%S', time.gmtime(seconds)
            )
        return f'{prefix}.{nanos // 1000:06d}+00:00",'
    return f'{{"at":{_quote(at.isoformat() if isinstance(at, datetime) else str(at))},'


def _tail(event: dict[str, Any]) -> str:
    """The line after its time: the same for every repeat of an event."""
    tables = event["tables"]
    actor_id = event["actor_id"]
    return (
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


def line(event: dict[str, Any]) -> str:
    """The event's log line: a JSON object with FIELDS' keys, on one line. Written key by
    key (a third of json.dumps' time on a dict)."""
    return _head(event["at"]) + _tail(event)


#: What makes two events the same one repeated: everything but their time.
_SAME = FIELDS[1:]
_KEY = operator.itemgetter(*_SAME)
_TABLES = _SAME.index("tables")


@dataclass
class Folded:
    """An event repeated within a batch: as last seen, how many times, its first time."""

    event: dict[str, Any]
    count: int
    first: Any
    tail: str


def fold(events: list[dict[str, Any]]) -> tuple[str, list[Folded]]:
    """A batch's log lines (joined by newlines, in the events' order) and its events, each
    repeated one once, in the order of its first time. A repeat's line reuses the first's
    text after its time."""
    seen: dict[tuple, Folded] = {}
    lines = []
    for event in events:
        key = _KEY(event)
        if key[_TABLES] is not None:  # a list: a key holds it as a tuple
            key = (*key[:_TABLES], tuple(key[_TABLES]), *key[_TABLES + 1 :])
        found = seen.get(key)
        if found is None:
            found = seen[key] = Folded(event, 0, event["at"], _tail(event))
        found.event = event
        found.count += 1
        lines.append(_head(event["at"]) + found.tail)
    return "\n".join(lines), list(seen.values())


def log(text: str) -> None:
    """Write lines (one, or several joined by newlines) on LOGGER: straight to its handlers
    when each one takes lines already made (infra.logs.LineHandler, as the settings
    configure it), else as records, one a line."""
    if not LOGGER.isEnabledFor(logging.INFO):
        return
    handlers = LOGGER.handlers
    if handlers and not LOGGER.propagate and all(hasattr(h, "write_line") for h in handlers):
        for handler in handlers:
            handler.write_line(text)
    else:
        for one in text.split("\n"):
            LOGGER.info(one)


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
        # Serializes the flusher's and `flush`'s (a test's, or atexit's) writes, so that the
        # lines stay in the order of the events.
        self._writing = threading.Lock()

    # -- recording ---------------------------------------------------------------------------

    def record(self, event: dict[str, Any]) -> None:
        """Queue the event (or, when `interval` is 0, write its line and row now)."""
        if self.interval <= 0:
            log(line(event))
            self._write([Folded(event, 1, event["at"], "")], 1)
            return
        queue = self._queue
        queue.append(event)  # one append under the GIL: no lock on the request's path
        if len(queue) > self.capacity:
            self._drop_oldest()
        if self._pid != os.getpid():
            self._start()
        if len(queue) >= self.batch:
            self._wake.set()

    def _drop_oldest(self) -> None:
        """Past `capacity` (the flusher is stuck: the database is down or slow), the oldest
        events leave the queue: their rows are lost and counted, their lines written."""
        with self._lock:
            extra = len(self._queue) - self.capacity
            dropped = [self._queue.popleft() for _ in range(max(extra, 0))]
        if dropped:
            log("\n".join(map(line, dropped)))
            self._count_drop(len(dropped))

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
        """Write everything queued now, in the caller's thread: the lines, then the rows;
        how many rows were written."""
        written = 0
        with self._writing:
            while taken := self._take():
                lines, events = fold(taken)
                log(lines)
                written += self._write(events, len(taken))
        return written

    def _write(self, events: list[Folded], count: int) -> int:
        """Write the rows of `count` events, folded; how many were written."""
        try:
            self.write(events)
        except Exception:
            logger.exception("could not write %d access events", count)
            self._count_drop(count)
            return 0
        return count

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


def now() -> int:
    """An event's time: nanoseconds since the epoch (`moment` makes it a datetime)."""
    return time.time_ns()


def moment(at: int | datetime) -> datetime:
    """An event's time as a datetime in UTC (to the microsecond, as the database keeps it)."""
    if isinstance(at, datetime):
        return at
    seconds, nanos = divmod(at, 1_000_000_000)
    return datetime.fromtimestamp(seconds, UTC).replace(microsecond=nanos // 1000)
