"""What a refresh worker asks of Spark: the schema of a query (Spark's analyzer, no job
run), a session for one run with that run's settings and default namespace, and a data
change (UPDATE / DELETE) run as written. Django-free: the worker passes plain values.

Every run gets `newSession()` of the worker's one long-lived session: it shares the JVM and
the SparkContext (started once per worker process) but has SQL settings and catalog
instances of its own, so one run's options and `USE` never leak into another running
beside it on another thread."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from catalog.core.errors import SqlError
from refresh.spark import sandbox
from refresh.spark.batch import quote

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Spark's analysis errors end "...; line 1 pos 14;" followed by the plan; parse errors say
#: "(line 1, pos 7)" followed by the query with a marker.
_POSITION = re.compile(r"line (\d+),? pos (\d+)")


def run_session(
    spark: SparkSession,
    *,
    catalog: str,
    namespace: Sequence[str],
    settings: Mapping[str, str] | None = None,
) -> SparkSession:
    """A session for one run: `settings` applied, then the sandbox's (which they cannot
    undo), current namespace `catalog.namespace`."""
    session = spark.newSession()
    for key, value in (settings or {}).items():
        session.conf.set(key, value)
    sandbox.harden(session)
    session.sql(f"USE {quote([catalog, *namespace])}")
    return session


def spark_error(error: Exception, *, line_offset: int = 0, column_offset: int = 0) -> SqlError:
    """A Spark analysis or parse error as a SqlError: the first line of Spark's message,
    without the plan it appends, placed at Spark's line and column (1-based; Spark's `pos`
    is 0-based), shifted by where the query starts in the statement."""
    text = str(getattr(error, "desc", None) or error)
    message = next((line.strip() for line in text.splitlines() if line.strip()), "")
    message = re.sub(r";\s*line \d+ pos \d+;?.*$", "", message).strip()
    message = re.sub(r"\s*\(line \d+, pos \d+\)", "", message).strip()
    found = _POSITION.search(text)
    line = column = None
    if found:
        line = int(found.group(1)) + line_offset
        column = int(found.group(2)) + 1 + (column_offset if found.group(1) == "1" else 0)
    return SqlError(f"Spark cannot analyze the query: {message[:1000]}", line=line, column=column)


#: What Iceberg says when a commit lost to a concurrent one it cannot be rebased onto: a
#: compaction replaced the files a MERGE's delete files name, or a refresh replaced the
#: files a compaction rewrote. Whoever lost may run again.
COMMIT_CONFLICTS = (
    "Found conflicting",
    "Missing required files",
    "Cannot commit",
    "CommitFailed",
    "ValidationException",
)


def is_commit_conflict(error: BaseException) -> bool:
    return any(marker in str(error) for marker in COMMIT_CONFLICTS)


def failure_message(error: Exception) -> str:
    """What a failed Spark job says to its user: the root cause's message (an
    `assert_true` that did not hold, a division by zero under ANSI mode, a file gone),
    not py4j's wrapping and the JVM's stack trace."""
    java = getattr(error, "java_exception", None)
    if java is None:
        text = str(error).strip()
        return text.splitlines()[0] if text else type(error).__name__
    try:
        root = java
        while root.getCause() is not None and root.getCause() is not root:
            root = root.getCause()
        message = root.getMessage() or root.toString()
    except Exception:  # noqa: BLE001 - the JVM is gone: py4j's own words
        message = str(error)
    return message.strip().splitlines()[0][:2000] if message.strip() else type(error).__name__


def query_schema(session: SparkSession, query: str, *, catalog: str) -> str:
    """The output schema of `query` as Spark's analyzer derives it (`StructType.json()`):
    exact types, nested types and nullability, once the sandbox allowed its plan. Nothing
    is executed."""
    return sandbox.query(session, query, catalog=catalog).schema.json()


def run_statement(
    session: SparkSession, statement: str, *, catalog: str, target: Sequence[str]
) -> None:
    """An UPDATE, DELETE or MERGE of `target` (namespace levels..., name), as Spark runs it
    (Iceberg's row-level operations), once the sandbox found it changes that table only."""
    sandbox.data_change(session, statement, catalog=catalog, target=target)
