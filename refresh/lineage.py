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
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import reduce
from operator import or_
from typing import Any

from django.db.models import Q
from django.urls import reverse

from catalog import access
from catalog import selectors as catalog_selectors
from catalog.core.access import READ_METADATA
from catalog.core.errors import NotFound
from catalog.models import CatalogObject, Namespace, View, ViewRead
from refresh import selectors
from refresh.models import MaterializedTable

MAX_DEPTH = 10
MAX_LIMIT = 500

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

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.kinds: dict[str, str] = {}
        #: A view's reads ("ns.name"), from its `dependencies`.
        self.views: dict[str, list[str]] = {}
        self.mts: dict[str, MaterializedTable] = {}
        #: An object's id and owner (for catalog.access), by "ns.name".
        self.refs: dict[str, tuple[int, int | None]] = {}
        self.edges: set[tuple[str, str]] = set()
        self.truncated = False

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
        pairs = [_split(n) for n in fresh]
        # The namespaces by name, then their objects with one of the names (kept when the
        # pair is asked for): plain lists, and no join a planner without statistics (new
        # rows on PostgreSQL) could walk the wrong way round.
        namespaces = dict(
            Namespace.objects.filter(name__in={ns for ns, _ in pairs}).values_list("pk", "name")
        )
        rows = CatalogObject.objects.filter(
            namespace_id__in=list(namespaces), name__in={name for _, name in pairs}
        ).values_list("pk", "kind", "namespace_id", "name", "view__dependencies", "owner_id")
        wanted = set(fresh)
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
        for name in fresh:
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

    def connect(self, source: str, target: str) -> None:
        if source in self.kinds and target in self.kinds:
            self.edges.add((source, target))


def _sources_of(graph: _Graph, name: str) -> list[str]:
    if name in graph.views:
        return graph.views[name]
    if name in graph.mts:
        return [str(s) for s in graph.mts[name].sources or []]
    return []


def _readers_of(names: list[str]) -> dict[str, list[str]]:
    """{name: ["ns.name" of the views and materialized tables reading it]} for a level of
    names: one query for views and one for materialized tables."""
    wanted = set(names)
    readers: dict[str, list[str]] = {n: [] for n in names}
    if not names:
        return readers
    pairs = [_split(n) for n in names]
    # The reads of the names' namespaces with one of the names (over ViewRead's index; kept
    # when the pair is asked for), then the readers' names: plain lists, no join a planner
    # without statistics could walk the wrong way round.
    reads = list(
        ViewRead.objects.of_this_catalog()
        .filter(namespace__in={ns for ns, _ in pairs}, name__in={name for _, name in pairs})
        .values_list("namespace", "name", "view_id")
    )
    views = {
        pk: f"{namespace}.{name}"
        for pk, namespace, name in CatalogObject.objects.filter(
            pk__in={view_id for _, _, view_id in reads}
        ).values_list("pk", "namespace__name", "name")
    }
    for namespace, name, view_id in sorted(reads, key=lambda read: _split(views.get(read[2], ""))):
        read, reader = f"{namespace}.{name}", views.get(view_id)
        if read in wanted and reader is not None and reader not in readers[read]:
            readers[read].append(reader)
    mts = MaterializedTable.objects.filter(
        reduce(or_, (Q(sources__icontains=n) for n in names))
    ).values_list("sources", "table__namespace__name", "table__name")
    for sources, namespace, name in mts:
        for source in sources or []:
            if source in wanted:
                readers[source].append(f"{namespace}.{name}")
    return readers


def _walk(graph: _Graph, start: str, *, depth: int, upstream: bool) -> None:
    frontier = [start]
    for _ in range(depth):
        if not frontier:
            return
        if upstream:
            pairs = [(s, n) for n in frontier for s in _sources_of(graph, n)]
            added = graph.load(s for s, _ in pairs)
        else:
            readers = _readers_of([n for n in frontier if graph.kinds.get(n) != UNKNOWN])
            pairs = [(n, r) for n, found in readers.items() for r in found]
            added = graph.load(r for _, r in pairs)
        for source, target in pairs:
            graph.connect(source, target)
        frontier = added
    if frontier:
        # Stopped by the depth: say so if there is more beyond.
        more = (
            any(_sources_of(graph, n) for n in frontier)
            if upstream
            else any(_readers_of(frontier).values())
        )
        graph.truncated = graph.truncated or more


def _url(kind: str, namespace: str, name: str) -> str | None:
    route = {
        TABLE: "catalog:table-detail",
        VIEW: "catalog:view-detail",
        MATERIALIZED_TABLE: "refresh:mt-detail",
    }.get(kind)
    if route is None:
        return None
    return reverse(route, kwargs={"namespace": namespace, "name": name})


def _node(graph: _Graph, qualified: str, focus: str) -> dict[str, Any]:
    namespace, name = _split(qualified)
    kind = graph.kinds[qualified]
    node: dict[str, Any] = {
        "id": qualified,
        "namespace": namespace,
        "name": name,
        "kind": kind,
        "url": _url(kind, namespace, name),
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
    return node


def _bounded(value: Any, default: int, maximum: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return default
    return min(max(number, 1), maximum)


def lineage(
    namespace: str,
    name: str,
    *,
    depth: int = MAX_DEPTH,
    limit: int = MAX_LIMIT,
    principal: access.Principal | None = None,
) -> dict[str, Any]:
    """{"focus", "nodes", "edges", "truncated"} around `namespace.name` (a table, view or
    materialized table): everything it reads and everything that reads it, up to `depth`
    levels each way and `limit` nodes. Unknown names (dropped since) are nodes of kind
    "unknown". NotFound when the object itself does not exist.

    Given a `principal`, of what it may see (read_metadata, catalog.access): an object it
    may not see answers as a missing one, and the graph leaves out the nodes it may not
    see, with their edges."""
    depth = _bounded(depth, MAX_DEPTH, MAX_DEPTH)
    limit = _bounded(limit, MAX_LIMIT, MAX_LIMIT)
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
    focus = f"{ns.name}.{name}"
    graph = _Graph(limit)
    graph.load([focus])
    _walk(graph, focus, depth=depth, upstream=True)
    _walk(graph, focus, depth=depth, upstream=False)
    shown = list(graph.kinds)
    if principal is not None and not access.may(principal, READ_METADATA, access.CATALOG):
        shown = [name for name in shown if _sees(principal, graph, name)]
    visible = set(shown)
    return {
        "focus": focus,
        "nodes": [_node(graph, n, focus) for n in shown],
        "edges": [
            {"source": s, "target": t}
            for s, t in sorted(graph.edges)
            if s in visible and t in visible
        ],
        "truncated": graph.truncated,
    }


def _sees(principal: access.Principal, graph: _Graph, qualified: str) -> bool:
    """Whether the principal may see a node (read_metadata), decided in memory from the row
    the walk read (catalog.access). A name no object holds (dropped since) is seen when its
    namespace is."""
    namespace, _ = _split(qualified)
    ref = graph.refs.get(qualified)
    if ref is None:
        return principal.sees_namespace(namespace)
    return access.may(principal, READ_METADATA, access.object_ref(ref[0], namespace, ref[1]))
