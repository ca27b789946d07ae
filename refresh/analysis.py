"""Spark's analyzer, asked from the web process: the schema of a materialized table's query
is derived by a refresh worker's Spark session (the only place a JVM runs), through a Celery
task whose answer the request waits for. Errors come back as values (message, line,
column), never as pickled exceptions."""

from __future__ import annotations

from django.conf import settings

from catalog.core.errors import SqlError, Unavailable


def query_schema(query: str, *, namespace: str) -> str:
    """Spark's `StructType.json()` for `query`, its names resolved in `namespace`; a
    SqlError (placed in the query's own lines) when Spark refuses it; Unavailable when no
    worker answers in `MT_ANALYZE_TIMEOUT_SECONDS`."""
    from celery.exceptions import TimeoutError as CeleryTimeout

    from refresh import tasks

    timeout = settings.MT_ANALYZE_TIMEOUT_SECONDS
    try:
        pending = tasks.analyze_query.apply_async(args=[query, namespace])
        answer = pending.get(timeout=timeout, disable_sync_subtasks=False)
    except CeleryTimeout as error:
        raise Unavailable(
            f"No refresh worker answered within {timeout} s, so Spark could not derive the "
            "query's schema; is a Celery worker running? (`make run` starts one)"
        ) from error
    except Exception as error:  # the broker or the result store cannot be reached
        raise Unavailable(f"The task queue cannot be reached: {error}") from error
    if "error" in answer:
        problem = answer["error"]
        raise SqlError(
            problem["message"],
            line=problem.get("line"),
            column=problem.get("column"),
            field="query",
        )
    return answer["schema"]


def run_data_change(statement: str, *, namespace: str) -> None:
    """Run an UPDATE or DELETE on a refresh worker's Spark and wait for it (the console's
    data changes on materialized tables)."""
    from celery.exceptions import TimeoutError as CeleryTimeout

    from refresh import tasks

    timeout = settings.MT_ANALYZE_TIMEOUT_SECONDS * 5
    try:
        pending = tasks.run_statement.apply_async(args=[statement, namespace])
        answer = pending.get(timeout=timeout, disable_sync_subtasks=False)
    except CeleryTimeout as error:
        raise Unavailable(f"No refresh worker finished the statement within {timeout} s") from error
    except Exception as error:  # the broker or the result store cannot be reached
        raise Unavailable(f"The task queue cannot be reached: {error}") from error
    if "error" in answer:
        problem = answer["error"]
        raise SqlError(
            problem["message"], line=problem.get("line"), column=problem.get("column"), field="sql"
        )
