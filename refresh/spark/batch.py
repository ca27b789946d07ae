"""The full refresh of a materialized table, as one Spark batch job and one Iceberg commit.

`full_refresh` runs the table's query and replaces the table's rows with its result in a
single overwrite (Spark's DataFrameWriterV2 `overwrite(condition)`, one Iceberg snapshot):
readers see the old rows or the new ones, never a mix. With a partition (the one a scheduled
run computes from `partition.fields.<col>.date-formatter`, or one asked for by hand), only
the rows of that partition are replaced, and the data files of every other partition are
left untouched. Partition values reach Spark as literal columns (`F.lit`), never as SQL
text, and the query runs only once the sandbox allowed Spark's plan of it. Django-free: the
worker passes plain values in."""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from refresh.core import expectations as ex
from refresh.core.definition import DISTRIBUTION_PROPERTY
from runtime.spark.session import quote

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


@dataclass(frozen=True)
class RefreshResult:
    """What the commit made, from its snapshot's summary."""

    snapshot_id: int | None
    rows_written: int | None
    bytes_written: int | None


def as_rows(frame: DataFrame) -> DataFrame:
    """`frame` computed now and kept as plain rows (a local checkpoint): plans that read it
    see a leaf, not the plan that made it, so neither Spark's optimizer nor the sandbox's
    plan check walks that plan again. `release` frees the rows."""
    return frame.localCheckpoint()


def release(frame: DataFrame) -> None:
    """Free what `frame` keeps: a local checkpoint's blocks (its DataFrame's unpersist does
    not reach them, and a stream making one per micro-batch would hold them until the JVM
    collects their RDDs), or a cached frame's cache."""
    plan = frame._jdf.queryExecution().analyzed()  # noqa: SLF001 - py4j
    if plan.getClass().getSimpleName() == "LogicalRDD":
        plan.rdd().unpersist(False)
    else:
        frame.unpersist()


def full_refresh(
    spark: SparkSession,
    *,
    target: Sequence[str],
    query: str,
    partition: Mapping[str, str] | None = None,
    report: bool = True,
    timings: dict[str, float] | None = None,
    trusted_views: Sequence[str] = (),
    snapshot_properties: Mapping[str, str] | None = None,
    expectations: Sequence[ex.Expectation] = (),
    violations: dict[str, int] | None = None,
) -> RefreshResult | None:
    """Replace the target's rows (or one partition's) with what `query` gives now, its
    `expectations` applied (`expected`: the counts of violating rows go in `violations`; a
    FAIL UPDATE one that rows violate raises before anything is written). With
    `report`, read back the commit's snapshot (a small Spark job over the table's metadata);
    a caller that learns it elsewhere (the catalog's mirror) passes False. `timings` gets
    the seconds the sandbox's check took ("checked") and the job with its commit ("written").
    `trusted_views` are the caller's temporary views the query may read (pinned sources);
    `snapshot_properties` go into the commit's snapshot summary (its refresh state)."""
    import time

    from pyspark.sql import functions as F

    from runtime.spark import sandbox
    from runtime.spark.commits import with_properties

    started = time.perf_counter()
    text = ex.flagged_query(query, expectations) if expectations else query
    frame = sandbox.query(spark, text, catalog=target[0], trusted_views=trusted_views)
    checked = time.perf_counter()
    writer_target = quote(target)
    properties = snapshot_properties or {}
    condition = partition_condition(partition) if partition else F.lit(True)
    if partition:
        frame = frame.where(condition)
    with expected(frame, expectations, violations) as kept:
        with_properties(kept.writeTo(writer_target), properties).overwrite(condition)
    if timings is not None:
        timings.update(checked=checked - started, written=time.perf_counter() - checked)
    return latest_snapshot(spark, target) if report else None


@contextlib.contextmanager
def expected(
    frame: DataFrame,
    expectations: Sequence[ex.Expectation],
    violations: dict[str, int] | None = None,
) -> Iterator[DataFrame]:
    """`frame` (a `flagged_query`'s rows) with its expectations applied: its violating rows
    counted per expectation in one aggregation (into `violations`), ExpectationFailed for
    the first FAIL UPDATE expectation any row violates, then the rows without DROP ROW's
    violators and without the flag columns. The rows are computed once: kept (memory, then
    disk) between the count and the caller's write."""
    from pyspark.sql import functions as F

    if not expectations:
        yield frame
        return
    flags = [ex.FLAG.format(index) for index in range(len(expectations))]
    frame = frame.persist()
    try:
        totals = frame.agg(
            *[F.sum(F.col(quote([flag])).cast("long")).alias(flag) for flag in flags]
        ).first()
        counts = {
            e.name: int(totals[flag] or 0) for e, flag in zip(expectations, flags, strict=True)
        }
        if violations is not None:
            violations.update(counts)
        failure = ex.first_failure(expectations, counts)
        if failure is not None:
            raise failure
        kept = frame
        for expectation, flag in zip(expectations, flags, strict=True):
            if expectation.on_violation == ex.DROP_ROW:
                kept = kept.where(~F.col(quote([flag])))
        yield kept.drop(*flags)
    finally:
        frame.unpersist()


def partition_condition(partition: Mapping[str, str]) -> Column:
    """`col = value AND ...` for a partition's columns, the values as literals (`F.lit`),
    never SQL text."""
    from pyspark.sql import functions as F

    return functools.reduce(
        lambda left, right: left & right,
        [F.col(quote([column])) == F.lit(value) for column, value in partition.items()],
    )


def replace(
    frame: DataFrame,
    *,
    target: Sequence[str],
    partitioned_by: Sequence[str],
    properties: Mapping[str, str],
    snapshot_properties: Mapping[str, str] | None = None,
) -> None:
    """Replace the table with `frame`: its schema (columns keep their field ids by name),
    partitioning, the given properties (the others stay) and rows, in ONE Iceberg commit
    (Spark's atomic REPLACE TABLE AS SELECT: Iceberg stages the new metadata and the REST
    catalog swaps it in). Until then every reader sees the old schema with the old rows;
    afterwards the new with the new: a redefinition (ALTER ... AS, a rollback) is one step."""
    from pyspark.sql import functions as F

    from runtime.spark.commits import with_properties

    writer = with_properties(frame.writeTo(quote(target)), snapshot_properties or {})
    transforms = [F.col(quote([column])) for column in partitioned_by]
    # DISTRIBUTED BY: a bucket[n] field per column, after the partition keys, as CREATE made
    # them (refresh.core.definition.partition_spec).
    distribution = json.loads(properties.get(DISTRIBUTION_PROPERTY) or "null")
    if distribution:
        transforms += [
            F.bucket(int(distribution["buckets"]), F.col(quote([column])))
            for column in distribution["columns"]
        ]
    if transforms:
        writer = writer.partitionedBy(*transforms)
    for key, value in properties.items():
        writer = writer.tableProperty(key, value)
    writer.createOrReplace()


def rebuild(
    spark: SparkSession,
    *,
    target: Sequence[str],
    query: str,
    partitioned_by: Sequence[str],
    properties: Mapping[str, str],
    snapshot_properties: Mapping[str, str] | None = None,
    trusted_views: Sequence[str] = (),
    expectations: Sequence[ex.Expectation] = (),
    violations: dict[str, int] | None = None,
) -> None:
    """A FULL table's redefinition: the new query's result (once the sandbox allowed its
    plan), its `expectations` applied (`expected`), replaces the table with its schema, in
    one commit (`replace`). `trusted_views` are the caller's temporary views the query may
    read (pinned sources)."""
    from runtime.spark import sandbox

    text = ex.flagged_query(query, expectations) if expectations else query
    frame = sandbox.query(spark, text, catalog=target[0], trusted_views=trusted_views)
    with expected(frame, expectations, violations) as kept:
        replace(
            kept,
            target=target,
            partitioned_by=partitioned_by,
            properties=properties,
            snapshot_properties=snapshot_properties,
        )


def latest_snapshot(spark: SparkSession, target: Sequence[str]) -> RefreshResult:
    rows = spark.sql(
        f"SELECT snapshot_id, summary FROM {quote(target)}.snapshots "
        "ORDER BY committed_at DESC LIMIT 1"
    ).collect()
    if not rows:
        return RefreshResult(None, None, None)
    summary = rows[0]["summary"] or {}

    def number(key: str) -> int | None:
        value = summary.get(key)
        return int(value) if value is not None else None

    return RefreshResult(
        snapshot_id=rows[0]["snapshot_id"],
        rows_written=number("added-records"),
        bytes_written=number("added-files-size"),
    )
