"""The refresh worker's Spark: one session per worker process, started by the first job
that needs it and kept until the process ends (never one per refresh: a JVM takes seconds
to start). Its only catalog is the app's own Iceberg REST catalog, reached with the
service credential (refresh.credentials), so refresh jobs commit through the one commit
path like any engine.

Iceberg's Spark catalog caches loaded tables (30 s by default); a long-lived session would
then read stale snapshots of tables other writers changed, so the cache is off."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from django.conf import settings

from refresh.credentials import service_credential
from refresh.spark.session import SparkSessionConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

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
    """The worker process's session (thread-safe; the first caller starts it)."""
    global _session
    with _lock:
        if _session is None:
            _session = session_config().build()
        return _session


def is_running() -> bool:
    return _session is not None


_sessions: dict[tuple, SparkSession] = {}


def run_session(*, namespace: list[str], settings: dict[str, str] | None = None) -> SparkSession:
    """A session for runs in `namespace` with `settings` (refresh.spark.jobs.run_session),
    kept for the next run alike: a new session makes its own catalog client, which signs in
    to the REST catalog again."""
    from django.conf import settings as django_settings

    from refresh.spark import jobs

    key = (tuple(namespace), tuple(sorted((settings or {}).items())))
    with _lock:
        cached = _sessions.get(key)
    if cached is not None:
        return cached
    session = jobs.run_session(
        spark(), catalog=django_settings.CATALOG_NAME, namespace=namespace, settings=settings
    )
    with _lock:
        if len(_sessions) > 64:
            _sessions.clear()
        _sessions[key] = session
    return session


@contextlib.contextmanager
def job_group(group: str, description: str) -> Iterator[None]:
    """Tag the Spark jobs this thread starts inside with `group`, so that `cancel_group`
    stops them (Spark keeps the tag per thread: PySpark pins each Python thread to a JVM
    thread)."""
    context = spark().sparkContext
    context.setJobGroup(group, description, interruptOnCancel=True)
    try:
        yield
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


def cancel_group(group: str) -> None:
    """Cancel the running Spark jobs tagged with `group` (none once they ended; a job the
    group starts later runs, so a caller that means to stop a run asks again)."""
    if is_running():
        spark().sparkContext.cancelJobGroup(group)
