"""What the services ask of Spark (a query's schema, a view's column types, a console data
change, a preview read), answered only where Spark runs: inside a job on a refresh worker
(`on_worker()`, which the job executor below enters). Anywhere else, a web request above
all, they raise `NeedsWorker` before anything is written, and the caller makes the
operation a job (catalog.jobs) instead of waiting for a worker: no web request waits on
Spark. `EXECUTOR` is how catalog.jobs runs a job with this worker's Spark (refresh.apps
registers it)."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from django.conf import settings

from catalog.core.errors import CatalogError, InvalidInput, NeedsWorker, Unavailable
from catalog.jobs import Executor
from refresh.core.refresh_state import user_change

_on_worker: contextvars.ContextVar[bool] = contextvars.ContextVar("on_worker", default=False)


@contextlib.contextmanager
def on_worker() -> Iterator[None]:
    """Spark is here: what runs inside asks this process's Spark (runtime.engine)."""
    token = _on_worker.set(True)
    try:
        yield
    finally:
        _on_worker.reset(token)


@contextlib.contextmanager
def spark_job(group: str, description: str) -> Iterator[None]:
    """A job on this worker: Spark is here, its Spark jobs are tagged with `group` (so that
    `cancel_group` stops them), and a statement Spark refuses (a parse or analysis error,
    Iceberg's too) is the user's SQL, a SqlError with Spark's line and column."""
    from runtime import engine

    with on_worker(), engine.job_group(group, description):
        try:
            yield
        except Exception as error:
            if _is_spark_refusal(error):
                from runtime.spark.errors import spark_error

                raise spark_error(error) from error
            lost = engine.lost_jvm_message(error)
            if lost is not None:
                raise Unavailable(lost.replace("this run", "this job")) from error
            raise


def cancel_group(group: str) -> None:
    from runtime import engine

    engine.cancel_group(group)


def _is_spark_refusal(error: Exception) -> bool:
    try:
        from pyspark.errors.exceptions.captured import (
            AnalysisException,
            IllegalArgumentException,
            ParseException,
        )
    except ImportError:  # pragma: no cover - pyspark is a dependency
        return False
    return isinstance(error, AnalysisException | ParseException | IllegalArgumentException)


EXECUTOR = Executor(running=spark_job, cancel=cancel_group)


def need_spark(what: str) -> None:
    """NeedsWorker unless this runs where Spark is: an operation that writes more than one
    row calls it before its first write, so that nothing is written twice (once in the
    request, once on the worker)."""
    if not _on_worker.get():
        raise NeedsWorker(what)


def query_schema(query: str, *, namespace: str) -> str:
    """Spark's `StructType.json()` for `query`, its names resolved in `namespace`, once the
    sandbox allowed its plan (a SqlError, with line and column, otherwise)."""
    need_spark("Spark derives the query's schema")
    from refresh.spark import jobs
    from runtime import engine

    session = engine.run_session(namespace=namespace.split("."))
    return jobs.query_schema(session, query, catalog=settings.CATALOG_NAME)


def run_data_change(
    statement: str,
    *,
    namespace: str,
    target: list[str],
    changed_by: str = "",
    may_read: Callable[[Any], None] | None = None,
    policies: Sequence[Any] = (),
) -> None:
    """Run an UPDATE, DELETE or MERGE (the console's data changes on materialized tables);
    Spark's sandbox refuses it unless it changes `target` (namespace levels..., name) and
    nothing else, and `may_read` refuses it unless its user may read what it reads (a
    MERGE's source), which it reads through its user's row filters and masks (`policies`;
    a table they protect is not written). Its snapshot is marked as a person's change."""
    need_spark("Spark runs the statement")
    from refresh.spark import jobs
    from runtime import engine

    session = engine.run_session(namespace=namespace.split("."))
    jobs.run_statement(
        session,
        statement,
        catalog=settings.CATALOG_NAME,
        target=target,
        properties=user_change(changed_by),
        namespace=namespace.split("."),
        may_read=may_read,
        policies=policies,
    )


def verify_snapshot(
    *,
    query: str,
    namespace: str,
    target: list[str],
    snapshot_id: int,
    pins: dict[tuple[str, ...], int | None],
    partition: dict[str, str] | None,
    expectations: Any = (),
) -> Any:
    """refresh.spark.verify's verdict on the table `target` (namespace levels..., name) at
    `snapshot_id` against `query` over the sources at `pins`, without the rows its DROP ROW
    `expectations` leave out."""
    need_spark("Spark recomputes the query to verify the table")
    from refresh.spark import verify
    from runtime import engine

    session = engine.run_session(namespace=namespace.split("."))
    return verify.verify_snapshot(
        session,
        query=query,
        target=[settings.CATALOG_NAME, *target],
        snapshot_id=snapshot_id,
        pins=pins,
        namespace=namespace.split("."),
        catalog=settings.CATALOG_NAME,
        partition=partition,
        expectations=expectations,
    )


def view_schema(spark_sql: str, namespace: list[str]) -> dict | None:
    """The Iceberg schema Spark's analyzer gives a view's query, for the column types
    sqlglot could only guess (catalog.services.sql_views.TYPE_DERIVERS). On a worker: Spark
    answers, or None when it cannot analyze the query (the guesses stay, with their
    warning). Elsewhere: NeedsWorker when a worker is alive to ask (the create becomes a
    job), None at once when none is."""
    from catalog import workers

    if not settings.VIEW_TYPES_FROM_SPARK:
        return None
    if not _on_worker.get():
        if workers.alive():
            raise NeedsWorker("Spark types the view's columns")
        return None
    from refresh.spark.schema import iceberg_schema

    try:
        return iceberg_schema(query_schema(spark_sql, namespace=".".join(namespace)))
    except Exception:  # noqa: BLE001 - any failure keeps sqlglot's answer
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
    """A preview read by Spark: {"columns": [[name, type]], "rows": [[JSON-safe values]]}.
    The filter and columns were checked by the caller; the sandbox checks Spark's plan."""
    need_spark("Spark reads the preview")
    from refresh.spark import preview
    from runtime import engine

    frame = preview.read(
        # A session of its own (not the worker's root one): a view an engine made may name
        # the catalog by the engine's own name, which only run sessions register.
        engine.run_session(namespace=[]),
        identifier=[settings.CATALOG_NAME, *identifier],
        snapshot_id=snapshot_id,
        timestamp_ms=timestamp_ms,
        columns=columns,
        row_filter=row_filter,
        limit=limit,
    )
    return preview.answer(frame, limit=limit)


def prepare_query(sql: str, *, namespace: str | None, policies: Sequence[Any] = ()) -> Any:
    """A console query parsed, analyzed and checked by the worker's Spark through the
    sandbox, nothing read yet (refresh.spark.query.Prepared: its kind, columns and what it
    reads); names resolve in `namespace` (the catalog's own when None); every table that
    `policies` (catalog.core.policies.TablePolicy, the reader's) name is read through them."""
    need_spark("Spark runs the query")
    from refresh.spark import query
    from runtime import engine

    levels = namespace.split(".") if namespace else []
    session = engine.run_session(namespace=levels)
    return query.prepare(
        session, sql, catalog=settings.CATALOG_NAME, namespace=levels, policies=policies
    )


def fetch_query(prepared: Any, *, max_rows: int) -> Any:
    """The prepared query's first `max_rows + 1` rows as an Arrow table. A Spark job of the
    query that fails (a division by zero under ANSI mode, a cast, raise_error()) is the
    query's fault: InvalidInput with its root cause; a JVM gone is Unavailable."""
    need_spark("Spark reads the query's rows")
    from refresh.spark import query
    from runtime import engine
    from runtime.spark.errors import failure_message

    try:
        return query.fetch(prepared, max_rows=max_rows)
    except CatalogError:
        raise
    except Exception as error:
        lost = engine.lost_jvm_message(error)
        if lost is not None:
            raise Unavailable(lost.replace("this run", "this query")) from error
        if type(error).__name__ not in (
            "Py4JJavaError",
            "PythonException",
        ) and not _is_spark_refusal(error):
            raise
        raise InvalidInput(f"The query failed in Spark: {failure_message(error)}") from error
