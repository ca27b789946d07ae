"""A merge plan applied by the table's primary key (aggregations, joins): the query over each
changed source's appended (and deleted) rows names the keys they touch; the query over the
whole sources, for those keys only, gives their rows now; one `MERGE INTO` on the primary
key updates them, inserts the new ones and deletes a touched key the query no longer gives
(or whose row a DROP ROW expectation leaves out). A MERGE that loses to a concurrent commit
is run again (idempotent). Django-free."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from refresh.core import expectations as ex
from refresh.core.expectations import Expectation
from refresh.core.streaming import StreamPlan, having_dropped, inner_toward, rewrite_sources
from refresh.spark.batch import as_rows, expected, release
from runtime.spark import sandbox
from runtime.spark.commits import run_sql
from runtime.spark.errors import is_commit_conflict
from runtime.spark.session import quote

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from sqlglot import exp
from refresh.spark.change_views import Source, partition_filter, temp_view

GONE = "__lakeview_gone"


def merge_changes(
    session: SparkSession,
    *,
    plan: StreamPlan,
    query: str | exp.Query,
    target: Sequence[str],
    appended: Mapping[Source, str],
    whole: Mapping[Source, str],
    namespace: Sequence[str],
    catalog: str,
    deleted: Mapping[Source, str] | None = None,
    old: Mapping[Source, str] | None = None,
    partition: Mapping[str, str] | None = None,
    merge_turn: Callable[[], AbstractContextManager[Any]] = nullcontext,
    properties: Mapping[str, str] | None = None,
    expectations: Sequence[Expectation] = (),
    violations: dict[str, int] | None = None,
) -> int:
    """A merge plan's changes (see the module); returns how many keys were recomputed.
    `appended` maps each changed source to a view of the rows it inserted, `deleted` to a
    view of the rows it deleted (as they were); `whole` maps sources to views of them as the
    refresh reads them (pinned snapshots), `old` to views of them at the snapshots the last
    refresh read, and a source in neither is read as it is now. Inserted rows find their
    keys against the other sources as they are now, deleted rows against them as they were:
    together every key whose rows differ between the two. `properties` go into the MERGE's
    snapshot summary. `expectations` are applied to the touched keys' rows (their violations
    counted into `violations`; a FAIL UPDATE one raises before the MERGE); a key whose row
    DROP ROW leaves out is deleted."""
    key = [quote([k]) for k in plan.key]
    columns = ", ".join(key)
    deleted = deleted or {}
    trusted = [*appended.values(), *deleted.values(), *whole.values(), *(old or {}).values()]
    touched = []
    keyed = having_dropped(query)
    sides = [(source, view, whole) for source, view in appended.items()]
    sides += [(source, view, {**whole, **(old or {})}) for source, view in deleted.items()]
    for source, view, others in sides:
        toward = inner_toward(keyed, source, namespace=namespace, catalog=catalog)
        partial = rewrite_sources(
            toward, {**others, source: view}, namespace=namespace, catalog=catalog
        )
        touched.append(
            sandbox.query(
                session,
                f"SELECT DISTINCT {columns} FROM ({partial})",
                catalog=catalog,
                trusted_views=trusted,
            )
        )
    # Kept as plain rows: the recompute, the gone keys and the MERGE read a leaf, not the
    # plans that found the keys again.
    keys_frame = as_rows(
        partition_filter(
            functools.reduce(lambda left, right: left.union(right), touched).distinct(),
            partition,
        )
    )
    count = keys_frame.count()
    keys = temp_view(keys_frame, "keys")
    now = rewrite_sources(query, dict(whole), namespace=namespace, catalog=catalog)
    if expectations:
        now = ex.flagged_query(now, expectations)
    rows = rows_of_keys(
        session,
        query=now,
        keys=keys,
        keys_frame=keys_frame,
        key=plan.key,
        count=count,
        catalog=catalog,
        trusted=[*trusted, keys],
    )
    if not expectations:
        rows = rows.cache()  # `expected` keeps the rows itself
    try:
        with expected(rows, expectations, violations) as kept:
            changed = temp_view(with_gone(kept, keys_frame, plan.key), "changed")
            with merge_turn():
                merge_by_key(
                    session,
                    target=target,
                    changes=changed,
                    key=plan.key,
                    columns=kept.columns,
                    properties=properties,
                )
        for view in (keys, changed):
            session.catalog.dropTempView(view)
    finally:
        rows.unpersist()
        release(keys_frame)
    return count


def rows_of_keys(
    session: SparkSession,
    *,
    query: str,
    keys: str,
    keys_frame: DataFrame,
    key: Sequence[str],
    count: int,
    catalog: str,
    trusted: Sequence[str],
) -> DataFrame:
    """The rows `query` (SQL over the refresh's pinned sources) gives for the keys in the
    view `keys` (`keys_frame`, `count` of them), checked by the sandbox."""
    match = " AND ".join(f"q.{k} <=> k.{k}" for k in (quote([c]) for c in key))
    rows = sandbox.query(
        session,
        f"SELECT q.* FROM ({query}) q LEFT SEMI JOIN {keys} k ON {match}",
        catalog=catalog,
        trusted_views=trusted,
    )
    return _narrowed(rows, keys_frame, key, count)


def merge_by_key(
    session: SparkSession,
    *,
    target: Sequence[str],
    changes: str,
    key: Sequence[str],
    columns: Sequence[str],
    properties: Mapping[str, str] | None,
) -> None:
    """One MERGE INTO `target` of the view `changes` (its `columns`, and GONE): on the
    primary key, a gone key's row deleted, the others' updated or inserted."""
    on = " AND ".join(f"t.{k} <=> s.{k}" for k in (quote([c]) for c in key))
    names = [quote([c]) for c in columns]
    statement = (
        f"MERGE INTO {quote(target)} t USING {changes} s ON {on} "
        f"WHEN MATCHED AND s.{GONE} THEN DELETE "
        f"WHEN MATCHED THEN UPDATE SET {', '.join(f't.{c} = s.{c}' for c in names)} "
        f"WHEN NOT MATCHED AND NOT s.{GONE} THEN INSERT ({', '.join(names)}) "
        f"VALUES ({', '.join(f's.{c}' for c in names)})"
    )
    merge_retrying(session, statement, properties)


#: Up to this many touched keys, their values are also given to the recompute as literal
#: IN lists, which Spark pushes through projections, aggregations and joins down to the
#: sources' scans, where Iceberg skips the data files whose column statistics hold none of
#: them (a semi-join with the keys' view prunes nothing at planning time). Few: planning a
#: list of 10,000 literals took Spark 5 s on the bench's 10-million-row source, longer
#: than reading it whole.
PUSHED_KEYS = 200


def _narrowed(rows: DataFrame, keys: DataFrame, key: Sequence[str], count: int) -> DataFrame:
    """`rows` filtered by each key column's touched values (a superset of the touched keys:
    the semi-join stays exact), when there are few enough of them; else `rows`."""
    from pyspark.sql import functions as F

    if not count or count > PUSHED_KEYS:
        return rows if count else rows.limit(0)
    found = keys.collect()
    condition = None
    for index, column in enumerate(key):
        values = {row[index] for row in found}
        present = [v for v in values if v is not None]
        test = F.col(quote([column])).isin(present) if present else F.lit(False)
        if None in values:
            test = test | F.col(quote([column])).isNull()
        condition = test if condition is None else condition & test
    return rows.where(condition) if condition is not None else rows


MERGE_ATTEMPTS = 4


def merge_retrying(
    session: SparkSession, statement: str, properties: Mapping[str, str] | None = None
) -> None:
    """Run a MERGE (its commit's snapshot summary with `properties`); when a concurrent
    commit (table maintenance) conflicts with it, run it again: the changed rows are a view
    over the sources, recomputed on each run, and merging on the primary key is idempotent,
    so a retry is exact."""
    for attempt in range(1, MERGE_ATTEMPTS + 1):
        try:
            run_sql(session, statement, properties or {})
            return
        except Exception as error:  # noqa: BLE001 - Py4J's errors; re-raised unless a conflict
            if attempt == MERGE_ATTEMPTS or not is_commit_conflict(error):
                raise
            time.sleep(0.2 * attempt)


def with_gone(rows: DataFrame, keys: DataFrame, key: Sequence[str]) -> DataFrame:
    """The rows for the touched keys, flagged not gone, and the touched keys the query no
    longer gives, flagged gone (their other columns null)."""
    from pyspark.sql import functions as F

    present = rows.withColumn(GONE, F.lit(False))
    condition = functools.reduce(
        lambda left, right: left & right,
        [keys[quote([k])].eqNullSafe(rows[quote([k])]) for k in key],
    )
    gone = keys.join(rows, condition, "left_anti")
    for column in rows.schema.fields:
        if column.name not in key:
            gone = gone.withColumn(column.name, F.lit(None).cast(column.dataType))
    gone = gone.select(*[F.col(quote([c])) for c in rows.columns]).withColumn(GONE, F.lit(True))
    return present.unionByName(gone)
