"""How a scheduled or manual refresh of a FULL materialized table refreshes: NO_DATA (no
source changed), INCREMENTAL (apply the rows the sources inserted and deleted since the
snapshots the last successful refresh read), or FULL (recompute the query), with the reason a
user reads in the history ("incremental: 3 source snapshots appended 12,000 rows",
"full: source sales.orders changed by 2,000,000 of its 3,000,000 rows...").

Snowflake's dynamic tables and Databricks' materialized views make the same choice. The
rules, in order:

1. a source outside this catalog: FULL (its changes cannot be known);
2. no earlier successful refresh of these rows: FULL;
3. a full refresh asked for (the run's `full` flag): FULL, changed sources or not;
4. every source at the snapshots that refresh read: NO_DATA (unless forced); forced with no
   source changed, or the table option `refresh.incremental` = 'off': FULL;
5. a definition newer than that refresh's: FULL;
6. a query shape the incremental refresh cannot maintain (refresh.core.streaming's plan,
   views expanded), or a FULL OUTER join: FULL;
7. the table itself changed since that refresh other than by compaction (a writer through
   /iceberg): FULL;
8. a source whose history since that refresh cannot be read as row changes (rolled back
   past the snapshot read, that snapshot expired, more than MAX_STEPS snapshots): FULL
   naming the source and why;
9. a source that deleted or rewrote rows (a DELETE, UPDATE, MERGE INTO or overwrite,
   copy-on-write or merge-on-read) when the table has no primary key: FULL, saying that a
   primary key would make it incremental (without one, a deleted source row names no row
   of the table);
10. under `refresh.incremental` = 'auto' (the default), a source that deleted or rewrote
    rows in a change touching more than `refresh.incremental.max-change-ratio` (0.3) of its
    rows (the snapshots' summaries count them: a copy-on-write rewrite counts the whole
    files it rewrote): FULL, which is then the cheaper (Snowflake's adaptive refresh). The
    worker applies the same share to the rows it would read (refresh.spark.source_changes,
    ChangesTooLarge) and recomputes instead. Appends alone are always applied: they cost
    the rows appended;
11. otherwise INCREMENTAL with each source's range of snapshots, and whether it only
    appended (Iceberg's incremental append scan reads its rows) or also deleted rows (its
    row changes are read: refresh.spark.source_changes). Compactions (`replace` snapshots)
    change no rows and are stepped over; sources changed only by them are NO_DATA.

Under `refresh.incremental` = 'strict' the FULL decisions of rules 1 and 6-10 (those a
cost-conscious user wants to hear about) are refusals: the run fails with the reason instead
of recomputing (Databricks' INCREMENTAL_STRICT), and rule 10 does not apply. The first
refresh, a full refresh asked for by name and a new definition still recompute.

A partition refresh (a date-formatter table's scheduled partition) is incremental only when
every row of that partition can be found from the changed rows: an append query, or a keyed
query whose primary key holds the partition columns.

A continuous table whose stream stopped (a source snapshot its stream cannot read, a static
source of its join that moved on) catches up by the same rules (`catch_up`): one
INCREMENTAL refresh from the snapshots the table holds to the sources' current ones when it
has a primary key and the range reads as row changes, else FULL (a recompute) saying why.

Django-free: the caller passes lineages read from the catalog's mirror."""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp

from refresh.core.streaming import StreamPlan

#: The table option that chooses the policy: 'auto' (the default), 'strict' or 'off'
#: ('true' and 'false', its earlier values, read as 'auto' and 'off').
INCREMENTAL_OPTION = "refresh.incremental"
POLICIES = {"auto": "auto", "strict": "strict", "off": "off", "true": "auto", "false": "off"}
#: The table option bounding, under 'auto', the share of a source's rows a change may touch
#: before a full refresh is chosen instead.
RATIO_OPTION = "refresh.incremental.max-change-ratio"
DEFAULT_RATIO = 0.3
#: Steps walked back through one lineage before giving up (a full refresh is then cheaper).
MAX_STEPS = 10_000


class Kind(enum.StrEnum):
    NO_DATA = "NO_DATA"
    INCREMENTAL = "INCREMENTAL"
    FULL = "FULL"


@dataclass(frozen=True)
class Step:
    """One snapshot of a table, as its lineage records it (the counts from its summary)."""

    snapshot_id: int
    parent_id: int | None
    operation: str
    added_records: int = 0
    deleted_records: int = 0
    #: Position and equality delete records the snapshot added (merge-on-read deletes).
    added_deletes: int = 0
    total_records: int | None = None
    schema_id: int | None = None

    @classmethod
    def of(
        cls,
        snapshot_id: int,
        parent_id: int | None,
        operation: str,
        summary: Mapping[str, str] | None,
        schema_id: int | None = None,
    ) -> Step:
        """A snapshot as its summary counts it (Iceberg's summary keys). A count any engine
        wrote as something other than a whole number reads as 0 (none known)."""
        summary = summary or {}

        def count(*names: str) -> int:
            return sum(_whole(summary.get(name)) for name in names)

        return cls(
            snapshot_id,
            parent_id,
            operation,
            added_records=count("added-records"),
            deleted_records=count("deleted-records"),
            added_deletes=count("added-position-deletes", "added-equality-deletes"),
            total_records=count("total-records") if "total-records" in summary else None,
            schema_id=schema_id,
        )


def _whole(value: object) -> int:
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return 0


@dataclass(frozen=True)
class Delta:
    """What one source did in the snapshots after `since` up to `until`: how many snapshots
    appended or changed rows, the rows they added, and, when some also deleted or rewrote
    rows (`changed`), the first such snapshot and an estimate of the rows involved."""

    source: str
    since: int | None
    until: int
    snapshots: int
    rows: int
    #: Some snapshot deleted or rewrote rows: the row changes are read, not the appends.
    changed: bool = False
    #: Rows removed (copy-on-write rewrites count whole files) and delete records added.
    deleted: int = 0
    #: (snapshot id, operation) of the first snapshot that was not an append.
    first_change: tuple[int, str] | None = None
    #: The source's rows at `until` (its summary's total-records), when known.
    total: int | None = None

    @property
    def touched(self) -> int:
        """An upper bound of the rows the change involves, as the snapshots' summaries
        count them."""
        return self.rows + self.deleted


@dataclass(frozen=True)
class Baseline:
    """The last successful refresh covering the rows refreshed now."""

    run_id: int
    source_snapshots: Mapping[str, int | None]
    definition_version: int | None
    #: The table's snapshot after that refresh.
    table_snapshot: int | None
    #: When that refresh started (ms since the epoch; 0 when unknown).
    started_ms: int = 0


@dataclass(frozen=True)
class Decision:
    kind: Kind
    reason: str
    deltas: tuple[Delta, ...] = ()
    #: A FULL decision the table's strict policy turns into a failure: the run fails with
    #: `reason` instead of recomputing.
    refused: bool = False


def full(reason: str) -> Decision:
    return Decision(Kind.FULL, f"full: {reason}")


def policy(options: Mapping[str, str] | None) -> str:
    """The table's incremental policy: 'auto', 'strict' or 'off'."""
    value = (options or {}).get(INCREMENTAL_OPTION, "auto").strip().lower()
    return POLICIES.get(value, "auto")


def max_change_ratio(options: Mapping[str, str] | None) -> float:
    """The table's RATIO_OPTION (checked when set: refresh.core.options)."""
    try:
        return float((options or {}).get(RATIO_OPTION, DEFAULT_RATIO))
    except ValueError:
        return DEFAULT_RATIO


def changed_between(
    source: str,
    lineage: Mapping[int, Step],
    *,
    since: int | None,
    until: int,
    reader: str = "the last refresh",
) -> Delta | str:
    """What the source did between `since` (exclusive; None: the table's beginning) and
    `until` (inclusive), or why that range cannot be read as row changes (naming `reader`,
    what read `since`)."""
    snapshots = rows = deleted = 0
    first_change: tuple[int, str] | None = None
    schemas: set[int] = set()
    current: int | None = until
    for _ in range(MAX_STEPS):
        if current == since:
            if since is not None and since not in lineage:
                # Both Iceberg's incremental scan and a read of row changes start from a
                # snapshot the table still has.
                return f"snapshot {since} that {reader} read of source {source} expired"
            if since is not None and lineage[since].schema_id is not None:
                schemas.add(lineage[since].schema_id)
            if first_change is not None and len(schemas) > 1:
                # Rows deleted under one schema and inserted under another cannot be told
                # apart from rows that merely changed their columns.
                return (
                    f"source {source}'s schema changed since the snapshot {reader} read, "
                    "and it did not only append"
                )
            top = lineage.get(until)
            return Delta(
                source,
                since,
                until,
                snapshots,
                rows,
                changed=first_change is not None,
                deleted=deleted,
                first_change=first_change,
                total=top.total_records if top is not None else None,
            )
        if current is None:
            return (
                f"snapshot {since} that {reader} read of source {source} is no "
                "longer in its history (rolled back or expired)"
            )
        step = lineage.get(current)
        if step is None:
            return f"source {source}'s history is incomplete at snapshot {current}"
        if step.schema_id is not None:
            schemas.add(step.schema_id)
        if step.operation == "append":
            snapshots += 1
            rows += step.added_records
        elif step.operation != "replace":  # a compaction changes no rows
            # A delete, overwrite (UPDATE, MERGE INTO, INSERT OVERWRITE) or anything newer:
            # read as the rows it removed and added.
            snapshots += 1
            rows += step.added_records
            deleted += step.deleted_records + step.added_deletes
            first_change = (step.snapshot_id, step.operation or "unknown operation")
        current = step.parent_id
    return f"source {source} has more than {MAX_STEPS:,} snapshots since {reader} read it"


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
    full_outer_join: bool = False,
    primary_key: Sequence[str] = (),
    read_twice: Sequence[str] = (),
    null_supplied: str = "",
    views_changed: str = "",
    read_through_policies: str = "",
) -> Decision:
    """The decision for one run (see the module's rules). `plan` is the continuous mode's
    plan of the query, or why it has none; `own_snapshots` are the table's snapshots this
    materialized table's own refreshes made after the baseline (other partitions');
    `primary_key` the table's (a keyed table takes row changes whatever its shape);
    `read_twice` the sources the query reads more than once (a self-join); `null_supplied`
    why an outer join's key cannot be followed (null_supplied_key); `views_changed` how a
    view the query reads differs from the version that refresh read (then its SQL is not
    the one the table answers); `read_through_policies` names the source whose row filter
    or masks apply to the table's owner (a change read from Iceberg's history would bypass
    them: only a full refresh reads the source through them)."""
    chosen = policy(options)

    def avoidable(reason: str) -> Decision:
        if chosen == "strict":
            return Decision(
                Kind.FULL,
                f"refused: {reason}, and {INCREMENTAL_OPTION} = 'strict' refuses a full refresh",
                refused=True,
            )
        return full(reason)

    if baseline is None:
        return full("no earlier successful refresh of these rows to start from")
    if unknown:
        return avoidable(f"source {unknown[0]} is not in this catalog, so its changes are unknown")
    if full_asked:  # asked for by name: it runs, changed sources or not
        return full("a full refresh was asked for")
    if views_changed:
        return full(views_changed)
    changed = {s: id_ for s, id_ in now.items() if baseline.source_snapshots.get(s, -1) != id_}
    if not changed and not force:
        return Decision(Kind.NO_DATA, f"no data: no source changed since run {baseline.run_id}")
    if not changed:
        return full("a refresh was asked for although no source changed")
    if chosen == "off":
        return full(f"incremental refreshes are off ({INCREMENTAL_OPTION} = 'off')")
    if baseline.definition_version != definition_version:
        return full(
            f"the definition changed (version {baseline.definition_version} to "
            f"{definition_version}) since run {baseline.run_id}"
        )
    if isinstance(plan, str):
        return avoidable(plan)
    if read_through_policies:
        return avoidable(
            f"the owner reads source {read_through_policies} through its row filter or "
            "masks, which its changes would bypass"
        )
    shape = _shape_reason(
        full_outer_join=full_outer_join, read_twice=read_twice, null_supplied=null_supplied
    )
    if shape:
        return avoidable(shape)
    key = tuple(plan.key or primary_key)
    if partition and (plan.mode == "merge" or key):
        missing = [c for c in partition_columns if c not in key]
        if missing:
            return avoidable(
                f"the partition column {missing[0]} is not in the primary key, so the "
                "partition's changed rows cannot be found"
            )
    reason = _table_changed(table_lineage, baseline.table_snapshot, table_snapshot, own_snapshots)
    if reason:
        return avoidable(reason)
    deltas = []
    for source, until in sorted(changed.items()):
        if source not in baseline.source_snapshots:  # not "empty then": unknown then
            return avoidable(f"source {source} was not read by run {baseline.run_id}")
        since = baseline.source_snapshots[source]
        if until is None:
            return avoidable(f"source {source} has no snapshot any more")
        found = changed_between(source, lineages.get(source, {}), since=since, until=until)
        if isinstance(found, str):
            return avoidable(found)
        if found.changed and not key:
            return avoidable(_keyless(found, "refresh it"))
        if found.snapshots:
            deltas.append(found)
    if not deltas:
        return Decision(Kind.NO_DATA, "no data: the sources were only compacted")
    if chosen == "auto":
        ratio = max_change_ratio(options)
        for delta in deltas:
            # Appends alone cost the rows appended, whatever their share: always applied.
            if not delta.changed or delta.total is None:
                continue
            if delta.touched > ratio * max(delta.total, 1):
                return full(
                    f"source {delta.source} changed {delta.touched:,} rows of "
                    f"{delta.total:,} ({_percent(delta.touched, delta.total)}), more than "
                    f"{RATIO_OPTION} ({ratio:g}) of it: a full refresh is the cheaper"
                )
    return Decision(Kind.INCREMENTAL, incremental_reason(deltas), tuple(deltas))


def _shape_reason(*, full_outer_join: bool, read_twice: Sequence[str], null_supplied: str) -> str:
    """Why the query's changed rows cannot be applied by key ('' when they can)."""
    if full_outer_join:
        return (
            "a FULL OUTER join's rows cannot be found from the rows that changed (LEFT, RIGHT "
            "and inner joins can)"
        )
    if read_twice:
        return (
            f"source {read_twice[0]} is read more than once (a self-join), so its changed "
            "rows cannot be applied one reference at a time"
        )
    return null_supplied


def _keyless(delta: Delta, doing: str) -> str:
    """Why a table without a primary key cannot take `delta`'s deleted rows."""
    snapshot, operation = delta.first_change or (delta.until, "")
    return (
        f"source {delta.source} had {_an(operation)} in snapshot {snapshot}, and a table "
        "without a primary key is kept incrementally through appends only (declare "
        f"PRIMARY KEY (...) NOT ENFORCED on the columns that identify a row to {doing} "
        "incrementally through updates and deletes)"
    )


#: What a continuous table's catch-up adds to its reason: the stream goes on from there.
RESUMED = "the stream resumed after it"


def catch_up(
    *,
    position: Mapping[str, int | None] | str,
    now: Mapping[str, int | None],
    lineages: Mapping[str, Mapping[int, Step]],
    key: Sequence[str],
    full_outer_join: bool = False,
    read_twice: Sequence[str] = (),
    null_supplied: str = "",
) -> Decision:
    """How a continuous table whose stream stopped catches up with its sources: a source
    snapshot its stream cannot read (a DELETE, UPDATE, MERGE INTO or overwrite: Iceberg's
    stream source refuses them), or a static source of its join that moved on.

    `position` is the snapshot of each source ("ns.table") whose rows the table holds (the
    stream's last committed micro-batch read through it, or the load pinned it; a static
    source's pin), or why that is not exactly known; `now` each source's current snapshot;
    `key` the table's primary key (a merge plan's, or the one the table declares).

    INCREMENTAL: one keyed refresh of each moved source's changes from `position` to `now`
    (refresh.spark.changes.incremental_refresh), after which the stream starts again just
    after `now`. FULL, with the reason, where that is not possible: no primary key (a
    deleted row names no row of the table), a position not exactly known (an offset inside
    a snapshot), a range that cannot be read as row changes (an expired snapshot, a schema
    change), or a query whose changed rows cannot be applied by key. NO_DATA when no source
    moved but by compactions. The table's `refresh.incremental` policy is not consulted: a
    continuous table is incremental by nature, and the alternative is a recompute, never a
    stream that stops."""
    deltas: list[Delta] = []
    unreadable = _moves(position, now, lineages, deltas)
    changed = next((d for d in deltas if d.changed), None)
    if not key and changed is not None:
        return full(_keyless(changed, "catch up"))
    if unreadable:
        return full(unreadable)
    if not key:
        return full(
            "a source snapshot deleted or overwrote rows, and a table without a primary key is "
            "kept incrementally through appends only (declare PRIMARY KEY (...) NOT ENFORCED "
            "on the columns that identify a row to catch up incrementally through updates and "
            "deletes)"
        )
    shape = _shape_reason(
        full_outer_join=full_outer_join, read_twice=read_twice, null_supplied=null_supplied
    )
    if shape:
        return full(shape)
    if not deltas:
        return Decision(Kind.NO_DATA, f"no data: the sources were only compacted; {RESUMED}")
    return Decision(Kind.INCREMENTAL, f"{incremental_reason(deltas)}; {RESUMED}", tuple(deltas))


def _moves(
    position: Mapping[str, int | None] | str,
    now: Mapping[str, int | None],
    lineages: Mapping[str, Mapping[int, Step]],
    deltas: list[Delta],
) -> str:
    """What each source did from `position` to `now` (into `deltas`, sources that moved
    by more than compactions), or why that cannot be read as row changes ('' if it can)."""
    if isinstance(position, str):
        return position
    for source, until in sorted(now.items()):
        if source not in position:
            return f"the snapshot of source {source} the table holds is not known"
        since = position[source]
        if since == until:
            continue
        if until is None:
            return f"source {source} has no snapshot any more"
        found = changed_between(
            source, lineages.get(source, {}), since=since, until=until, reader="the table's stream"
        )
        if isinstance(found, str):
            return found
        if found.snapshots:
            deltas.append(found)
    return ""


def _rows(count: int) -> str:
    return f"{count:,} row{'' if count == 1 else 's'}"


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "all"


def incremental_reason(
    deltas: Sequence[Delta],
    counted: Mapping[str, tuple[int, int]] | None = None,
    keys: int | None = None,
) -> str:
    """The reason of an INCREMENTAL run: before it runs, from the snapshots' summaries;
    after, with the rows it read as deleted and inserted per changed source (`counted`:
    source -> (deleted, inserted)) and the keys it recomputed."""
    if not any(d.changed for d in deltas):
        snapshots = sum(d.snapshots for d in deltas)
        rows = sum(d.rows for d in deltas)
        detail = ", ".join(f"{d.source} +{d.rows:,} in {d.snapshots}" for d in deltas)
        text = (
            f"incremental: {snapshots} source snapshot{'s' if snapshots != 1 else ''} appended "
            f"{rows:,} row{'s' if rows != 1 else ''} ({detail})"
        )
    else:
        parts = []
        for d in deltas:
            if not d.changed:
                parts.append(f"{d.source} appended {d.rows:,} rows in {d.snapshots}")
                continue
            snapshot, operation = d.first_change or (d.until, "")
            where = f"in snapshot {snapshot}" + (
                f" and {d.snapshots - 1} more" if d.snapshots > 1 else ""
            )
            if counted and d.source in counted:
                gone, new = counted[d.source]
                rows = f"{_rows(gone)} deleted, {new:,} inserted"
            else:
                rows = f"up to {_rows(d.deleted)} deleted, {d.rows:,} inserted"
            parts.append(f"{d.source} changed by {_an(operation)} {where} ({rows})")
        text = "incremental: " + "; ".join(parts)
    if keys is not None:
        text += f"; {keys:,} key{'s' if keys != 1 else ''} recomputed"
    return text


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


def null_supplied_key(query: str | exp.Query, key: Sequence[str]) -> str:
    """Why a keyed query with LEFT or RIGHT joins cannot find its changed rows from the
    changed rows of a source ('' when it can): a primary key column taken from a
    null-supplying side (a LEFT join's right side, a RIGHT join's left), or not qualified
    with its table. Such a row's key changes with the other side (a row null-extended under
    one key and matched under another), which the changed rows do not name."""
    from catalog.core.sql import as_query

    parsed = as_query(query)
    for select in parsed.find_all(exp.Select):
        joins = select.args.get("joins") or []
        if not any((j.side or "").upper() in ("LEFT", "RIGHT") for j in joins):
            continue
        from_ = select.args.get("from")
        left = [from_.this] if from_ is not None else []
        supplying: set[str] = set()
        for join in joins:
            side = (join.side or "").upper()
            if side == "LEFT":
                supplying |= _aliases(join.this)
            elif side == "RIGHT":
                for node in left:
                    supplying |= _aliases(node)
            left.append(join.this)
        by_name = {p.alias_or_name: p for p in select.expressions}
        for column in key:
            projection = by_name.get(column)
            if projection is None:
                return f"the primary key column {column} is not a column of the query"
            for used in projection.find_all(exp.Column):
                if not used.table:
                    return (
                        f"the primary key column {column} is not qualified with its table "
                        "in a query with an outer join (write it as alias.column)"
                    )
                if used.table in supplying:
                    return (
                        f"the primary key column {column} comes from {used.table}, the side "
                        "of an outer join that supplies nulls, so a row's key changes with "
                        "the other side"
                    )
    return ""


def _aliases(node: exp.Expression) -> set[str]:
    """The names a FROM item answers to (a table's alias or name, a subquery's alias), and
    those of the tables inside it."""
    found = {node.alias_or_name} if node.alias_or_name else set()
    for table in node.find_all(exp.Table):
        found.add(table.alias_or_name)
    return found


def has_full_outer_join(query: str | exp.Query) -> bool:
    """Whether the query (its text or its parsed form) has a FULL join anywhere."""
    from catalog.core.sql import as_query

    return any((join.side or "").upper() == "FULL" for join in as_query(query).find_all(exp.Join))


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


def count_star_column(query: str | exp.Query) -> str | None:
    """The output column holding COUNT(*) of a combinable aggregation, if any: it says when
    a group lost its last row."""
    from catalog.core.sql import as_query

    select = as_query(query)
    if not isinstance(select, exp.Select):
        return None
    for projection in select.expressions:
        inner = projection.this if isinstance(projection, exp.Alias) else projection
        if isinstance(inner, exp.Count) and isinstance(inner.this, exp.Star):
            return projection.alias_or_name
    return None
