"""What a refresh must pin so that it reads exactly the source snapshots it records: every
table its query reads, for any query shape (outer joins, windows, subqueries, CTEs), with
the views it reads expanded into their SQL so that their tables can be pinned too.

- `table_references`: the catalog tables and views a query names (CTEs and table-valued
  functions excluded), as (namespace levels..., name).
- `expand_views`: the query with each view replaced by its Spark SQL as a subquery (the
  view's tables qualified with the view's default catalog and namespace, its CTEs renamed so
  that they cannot meet the query's, its columns named and cast as the view's schema says,
  as Spark reads a view), recursively. A view that cannot be expanded (no Spark SQL, SQL
  sqlglot cannot read, a cycle) stays as it is, read by Spark as it is when read, and the
  reason is returned for the caller to log.

The expanded SQL is the user's SQL still: it reaches Spark only through the sandbox, as the
query does. Django-free."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.errors import SqlglotError

from catalog.core.errors import CatalogError
from catalog.core.sql import as_query, parse_query
from refresh.core.streaming import real_tables, table_name

Source = tuple[str, ...]
#: Views inside views inside views...: deeper than this is taken as a cycle.
MAX_DEPTH = 16


@dataclass(frozen=True)
class ViewText:
    """A view's current version as Spark reads it: its Spark SQL, the default catalog and
    namespace its unqualified names resolve in, its schema's column names and their Spark
    SQL types (None: no cast), which Spark gives the query's columns by position."""

    sql: str
    namespace: tuple[str, ...]
    catalog: str | None = None
    columns: tuple[str, ...] = ()
    types: tuple[str | None, ...] = ()


@dataclass(frozen=True)
class Expanded:
    """A query with its views expanded: the SQL, every table it reads (views' tables
    included, first-seen order), the views expanded, why a view was left as it is (one
    line per view), and the expanded query parsed (what a caller rewrites further, rather
    than parse `query` again)."""

    query: str
    tables: tuple[Source, ...]
    views: tuple[Source, ...] = ()
    unexpanded: tuple[str, ...] = ()
    parsed: exp.Query | None = field(default=None, compare=False, repr=False)


#: What a view name resolves to: its text, a reason it cannot be expanded, or None when the
#: name is not a view (a table).
ViewLookup = Callable[[Source], "ViewText | str | None"]


def table_references(
    query: str | exp.Query, *, namespace: Sequence[str], catalog: str
) -> list[Source]:
    """The tables and views `query` (text, or parsed) names, CTEs excluded, in first-seen
    order."""
    parsed = as_query(query)
    found: list[Source] = []
    for table in real_tables(parsed):
        name = table_name(table, namespace, catalog)
        if name not in found:
            found.append(name)
    return found


def expand_views(
    query: str | exp.Query,
    *,
    namespace: Sequence[str],
    catalog: str,
    view: ViewLookup,
    aliases: Collection[str] = (),
) -> Expanded:
    """`query` with every view it reads (through views too) replaced by the view's SQL (see
    the module); tables stay as they are. A parsed `query` is left as it is (the expansion
    works on a copy); the text it gives back is then the parsed form's SQL. `aliases`:
    other names of `catalog` that views' SQL may use (an engine's own name for it, such as
    Spark's `lake` in `lake.shop.orders`); the expansion names `catalog` instead."""
    parsed = as_query(query, copy=True)
    found = _Found()
    names = _Names(catalog, frozenset(aliases))
    _expand(parsed, namespace, names, view, found, itertools.count(1), ())
    written = query if isinstance(query, str) and not found.views else None
    return Expanded(
        written or parsed.sql(dialect="spark"),  # nothing expanded: as written
        tuple(found.tables),
        tuple(found.views),
        tuple(found.unexpanded),
        parsed,
    )


@dataclass(frozen=True)
class _Names:
    """This catalog's name, and the other names views' SQL may give it."""

    catalog: str
    aliases: frozenset[str] = frozenset()

    def ours(self, name: str | None) -> bool:
        return name in (None, "", self.catalog) or name in self.aliases


@dataclass
class _Found:
    tables: list[Source] = field(default_factory=list)
    views: list[Source] = field(default_factory=list)
    unexpanded: list[str] = field(default_factory=list)


def _expand(
    parsed: exp.Expression,
    namespace: Sequence[str],
    names: _Names,
    view: ViewLookup,
    seen: _Found,
    ctes: itertools.count,
    path: tuple[Source, ...],
) -> None:
    catalog = names.catalog
    for node in real_tables(parsed):
        name = table_name(node, namespace, catalog)
        text = view(name)
        if text is None:
            if name not in seen.tables:
                seen.tables.append(name)
            continue
        shown = ".".join(name)
        if isinstance(text, str):
            seen.unexpanded.append(f"{shown}: {text}")
            continue
        if name in path or len(path) >= MAX_DEPTH:
            seen.unexpanded.append(f"{shown}: it reads itself through views")
            continue
        try:
            body = _as_schema(_view_query(text, names, ctes), text)
        except (CatalogError, SqlglotError, ValueError) as error:
            seen.unexpanded.append(f"{shown}: {getattr(error, 'message', None) or error}")
            continue
        # Names inside are qualified now: the view's default namespace no longer matters.
        if name not in seen.views:
            seen.views.append(name)
        _expand(body, namespace, names, view, seen, ctes, (*path, name))
        alias = exp.to_identifier(node.alias or node.name, quoted=True)
        node.replace(exp.Subquery(this=body, alias=exp.TableAlias(this=alias)))


def _as_schema(body: exp.Query, text: ViewText) -> exp.Query:
    """The view's query with its columns as Spark reads a view: named by the schema, by
    position, and cast to the schema's types (Spark up-casts a view's columns to them)."""
    if not text.columns:
        return body
    inner = exp.Subquery(
        this=body,
        alias=exp.TableAlias(
            this=exp.to_identifier("__lakeview_view", quoted=True),
            columns=[exp.to_identifier(c, quoted=True) for c in text.columns],
        ),
    )
    projections = []
    for position, column in enumerate(text.columns):
        value: exp.Expression = exp.column(column, quoted=True)
        kind = text.types[position] if position < len(text.types) else None
        if kind:
            value = exp.Cast(this=value, to=exp.DataType.build(kind, dialect="spark"))
            value = exp.alias_(value, column, quoted=True)
        projections.append(value)
    return exp.select(*projections).from_(inner)


def _view_query(found: ViewText, names: _Names, ctes: itertools.count) -> exp.Query:
    """The view's SQL, parsed, with each table it names fully qualified (the view's default
    catalog and namespace fill in what a name leaves out; this catalog's other names become
    its own) and its CTEs renamed: Spark's SQL keeps CTEs at the top of a statement, where
    the view's would meet the query's own."""
    catalog = names.catalog
    # A default catalog that is not this one matters only to a name that leaves it out:
    # Spark records its session catalog as the default of a view whose names are all full.
    default = catalog if names.ours(found.catalog) else found.catalog
    body = parse_query(found.sql, "spark")
    renamed: dict[str, str] = {}
    for cte in body.find_all(exp.CTE):
        old = cte.alias_or_name
        if old in renamed:
            raise ValueError(f"it defines the CTE {old} twice")
        renamed[old] = f"__lakeview_cte_{next(ctes)}_{old}"
    for node in real_tables(body):
        parts = [part.name for part in node.parts]
        if len(parts) == 1:
            if len(found.namespace) != 1:
                raise ValueError("its default namespace has nested levels")
            parts = [found.namespace[0], *parts]
        if len(parts) == 2:
            if default != catalog:
                raise ValueError(
                    f"it reads {'.'.join(parts)} in its default catalog {default}, "
                    "which is not this catalog"
                )
            parts = [catalog, *parts]
        if len(parts) != 3:
            raise ValueError(f"{'.'.join(parts)} names nested namespaces")
        if parts[0] in names.aliases:
            parts = [catalog, *parts[1:]]
        node.set("catalog", exp.to_identifier(parts[0], quoted=True))
        node.set("db", exp.to_identifier(parts[1], quoted=True))
        node.set("this", exp.to_identifier(parts[2], quoted=True))
        if not node.alias:  # qualified columns (`orders.id`) still resolve
            node.set("alias", exp.TableAlias(this=exp.to_identifier(parts[2], quoted=True)))
    for cte in body.find_all(exp.CTE):
        cte.set("alias", exp.TableAlias(this=exp.to_identifier(renamed[cte.alias_or_name])))
    for node in body.find_all(exp.Table):
        if not node.args.get("db") and node.name in renamed:
            alias = node.alias or node.name
            node.set("this", exp.to_identifier(renamed[node.name]))
            node.set("alias", exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))
    return body


def flattened(expanded: Expanded) -> exp.Query | None:
    """The expanded query with each view's subquery merged into the query that reads it
    where SQL allows (sqlglot's qualify and merge_subqueries: a view that projects, filters
    and joins becomes part of the query's FROM and WHERE), so that an incremental refresh
    sees the tables the views read as its own sources. None when the expansion has no parsed
    form or sqlglot cannot qualify every column (the refresh is then FULL, saying a view is
    read); a view it cannot merge (an aggregation read by an aggregation) stays a subquery,
    which the incremental plan then refuses."""
    from sqlglot.optimizer.merge_subqueries import merge_subqueries
    from sqlglot.optimizer.qualify import qualify

    if expanded.parsed is None:
        return None

    def merged(expand_alias_refs: bool) -> exp.Query:
        qualified = qualify(
            expanded.parsed.copy(),
            dialect="spark",
            # A column sqlglot cannot place (unqualified, of a view joining tables: no schema
            # here) would stay unqualified in the merged query, where another table's column
            # of that name could make it ambiguous: such a query is not merged.
            validate_qualify_columns=True,
            infer_schema=True,
            expand_alias_refs=expand_alias_refs,
        )
        return merge_subqueries(qualified)

    # Spark reads a name in GROUP BY or HAVING as the source's column first, and as an
    # output alias only when no column has it; sqlglot expands every alias it finds, which
    # turns `coalesce(k, '-') AS k ... GROUP BY coalesce(k, '-')` into a double coalesce.
    # So aliases stay unexpanded, and where the query needs them expanded (`GROUP BY day`),
    # only a query where no alias also names a column its own expression reads is merged.
    try:
        return merged(expand_alias_refs=False)
    except (SqlglotError, ValueError, KeyError):
        pass
    if _alias_shadows_a_column(expanded.parsed):
        return None
    try:
        return merged(expand_alias_refs=True)
    except (SqlglotError, ValueError, KeyError):
        return None


def _alias_shadows_a_column(query: exp.Expression) -> bool:
    """Whether some SELECT with GROUP BY or HAVING names an expression after a column the
    expression reads (`coalesce(k, '-') AS k`): there, a `k` in them may mean either."""
    for select in query.find_all(exp.Select):
        if not (select.args.get("group") or select.args.get("having")):
            continue
        for projection in select.expressions:
            if not isinstance(projection, exp.Alias) or isinstance(projection.this, exp.Column):
                continue
            if any(c.name == projection.alias for c in projection.this.find_all(exp.Column)):
                return True
    return False
