"""What the SQL editor completes (GET /api/completions/): the namespaces, tables, views,
materialized tables and columns whose names start with what is being typed, among what the
user may see.

What is typed is a dotted path, as in a query: `ord` (an object of the console's
namespace, a namespace, or a column of a table the statement reads), `sales.ord` (an object
of namespace sales, or a column of table `sales` of the console's namespace),
`sales.orders.am` (a column of sales.orders); a first part that is the catalog's name
(`lakeview.sales.orders`) is skipped. Names match whatever their case.

Every answer is bounded: at most `limit` names, found in a fixed number of queries that read
ranges of indexes (migration 0015) and stop at the limit, however large the catalog or one
namespace is."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import reduce
from operator import or_
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Expression, F, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Collate, Concat, Lower

from catalog import access
from catalog.core.errors import InvalidInput
from catalog.models import CatalogObject, Namespace, TableSchemaField, ViewSchemaField, ViewVersion

#: Names in one answer, unless asked for fewer.
LIMIT = 50
MAX_LIMIT = 100
#: Tables of the statement whose columns complete a bare name.
MAX_TABLES = 10
#: Longer than any namespace and name joined (1,024 + 255 + 255 and the dots).
MAX_PREFIX = 2000
#: Above every character: the end of the range of names that start with a prefix.
_TOP = "\U0010ffff"


@dataclass(frozen=True)
class Completion:
    #: What replaces the last part of the path being typed.
    label: str
    #: namespace, table, view, materialized_table or column.
    kind: str
    #: The namespace's name, the object's `namespace.name`, or a column's table's.
    qualified: str
    #: A column's Iceberg type.
    type: str = ""


@dataclass(frozen=True)
class Completions:
    items: list[Completion]
    #: Whether more names start with the prefix than the answer holds.
    truncated: bool


# -- what a user may see -------------------------------------------------------------------
#
# The one place that decides which namespaces and objects completion names to a user; grants
# on namespaces and objects narrow these querysets.


def visible_namespaces(user: Any) -> QuerySet[Namespace]:
    """The namespaces `user` may see (catalog.access: a grant on, above or under them)."""
    condition = access.namespaces_condition(access.for_user(user))
    return Namespace.objects.all() if condition is None else Namespace.objects.filter(condition)


def visible_objects(user: Any) -> QuerySet[CatalogObject]:
    """The tables and views `user` may see (read_metadata on them)."""
    condition = access.objects_condition(access.for_user(user))
    listed = CatalogObject.objects.all()
    return listed if condition is None else listed.filter(condition)


# -- completion ----------------------------------------------------------------------------


def complete(
    user: Any,
    *,
    prefix: str,
    namespace: str | None = None,
    tables: Sequence[str] = (),
    limit: int = LIMIT,
) -> Completions:
    """The names that may follow `prefix` (a dotted path, see the module's text):
    columns first, then objects, then namespaces. `namespace` is where unqualified names
    resolve; `tables` are the tables and views the statement reads (qualified or not),
    whose columns complete a bare prefix."""
    _check(prefix=prefix, namespace=namespace, tables=tables, limit=limit)
    parts = _path(prefix)
    *qualifier, partial = parts
    qualified = ".".join(qualifier)
    owners = [_owner(qualifier, namespace)] if qualifier else []
    if not qualifier:
        owners += [_owner(_path(table), namespace) for table in tables if table.strip()]
    owners = [owner for owner in dict.fromkeys(owners) if owner is not None]
    home = qualified if qualifier else namespace
    wanted = {name for name, _ in owners} | ({home} if home else set())
    ids = dict(visible_namespaces(user).filter(name__in=wanted).values_list("name", "pk"))

    found: list[Completion] = []
    more = False
    columns, more_columns = _columns(user, owners, ids, partial, limit)
    found += columns
    if home in ids:
        objects, more_objects = _objects(user, ids[home], home, partial, limit)
        found += objects
        more |= more_objects
    namespaces, more_namespaces = _namespaces(user, ".".join(parts), qualified, limit)
    found += namespaces
    more |= more_columns or more_namespaces or len(found) > limit
    return Completions(found[:limit], more)


def _check(*, prefix: str, namespace: str | None, tables: Sequence[str], limit: int) -> None:
    if len(prefix) > MAX_PREFIX:
        raise InvalidInput(f"prefix is at most {MAX_PREFIX} characters", field="prefix")
    if namespace is not None and len(namespace) > MAX_PREFIX:
        raise InvalidInput(f"namespace is at most {MAX_PREFIX} characters", field="namespace")
    if len(tables) > MAX_TABLES:
        raise InvalidInput(f"table is given at most {MAX_TABLES} times", field="table")
    if any(len(table) > MAX_PREFIX for table in tables):
        raise InvalidInput(f"a table is at most {MAX_PREFIX} characters", field="table")
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}", field="limit")
    # No name holds a NUL, and PostgreSQL refuses one in any text.
    for field, values in (
        ("prefix", [prefix]),
        ("namespace", [namespace or ""]),
        ("table", tables),
    ):
        if any("\x00" in value for value in values):
            raise InvalidInput(f"{field} holds a NUL character", field=field)


def _path(text: str) -> list[str]:
    """A dotted path's parts, without the catalog's name in front."""
    parts = [part.strip() for part in text.split(".")]
    if len(parts) > 1 and parts[0] == settings.CATALOG_NAME:
        parts = parts[1:]
    return parts


def _owner(parts: Sequence[str], namespace: str | None) -> tuple[str, str] | None:
    """The (namespace, name) a path to a table names, an unqualified one in `namespace`."""
    *levels, name = parts
    where = ".".join(levels) or namespace
    return (where, name) if where and name else None


def _folded(field: str) -> Expression:
    """The lower-cased name, compared in code point order: migration 0015's indexes."""
    folded = Lower(field)
    return Collate(folded, "C") if connection.vendor == "postgresql" else folded


def starting_with(queryset: QuerySet, prefix: str) -> QuerySet:
    """The rows whose `name` starts with `prefix` in any case, in that order: one range of
    an index on the lower-cased name."""
    low = Lower(Value(prefix))
    return (
        queryset.alias(folded=_folded("name"))
        .filter(folded__gte=low, folded__lt=Concat(low, Value(_TOP)))
        .order_by("folded")
    )


def _objects(
    user: Any, namespace_id: int, namespace: str, partial: str, limit: int
) -> tuple[list[Completion], bool]:
    rows = list(
        starting_with(visible_objects(user).filter(namespace_id=namespace_id), partial).values(
            "name", "kind", materialized=F("table__materialized__id")
        )[: limit + 1]
    )
    items = [
        Completion(row["name"], _kind(row), f"{namespace}.{row['name']}") for row in rows[:limit]
    ]
    return items, len(rows) > limit


def _kind(row: dict[str, Any]) -> str:
    if row["kind"] == CatalogObject.Kind.VIEW:
        return "view"
    return "materialized_table" if row["materialized"] is not None else "table"


def _namespaces(
    user: Any, prefix: str, qualified: str, limit: int
) -> tuple[list[Completion], bool]:
    """Namespaces whose name starts with the whole path: with a qualifier (`sales.e`), the
    label is what follows it (`eu` of sales.eu)."""
    names = list(
        starting_with(visible_namespaces(user), prefix).values_list("name", flat=True)[: limit + 1]
    )
    cut = len(qualified) + 1 if qualified else 0
    items = [Completion(name[cut:], "namespace", name) for name in names[:limit]]
    return items, len(names) > limit


def _columns(
    user: Any,
    owners: Iterable[tuple[str, str]],
    namespace_ids: dict[str, int],
    partial: str,
    limit: int,
) -> tuple[list[Completion], bool]:
    """The columns starting with `partial` of the tables and views `owners` that exist: a
    table's current schema, a view's current version's schema."""
    view_schema = (
        ViewVersion.objects.filter(
            view_id=OuterRef("pk"), version_id=OuterRef("view__current_version_id")
        )
        .order_by()
        .values("schema_id")[:1]
    )
    # One query of one index lookup per name: an OR of them would have the database walk
    # the namespace instead.
    lookups = [
        visible_objects(user)
        .alias(folded=_folded("name"))
        .filter(namespace_id=namespace_ids[namespace], folded=Lower(Value(name)))
        .order_by()
        .values(
            "pk",
            "kind",
            "name",
            namespace_name=F("namespace__name"),
            table_schema=F("table__current_schema_id"),
            view_schema=Subquery(view_schema),
        )
        for namespace, name in owners
        if namespace in namespace_ids
    ]
    if not lookups:
        return [], False
    found = list(lookups[0].union(*lookups[1:], all=True) if len(lookups) > 1 else lookups[0])
    names = {row["pk"]: f"{row['namespace_name']}.{row['name']}" for row in found}
    tables = [row for row in found if row["kind"] == CatalogObject.Kind.TABLE]
    views = [row for row in found if row["kind"] == CatalogObject.Kind.VIEW]
    rows: list[dict[str, Any]] = []
    of_tables = [Q(table_id=row["pk"], schema_id=row["table_schema"]) for row in tables]
    if of_tables:
        rows += _fields(
            TableSchemaField.objects.filter(reduce(or_, of_tables)), "table_id", partial, limit
        )
    of_views = [
        Q(view_id=row["pk"], schema_id=row["view_schema"])
        for row in views
        if row["view_schema"] is not None
    ]
    if of_views and len(rows) <= limit:
        rows += _fields(
            ViewSchemaField.objects.filter(reduce(or_, of_views)), "view_id", partial, limit
        )
    items = [Completion(row["name"], "column", names[row["owner"]], row["type"]) for row in rows]
    return items[:limit], len(items) > limit


def _fields(queryset: QuerySet, owner: str, partial: str, limit: int) -> list[dict[str, Any]]:
    return list(
        queryset.filter(name__istartswith=partial)
        .order_by(owner, "position")
        .values("name", "type", owner=F(owner))[: limit + 1]
    )
