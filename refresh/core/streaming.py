"""What a continuous materialized table's streaming query is, decided from its SQL.

Spark Structured Streaming maintains some query shapes and not others; a shape it cannot
maintain exactly is refused at CREATE with the reason and the suggestion to use FULL:

- **append**: a query that only projects and filters its source tables (and UNION ALLs such
  queries): every source is read as an Iceberg stream of appended snapshots, and each
  micro-batch's rows are appended to the table in one commit.
- **merge**: an aggregation (GROUP BY) over one source table, or a join of one source
  table (the first in FROM: the stream) with other tables (static: read at the snapshot
  the table's load read, and the table caught up when one moves on, `static_moved`):
  each micro-batch recomputes the keys its new rows touch and writes them with `MERGE
  INTO` on the primary key, so the table holds exactly what the query gives. A primary
  key is required.

Refused: ORDER BY, LIMIT, window functions, DISTINCT, a UNION that removes duplicates,
subqueries in expressions, aggregations without GROUP BY, joins of two streams, and
sources that are views (a view is not a stream: refresh.sources merges views into the
query first where SQL allows, and plans the merged query). Django-free."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.optimizer.scope import traverse_scope

from catalog.core.errors import InvalidInput
from catalog.core.sql import as_query
from refresh.core.freshness import Freshness

USE_FULL = " Use REFRESH_MODE = FULL for this query."


@dataclass(frozen=True)
class StreamPlan:
    #: "append" or "merge".
    mode: str
    #: (namespace levels..., name) of the tables read as streams, in the query's order.
    streams: tuple[tuple[str, ...], ...]
    #: Tables read as they are at each micro-batch (the other side of a join).
    static: tuple[tuple[str, ...], ...]
    #: The primary key MERGE INTO matches rows on (merge mode).
    key: tuple[str, ...] = ()
    #: The SQL the stream runs, when it is not the table's own: the table's query with the
    #: views it reads merged in (a view is not a stream; its tables are).
    query: str | None = None
    #: ("ns.view", version) of each view merged in: a new version of one is a new query.
    views: tuple[tuple[str, int | None], ...] = ()

    def sql(self, query: str) -> str:
        """What the stream of a table whose query is `query` runs."""
        return self.query or query


def _refuse(reason: str) -> InvalidInput:
    return InvalidInput(
        f"A continuous materialized table cannot maintain this query: {reason}.{USE_FULL}",
        field="query",
    )


def table_name(table: exp.Table, default: Sequence[str], catalog: str) -> tuple[str, ...]:
    """A table reference's name without the catalog (`catalog` leading it is dropped), one
    part names a table of the `default` namespace."""
    parts = [part.name for part in table.parts]
    if len(parts) >= 3 and parts[0] == catalog:
        parts = parts[1:]
    if len(parts) == 1:
        return (*default, parts[0])
    return tuple(parts)


def plan_stream(
    query: str | exp.Query,
    *,
    namespace: Sequence[str],
    catalog: str,
    primary_key: Sequence[str] = (),
    is_view: callable = lambda name: False,  # type: ignore[valid-type]
) -> StreamPlan:
    """How the query (its text, or its parsed form, which is only read) is maintained as a
    stream, or InvalidInput saying why it cannot be."""
    parsed = as_query(query)
    if parsed.find(exp.Window):
        raise _refuse("window functions (OVER) are not supported on streams")
    if parsed.find(exp.Order):
        raise _refuse("ORDER BY has no meaning for a table kept up to date row by row")
    if parsed.args.get("limit") or parsed.find(exp.Limit):
        raise _refuse("LIMIT cannot be kept as rows arrive")
    # count(DISTINCT x) is an aggregate of its group, recomputed with it; SELECT DISTINCT
    # is not (a row's duplicates in other batches are unknown).
    if any(
        not isinstance(d.parent, exp.AggFunc) and not isinstance(d.parent, exp.Count)
        for d in parsed.find_all(exp.Distinct)
    ):
        raise _refuse("DISTINCT is not supported; GROUP BY the columns instead")
    if isinstance(parsed, exp.Union) and parsed.args.get("distinct"):
        raise _refuse("UNION removes duplicates across streams; use UNION ALL")
    if isinstance(parsed, exp.Intersect | exp.Except):
        raise _refuse("INTERSECT and EXCEPT are not supported on streams")
    if parsed.find(exp.With):
        raise _refuse("WITH (common table expressions) is not supported on streams yet")
    selects = list(parsed.find_all(exp.Select))
    for select in selects:
        for projection in select.expressions:
            if projection.find(exp.Subquery):
                raise _refuse("subqueries in the select list are not supported")
        where = select.args.get("where")
        if where is not None and where.find(exp.Subquery):
            raise _refuse("subqueries in WHERE are not supported")
        if select.find(exp.Subquery) and any(
            isinstance(source, exp.Subquery) for source in _from_sources(select)
        ):
            raise _refuse("subqueries in FROM are not supported")
    tables = [t for t in parsed.find_all(exp.Table)]
    names = [table_name(t, namespace, catalog) for t in tables]
    for name in names:
        if is_view(name):
            raise _refuse(
                f"{'.'.join(name)} is a view, which cannot be read as a stream; read its "
                "tables instead"
            )
    has_join = any(select.args.get("joins") for select in selects)
    aggregates = any(select.args.get("group") or select.find(exp.AggFunc) for select in selects)
    if not has_join and not aggregates:
        return StreamPlan("append", tuple(dict.fromkeys(names)), ())
    if len(selects) != 1:
        raise _refuse("a UNION of aggregations or joins is not supported")
    [select] = selects
    if aggregates and not select.args.get("group"):
        raise _refuse("an aggregation needs GROUP BY (a global aggregate has no key to merge)")
    if not primary_key:
        raise _refuse(
            "an aggregation or a join is kept with MERGE INTO on the primary key, so the "
            "table needs PRIMARY KEY (...) NOT ENFORCED on the columns that identify a row"
        )
    stream, *static = names
    if stream in static:
        raise _refuse("a stream joined with itself is not supported")
    return StreamPlan("merge", (stream,), tuple(dict.fromkeys(static)), tuple(primary_key))


def _from_sources(select: exp.Select) -> list[exp.Expression]:
    sources = []
    from_ = select.args.get("from")
    if from_ is not None:
        sources.append(from_.this)
    for join in select.args.get("joins") or []:
        sources.append(join.this)
    return sources


def rewrite_sources(
    query: str | exp.Query,
    replacements: dict[tuple[str, ...], str],
    *,
    namespace: Sequence[str],
    catalog: str,
) -> str:
    """`query` with each table in `replacements` read from the named temporary view instead
    (its alias kept, or its own name as the alias, so qualified columns still resolve). A
    parsed `query` is left as it is: the rewrite works on a copy."""
    parsed = as_query(query, copy=True)
    for node in real_tables(parsed):  # a CTE of the same name is the query's own: kept
        view = replacements.get(table_name(node, namespace, catalog))
        if view is not None:
            alias = node.alias or node.name
            node.replace(
                exp.Table(
                    this=exp.to_identifier(view),
                    alias=exp.TableAlias(this=exp.to_identifier(alias, quoted=True)),
                )
            )
    return parsed.sql(dialect="spark")


def real_tables(parsed: exp.Expression) -> list[exp.Table]:
    """The nodes of `parsed` that name a table or view of a catalog: not a reference to a
    CTE, not a table-valued function (`range(3)`)."""
    try:
        found = [
            source
            for scope in traverse_scope(parsed)
            for source in scope.sources.values()
            if isinstance(source, exp.Table)
        ]
    except Exception:  # noqa: BLE001 - sqlglot's scopes fail on some shapes: names decide
        ctes = {cte.alias_or_name for cte in parsed.find_all(exp.CTE)}
        found = [t for t in parsed.find_all(exp.Table) if t.db or t.name not in ctes]
    unique = {id(t): t for t in found if isinstance(t.this, exp.Identifier)}
    return list(unique.values())


def qualify_all(query: str | exp.Query, *, namespace: Sequence[str], catalog: str) -> str:
    """`query` with every table named `catalog.namespace.name`, so that it reads the same
    tables in any Spark session, whatever its current namespace."""
    parsed = as_query(query)  # transform() works on a copy
    ctes = {cte.alias_or_name for cte in parsed.find_all(exp.CTE)}

    def qualify(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Table) and not (not node.db and node.name in ctes):
            parts = table_name(node, namespace, catalog)
            if len(parts) != 2:  # nested namespaces: left to the session's USE
                return node
            return exp.Table(
                this=exp.to_identifier(parts[1], quoted=True),
                db=exp.to_identifier(parts[0], quoted=True),
                catalog=exp.to_identifier(catalog, quoted=True),
                alias=exp.TableAlias(this=exp.to_identifier(node.alias or node.name, quoted=True)),
            )
        return node

    return parsed.transform(qualify).sql(dialect="spark")


def static_pins(
    plan: StreamPlan, start: Mapping[str, Sequence[int] | None]
) -> dict[tuple[str, ...], int | None]:
    """The snapshot each of a merge plan's other (static) sources is read at for the whole
    life of a checkpoint: the one the load read (`start`, the load's pins: "ns.table" ->
    (snapshot id, ms), or None or absent for a source empty then). Pinned rather than read
    as they are at each batch: a batch recomputes only the keys its new rows touch, so a
    static source read anew would leave every other key at its older snapshot and the table
    would answer no snapshot at all. When one moves on, the table catches up with it
    (`static_moved`; refresh.streams), and its stream goes on with new pins."""
    pins: dict[tuple[str, ...], int | None] = {}
    for source in plan.static:
        pin = start.get(".".join(source))
        pins[tuple(source)] = int(pin[0]) if pin else None
    return pins


def static_moved(
    plan: StreamPlan,
    start: Mapping[str, Sequence[int] | None],
    current: Mapping[str, int | None],
) -> dict[str, tuple[int | None, int | None]]:
    """The static sources of a merge plan that moved on since the table's load: "ns.table"
    -> (the snapshot its micro-batches read, `static_pins`, and its current one). A source
    the load's pins do not name at all counts as moved (the load predates it), so the table
    is recomputed and pins it (what its batches read of it is not known); a catch-up (or a
    recompute) is how a change of one reaches the table."""
    moved: dict[str, tuple[int | None, int | None]] = {}
    for source, pinned in static_pins(plan, start).items():
        name = ".".join(source)
        now = current.get(name)
        if name not in start or now != pinned:
            moved[name] = (pinned, now)
    return moved


def trigger_seconds(freshness: Freshness) -> float:
    """The micro-batch interval: half the freshness (a row that arrives just after a batch
    started waits one interval, then one batch's time), at least one second."""
    return max(1.0, freshness.seconds / 2)


def without_having(query: str | exp.Query) -> str:
    """`query` without its HAVING (`having_dropped`), as Spark SQL."""
    return having_dropped(query).sql(dialect="spark")


def having_dropped(query: str | exp.Query) -> exp.Query:
    """`query` without its HAVING (a parsed `query` is left as it is): the rows a group's
    keys come from. The keys appended rows touch are found by running the query over those
    rows alone, and a HAVING that fails for them alone (`count(*) < 3` over three new rows)
    would hide a key whose group changed (and must now leave the table)."""
    parsed = as_query(query, copy=True)
    for select in parsed.find_all(exp.Select):
        select.set("having", None)
    return parsed


def inner_toward(
    query: str | exp.Query, source: Sequence[str], *, namespace: Sequence[str], catalog: str
) -> exp.Query:
    """`query` (a parsed one is left as it is) with every outer join for which `source` is on
    the null-supplying side made an inner join: the query over `source`'s changed rows
    (the other sources whole) then gives the rows those changed rows match, whose keys are
    touched, rather than every row of the other side null-extended (all keys). A LEFT join
    supplies nulls for its right side, a RIGHT join for everything on its left; a row of the
    preserved side that changed keeps its outer join, so its own key is found even when it
    matches nothing."""
    parsed = as_query(query, copy=True)
    wanted = tuple(source)

    def holds(node: exp.Expression | None) -> bool:
        if node is None:
            return False
        tables = [node] if isinstance(node, exp.Table) else real_tables(node)
        return any(table_name(t, namespace, catalog) == wanted for t in tables)

    for select in parsed.find_all(exp.Select):
        from_ = select.args.get("from")
        left: list[exp.Expression] = [from_.this] if from_ is not None else []
        for join in select.args.get("joins") or []:
            side = (join.side or "").upper()
            if (side == "LEFT" and holds(join.this)) or (
                side == "RIGHT" and any(holds(node) for node in left)
            ):
                join.set("side", None)
                join.set("kind", None)
            left.append(join.this)
    return parsed
