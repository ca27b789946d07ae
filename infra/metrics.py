"""The app's Prometheus metrics (prometheus_client), which every process records and
`GET /metrics` (infra/metrics_endpoint.py) exposes.

Counters and histograms are recorded where things happen: HTTP requests here (the
middleware), Iceberg commits in the catalog's kernel, refresh runs where refresh/services.py
and the streaming host finish them. Each web worker, Celery worker and streaming host is a
process of its own, so in production they share one folder, PROMETHEUS_MULTIPROC_DIR
(prometheus_client's multiprocess mode): each process writes its own files there and a
scrape sums them all. The launchers empty that folder when the app starts (scripts/run.sh,
compose's migrate service); gunicorn's child_exit hook marks a dead worker
(webapp/gunicorn.conf.py), whose values are folded into one file per host, so the folder
keeps a bounded number of files between deployments. Without the variable (tests, one
process) the values stay in the process.

What is state rather than events (lag, queued and running jobs, live streaming hosts) is
read from the database at scrape time by the collectors the apps register in `COLLECTORS`,
each with a bounded number of aggregate queries whatever the number of tables.

This module imports nothing of the apps: the catalog's kernel and refresh both import it."""

from __future__ import annotations

import fcntl
import os
import re
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from prometheus_client import Counter, Histogram, values
from prometheus_client.core import Metric

MULTIPROC_DIR = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")

_HOST = re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname())


def process_identifier(pid: int | None = None) -> str:
    """The name of a process's files in the multiprocess folder: the host's name and the
    pid, since containers sharing the folder (compose's web, catalog, worker...) each
    number their processes from 1."""
    return f"{_HOST}-{os.getpid() if pid is None else pid}"


if MULTIPROC_DIR:
    os.makedirs(MULTIPROC_DIR, exist_ok=True)
    # Chosen before any metric below gets a value (prometheus_client reads it per value).
    values.ValueClass = values.MultiProcessValue(process_identifier)


#: Dead processes whose files wait for a fold, and whether a fold runs in this process.
_to_fold: list[str] = []
_folding = False


def mark_process_dead(pid: int) -> None:
    """A process that ended (a gunicorn worker): its live gauges go, and its counters,
    histograms and summaries are folded into its host's file of exited processes.

    gunicorn's arbiter calls this from its SIGCHLD handler, and a second worker's SIGCHLD
    can run that handler again in the middle of a fold (workers stop together at SIGTERM).
    The inner call must not fold: its flock on a new handle of the lock file would wait
    on the outer call's, in the same process, for ever (the arbiter then never stops).
    It leaves its process to the running fold instead."""
    global _folding
    if not MULTIPROC_DIR:
        return
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(process_identifier(pid), MULTIPROC_DIR)
    _to_fold.append(process_identifier(pid))
    if _folding:
        return
    _folding = True
    try:
        while _to_fold:
            fold_exited(_to_fold.pop(), MULTIPROC_DIR)
    finally:
        # A signal between the loop's last test and here leaves its process's files
        # unfolded until the next worker exits: still summed by every scrape, only later
        # merged.
        _folding = False


#: The kinds of files whose values a scrape sums across processes, so that a dead
#: process's values may be added into another file without changing any sum.
_SUMMED = ("counter", "histogram", "summary")


@contextmanager
def folder_lock(path: str, *, exclusive: bool) -> Iterator[None]:
    """A lock on the multiprocess folder: a scrape reads under a shared one and a fold
    writes under an exclusive one, so that no scrape counts a dead process's values twice
    (or not at all) while they move, which Prometheus would read as a counter reset."""
    with open(os.path.join(path, ".lock"), "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def fold_exited(identifier: str, path: str) -> None:
    """Add a dead process's summed values into its host's `<kind>_<host>-exited.db` and
    remove its files, so that the folder holds a bounded number of files however many
    workers gunicorn replaces over months, and every total stays what it was."""
    from prometheus_client.mmap_dict import MmapedDict

    with folder_lock(path, exclusive=True):
        for kind in _SUMMED:
            dead = os.path.join(path, f"{kind}_{identifier}.db")
            if not os.path.exists(dead):
                continue
            archive = MmapedDict(os.path.join(path, f"{kind}_{_HOST}-exited.db"))
            try:
                for key, value, timestamp, _ in MmapedDict.read_all_values_from_file(dead):
                    archive.write_value(key, archive.read_value(key)[0] + value, timestamp)
            finally:
                archive.close()
            os.remove(dead)


#: Collectors of what is read at scrape time: each a function yielding metric families.
COLLECTORS: list[Callable[[], Iterable[Metric]]] = []


def register_collector(collect: Callable[[], Iterable[Metric]]) -> None:
    if collect not in COLLECTORS:
        COLLECTORS.append(collect)


# -- HTTP ------------------------------------------------------------------------------------

HTTP_REQUESTS = Counter(
    "lakeview_http_requests",
    "HTTP requests answered, by Django route name, method and status class.",
    ["view", "method", "status"],
)
HTTP_SECONDS = Histogram(
    "lakeview_http_request_duration_seconds",
    "Time to answer an HTTP request, by Django route name and method.",
    ["view", "method"],
    # Few buckets: every route and method has them all, in every process's file.
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0),
)
#: Methods outside these count as OTHER: a label's values stay few whatever clients send.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def request_answered(view: str, method: str, status: int, seconds: float) -> None:
    method = method if method in METHODS else "OTHER"
    HTTP_REQUESTS.labels(view, method, f"{status // 100}xx").inc()
    HTTP_SECONDS.labels(view, method).observe(seconds)


# -- Iceberg commits -------------------------------------------------------------------------

COMMITS = Counter(
    "lakeview_iceberg_commits",
    "Objects whose metadata pointer a commit moved, by kind (view or table).",
    ["kind"],
)
COMMIT_CONFLICTS = Counter(
    "lakeview_iceberg_commit_conflicts",
    "Objects in commits refused because another writer moved a pointer first, or a guard "
    "refused (HTTP 409), by kind.",
    ["kind"],
)


def committed(kind: str) -> None:
    COMMITS.labels(kind).inc()


def commit_conflict(kind: str) -> None:
    COMMIT_CONFLICTS.labels(kind).inc()


# -- refresh runs ----------------------------------------------------------------------------

REFRESH_RUNS = Counter(
    "lakeview_refresh_runs",
    "Finished refresh runs, by materialized table, trigger, action and outcome.",
    ["table", "trigger", "action", "outcome"],
)
REFRESH_SECONDS = Histogram(
    "lakeview_refresh_run_duration_seconds",
    "Seconds from a refresh run's start to its end, by trigger, action and outcome.",
    ["trigger", "action", "outcome"],
    buckets=(1, 5, 15, 60, 300, 900, 3600),
)


def refresh_finished(
    *, table: str, trigger: str, action: str, outcome: str, seconds: float | None
) -> None:
    seconds = max(seconds or 0.0, 0.0)
    action = action or "NONE"
    REFRESH_RUNS.labels(table, trigger, action, outcome).inc()
    REFRESH_SECONDS.labels(trigger, action, outcome).observe(seconds)


# -- lineage events --------------------------------------------------------------------------

LINEAGE_EVENTS = Counter(
    "lakeview_openlineage_events",
    "OpenLineage run events by outcome: sent (the transport took it), failed (it raised), "
    "dropped (the process's queue was full).",
    ["outcome"],
)


def lineage_event(outcome: str) -> None:
    LINEAGE_EVENTS.labels(outcome).inc()


class RequestMetricsMiddleware:
    """Counts and times every request by its route's name (`resolver_match.view_name`),
    never its path: paths hold names and ids without bound, route names are fixed.
    Requests no route matched (unknown paths) count as "unmatched"."""

    def __init__(self, get_response: Callable) -> None:
        self.get_response = get_response

    def __call__(self, request: object) -> object:
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        request_answered(
            match.view_name if match is not None else "unmatched",
            request.method or "",  # type: ignore[attr-defined]
            response.status_code,  # type: ignore[attr-defined]
            time.perf_counter() - started,
        )
        return response


def clear() -> int:
    """Empty the multiprocess folder of every process's files (the launcher's step before
    the app's processes start: counts start from zero). Returns how many went."""
    if not MULTIPROC_DIR:
        return 0
    removed = 0
    for name in os.listdir(MULTIPROC_DIR):
        path = os.path.join(MULTIPROC_DIR, name)
        if name.endswith(".db") and os.path.isfile(path):
            os.remove(path)
            removed += 1
    return removed


# -- the audit of reads and refusals -------------------------------------------------------

ACCESS_EVENTS_DROPPED = Counter(
    "lakeview_access_events_dropped",
    "Access events (catalog.access_log) dropped before they reached the database: the "
    "queue was full (the oldest go first) or a batch could not be written. Their log lines "
    "were written.",
)
