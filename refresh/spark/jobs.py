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
    """A session for one run: `settings` applied, current namespace `catalog.namespace`."""
    session = spark.newSession()
    for key, value in (settings or {}).items():
        session.conf.set(key, value)
    session.sql(f"USE {quote([catalog, *namespace])}")
    return session


def spark_error(error: Exception, *, line_offset: int = 0, column_offset: int = 0) -> SqlError:
    """A Spark analysis or parse error as a SqlError: the first line of Spark's message,
    without the plan it appends, placed at Spark's line and column (1-based; Spark's `pos`
    is 0-based), shifted by where the query starts in the statement."""
    text = str(getattr(error, "desc", None) or error)
    message = text.split("\n")[0].strip()
    message = re.sub(r";\s*line \d+ pos \d+;?.*$", "", message).strip()
    found = _POSITION.search(text)
    line = column = None
    if found:
        line = int(found.group(1)) + line_offset
        column = int(found.group(2)) + 1 + (column_offset if found.group(1) == "1" else 0)
    return SqlError(f"Spark cannot analyze the query: {message[:1000]}", line=line, column=column)


def query_schema(session: SparkSession, query: str) -> str:
    """The output schema of `query` as Spark's analyzer derives it (`StructType.json()`):
    exact types, nested types and nullability. Nothing is executed."""
    from pyspark.errors import AnalysisException, ParseException

    try:
        return session.sql(query).schema.json()
    except (AnalysisException, ParseException) as error:
        raise spark_error(error) from error


def run_statement(session: SparkSession, statement: str) -> None:
    """An UPDATE or DELETE, as Spark runs it (Iceberg's row-level operations)."""
    from pyspark.errors import AnalysisException, ParseException

    try:
        session.sql(statement).collect()
    except (AnalysisException, ParseException) as error:
        raise spark_error(error) from error
