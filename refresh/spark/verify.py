"""Check that a materialized table's snapshot is exactly what it says it answers: the query,
recomputed by Spark over the source snapshots the snapshot's refresh state records (time
travel), against the table at that snapshot, as multisets of rows. Django-free.

Floating-point columns are compared at 12 significant digits: an incremental refresh adds
sums in another order than a recompute does, which moves the last bits and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from refresh.core.expectations import Expectation, kept_query
from refresh.core.streaming import rewrite_sources
from refresh.spark.batch import partition_condition
from refresh.spark.changes import pin_sources
from runtime.spark import sandbox
from runtime.spark.session import quote

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Rows of each kind a verdict shows (the counts are always whole).
SAMPLE = 20
_FLOATING = ("float", "double")
#: The comparison's own column (a name no query gives).
_SIDE = "__lakeview_side"


@dataclass(frozen=True)
class Verdict:
    """How a snapshot compares with its query: rows the query gives that the table lacks
    (`missing`) and rows the table holds that the query does not give (`extra`), counted
    with their multiplicity, and a sample of each (JSON-safe values, by column)."""

    columns: tuple[str, ...]
    missing: int
    extra: int
    missing_sample: list[list[Any]] = field(default_factory=list)
    extra_sample: list[list[Any]] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        return self.missing == 0 and self.extra == 0


def verify_snapshot(
    session: SparkSession,
    *,
    query: str,
    target: Sequence[str],
    snapshot_id: int,
    pins: Mapping[tuple[str, ...], int | None],
    namespace: Sequence[str],
    catalog: str,
    partition: Mapping[str, str] | None = None,
    expectations: Sequence[Expectation] = (),
) -> Verdict:
    """The table `target` (catalog, namespace levels..., name) at `snapshot_id` against
    `query` over each source at its snapshot in `pins` (None: the source was empty); with
    `partition`, that partition of both only (a partition refresh answers for its
    partition). The rows a DROP ROW expectation of `expectations` leaves out are left out of
    the recomputation too, as the refresh left them out."""
    views = pin_sources(session, pins=pins, catalog=catalog)
    try:
        sql = kept_query(
            rewrite_sources(query, views, namespace=namespace, catalog=catalog), expectations
        )
        expected = sandbox.query(session, sql, catalog=catalog, trusted_views=views.values())
        actual = session.read.option("snapshot-id", str(snapshot_id)).table(quote(target))
        actual = actual.select(*[actual[quote([c])] for c in expected.columns])
        if partition:
            expected = expected.where(partition_condition(partition))
            actual = actual.where(partition_condition(partition))
        return _compare(_comparable(expected), _comparable(actual))
    finally:
        for view in views.values():
            session.catalog.dropTempView(view)


def _compare(expected: DataFrame, actual: DataFrame) -> Verdict:
    """Rows counted on each side in one aggregation (+1 per row the query gives, -1 per row
    the table holds, grouped by the whole row: multisets, nulls equal): a row whose sum is
    not 0 is missing (> 0) or extra (< 0) that many times. An exact table costs one Spark
    job; samples are read only when something differs."""
    from pyspark.sql import functions as F

    columns = [quote([c]) for c in expected.columns]
    sides = expected.select(*columns, F.lit(1).alias(_SIDE)).unionByName(
        actual.select(*columns, F.lit(-1).alias(_SIDE))
    )
    diff = sides.groupBy(*columns).agg(F.sum(_SIDE).alias(_SIDE)).where(F.col(_SIDE) != 0)
    diff = diff.cache()
    try:
        totals = diff.agg(
            F.sum(F.when(F.col(_SIDE) > 0, F.col(_SIDE))).alias("missing"),
            F.sum(F.when(F.col(_SIDE) < 0, -F.col(_SIDE))).alias("extra"),
        ).first()
        missing, extra = int(totals["missing"] or 0), int(totals["extra"] or 0)
        return Verdict(
            columns=tuple(expected.columns),
            missing=missing,
            extra=extra,
            missing_sample=_sample(diff.where(F.col(_SIDE) > 0), columns) if missing else [],
            extra_sample=_sample(diff.where(F.col(_SIDE) < 0), columns) if extra else [],
        )
    finally:
        diff.unpersist()


def _comparable(frame: DataFrame) -> DataFrame:
    """Floating-point columns as text at 12 significant digits; the others as they are."""
    from pyspark.sql import functions as F

    columns = []
    for column in frame.schema.fields:
        if column.dataType.typeName() in _FLOATING:
            value = F.format_string("%.12g", frame[quote([column.name])])
            columns.append(value.alias(column.name))
        else:
            columns.append(frame[quote([column.name])])
    return frame.select(*columns)


def _sample(frame: DataFrame, columns: list[str]) -> list[list[Any]]:
    return [
        [_json(value) for value in row] for row in frame.select(*columns).limit(SAMPLE).collect()
    ]


def _json(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)
