"""A continuous materialized table's load (its first, or a recompute) at pinned source
snapshots, the Spark side of refresh.streams.loads. Django-free: the streaming process
passes plain values.

The load reads every source at one snapshot id (temporary views over
`spark.read.option("snapshot-id", ...)`) and overwrites the table in one commit, recording
in its refresh state (refresh.core.refresh_state) the snapshots it pinned; the stream then
starts strictly after those snapshots (`stream-from-timestamp`,
refresh.spark.stream_queries), so no append is read twice or missed. Expectations
(refresh.core.expectations) are applied to the load's rows. The user's query, however
rewritten, reaches Spark only through the sandbox (runtime.spark.sandbox); the temporary
views this module makes are the only ones it may read besides the catalog's tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from refresh.core import expectations as ex
from refresh.core.streaming import rewrite_sources
from refresh.spark.batch import RefreshResult, expected, latest_snapshot, replace
from refresh.spark.changes import pin_sources
from runtime.spark import sandbox
from runtime.spark.commits import with_properties
from runtime.spark.session import quote

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def view_name(index: int, kind: str) -> str:
    """The temporary view over a source pinned for a load or a micro-batch."""
    return f"__lakeview_{kind}_{index}"


def pinned_snapshots(spark: SparkSession, tables: Sequence[Sequence[str]]) -> dict[str, Any]:
    """{"ns.name": (snapshot id, timestamp ms)} of each table's current snapshot now
    (None for a table without one)."""
    pins: dict[str, Any] = {}
    for table in tables:
        rows = spark.sql(
            f"SELECT snapshot_id, committed_at FROM {quote(table)}.snapshots "
            "ORDER BY committed_at DESC LIMIT 1"
        ).collect()
        key = ".".join(table[1:])
        pins[key] = (rows[0][0], int(rows[0][1].timestamp() * 1000)) if rows else None
    return pins


def load(
    spark: SparkSession,
    *,
    query: str,
    target: Sequence[str],
    sources: Sequence[Sequence[str]],
    pins: Mapping[str, Any],
    namespace: Sequence[str],
    catalog: str,
    replacing: Mapping[str, Any] | None = None,
    snapshot_properties: Mapping[str, str] | None = None,
    expectations: Sequence[ex.Expectation] = (),
    violations: dict[str, int] | None = None,
) -> RefreshResult:
    """Overwrite the table with the query's result over the sources at their pinned
    snapshots (one commit, whose snapshot summary gets `snapshot_properties`: the refresh
    state of those pins), its `expectations` applied (batch.expected: counts into
    `violations`, ExpectationFailed before the commit). With `replacing`
    ({"partitioned_by": [...], "properties": {...}}), a new definition's load: the table is
    replaced, schema and rows in one commit (batch.replace)."""
    from pyspark.sql import functions as F

    snapshots = {}
    for source in sources:
        pin = pins.get(".".join(source[1:]))
        snapshots[tuple(source[1:])] = pin[0] if pin is not None else None
    replacements = pin_sources(spark, pins=snapshots, catalog=catalog)
    try:
        sql = rewrite_sources(query, replacements, namespace=namespace, catalog=catalog)
        if expectations:
            sql = ex.flagged_query(sql, expectations)
        frame = sandbox.query(spark, sql, catalog=catalog, trusted_views=replacements.values())
        with expected(frame, expectations, violations) as kept:
            if replacing is not None:
                replace(
                    kept,
                    target=target,
                    partitioned_by=replacing["partitioned_by"],
                    properties=replacing["properties"],
                    snapshot_properties=snapshot_properties,
                )
            else:
                with_properties(kept.writeTo(quote(target)), snapshot_properties or {}).overwrite(
                    F.lit(True)
                )
    finally:
        for view in replacements.values():
            spark.catalog.dropTempView(view)
    return latest_snapshot(spark, target)
