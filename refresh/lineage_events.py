"""OpenLineage events of refresh runs (OPENLINEAGE_ENABLED): receivers of refresh.signals
(connected by apps.py) that, once the run's transaction has committed, read what the event
says (the table's query and schema, the sources) and hand the events built by
refresh.core.lineage_events to this process's sender.

The sender is a daemon thread with a bounded queue, not a Celery task: a Celery task would
take a worker thread that refreshes need, for as long as the transport waits on a slow or
dead receiver (the HTTP transport's timeouts and retries), and a message per micro-batch
would load the broker. The thread sends events in order through openlineage-python's
client (its transport as OPENLINEAGE_URL, OPENLINEAGE_CONFIG or openlineage.yml configure
it); a full queue drops the event, a transport that raises loses it, and both are logged
and counted (infra.metrics.LINEAGE_EVENTS). Lineage is best effort: nothing here makes a
run fail, and with lineage off the receivers return before any query."""

from __future__ import annotations

import atexit
import copy
import functools
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from infra import metrics
from refresh.models import MaterializedTable, MaterializedTableVersion, RefreshRun

logger = logging.getLogger(__name__)


def enabled() -> bool:
    return bool(settings.OPENLINEAGE_ENABLED)


# -- receivers -------------------------------------------------------------------------------


def run_started(sender: Any, run: RefreshRun, **kwargs: Any) -> None:
    if enabled():
        # The row as it is now: the caller goes on changing its instance.
        at_start = copy.copy(run)
        transaction.on_commit(lambda: _send(at_start, started=True))


def run_finished(sender: Any, run: RefreshRun, **kwargs: Any) -> None:
    if enabled():
        at_end = copy.copy(run)
        transaction.on_commit(lambda: _send(at_end, started=False))


def _send(run: RefreshRun, *, started: bool) -> None:
    try:
        from refresh.core import lineage_events as core

        facts = run_facts(run, started=started)
        where = _where()
        if started:
            events = [core.start_event(facts, where)]
        else:
            # A micro-batch is recorded once it committed: its START goes with its end.
            announced = run.batch_id is None
            events = core.finished_events(facts, where, announced=announced)
    except Exception:
        logger.exception("The lineage events of refresh run %s could not be built", run.pk)
        metrics.lineage_event("failed")
        return
    for event in events:
        SENDER.put(event)


def _where() -> Any:
    from refresh.core.lineage_events import Where

    return Where(
        job_namespace=settings.OPENLINEAGE_NAMESPACE,
        dataset_namespace=settings.OPENLINEAGE_DATASET_NAMESPACE,
        catalog_name=settings.CATALOG_NAME,
        warehouse=_uri(settings.WAREHOUSE),
        engine_version=_version(),
    )


def _uri(location: str) -> str:
    """A warehouse given as a path, as a file: URI (others are URIs already)."""
    return location if "://" in location else Path(location).absolute().as_uri()


@functools.cache
def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lakeview")
    except PackageNotFoundError:
        return "unknown"


def run_facts(run: RefreshRun, *, started: bool) -> Any:
    """What the events of `run` say, from its row, its table's row and the table's current
    schema in the mirror (two or three queries)."""
    from catalog.models import TableSchemaField
    from refresh.core.lineage_events import Column, RunFacts

    mt = (
        MaterializedTable.objects.filter(pk=run.materialized_table_id)
        .values("query", "sources", "table_id", "table__current_schema_id")
        .first()
    )
    query, declared, columns = "", [], []
    if mt is not None:
        query, declared = mt["query"], mt["sources"] or []
        if run.trigger == RefreshRun.Trigger.REBUILD and run.definition_version is not None:
            # A rebuild runs its own version's query (current only once it is applied).
            query = (
                MaterializedTableVersion.objects.filter(
                    materialized_table_id=run.materialized_table_id,
                    version_id=run.definition_version,
                )
                .values_list("query", flat=True)
                .first()
                or query
            )
        columns = [
            Column(name, type_, doc)
            for name, type_, doc in TableSchemaField.objects.filter(
                table_id=mt["table_id"], schema_id=mt["table__current_schema_id"]
            )
            .order_by("position")
            .values_list("name", "type", "doc")
        ]
    # Until the run decided, the sources it reads are the ones its query names; then the
    # tables it read (through views), each at its snapshot.
    sources = {} if started else dict(run.source_snapshots or {})
    if not sources:
        sources = dict.fromkeys(declared)
    return RunFacts(
        run_id=run.pk,
        queued_at=run.queued_at,
        table=run.table_name,
        trigger=run.trigger,
        state=run.state,
        query=query,
        action=run.action,
        started_at=run.started_at,
        finished_at=run.finished_at,
        schedule_time=run.schedule_time,
        sources=sources,
        snapshot_id=run.snapshot_id,
        rows_written=run.rows_written,
        bytes_written=run.bytes_written,
        columns=columns,
        error=run.error,
    )


# -- the sender ------------------------------------------------------------------------------


class Sender:
    """One thread per process that emits queued events through the OpenLineage client, in
    order; `put` never blocks."""

    def __init__(self, client: Callable[[], Any] | None = None) -> None:
        self._make_client = client or _client
        self._client: Any = None
        self._queue: queue.Queue | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def _started(self) -> queue.Queue:
        # A forked process (gunicorn, Celery's prefork) has no thread of its parent's.
        with self._lock:
            if self._queue is None or self._pid != os.getpid():
                self._queue = queue.Queue(maxsize=max(1, settings.OPENLINEAGE_QUEUE_SIZE))
                self._pid = os.getpid()
                self._client = None
                threading.Thread(
                    target=self._work, args=(self._queue,), name="openlineage", daemon=True
                ).start()
            return self._queue

    def put(self, event: Any) -> None:
        try:
            self._started().put_nowait(event)
        except queue.Full:
            logger.warning("OpenLineage event dropped: %s events wait already", self.waiting())
            metrics.lineage_event("dropped")

    def waiting(self) -> int:
        return self._queue.unfinished_tasks if self._queue is not None else 0

    def flush(self, timeout: float = 5.0) -> bool:
        """Wait up to `timeout` seconds for the queued events to be sent; whether they were."""
        deadline = time.monotonic() + timeout
        while self.waiting() and time.monotonic() < deadline:
            time.sleep(0.01)
        return not self.waiting()

    def reset(self) -> None:
        """A new client at the next event (a test changing the transport's configuration)."""
        self.flush()
        self._client = None

    def _work(self, events: queue.Queue) -> None:
        while True:
            event = events.get()
            try:
                if self._client is None:
                    self._client = self._make_client()
                self._client.emit(event)
                metrics.lineage_event("sent")
            except Exception as error:  # noqa: BLE001 - lineage never stops the process
                logger.warning(
                    "OpenLineage %s event of %s could not be sent: %s",
                    getattr(event.eventType, "value", "?"),
                    getattr(event.job, "name", "?"),
                    error,
                )
                metrics.lineage_event("failed")
            finally:
                events.task_done()


def _client() -> Any:
    from openlineage.client import OpenLineageClient

    return OpenLineageClient()


SENDER = Sender()


@atexit.register
def _drain() -> None:
    # A worker or streaming host stopping sends what it queued, for a bounded time.
    if SENDER.waiting():
        SENDER.flush(timeout=5.0)
