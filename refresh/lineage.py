"""Lineage: what a catalog object reads (upstream) and what reads it (downstream),
transitively, as a graph of nodes and edges for the lineage page and the API.

Edges come from two places: a view's `View.dependencies` (its current version's
[catalog, *namespace, name] lists; catalog "", `settings.CATALOG_NAME` or an engine's own name
for it is this catalog: catalog.selectors.catalogs_meaning_this) and
a materialized table's `MaterializedTable.sources` (["ns.name", ...]). An edge goes from the
object read to the object reading it, as data flows.

The walk goes breadth first, one level at a time in each direction, with a fixed number of
queries per level (not per node): the level's objects by name, then the views and
materialized tables among them; a view reading an object is found over `ViewRead`'s
(namespace, name) index, a materialized table with `icontains` on its `sources` (checked in
Python; materialized tables are few). It stops after `depth` levels or
`limit` nodes, so it never walks the whole catalog; `truncated` says when it stopped early.

A graph a person can read has a bound: of each object it draws at most FANOUT readers and
FANOUT sources (those the principal may see); the rest are counted on the object's node
(`more_readers`, `more_sources`) and listed by the readers page that pages through them
(`readers_url`). A level asks for at most FANOUT + 1 readers of each of its objects (a
limited lookup of `ViewRead`'s index each, in one query), so that the page's cost and size
stay the same whatever the number of views reading a table. Counting the readers beyond
the drawn ones goes no further than COUNT_CAP of them ("more than 1,000"): a count past
that would read every entry of the index for the name on every view of the page.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.db import connection
from django.db.models import Q
from django.urls import get_script_prefix, get_urlconf, reverse
from django.utils.http import RFC3986_SUBDELIMS

from catalog import access
from catalog import selectors as catalog_selectors
from catalog.core.access import READ_METADATA
from catalog.core.errors import NotFound
from catalog.models import CatalogObject, Namespace, View, ViewRead
from refresh import selectors
from refresh.models import MaterializedTable

MAX_DEPTH = 10
MAX_LIMIT = 500
#: Readers, and sources, of one object the graph draws at most; the rest are counted.
FANOUT = 50
#: Readers counted beyond the drawn ones at most ("more than COUNT_CAP" past it).
COUNT_CAP = 1000

TABLE = "table"
VIEW = "view"
MATERIALIZED_TABLE = "materialized table"
UNKNOWN = "unknown"


class NoSuchObject(NotFound):
    iceberg_type = "NoSuchTableException"


def _split(qualified: str) -> tuple[str, str]:
    namespace, _, name = qualified.rpartition(".")
    return namespace, name


def view_reads(view: View) -> list[str]:
    """ "ns.name" of what a view's current version reads in this catalog."""
    return _reads(view.dependencies)


def _reads(dependencies: Any) -> list[str]:
    found: list[str] = []
    named = [
        [str(part) for part in dependency]
        for dependency in dependencies or []
        if isinstance(dependency, list | tuple) and len(dependency) >= 3
    ]
    # An engine's own name for this catalog (`lake`) is this one too.
    ours = catalog_selectors.catalogs_meaning_this({parts[0] for parts in named})
    for catalog, *levels, name in named:
        if catalog not in ours:
            continue
        qualified = f"{'.'.join(levels)}.{name}"
        if qualified not in found:
            found.append(qualified)
    return found


class _Graph:
    """Nodes (with what each is) and edges found so far, within the limit."""

    def __init__(self, limit: int, principal: access.Principal | None = None) -> None:
        self.limit = limit
        #: None when the principal sees the whole catalog (or there is none).
        self.principal = (
            principal
            if principal is not None and not access.may(principal, READ_METADATA, access.CATALOG)
            else None
        )
        self.kinds: dict[str, str] = {}
        #: A view's reads ("ns.name"), from its `dependencies`.
        self.views: dict[str, list[str]] = {}
        self.mts: dict[str, MaterializedTable] = {}
        #: An object's id and owner (for catalog.access), by "ns.name".
        self.refs: dict[str, tuple[int, int | None]] = {}
        #: The nodes drawn, in the order found (a loaded name past FANOUT is not).
        self.drawn: dict[str, None] = {}
        #: {(name, "readers" or "sources"): (how many more, whether at least that many)}.
        self.more: dict[tuple[str, str], tuple[int, bool]] = {}
        self.edges: set[tuple[str, str]] = set()
        self.truncated = False
        self._mt_sources: list[tuple[list[str], str]] | None = None
        #: Views the readers query found, with their row (id, owner, dependencies): `load`
        #: asks nothing more of them.
        self.found_views: dict[str, tuple[int, int | None, Any]] = {}

    def load(self, names: Iterable[str]) -> list[str]:
        """Learn the kind of each new name (three queries for the lot); the names that fit
        within the limit are returned, in order."""
        fresh = [n for n in dict.fromkeys(names) if n not in self.kinds]
        room = self.limit - len(self.kinds)
        if len(fresh) > room:
            self.truncated = True
            fresh = fresh[: max(room, 0)]
        if not fresh:
            return []
        for name in [n for n in fresh if n in self.found_views]:
            pk, owner_id, dependencies = self.found_views[name]
            self.refs[name] = (pk, owner_id)
            self.views[name] = _reads(dependencies)
            self.kinds[name] = VIEW
        asked = [n for n in fresh if n not in self.kinds]
        if not asked:
            return fresh
        pairs = [_split(n) for n in asked]
        # The namespaces by name, then their objects with one of the names (kept when the
        # pair is asked for): plain lists, and no join a planner without statistics (new
        # rows on PostgreSQL) could walk the wrong way round.
        namespaces = dict(
            Namespace.objects.filter(name__in={ns for ns, _ in pairs}).values_list("pk", "name")
        )
        rows = CatalogObject.objects.filter(
            namespace_id__in=list(namespaces), name__in={name for _, name in pairs}
        ).values_list("pk", "kind", "namespace_id", "name", "view__dependencies", "owner_id")
        wanted = set(asked)
        found: dict[str, str] = {}
        tables: dict[int, str] = {}
        for pk, kind, namespace_id, name, dependencies, owner_id in rows:
            qualified = f"{namespaces[namespace_id]}.{name}"
            if qualified not in wanted:
                continue
            found[qualified] = kind
            self.refs[qualified] = (pk, owner_id)
            if kind == CatalogObject.Kind.VIEW:
                self.views[qualified] = _reads(dependencies)
            elif kind == CatalogObject.Kind.TABLE:
                tables[pk] = qualified
        mt_ids = list(
            MaterializedTable.objects.filter(table_id__in=list(tables)).values_list("pk", flat=True)
        )
        if mt_ids:
            # Each one's last run and data time in the same query (its node's lag).
            materialized = selectors.materialized_tables(with_freshness=True)
            for mt in materialized.filter(pk__in=mt_ids):
                self.mts[tables[mt.table_id]] = mt
        for name in asked:
            obj = found.get(name)
            if obj is None:
                self.kinds[name] = UNKNOWN
            elif name in self.mts:
                self.kinds[name] = MATERIALIZED_TABLE
            elif name in self.views:
                self.kinds[name] = VIEW
            else:
                self.kinds[name] = TABLE
        return fresh

    def sees(self, qualified: str) -> bool:
        """Whether the principal may see a loaded node (read_metadata), decided in memory
        from the row the walk read (catalog.access). A name no object holds (dropped since)
        is seen when its namespace is."""
        if self.principal is None:
            return True
        namespace, _ = _split(qualified)
        ref = self.refs.get(qualified)
        if ref is None:
            return self.principal.sees_namespace(namespace)
        return access.may(
            self.principal, READ_METADATA, access.object_ref(ref[0], namespace, ref[1])
        )

    def mt_sources(self) -> list[tuple[list[str], str]]:
        """(sources, "ns.name") of every materialized table (they are few), read once."""
        if self._mt_sources is None:
            found = MaterializedTable.objects.values_list(
                "sources", "table__namespace__name", "table__name"
            )
            self._mt_sources = [
                ([str(source) for source in sources or []], f"{namespace}.{name}")
                for sources, namespace, name in found
            ]
        return self._mt_sources

    def reads_condition(self) -> Q | None:
        """On `ViewRead` rows: the principal may see the view reading (None: every one)."""
        if self.principal is None:
            return None
        return access.objects_condition(self.principal, READ_METADATA, prefix="view__")


def _sources_of(graph: _Graph, name: str) -> list[str]:
    if name in graph.views:
        return graph.views[name]
    if name in graph.mts:
        return [str(s) for s in graph.mts[name].sources or []]
    return []


def _reads_of(graph: _Graph, namespace: str, name: str) -> Any:
    """The `ViewRead` rows naming `namespace.name` whose view the principal may see."""
    reads = ViewRead.objects.of_this_catalog().filter(namespace=namespace, name=name)
    condition = graph.reads_condition()
    return reads if condition is None else reads.filter(condition)


#: Stand-ins for a name in the reads query compiled once per level (`_first_reads`).
_NAMESPACE, _NAME = "\x00lineage namespace", "\x00lineage name"


#: The statement of one name's first reads, by (database, vendor, catalog name, fanout),
#: for a principal who sees every view (the condition of one who does not is their own).
_FIRST_READS: dict[tuple[str, str, str, int], tuple[str, list[Any]]] = {}


def _first_reads_statement(graph: _Graph) -> tuple[str, list[Any]]:
    condition = graph.reads_condition()
    key = (connection.alias, connection.vendor, settings.CATALOG_NAME, FANOUT)
    if condition is None and key in _FIRST_READS:
        return _FIRST_READS[key]
    one = _reads_of(graph, _NAMESPACE, _NAME).order_by("pk")
    first = one.values_list("namespace", "name", "view_id")[: FANOUT + 1]
    sql, params = first.query.sql_with_params()
    if condition is None:
        _FIRST_READS[key] = (sql, list(params))
    return sql, list(params)


def _first_reads(graph: _Graph, names: list[str]) -> list[tuple[str, str, int]]:
    """(namespace, name, view id) of the first FANOUT + 1 reads of each name (by id, of the
    views the principal may see): a limited walk of ViewRead's (namespace, name) index each,
    all in one query, so that a name a million views read costs what one a few read does.
    The ORM compiles the query of one name (about 3 ms a name when built for each; once a
    process for a principal who sees every view); the statement repeats it with each
    name's parameters."""
    sql, params = _first_reads_statement(graph)
    parts, values = [], []
    for index, qualified in enumerate(names):
        namespace, name = _split(qualified)
        parts.append(f"SELECT * FROM ({sql}) AS reads_{index}")
        values += [
            namespace if value == _NAMESPACE else name if value == _NAME else value
            for value in params
        ]
    with connection.cursor() as cursor:
        cursor.execute(" UNION ALL ".join(parts), values)
        return [(namespace, name, view_id) for namespace, name, view_id in cursor.fetchall()]


def _readers_of(graph: _Graph, names: list[str]) -> dict[str, list[str]]:
    """{name: ["ns.name" of the views and materialized tables reading it]} for a level of
    names, of the views at most FANOUT + 1 each (those the principal may see): one query
    for the reads and one for the views' names (materialized tables are read once a walk)."""
    wanted = set(names)
    readers: dict[str, list[str]] = {n: [] for n in names}
    if not names:
        return readers
    reads = _first_reads(graph, names)
    views: dict[int, str] = {}
    rows = View.objects.filter(pk__in={view_id for _, _, view_id in reads}).values_list(
        "pk", "namespace__name", "name", "owner_id", "dependencies"
    )
    for pk, namespace, name, owner_id, dependencies in rows:
        views[pk] = f"{namespace}.{name}"
        graph.found_views[views[pk]] = (pk, owner_id, dependencies)
    for namespace, name, view_id in sorted(reads, key=lambda read: _split(views.get(read[2], ""))):
        read, reader = f"{namespace}.{name}", views.get(view_id)
        if read in wanted and reader is not None and reader not in readers[read]:
            readers[read].append(reader)
    for sources, reader in graph.mt_sources():
        for source in sources:
            if source in wanted:
                readers[source].append(reader)
    return readers


def _more_readers(graph: _Graph, name: str, found: list[str]) -> tuple[int, bool]:
    """How many readers of `name` the principal may see beyond the FANOUT drawn, and
    whether there are at least that many (the count stopped at COUNT_CAP)."""
    views = sum(1 for reader in found if graph.kinds.get(reader) == VIEW)
    others = len(found) - views
    if views <= FANOUT:
        return len(found) - FANOUT, False
    counted = _reads_of(graph, *_split(name)).values("view_id").distinct()
    total = counted[: FANOUT + COUNT_CAP + 1].count()
    capped = total > FANOUT + COUNT_CAP
    return min(total, FANOUT + COUNT_CAP) + others - FANOUT, capped


def _walk(graph: _Graph, start: str, *, depth: int, upstream: bool) -> None:
    direction = "sources" if upstream else "readers"
    frontier = [start]
    for _ in range(depth):
        if not frontier:
            return
        if upstream:
            found = {n: _sources_of(graph, n) for n in frontier}
        else:
            found = _readers_of(graph, [n for n in frontier if graph.kinds.get(n) != UNKNOWN])
        graph.load(name for names in found.values() for name in names)
        added: list[str] = []
        for node, names in found.items():
            seen = [n for n in dict.fromkeys(names) if n in graph.kinds and graph.sees(n)]
            if len(seen) > FANOUT:
                graph.truncated = True
                graph.more[(node, direction)] = (
                    (len(seen) - FANOUT, False) if upstream else _more_readers(graph, node, seen)
                )
            for name in seen[:FANOUT]:
                if name not in graph.drawn:
                    graph.drawn[name] = None
                    added.append(name)
                graph.edges.add((name, node) if upstream else (node, name))
        frontier = added
    if frontier:
        # Stopped by the depth: say so if there is more beyond.
        more = (
            any(_sources_of(graph, n) for n in frontier)
            if upstream
            else any(_readers_of(graph, frontier).values())
        )
        graph.truncated = graph.truncated or more


_ROUTES = {
    TABLE: "catalog:table-detail",
    VIEW: "catalog:view-detail",
    MATERIALIZED_TABLE: "refresh:mt-detail",
}
#: Letters only, which reverse() leaves as they are.
_NS_MARK, _NAME_MARK = "LINEAGENAMESPACE", "LINEAGEOBJECTNAME"


def url_of(kind: str, namespace: str, name: str) -> str | None:
    """An object's page; None for a name no object holds. Each route is reversed once (by
    URL conf and script prefix) and then filled in, quoted as reverse() quotes: a graph's
    many nodes would reverse it each."""
    route = _ROUTES.get(kind)
    if route is None:
        return None
    head, middle, tail = _route_pieces(route, get_urlconf(), get_script_prefix())
    return f"{head}{quote(namespace, safe=_SAFE)}{middle}{quote(name, safe=_SAFE)}{tail}"


#: What reverse() leaves unquoted in a path (django.urls.resolvers).
_SAFE = RFC3986_SUBDELIMS + "/~:@"


@functools.lru_cache(maxsize=64)
def _route_pieces(route: str, urlconf: Any, prefix: str) -> tuple[str, str, str]:
    address = reverse(route, kwargs={"namespace": _NS_MARK, "name": _NAME_MARK})
    head, _, rest = address.partition(_NS_MARK)
    middle, _, tail = rest.partition(_NAME_MARK)
    return head, middle, tail


def readers_url(namespace: str, name: str) -> str:
    """The page that lists, a page at a time, what reads `namespace.name`."""
    return reverse("refresh:lineage-readers", kwargs={"namespace": namespace, "name": name})


def _node(graph: _Graph, qualified: str, focus: str) -> dict[str, Any]:
    namespace, name = _split(qualified)
    kind = graph.kinds[qualified]
    node: dict[str, Any] = {
        "id": qualified,
        "namespace": namespace,
        "name": name,
        "kind": kind,
        "url": url_of(kind, namespace, name),
        "focus": qualified == focus,
    }
    if kind == MATERIALIZED_TABLE:
        mt = graph.mts[qualified]
        lag = selectors.lag(mt)
        node.update(
            state=mt.state,
            refresh_mode=mt.refresh_mode,
            freshness=str(mt.freshness),
            freshness_seconds=mt.freshness.seconds,
            lag_seconds=lag.total_seconds() if lag is not None else None,
            late=lag is not None and lag > mt.freshness.to_timedelta(),
        )
    readers = graph.more.get((qualified, "readers"))
    if readers is not None:
        node.update(
            more_readers=readers[0],
            more_readers_at_least=readers[1],
            readers_url=readers_url(namespace, name),
        )
    sources = graph.more.get((qualified, "sources"))
    if sources is not None:
        node.update(more_sources=sources[0])
    return node


def _bounded(value: Any, default: int, maximum: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return default
    return min(max(number, 1), maximum)


def _seen_object(namespace: str, name: str, principal: access.Principal | None) -> Namespace:
    """The namespace of `namespace.name`, an object the principal may see; NotFound when
    it does not exist or the principal may not see it (the same answer)."""
    if principal is not None and not principal.sees_namespace(namespace):
        raise catalog_selectors.no_such_namespace(namespace)
    ns = catalog_selectors.get_namespace(namespace)
    holder = catalog_selectors.holder_of(ns, name)
    if holder is None or (
        principal is not None
        and not access.may(
            principal, READ_METADATA, access.object_ref(holder.pk, ns.name, holder.owner_id)
        )
    ):
        raise NoSuchObject(f"Table or view does not exist: {namespace}.{name}", field="name")
    return ns


def lineage(
    namespace: str,
    name: str,
    *,
    depth: int = MAX_DEPTH,
    limit: int = MAX_LIMIT,
    principal: access.Principal | None = None,
) -> dict[str, Any]:
    """{"focus", "nodes", "edges", "truncated", "fanout"} around `namespace.name` (a table,
    view or materialized table): everything it reads and everything that reads it, up to
    `depth` levels each way and `limit` nodes, at most FANOUT readers and FANOUT sources of
    each object (a node whose others were left out says how many: `more_readers`, with
    `more_readers_at_least` when the count stopped at COUNT_CAP, and `readers_url`;
    `more_sources`). Unknown names (dropped since) are nodes of kind "unknown". NotFound
    when the object itself does not exist.

    Given a `principal`, of what it may see (read_metadata, catalog.access): an object it
    may not see answers as a missing one, the graph leaves out the nodes it may not see,
    with their edges, and counts only the objects it may see."""
    depth = _bounded(depth, MAX_DEPTH, MAX_DEPTH)
    limit = _bounded(limit, MAX_LIMIT, MAX_LIMIT)
    ns = _seen_object(namespace, name, principal)
    focus = f"{ns.name}.{name}"
    graph = _Graph(limit, principal)
    graph.load([focus])
    graph.drawn[focus] = None
    _walk(graph, focus, depth=depth, upstream=True)
    _walk(graph, focus, depth=depth, upstream=False)
    shown = list(graph.drawn)
    return {
        "focus": focus,
        "nodes": [_node(graph, n, focus) for n in shown],
        "edges": [{"source": s, "target": t} for s, t in sorted(graph.edges)],
        "truncated": graph.truncated,
        "fanout": FANOUT,
    }


#: The readers page lists this many at a time.
READERS_PAGE = 50


def readers(
    namespace: str, name: str, *, page: int = 1, principal: access.Principal | None = None
) -> dict[str, Any]:
    """What reads `namespace.name`, of what the principal may see, a page at a time, by
    name: {"views": [{"id", "url"}], "materialized_tables" (on the first page; they are
    few), "page", "has_next"}. Nothing is counted: a page reads READERS_PAGE + 1 views past
    its offset. NotFound as `lineage`."""
    ns = _seen_object(namespace, name, principal)
    graph = _Graph(MAX_LIMIT, principal)
    visible = None if graph.principal is None else access.objects_condition(graph.principal)
    views = View.objects.reading(ns.name, name)
    if visible is not None:
        views = views.filter(visible)
    start = (max(page, 1) - 1) * READERS_PAGE
    rows = list(
        views.order_by("namespace__name", "name").values_list("namespace__name", "name")[
            start : start + READERS_PAGE + 1
        ]
    )
    mts: list[dict[str, Any]] = []
    if page <= 1:
        qualified = f"{ns.name}.{name}"
        found = MaterializedTable.objects.filter(sources__icontains=qualified).values_list(
            "sources", "table__namespace__name", "table__name"
        )
        names = sorted(
            f"{mt_ns}.{mt_name}"
            for sources, mt_ns, mt_name in found
            if qualified in (sources or [])
        )
        graph.load(names)
        mts = [
            {"id": n, "url": url_of(MATERIALIZED_TABLE, *_split(n))} for n in names if graph.sees(n)
        ]
    return {
        "views": [
            {"id": f"{v_ns}.{v_name}", "url": url_of(VIEW, v_ns, v_name)}
            for v_ns, v_name in rows[:READERS_PAGE]
        ],
        "materialized_tables": mts,
        "page": max(page, 1),
        "has_next": len(rows) > READERS_PAGE,
    }
