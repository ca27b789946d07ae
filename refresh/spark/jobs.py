"""What a refresh worker asks of Spark: the schema of a query (Spark's analyzer, no job
run), a session for one run with that run's settings and default namespace, and a data
change (UPDATE / DELETE) run as written. Django-free: the worker passes plain values.

Every run gets `newSession()` of the worker's one long-lived session: it shares the JVM and
the SparkContext (started once per worker process) but has SQL settings and catalog
instances of its own, so one run's options and `USE` never leak into another running
beside it on another thread."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from refresh.core.options import check_run_options
from runtime.spark import sandbox
from runtime.spark.session import session_with

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def run_session(
    spark: SparkSession,
    *,
    catalog: str,
    namespace: Sequence[str],
    settings: Mapping[str, str] | None = None,
    aliases: Sequence[str] = (),
) -> SparkSession:
    """A session for one run: its user's `settings` checked here again, where Spark takes
    them (core.options.check_run_options: options stored before a rule was tightened fail
    the run, naming the option, instead of reaching Spark), then `session_with`."""
    checked = check_run_options(dict(settings or {}))
    return session_with(spark, catalog=catalog, namespace=namespace, conf=checked, aliases=aliases)


def query_schema(session: SparkSession, query: str, *, catalog: str) -> str:
    """The output schema of `query` as Spark's analyzer derives it (`StructType.json()`):
    exact types, nested types and nullability, once the sandbox allowed its plan. Nothing
    is executed."""
    return sandbox.query(session, query, catalog=catalog).schema.json()


def run_statement(
    session: SparkSession,
    statement: str,
    *,
    catalog: str,
    target: Sequence[str],
    properties: Mapping[str, str] | None = None,
    namespace: Sequence[str] = (),
    may_read: Callable[[Any], None] | None = None,
    policies: Sequence[Any] = (),
) -> None:
    """An UPDATE, DELETE or MERGE of `target` (namespace levels..., name), as Spark runs it
    (Iceberg's row-level operations), once the sandbox found it changes that table only
    and `may_read` (given what it reads, as a query.Prepared with their places) raised
    nothing; its commit adds `properties` to the snapshot's summary (a person's change).
    `namespace`: the session's current one."""
    from refresh.spark import query

    def checked(facts: list) -> None:
        if may_read is not None:
            reads = sandbox.reads(facts, catalog, namespace=namespace)
            places = query.places(statement, facts, catalog, namespace)
            may_read(query.Prepared(kind="DATA", columns=[], reads=reads, places=places))

    sandbox.data_change(
        session,
        statement,
        catalog=catalog,
        target=target,
        properties=properties,
        checked=checked,
        policies=policies,
    )
