"""Spark's analyzer, asked from the web process: the schema of a materialized table's query
is derived by a refresh worker's Spark session (the only place a JVM runs), through a Celery
task whose answer the request waits for. Errors come back as values (message, line,
column), never as pickled exceptions."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from catalog.core.errors import SqlError, Unavailable


def _ask_worker(
    task: Any, args: list[Any], *, timeout: float, late: str, field: str | None
) -> dict:
    """Send `task` to a refresh worker and wait for its answer; Unavailable when none
    answers in `timeout` (`late` says what could not be done) or the queue is unreachable,
    a SqlError (placed in the statement's own lines) when Spark refused the SQL."""
    from celery.exceptions import TimeoutError as CeleryTimeout

    try:
        answer = task.apply_async(args=args).get(timeout=timeout, disable_sync_subtasks=False)
    except CeleryTimeout as error:
        raise Unavailable(
            f"No refresh worker answered within {timeout} s, so {late}; is a Celery worker "
            "running? (`make run` starts one)"
        ) from error
    except Exception as error:  # the broker or the result store cannot be reached
        raise Unavailable(f"The task queue cannot be reached: {error}") from error
    if "error" in answer:
        problem = answer["error"]
        raise SqlError(
            problem["message"], line=problem.get("line"), column=problem.get("column"), field=field
        )
    return answer


def query_schema(query: str, *, namespace: str, timeout: float | None = None) -> str:
    """Spark's `StructType.json()` for `query`, its names resolved in `namespace`; waits
    `MT_ANALYZE_TIMEOUT_SECONDS` at most."""
    from refresh import tasks

    answer = _ask_worker(
        tasks.analyze_query,
        [query, namespace],
        timeout=timeout or settings.MT_ANALYZE_TIMEOUT_SECONDS,
        late="Spark could not derive the query's schema",
        field="query",
    )
    return answer["schema"]


def run_data_change(statement: str, *, namespace: str, target: list[str]) -> None:
    """Run an UPDATE, DELETE or MERGE on a refresh worker's Spark and wait for it (the
    console's data changes on materialized tables); Spark's sandbox refuses it unless it
    changes `target` (namespace levels..., name) and nothing else."""
    from refresh import tasks

    _ask_worker(
        tasks.run_statement,
        [statement, namespace, target],
        timeout=settings.MT_ANALYZE_TIMEOUT_SECONDS * 5,
        late="the statement did not run",
        field="sql",
    )


#: How long a view create waits for Spark's types before keeping sqlglot's guesses.
VIEW_TYPES_TIMEOUT_SECONDS = 30
#: After finding no worker, views keep sqlglot's guesses this long without asking again.
NO_WORKER_BACKOFF_SECONDS = 30.0
_no_worker_until = 0.0


def view_schema(spark_sql: str, namespace: list[str]) -> dict | None:
    """The Iceberg schema Spark's analyzer gives a view's query, for the column types
    sqlglot could only guess (catalog.services.sql_views.TYPE_DERIVERS); None, quickly, when
    no refresh worker is running or Spark cannot analyze the query (the guesses stay, with
    their warning)."""
    import time

    from refresh.spark.schema import iceberg_schema
    from webapp.celery import app

    global _no_worker_until
    if not settings.VIEW_TYPES_FROM_SPARK or time.monotonic() < _no_worker_until:
        return None
    try:
        if not app.control.ping(timeout=0.5):
            _no_worker_until = time.monotonic() + NO_WORKER_BACKOFF_SECONDS
            return None
        return iceberg_schema(
            query_schema(
                spark_sql, namespace=".".join(namespace), timeout=VIEW_TYPES_TIMEOUT_SECONDS
            )
        )
    except Exception:  # noqa: BLE001 - any failure keeps sqlglot's answer
        _no_worker_until = time.monotonic() + NO_WORKER_BACKOFF_SECONDS
        return None


def preview_with_spark(
    *,
    identifier: list[str],
    snapshot_id: int | None = None,
    timestamp_ms: int | None = None,
    columns: list[str] | None = None,
    row_filter: str | None = None,
    limit: int = 100,
) -> dict:
    """A preview read by a refresh worker's Spark: {"columns": [[name, type]], "rows":
    [[JSON-safe values]]}. The filter and columns were checked by the caller."""
    from refresh import tasks

    return _ask_worker(
        tasks.preview_rows,
        [
            {
                "identifier": identifier,
                "snapshot_id": snapshot_id,
                "timestamp_ms": timestamp_ms,
                "columns": columns,
                "row_filter": row_filter,
                "limit": limit,
            }
        ],
        timeout=settings.MT_ANALYZE_TIMEOUT_SECONDS,
        late="Spark could not read the preview",
        # A refusal is about the view's SQL or the filter; the message says which.
        field=None,
    )
