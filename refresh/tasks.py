"""Celery tasks of materialized tables: thin, they take ids and plain values and call one
function each (refresh.runner on the worker side, refresh.services for housekeeping)."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings

from catalog.core.errors import SqlError


def _refused(error: SqlError) -> dict:
    """Spark's refusal as a value the waiting web process turns back into a SqlError."""
    return {"error": {"message": error.base_message, "line": error.line, "column": error.column}}


@shared_task(name="refresh.run_refresh")
def run_refresh(run_id: int) -> str:
    """A queued run (CREATE, MANUAL, API): claim it and run it."""
    from refresh import runner

    return runner.execute(run_id)


@shared_task(name="refresh.scheduled_refresh")
def scheduled_refresh(materialized_table_id: int, options: dict | None = None) -> int | None:
    """A tick of a table's schedule (celery-beat sends it; refresh.schedules names it)."""
    from refresh import runner

    return runner.run_scheduled(materialized_table_id, options)


@shared_task(name="refresh.analyze_query")
def analyze_query(query: str, namespace: str) -> dict:
    """Spark's schema for a query, for a CREATE waiting in the web process."""
    from refresh import engine
    from refresh.spark import jobs

    try:
        session = engine.run_session(namespace=namespace.split("."))
        return {"schema": jobs.query_schema(session, query, catalog=settings.CATALOG_NAME)}
    except SqlError as error:
        return _refused(error)


@shared_task(name="refresh.run_statement")
def run_statement(statement: str, namespace: str, target: list[str]) -> dict:
    """An UPDATE, DELETE or MERGE of one materialized table (`target`: its namespace levels
    and name), run by Spark for the console, names resolved in `namespace`."""
    from refresh import engine
    from refresh.spark import jobs

    try:
        session = engine.run_session(namespace=namespace.split("."))
        jobs.run_statement(session, statement, catalog=settings.CATALOG_NAME, target=target)
        return {"ok": True}
    except SqlError as error:
        return _refused(error)
    except Exception as error:  # noqa: BLE001 - reported to the console, not raised there
        return {"error": {"message": str(error).split("\n")[0][:1000]}}


@shared_task(name="refresh.preview_rows")
def preview_rows(request: dict) -> dict:
    """A preview read by Spark (a view's rows, a table with equality deletes), for a page
    or API request waiting in the web process: columns and JSON-safe rows."""
    from refresh import engine
    from refresh.spark import preview

    try:
        return preview.answer(engine.spark(), catalog=settings.CATALOG_NAME, **request)
    except SqlError as error:
        return _refused(error)
    except Exception as error:  # noqa: BLE001 - reported to the page, not raised there
        return {"error": {"message": str(error).split("\n")[0][:1000]}}


@shared_task(name="refresh.fail_abandoned_runs")
def fail_abandoned_runs() -> int:
    """Runs whose worker died (celery-beat calls this every 15 s: settings)."""
    from refresh import services

    return services.fail_abandoned(
        silent_for=timedelta(seconds=settings.MT_ABANDONED_AFTER_SECONDS)
    )
