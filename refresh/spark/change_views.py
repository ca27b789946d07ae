"""The temporary views every plan of refresh.spark.changes reads through (a source's
appended rows, the keys a change touched, a partition's rows) and the query over the
appended rows alone (every other source read as empty, or whole); the phases' timings the
worker logs. Django-free."""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from refresh.core.streaming import rewrite_sources
from refresh.spark.batch import partition_condition
from runtime.spark import sandbox
from runtime.spark.session import quote

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from sqlglot import exp


Source = tuple[str, ...]


view_numbers = itertools.count()


def text_of(query: str | exp.Query) -> str:
    """A query as Spark SQL text: a parsed one rendered."""
    return query if isinstance(query, str) else query.sql(dialect="spark")


def temp_view(frame: DataFrame, kind: str) -> str:
    name = f"__lakeview_{kind}_{next(view_numbers)}"
    frame.createOrReplaceTempView(name)
    return name


def partition_filter(frame: DataFrame, partition: Mapping[str, str] | None) -> DataFrame:
    return frame.where(partition_condition(partition)) if partition else frame


def appended_rows(
    session: SparkSession,
    *,
    query: str | exp.Query,
    appended: Mapping[Source, str],
    sources: Sequence[Source],
    whole: Mapping[Source, str],
    namespace: Sequence[str],
    catalog: str,
    scratch: list[str],
) -> DataFrame:
    """An append plan's new rows: the query with each source read from its appended rows
    (`appended`: source -> view) or, unchanged, as empty (views it makes go in `scratch`,
    for the caller to drop once the rows are written)."""
    replacements = dict(appended)
    for source in sources:
        if source not in replacements:
            base = whole.get(source) or quote((catalog, *source))
            replacements[source] = temp_view(session.table(base).limit(0), "none")
            scratch.append(replacements[source])
    sql = rewrite_sources(query, replacements, namespace=namespace, catalog=catalog)
    return sandbox.query(session, sql, catalog=catalog, trusted_views=replacements.values())


def mark(timings: dict[str, float] | None, phase: str) -> None:
    """Seconds since the previous mark (or since `timings` was made: its "_at" entry), under
    `phase`: the worker logs where a refresh's time went (refresh.runner._log_phases)."""
    if timings is None:
        return
    now = time.perf_counter()
    timings[phase] = now - timings.get("_at", now)
    timings["_at"] = now
