"""A combined aggregation's refresh (COUNT / SUM / MIN / MAX of one table by its primary
key): the aggregation of the changed rows alone, merged by adding counts and sums and
keeping minima and maxima; nothing the source held is read, save the keys whose minimum or
maximum a delete may have removed, which are recomputed. Django-free."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from refresh.core.streaming import rewrite_sources
from refresh.spark.batch import as_rows, release
from runtime.spark import sandbox
from runtime.spark.session import quote

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from sqlglot import exp
from refresh.spark.change_views import Source, mark, partition_filter, temp_view
from refresh.spark.key_merges import GONE, merge_by_key, merge_retrying, rows_of_keys, with_gone


def merge_combined(
    session: SparkSession,
    *,
    query: str | exp.Query,
    target: Sequence[str],
    kinds: Mapping[str, str],
    appended: Mapping[Source, str],
    namespace: Sequence[str],
    catalog: str,
    partition: Mapping[str, str] | None = None,
    merge_turn: Callable[[], AbstractContextManager[Any]] = nullcontext,
    timings: dict[str, float] | None = None,
    properties: Mapping[str, str] | None = None,
) -> None:
    """An aggregation whose values combine (refresh.core.incremental.combinable): the query
    over the appended rows alone, merged into the table by combining each value with the
    table's (counts and sums added, minima and maxima kept): nothing the source held before
    is read. Not idempotent, so only for a refresh whose table is known to be exactly as its
    last refresh left it (the decision checks the table's own history); micro-batches, which
    a crash may replay, recompute their keys instead."""
    sql = rewrite_sources(query, dict(appended), namespace=namespace, catalog=catalog)
    delta = sandbox.query(session, sql, catalog=catalog, trusted_views=appended.values())
    view = temp_view(partition_filter(delta, partition), "delta")
    keys = [quote([c]) for c, kind in kinds.items() if kind == "key"]
    values = [(quote([c]), kind) for c, kind in kinds.items() if kind != "key"]
    combined = {
        "count": "t.{c} + s.{c}",
        "sum": "coalesce(t.{c} + s.{c}, t.{c}, s.{c})",
        "min": "least(t.{c}, s.{c})",
        "max": "greatest(t.{c}, s.{c})",
    }
    on = " AND ".join(f"t.{k} <=> s.{k}" for k in keys)
    names = [quote([c]) for c in kinds]
    update = ", ".join(f"t.{c} = {combined[kind].format(c=c)}" for c, kind in values)
    statement = (
        f"MERGE INTO {quote(target)} t USING {view} s ON {on} "
        + (f"WHEN MATCHED THEN UPDATE SET {update} " if update else "")
        + f"WHEN NOT MATCHED THEN INSERT ({', '.join(names)}) "
        f"VALUES ({', '.join(f's.{c}' for c in names)})"
    )
    mark(timings, "checked")
    try:
        with merge_turn():
            mark(timings, "turn")
            merge_retrying(session, statement, properties)
    finally:
        session.catalog.dropTempView(view)


def merge_combined_changes(
    session: SparkSession,
    *,
    query: str | exp.Query,
    target: Sequence[str],
    kinds: Mapping[str, str],
    source: Source,
    inserted: str,
    deleted: str,
    whole: Callable[[], Mapping[Source, str]],
    namespace: Sequence[str],
    catalog: str,
    partition: Mapping[str, str] | None = None,
    merge_turn: Callable[[], AbstractContextManager[Any]] = nullcontext,
    properties: Mapping[str, str] | None = None,
) -> int:
    """A combinable aggregation (refresh.core.incremental.combinable) of one source that
    deleted rows as well as inserted them: each touched key's values come from the table's
    own row, the aggregation of the inserted rows and that of the deleted rows (counts and
    sums: added and subtracted; minima and maxima: kept or replaced by the inserted ones),
    so the source is not read whole. Where that cannot tell the answer, the key is
    recomputed over the sources (`whole()` pins them): a deleted minimum or maximum, a sum
    whose every non-null value may have gone (or a floating-point one, which subtraction
    would round), and, without a COUNT(*) column, any key that lost rows (it may have lost
    its last). A group whose COUNT(*) reaches 0 is deleted. One MERGE INTO; returns the
    keys touched. Not idempotent, like merge_combined: only for a refresh whose table is as
    its last refresh left it (the decision checks the table's own history)."""
    from pyspark.sql import functions as F

    from refresh.core.incremental import count_star_column

    keys = [c for c, kind in kinds.items() if kind == "key"]
    quoted = [quote([c]) for c in keys]
    trusted = [inserted, deleted]
    views = []
    for view, kind in ((inserted, "ins"), (deleted, "del")):
        sql = rewrite_sources(query, {source: view}, namespace=namespace, catalog=catalog)
        frame = sandbox.query(session, sql, catalog=catalog, trusted_views=trusted)
        views.append(temp_view(partition_filter(frame, partition), kind))
    ins, dele = views
    table = session.table(quote(target))
    types = {f.name: f.dataType for f in table.schema.fields}
    star = count_star_column(query)

    def on(left: str, right: str) -> str:
        return " AND ".join(f"{left}.{k} <=> {right}.{k}" for k in quoted)

    values, unsure = [], []
    for column, kind in kinds.items():
        if kind == "key":
            continue
        c = quote([column])
        if kind == "count":
            values.append(f"coalesce(t.{c}, 0) + coalesce(i.{c}, 0) - coalesce(d.{c}, 0)")
        elif kind == "sum":
            values.append(
                f"CASE WHEN t.{c} IS NULL AND i.{c} IS NULL THEN NULL "
                f"ELSE coalesce(t.{c}, 0) + coalesce(i.{c}, 0) - coalesce(d.{c}, 0) END"
            )
            unsure.append(f"(d.{c} IS NOT NULL AND i.{c} IS NULL)")
            if types.get(column) is not None and types[column].typeName() in ("double", "float"):
                unsure.append(f"d.{c} IS NOT NULL")
        else:
            pick, beyond = ("least", "<=") if kind == "min" else ("greatest", ">=")
            values.append(f"{pick}(t.{c}, i.{c})")
            unsure.append(f"(d.{c} IS NOT NULL AND d.{c} {beyond} t.{c})")
        values[-1] += f" AS {c}"
    if star is None:
        unsure = ["d.__present"]  # a group may have lost its last row: nothing tells
    quoted_star = quote([star]) if star else None
    gone = (
        f"coalesce(t.{quoted_star}, 0) + coalesce(i.{quoted_star}, 0) "
        f"- coalesce(d.{quoted_star}, 0) = 0"
        if quoted_star
        else "false"
    )
    combined = session.sql(
        f"SELECT {', '.join(f'k.{k}' for k in quoted)}, {', '.join(values)}, "
        f"({gone}) AS {GONE}, coalesce({' OR '.join(unsure) or 'false'}, false) AS __unsure "
        f"FROM (SELECT {', '.join(quoted)} FROM {ins} "
        f"UNION SELECT {', '.join(quoted)} FROM {dele}) k "
        f"LEFT JOIN {quote(target)} t ON {on('t', 'k')} "
        f"LEFT JOIN {ins} i ON {on('i', 'k')} "
        f"LEFT JOIN (SELECT *, true AS __present FROM {dele}) d ON {on('d', 'k')}"
    )
    columns = list(kinds)
    combined = as_rows(
        combined.select(
            *[
                F.col(quote([c])).cast(types[c]) if c in types else F.col(quote([c]))
                for c in columns
            ],
            GONE,
            "__unsure",
        )
    )
    scratch = [ins, dele]
    frames = [combined]
    try:
        count = combined.count()
        changed = combined.where("NOT __unsure").drop("__unsure")
        unsure_keys = as_rows(combined.where("__unsure").select(*[quote([k]) for k in keys]))
        frames.append(unsure_keys)
        unsure = unsure_keys.count()
        if unsure:
            pinned = whole()
            view = temp_view(unsure_keys, "unsure")
            scratch.append(view)
            rows = rows_of_keys(
                session,
                query=rewrite_sources(query, dict(pinned), namespace=namespace, catalog=catalog),
                keys=view,
                keys_frame=unsure_keys,
                key=keys,
                count=unsure,
                catalog=catalog,
                trusted=[*pinned.values(), view],
            ).cache()
            frames.append(rows)
            recomputed = with_gone(rows, unsure_keys, keys)
            changed = changed.unionByName(
                recomputed.select(*[F.col(quote([c])) for c in columns], GONE)
            )
        source_view = temp_view(changed, "combined")
        scratch.append(source_view)
        with merge_turn():
            merge_by_key(
                session,
                target=target,
                changes=source_view,
                key=keys,
                columns=columns,
                properties=properties,
            )
        return count
    finally:
        for frame in frames:
            release(frame)
        for view in scratch:
            session.catalog.dropTempView(view)
