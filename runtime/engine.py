"""The refresh worker's Spark: one session per worker process, started by the first job
that needs it and kept until the process ends (never one per refresh: a JVM takes seconds
to start). Its only catalog is the app's own Iceberg REST catalog, reached with the
service credential (runtime.credentials), so refresh jobs commit through the one commit
path like any engine.

Iceberg's Spark catalog caches loaded tables (30 s by default); a long-lived session would
then read stale snapshots of tables other writers changed, so the cache is off."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from django.conf import settings

from runtime.credentials import service_credential
from runtime.spark.session import SparkSessionConfig, forget_jvm, jvm_gone, session_with

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

_session: SparkSession | None = None
_lock = threading.Lock()


def session_config(app_name: str = "lakeview-refresh-worker") -> SparkSessionConfig:
    uri = settings.CATALOG_URI.rstrip("/")
    return SparkSessionConfig(
        master=settings.SPARK_MASTER,
        jars_dir=settings.SPARK_JARS_DIR,
        warehouse=settings.WAREHOUSE,
        catalog_name=settings.CATALOG_NAME,
        app_name=app_name,
        catalog_conf={
            "type": "rest",
            "uri": uri,
            "credential": service_credential(),
            "rest.auth.type": "oauth2",
            "oauth2-server-uri": f"{uri}/v1/oauth/tokens",
            "cache-enabled": "false",
        },
        driver_memory=settings.SPARK_DRIVER_MEMORY,
        shuffle_partitions=settings.SPARK_SHUFFLE_PARTITIONS,
        extra_conf={str(key): str(value) for key, value in settings.SPARK_CONF.items()},
    )


def spark() -> SparkSession:
    """The worker process's session (thread-safe; the first caller starts it). When its JVM
    has exited (an OutOfMemoryError in one run ends it, for every table), a new one is
    started here, so that the next job runs instead of every job failing until someone
    restarts the worker."""
    global _session
    with _lock:
        if _session is not None and jvm_gone():
            logger.error("The worker's Spark JVM has exited; starting a new one")
            forget_jvm()
            _session = None
            _sessions.clear()  # each belonged to the dead JVM
        if _session is None:
            _session = session_config().build()
        return _session


def lost_jvm_message(error: BaseException | None = None) -> str | None:
    """What a run whose Spark JVM exited under it says (else None): a run's own error text
    would be "Connection refused". A JVM killed a moment ago may still be exiting when its
    run's call fails: for a connection error, this waits up to two seconds to know."""
    if _session is None:
        return None
    deadline = time.monotonic() + (2.0 if _connection_error(error) else 0.0)
    while not jvm_gone():
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)
    return (
        "The worker's Spark stopped during this run (its JVM exited: out of memory, or "
        "killed); a new one starts with the next job"
    )


def _connection_error(error: BaseException | None) -> bool:
    while error is not None:
        # Py4JError itself (not its Py4JJavaError) is py4j's word for a call that got no
        # answer, as a call into a JVM that just died gets.
        if isinstance(error, ConnectionError) or type(error).__name__ in (
            "Py4JNetworkError",
            "Py4JError",
        ):
            return True
        error = error.__cause__ or error.__context__
    return False


_sessions: dict[tuple, SparkSession] = {}


def run_session(*, namespace: list[str], conf: dict[str, str] | None = None) -> SparkSession:
    """A session for runs in `namespace` with `conf` (a run's options, checked by the caller:
    refresh.core.options.check_run_options), kept for the next run alike: a new session
    makes its own catalog client, which signs in to the REST catalog again."""
    from catalog.selectors import engine_catalogs

    # The names engines' views give the catalog (`lake`), registered as this one: a view
    # that Spark made as `lake.shop.v` reads `lake.shop.orders`.
    aliases = tuple(sorted(engine_catalogs()))
    key = (tuple(namespace), tuple(sorted((conf or {}).items())), aliases)
    root = spark()  # first: a new JVM in place of an exited one drops the kept sessions
    # Kept sessions belong to `root` only while it is the current one: another thread may
    # start a new JVM between these lines, and a session of the dead one, kept, would fail
    # every later run alike.
    with _lock:
        cached = _sessions.get(key) if root is _session else None
    if cached is not None:
        return cached
    session = session_with(
        root,
        catalog=settings.CATALOG_NAME,
        namespace=namespace,
        conf=conf or {},
        aliases=aliases,
    )
    with _lock:
        if root is _session:
            if len(_sessions) > 64:
                _sessions.clear()
            _sessions[key] = session
    return session


@contextlib.contextmanager
def job_group(group: str, description: str, *, context: Any = None) -> Iterator[None]:
    """Tag the Spark jobs this thread starts inside with `group`, so that `cancel_group`
    stops them (Spark keeps the tag per thread: PySpark pins each Python thread to a JVM
    thread). `context`: the SparkContext to tag, the worker's session's by default (a
    streaming host passes its own)."""
    context = context if context is not None else spark().sparkContext
    context.setJobGroup(group, description, interruptOnCancel=True)
    try:
        yield
    finally:
        if not jvm_gone():  # a JVM that exited took the tag with it
            context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


def cancel_group(group: str) -> None:
    """Cancel the running Spark jobs tagged with `group` (none once they ended; a job the
    group starts later runs, so a caller that means to stop a run asks again)."""
    session = _session  # never starts Spark, nor a new JVM in place of an exited one
    if session is not None and not jvm_gone():
        session.sparkContext.cancelJobGroup(group)
