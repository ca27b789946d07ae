"""How a scheduled or manual refresh of a FULL materialized table refreshes: NO_DATA (no
source changed), INCREMENTAL (apply what the sources appended since the snapshots the last
successful refresh read), or FULL (recompute the query), with the reason a user reads in the
history ("incremental: 3 source snapshots appended 12,000 rows", "full: source sales.orders
had a delete in snapshot 8812").

Snowflake's dynamic tables and Databricks' materialized views make the same choice. The
rules, in order:

1. a source outside this catalog: FULL (its changes cannot be known);
2. no earlier successful refresh of these rows: FULL;
3. a full refresh asked for (the run's `full` flag): FULL, changed sources or not;
4. every source at the snapshots that refresh read: NO_DATA (unless forced); forced with no
   source changed, or the table option `refresh.incremental` = 'false': FULL;
5. a definition newer than that refresh's: FULL;
6. a query shape the continuous mode cannot maintain (refresh.core.streaming), or an outer
   join (a row may vanish when the other side grows, and no appended row names it): FULL;
7. the table itself changed since that refresh other than by compaction (a writer through
   /iceberg): FULL;
8. a source that changed other than by appends since that refresh (a delete, an overwrite,
   a rollback, an expired snapshot), walking its lineage from now back to the snapshot read:
   FULL naming the source and the snapshot;
9. otherwise INCREMENTAL with each source's range of appended snapshots. Compactions
   (`replace` snapshots) add no rows and are stepped over; sources changed only by them
   are NO_DATA.

A partition refresh (a date-formatter table's scheduled partition) is incremental only when
every row of that partition can be found from the appended rows: an append query, or an
aggregation or join whose primary key holds the partition columns.

Django-free: the caller passes lineages read from the catalog's mirror."""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp

from refresh.core.streaming import StreamPlan

#: The table option that turns incremental refreshes off ('false').
INCREMENTAL_OPTION = "refresh.incremental"
#: Steps walked back through one lineage before giving up (a full refresh is then cheaper).
MAX_STEPS = 10_000


class Kind(enum.StrEnum):
    NO_DATA = "NO_DATA"
    INCREMENTAL = "INCREMENTAL"
    FULL = "FULL"


@dataclass(frozen=True)
class Step:
    """One snapshot of a table, as its lineage records it."""

    snapshot_id: int
    parent_id: int | None
    operation: str
    added_records: int = 0


@dataclass(frozen=True)
class Delta:
    """What one source appended: the snapshots after `since` up to `until`."""

    source: str
    since: int | None
    until: int
    snapshots: int
    rows: int


@dataclass(frozen=True)
class Baseline:
    """The last successful refresh covering the rows refreshed now."""

    run_id: int
    source_snapshots: Mapping[str, int | None]
    definition_version: int | None
    #: The table's snapshot after that refresh.
    table_snapshot: int | None


@dataclass(frozen=True)
class Decision:
    kind: Kind
    reason: str
    deltas: tuple[Delta, ...] = ()


def full(reason: str) -> Decision:
    return Decision(Kind.FULL, f"full: {reason}")


def appended(
    source: str, lineage: Mapping[int, Step], *, since: int | None, until: int
) -> Delta | str:
    """The appends between `since` (exclusive; None: the table's beginning) and `until`
    (inclusive), or why that range is not appends only."""
    snapshots = rows = 0
    current: int | None = until
    for _ in range(MAX_STEPS):
        if current == since:
            if since is not None and since not in lineage:
                # Iceberg's incremental scan starts from a snapshot the table still has.
                return f"snapshot {since} that the last refresh read of source {source} expired"
            return Delta(source, since, until, snapshots, rows)
        if current is None:
            return (
                f"snapshot {since} that the last refresh read of source {source} is no "
                "longer in its history (rolled back or expired)"
            )
        step = lineage.get(current)
        if step is None:
            return f"source {source}'s history is incomplete at snapshot {current}"
        if step.operation == "append":
            snapshots += 1
            rows += step.added_records
        elif step.operation != "replace":  # a compaction adds no rows
            return f"source {source} had {_an(step.operation)} in snapshot {step.snapshot_id}"
        current = step.parent_id
    return f"source {source} has more than {MAX_STEPS:,} snapshots since the last refresh"


def _an(operation: str) -> str:
    operation = operation or "unknown operation"
    return f"an {operation}" if operation[:1] in "aeiou" else f"a {operation}"


def decide(
    *,
    now: Mapping[str, int | None],
    unknown: Sequence[str],
    baseline: Baseline | None,
    lineages: Mapping[str, Mapping[int, Step]],
    plan: StreamPlan | str,
    table_lineage: Mapping[int, Step],
    table_snapshot: int | None,
    own_snapshots: Collection[int] = (),
    definition_version: int | None,
    partition: Mapping[str, str] | None = None,
    partition_columns: Sequence[str] = (),
    force: bool = False,
    full_asked: bool = False,
    options: Mapping[str, str] | None = None,
    outer_join: bool = False,
) -> Decision:
    """The decision for one run (see the module's rules). `plan` is the continuous mode's
    plan of the query, or why it has none; `own_snapshots` are the table's snapshots this
    materialized table's own refreshes made after the baseline (other partitions')."""
    if unknown:
        return full(f"source {unknown[0]} is not in this catalog, so its changes are unknown")
    if baseline is None:
        return full("no earlier successful refresh of these rows to start from")
    if full_asked:  # asked for by name: it runs, changed sources or not
        return full("a full refresh was asked for")
    changed = {s: id_ for s, id_ in now.items() if baseline.source_snapshots.get(s, -1) != id_}
    if not changed and not force:
        return Decision(Kind.NO_DATA, f"no data: no source changed since run {baseline.run_id}")
    if not changed:
        return full("a refresh was asked for although no source changed")
    if (options or {}).get(INCREMENTAL_OPTION, "true").strip().lower() == "false":
        return full(f"incremental refreshes are off ({INCREMENTAL_OPTION} = 'false')")
    if baseline.definition_version != definition_version:
        return full(
            f"the definition changed (version {baseline.definition_version} to "
            f"{definition_version}) since run {baseline.run_id}"
        )
    if isinstance(plan, str):
        return full(plan)
    if outer_join:
        return full("an outer join's rows can vanish when its other side grows")
    if partition and plan.mode == "merge":
        missing = [c for c in partition_columns if c not in plan.key]
        if missing:
            return full(
                f"the partition column {missing[0]} is not in the primary key, so the "
                "partition's changed rows cannot be found"
            )
    reason = _table_changed(table_lineage, baseline.table_snapshot, table_snapshot, own_snapshots)
    if reason:
        return full(reason)
    deltas = []
    for source, until in sorted(changed.items()):
        if source not in baseline.source_snapshots:  # not "empty then": unknown then
            return full(f"source {source} was not read by run {baseline.run_id}")
        since = baseline.source_snapshots[source]
        if until is None:
            return full(f"source {source} has no snapshot any more")
        found = appended(source, lineages.get(source, {}), since=since, until=until)
        if isinstance(found, str):
            return full(found)
        if found.snapshots:
            deltas.append(found)
    if not deltas:
        return Decision(Kind.NO_DATA, "no data: the sources were only compacted")
    snapshots = sum(d.snapshots for d in deltas)
    rows = sum(d.rows for d in deltas)
    detail = ", ".join(f"{d.source} +{d.rows:,} in {d.snapshots}" for d in deltas)
    return Decision(
        Kind.INCREMENTAL,
        f"incremental: {snapshots} source snapshot{'s' if snapshots != 1 else ''} appended "
        f"{rows:,} row{'s' if rows != 1 else ''} ({detail})",
        tuple(deltas),
    )


def _table_changed(
    lineage: Mapping[int, Step], since: int | None, now: int | None, own: Collection[int]
) -> str:
    """Why the table's rows may differ from what the last refresh left ('' if they do not):
    a commit after it other than a compaction or another of its own refreshes."""
    current = now
    for _ in range(MAX_STEPS):
        if current == since:
            return ""
        step = lineage.get(current) if current is not None else None
        if step is None:
            return "the table's history since the last refresh is incomplete"
        if step.operation != "replace" and step.snapshot_id not in own:
            return (
                f"the table was written by something other than its refreshes (snapshot "
                f"{step.snapshot_id}, {step.operation or 'unknown operation'})"
            )
        current = step.parent_id
    return "the table has too many snapshots since the last refresh"


def has_outer_join(query: str | exp.Query) -> bool:
    """Whether the query (its text or its parsed form) has a LEFT, RIGHT or FULL join
    anywhere."""
    from catalog.core.sql import as_query

    return any(
        (join.side or "").upper() in ("LEFT", "RIGHT", "FULL")
        for join in as_query(query).find_all(exp.Join)
    )


#: How a column of an aggregation is combined with the same column over appended rows.
COMBINERS = {"count": "count", "sum": "sum", "min": "min", "max": "max"}


def combinable(query: str | exp.Query, key: Sequence[str]) -> dict[str, str] | None:
    """{output column: "key" | "count" | "sum" | "min" | "max"} when the query is one
    aggregation whose every value can be combined with its value over appended rows, so an
    incremental refresh merges the aggregation of the appended rows alone (no read of what
    the source held before): SELECT of the GROUP BY columns (the primary key, unrenamed) and
    COUNT / SUM / MIN / MAX (no DISTINCT) of one table with an optional WHERE, no HAVING.
    None for any other query (AVG, joins, expressions over aggregates...): the touched keys
    are then recomputed."""
    from catalog.core.sql import as_query

    try:
        select = as_query(query)
    except Exception:  # noqa: BLE001 - not ours to report here: no shortcut
        return None
    if not isinstance(select, exp.Select) or select.args.get("having"):
        return None
    if select.args.get("joins") or select.find(exp.Subquery, exp.Window, exp.Distinct):
        return None
    group = select.args.get("group")
    if group is None or not all(isinstance(g, exp.Column) for g in group.expressions):
        return None
    grouped = {g.name for g in group.expressions}
    if grouped != set(key):
        return None
    kinds: dict[str, str] = {}
    for projection in select.expressions:
        inner = projection.this if isinstance(projection, exp.Alias) else projection
        name = projection.alias_or_name
        if isinstance(inner, exp.Column) and inner.name in grouped and name == inner.name:
            kinds[name] = "key"
            continue
        kind = {exp.Count: "count", exp.Sum: "sum", exp.Min: "min", exp.Max: "max"}.get(type(inner))
        if kind is None or inner.find(exp.AggFunc) is not inner or not name:
            return None
        if any(node is not inner and isinstance(node, exp.AggFunc) for node in inner.walk()):
            return None
        kinds[name] = kind
    if set(key) - {n for n, k in kinds.items() if k == "key"}:
        return None
    return kinds
