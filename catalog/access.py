"""The one place that decides "may this principal do this on that": `may(principal,
privilege, securable)`, and the list filters built from the same grants.

A principal is a user (with the groups they belong to), or an engine credential acting for
its user; a narrowed credential holds only what both its own grants and its user's allow.
Superusers hold everything and cost no query; inactive users hold nothing. Staff users
(`is_staff`: those who may sign in to the Django admin) hold only what they are granted,
like anyone else: being let into the admin site grants no data.

Cost: a principal's grants are read in one query, the first time a request asks anything
(`Principal.held`): the grants of the user, of their groups and of the credential, the
namespaces the user owns, the namespaces of the objects the user owns, and whether the
credential is narrowed, as one UNION ALL over indexed columns (compiled once, run with each
request's ids). Every later check in the request is answered in memory by walking the
namespace's levels (`core.access.Held`). The principal lives as long as the request
(`principal_of`), so a revoked grant is gone at the next request. An object's owner is read
from its own row, which the caller has loaded. Lists filter in their own query: the
namespaces under the grants are one subquery whose SQL does not grow with the grants
(`namespaces_under`). Load-table asks nothing of its own in the usual case: the grant rides
on its pointer query (`may_read_condition`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import reduce
from operator import or_
from typing import Any

from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.models import (
    Case,
    CharField,
    Exists,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Value,
    When,
)
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast, Concat, Length, Substr
from django.db.models.lookups import Exact

from catalog.core.access import IMPLIES, MANAGE, OWN, READ_DATA, READ_METADATA, Held
from catalog.models import CatalogClient, CatalogObject, Grant, Namespace

#: Markers in the loaded rows' privilege column beside real privileges.
_BENEATH = "beneath"  # a namespace holding an object the user owns
_NARROWED = "narrowed"  # the credential is narrowed


@dataclass(frozen=True)
class Securable:
    """What a privilege is held on: the catalog (neither field), a namespace (by name) or
    an object (its id, its namespace's name and its owner's id, all on its row)."""

    namespace: str | None = None
    object_id: int | None = None
    owner_id: int | None = None

    @property
    def is_object(self) -> bool:
        return self.object_id is not None


CATALOG = Securable()


def namespace(name: str) -> Securable:
    return Securable(namespace=name)


access_namespace = namespace  # for functions with a `namespace` argument of their own


def of_object(obj: CatalogObject) -> Securable:
    """An object's securable from its row (its namespace loaded, or its id's name known)."""
    return Securable(namespace=obj.namespace.name, object_id=obj.pk, owner_id=obj.owner_id)


def object_ref(object_id: int, namespace_name: str, owner_id: int | None) -> Securable:
    return Securable(namespace=namespace_name, object_id=object_id, owner_id=owner_id)


class Principal:
    """Who asks, for the length of one request. `client` is the engine credential the
    request came with, if any."""

    def __init__(self, user: Any, client: CatalogClient | None = None) -> None:
        self.user = user
        self.client = client
        active = bool(getattr(user, "is_authenticated", False)) and bool(
            getattr(user, "is_active", False)
        )
        self.active = active
        self.superuser = active and bool(getattr(user, "is_superuser", False))
        self._held: tuple[Held, Held | None] | None = None

    def __repr__(self) -> str:
        via = f" via {self.client.client_id}" if self.client is not None else ""
        return f"<Principal {getattr(self.user, 'username', None)!r}{via}>"

    def held(self) -> tuple[Held, Held | None]:
        """The user's privileges and, for a narrowed credential, the credential's: read in
        one query on first use."""
        if self._held is None:
            self._held = _load(self.user, self.client)
        return self._held

    def privileges(self, securable: Securable) -> frozenset[str]:
        """Every privilege held on the securable (what each grant implies included)."""
        if not self.active:
            return frozenset()
        if self.superuser and not self.narrowed_superuser():
            return IMPLIES[OWN]
        mine, narrowing = self.held()
        found = IMPLIES[OWN] if self.superuser else _privileges(mine, securable)
        if securable.is_object and securable.owner_id == self.user.pk:
            found = IMPLIES[OWN]
        if narrowing is not None:
            found &= _privileges(narrowing, securable)
        return found

    def narrowed_superuser(self) -> bool:
        # A superuser's credential can be narrowed too (a read-only one, say); without a
        # narrowed credential a superuser's answers need no query.
        return self.client is not None and self.client.narrowed

    def holds_anything(self) -> bool:
        """Whether the principal holds any privilege anywhere (owning counts)."""
        return self._answers(lambda held: not held.is_empty())

    def holds_any(self, privileges: tuple[str, ...]) -> bool:
        """Whether the principal holds one of `privileges` anywhere (owning counts)."""
        return self._answers(lambda held: held.holds_any(privileges))

    def sees_namespace(self, name: str) -> bool:
        """A namespace is visible to whoever holds anything on it, above it or under it."""
        return self._answers(lambda held: held.sees_namespace(name))

    def _answers(self, question: Callable[[Held], bool]) -> bool:
        """`question` asked of what the principal holds (a superuser holds everything) and
        of what its credential narrows it to, when it is narrowed: yes only if both say
        yes. An inactive principal holds nothing."""
        if not self.active:
            return False
        if self.superuser and not self.narrowed_superuser():
            return True
        mine, narrowing = self.held()
        return (self.superuser or question(mine)) and (narrowing is None or question(narrowing))


def _privileges(held: Held, securable: Securable) -> frozenset[str]:
    if securable.is_object:
        return held.on_object(securable.object_id, securable.namespace or "")
    if securable.namespace is not None:
        return held.on_namespace(securable.namespace)
    return held.on_catalog()


def may(principal: Principal, privilege: str, securable: Securable) -> bool:
    """Whether the principal may do what `privilege` allows on the securable. Seeing a
    namespace (READ_METADATA on it) needs any privilege on it, above it or under it; every
    other answer is the privileges held on it, inherited from its namespaces and the
    catalog, its owner holding all."""
    if privilege == READ_METADATA and securable.namespace is not None and not securable.is_object:
        return principal.sees_namespace(securable.namespace)
    return privilege in principal.privileges(securable)


# -- per request ---------------------------------------------------------------------------

_ATTRIBUTE = "_catalog_principal"


def for_user(user: Any) -> Principal:
    """The user's principal, kept on the user object (as roles were): for callers that
    have a user and no request (roles, the console). A request's checks use
    `principal_of`, which lives exactly as long as the request."""
    principal = getattr(user, _ATTRIBUTE, None)
    if principal is None:
        principal = Principal(user)
        if user is not None:
            setattr(user, _ATTRIBUTE, principal)
    return principal


def principal_of(request: Any) -> Principal:
    """The request's principal (a DRF Request or Django's), made on first use and kept on
    the request: a revoked grant is gone at the next request."""
    http = getattr(request, "_request", request)
    principal = getattr(http, _ATTRIBUTE, None)
    user = getattr(request, "user", None)
    if principal is None or (principal.client is None and principal.user is not user):
        principal = Principal(user)
        setattr(http, _ATTRIBUTE, principal)
        if user is not None:
            # What the request calls with its user alone (the console's statements ask
            # `for_user`) answers from the same grants, read once for the request.
            setattr(user, _ATTRIBUTE, principal)
    return principal


def bound_principal(request: Any) -> Principal | None:
    """The request's principal if one was made (the audit's refusals ask, never make one)."""
    return getattr(getattr(request, "_request", request), _ATTRIBUTE, None)


def bind(request: Any, principal: Principal) -> Principal:
    """Make `principal` the request's (the Iceberg REST catalog's, whose user comes with a
    credential rather than a session)."""
    setattr(getattr(request, "_request", request), _ATTRIBUTE, principal)
    return principal


# -- loading -------------------------------------------------------------------------------


def _rows(user_id: int, client_id: int | None) -> QuerySet:
    """One UNION ALL: (marker or privilege, namespace, object id, object's namespace,
    credential id). Its NULLs are typed: PostgreSQL gives an untyped one in a DISTINCT part
    the type text."""
    text, number = CharField(), IntegerField()
    memberships = get_user_model().groups.through.objects.filter(user_id=user_id)
    whose = Q(user_id=user_id) | Q(group_id__in=memberships.values("group_id"))
    if client_id is not None:
        whose |= Q(client_id=client_id)
    from_client = (
        Case(When(client_id__isnull=False, then=Value(1)), default=Value(0), output_field=number)
        if client_id is not None
        else Value(0, output_field=number)
    )
    grants = (
        Grant.objects.filter(whose)
        .order_by()
        .annotate(c=from_client)
        .values_list("privilege", "namespace__name", "object_id", "object__namespace__name", "c")
    )
    owned_namespaces = (
        Namespace.objects.filter(owner_id=user_id)
        .order_by()
        .annotate(
            p=Value(OWN, output_field=text),
            o=Cast(Value(None), number),
            x_ns=Cast(Value(None), text),
            c=Value(0, output_field=number),
        )
        .values_list("p", "name", "o", "x_ns", "c")
    )
    beneath = (
        CatalogObject.objects.filter(owner_id=user_id)
        .order_by()
        .annotate(
            p=Value(_BENEATH, output_field=text),
            n=Cast(Value(None), text),
            o=Cast(Value(None), number),
            c=Value(0, output_field=number),
        )
        .values_list("p", "n", "o", "namespace__name", "c")
        .distinct()
    )
    parts = [owned_namespaces, beneath]
    if client_id is not None:
        parts.append(
            CatalogClient.objects.filter(pk=client_id, narrowed=True)
            .order_by()
            .annotate(
                p=Value(_NARROWED, output_field=text),
                n=Cast(Value(None), text),
                o=Cast(Value(None), number),
                x_ns=Cast(Value(None), text),
                c=Value(1, output_field=number),
            )
            .values_list("p", "n", "o", "x_ns", "c")
        )
    return grants.union(*parts, all=True)


# `_rows` is built and compiled by the ORM once per database and shape (with a credential or
# without), then run with each request's ids: building its four parts and their union cost
# about 2 ms, twenty times what the database takes to answer it. Sentinels mark where the
# ids go among the compiled query's parameters.
_USER, _CLIENT = -7_300_000_000_000_000_011, -7_300_000_000_000_000_012
_compiled_rows: dict[tuple[str, str, bool], tuple[str, list[Any], list[int], list[int]]] = {}


def _compile_rows(db: Any, with_client: bool) -> tuple[str, list[Any], list[int], list[int]]:
    queryset = _rows(_USER, _CLIENT if with_client else None)
    sql, params = queryset.query.get_compiler(connection=db).as_sql()
    params = list(params)

    def slots(sentinel: int) -> list[int]:
        return [
            i
            for i, v in enumerate(params)
            if type(v) is int and v == sentinel  # noqa: E721
        ]

    users, clients = slots(_USER), slots(_CLIENT)
    if not users or with_client != bool(clients):
        # The ORM changed how it passes the ids: never run a query that looks for the
        # sentinels themselves.
        raise RuntimeError(f"The grants query does not take its ids as parameters: {sql}")
    return sql, params, users, clients


def _grant_rows(user_id: int, client_id: int | None) -> list[tuple]:
    """`_rows(user_id, client_id)`, run as compiled once (through Django's cursor, so that
    it is observed and wrapped as any query)."""
    db = connections[DEFAULT_DB_ALIAS]
    key = (db.alias, db.vendor, client_id is not None)
    compiled = _compiled_rows.get(key)
    if compiled is None:
        compiled = _compiled_rows[key] = _compile_rows(db, client_id is not None)
    sql, template, users, clients = compiled
    params = template.copy()
    for index in users:
        params[index] = user_id
    for index in clients:
        params[index] = client_id
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _load(user: Any, client: CatalogClient | None) -> tuple[Held, Held | None]:
    client_id = client.pk if client is not None else None
    mine: list[tuple] = []
    narrowing: list[tuple] = []
    narrowed = False
    for privilege, ns_name, object_id, object_ns, from_client in _grant_rows(user.pk, client_id):
        if privilege == _NARROWED:
            narrowed = True
        elif from_client:
            narrowing.append((privilege, ns_name, object_id, object_ns))
        else:
            mine.append((privilege, ns_name, object_id, object_ns))
    return Held.from_rows(mine), Held.from_rows(narrowing) if narrowed else None


# -- one object's read, inside another query ------------------------------------------------


def may_read_condition(namespace_name: str, user_id: int, client_id: int) -> Q:
    """`may(principal, READ_DATA, table)` for the table row of the query that carries it
    (OuterRef("pk"), its namespace_id and owner_id), as one SQL condition, so that
    load-table needs no query of its own for the grant. It answers true only where `may`
    does: a user's or group's grant implying read_data on the catalog, on the table or on
    its namespace or one above it; owning the table or one of those namespaces; and never
    for a narrowed credential (which `may` then decides, with a query). False means "ask
    `may`".

    Each part is read through an index on the principal (the user's grants, their groups'
    grants, the namespaces they own), never a scan of every grant or namespace: a
    namespace above the table's is one whose name, and a dot, begin the table's namespace
    name (compared as text, never with LIKE, whose wildcards a name may hold)."""
    readers = [p for p, implied in IMPLIES.items() if READ_DATA in implied and p != OWN]
    # `privilege = a OR privilege = b ...` rather than IN: SQLite builds a temporary b-tree
    # for an IN list on every evaluation, a quarter of load-table's query.
    any_reader = reduce(or_, (Q(privilege=p) for p in readers))

    def above(field: str) -> Q:
        head = Substr(Value(namespace_name), 1, Length(field) + 1)
        return Exact(head, Concat(field, Value("."), output_field=CharField()))

    def on_the_table(outer: Any = OuterRef) -> Q:
        return (
            Q(namespace__isnull=True, object__isnull=True)
            | Q(object_id=outer("pk"))
            | Q(namespace_id=outer("namespace_id"))
            | Q(above("namespace__name"))
        )

    by_user = Grant.objects.filter(on_the_table(), any_reader, user_id=user_id)
    # From each of the user's memberships to its group's grants (by group, not among every
    # grant of these privileges).
    of_group = Grant.objects.filter(
        on_the_table(lambda field: OuterRef(OuterRef(field))),
        any_reader,
        group_id=OuterRef("group_id"),
    )
    by_group = get_user_model().groups.through.objects.filter(Exists(of_group), user_id=user_id)
    owned_above = Namespace.objects.filter(
        Q(pk=OuterRef("namespace_id")) | Q(above("name")), owner_id=user_id
    )
    narrowed = CatalogClient.objects.filter(pk=client_id, narrowed=True)
    return (
        Q(owner_id=user_id) | Q(Exists(by_user)) | Q(Exists(by_group)) | Q(Exists(owned_above))
    ) & ~Q(Exists(narrowed))


# -- lists ---------------------------------------------------------------------------------


def visible_objects(principal: Principal, queryset: QuerySet) -> QuerySet:
    """The objects of `queryset` (CatalogObject, View or Table rows) the principal may see
    (READ_METADATA), filtered in the query so that counts and pages stay right."""
    condition = objects_condition(principal)
    return queryset if condition is None else queryset.filter(condition)


def objects_condition(
    principal: Principal,
    privilege: str = READ_METADATA,
    *,
    namespace: str | None = None,
    prefix: str = "",
) -> Q | None:
    """The condition, on CatalogObject rows (or View and Table rows; on rows that point to
    one through `prefix`, "table__" say), "the principal holds `privilege` on it": None when
    it holds everywhere (or, given the `namespace` the rows are all in, everywhere in it),
    so that a list needs no filter at all."""
    if not principal.active:
        return Q(pk__in=[])
    if principal.superuser and not principal.narrowed_superuser():
        return None
    if namespace is not None and privilege in principal.privileges(access_namespace(namespace)):
        return None
    mine, narrowing = principal.held()
    found = None
    if not principal.superuser:
        found = _object_filter(mine, privilege, owner_id=principal.user.pk, prefix=prefix)
    if narrowing is not None:
        narrowed = _object_filter(narrowing, privilege, owner_id=None, prefix=prefix)
        if narrowed is not None:
            found = narrowed if found is None else found & narrowed
    return found


def _object_filter(
    held: Held, privilege: str, *, owner_id: int | None, prefix: str = ""
) -> Q | None:
    """None when every object is visible, else the condition. The namespaces granted are
    one subquery of the (few) namespaces, run once, not a join and a test of each name on
    every row a list passes."""
    if privilege in held.catalog:
        return None
    found = Q(**{f"{prefix}pk__in": sorted(held.objects_with(privilege))})
    granted = held.namespaces_with(privilege)
    if granted:
        found |= Q(**{f"{prefix}namespace_id__in": namespaces_under(granted)})
    if owner_id is not None:
        found |= Q(**{f"{prefix}owner_id": owner_id})
    return found


#: How each database reads a JSON array of names as rows (a column named `value`).
_JSON_NAMES = {
    "sqlite": "json_each(%s)",
    "postgresql": "jsonb_array_elements_text(%s::jsonb) AS names(value)",
}


def namespaces_under(granted: Iterable[str], exactly: Iterable[str] = ()) -> RawSQL | QuerySet:
    """The ids of the namespaces named in `granted` or under one of them, and of those named
    in `exactly`, as a subquery for `namespace_id__in=` (or `pk__in=`).

    The names travel as two JSON arrays, one parameter each, so that the SQL is the same
    whatever the number of grants: a condition per name, built and compiled by the ORM, cost
    about 0.1 ms a name on every list and its count, several times a list's own query. It
    reads every namespace once and compares each with the names in the arrays; a namespace
    is under `name` when its name starts with `name` and a dot, compared with substr, as
    `may` compares it (LIKE would fold case on SQLite, "Finance.x" under "finance")."""
    granted, exactly = sorted(set(granted)), sorted(set(exactly) | set(granted))
    if connection.vendor not in _JSON_NAMES:
        names = reduce(or_, (under("name", name) for name in granted), Q(name__in=exactly))
        return Namespace.objects.filter(names).values("pk")
    return _namespaces_under_json(json.dumps(granted), json.dumps(exactly))


def _namespaces_under_json(granted: str, exactly: str | None = None) -> RawSQL:
    """`namespaces_under` of names given as JSON arrays (`exactly`: `granted` when None)."""
    rows = _JSON_NAMES[connection.vendor]
    table = connection.ops.quote_name(Namespace._meta.db_table)
    sql = (
        f"SELECT ns.id FROM {table} ns WHERE ns.name IN (SELECT value FROM {rows})"
        f" OR EXISTS (SELECT 1 FROM {rows}"
        " WHERE substr(ns.name, 1, length(value) + 1) = value || '.')"
    )
    return RawSQL(sql, [granted if exactly is None else exactly, granted])


def under(field: str, name: str) -> Q:
    """`field` (a namespace's name) is `name` or a namespace under it. LIKE (startswith)
    lets an index narrow the rows, but SQLite's LIKE ignores case ("Finance.x" would pass
    for "finance"): the prefix is then compared exactly, as `may` compares it."""
    prefix = name + "."
    return Q(**{field: name}) | (
        Q(**{f"{field}__startswith": prefix})
        & Q(Exact(Substr(F(field), 1, len(prefix)), Value(prefix, output_field=CharField())))
    )


# -- lists compiled once -------------------------------------------------------------------


@dataclass(frozen=True)
class Visibility:
    """What `objects_condition` decides for a principal, as values of constant SQL
    (`visible_where`), for a list whose query is compiled once (catalog.prepared): the ids
    of the objects granted, the namespaces granted (with those under them), both as JSON
    arrays, and the owner's id."""

    objects: str
    namespaces: str
    owner_id: int

    def values(self) -> dict[str, Any]:
        return {"objects": self.objects, "namespaces": self.namespaces, "owner": self.owner_id}


#: Samples of `Visibility`'s values, for a query compiled once (catalog.prepared) to find
#: where each call's go: `samples()`.
SAMPLE = Visibility(
    objects="[-7300000000000000021]",
    namespaces='["lakeview sample namespace granted"]',
    owner_id=-7_300_000_000_000_000_022,
)

#: How each database reads a JSON array of ids as rows (a column named `value`).
_JSON_IDS = {
    "sqlite": "SELECT value FROM json_each(%s)",
    "postgresql": "SELECT value::bigint FROM jsonb_array_elements_text(%s::jsonb) AS ids(value)",
}


def visibility(principal: Principal, privilege: str = READ_METADATA) -> Visibility | None:
    """`objects_condition(principal, privilege)` as a `Visibility`, for a principal whose
    condition it can say (a user's own grants, on SQLite or PostgreSQL), else None: then
    the caller filters with `objects_condition` (None from both: every object visible)."""
    if connection.vendor not in _JSON_IDS or not principal.active or principal.superuser:
        return None
    mine, narrowing = principal.held()
    if narrowing is not None or privilege in mine.catalog:
        return None
    return Visibility(
        objects=json.dumps(sorted(mine.objects_with(privilege))),
        namespaces=json.dumps(sorted(set(mine.namespaces_with(privilege)))),
        owner_id=principal.user.pk,
    )


def visible_where(prefix: str = "", *, objects: str, namespaces: str, owner: int) -> Q:
    """The condition `objects_condition` builds, on rows that are (or point through
    `prefix` to) objects, as SQL of one shape whatever the grants: the values of a
    `Visibility` (or of `SAMPLE`, in a query compiled once)."""
    ids = RawSQL(_JSON_IDS[connection.vendor], [objects])
    return (
        Q(**{f"{prefix}pk__in": ids})
        | Q(**{f"{prefix}namespace_id__in": _namespaces_under_json(namespaces)})
        | Q(**{f"{prefix}owner_id": owner})
    )


def namespaces_condition(principal: Principal) -> Q | None:
    """The condition, on Namespace rows, "the principal may see it" (`sees_namespace`):
    any privilege on it or above it, or a grant or an owned object under it. None when it
    sees every namespace."""
    if not principal.active:
        return Q(pk__in=[])
    if principal.superuser and not principal.narrowed_superuser():
        return None
    mine, narrowing = principal.held()
    found = None if principal.superuser else _namespace_filter(mine)
    if narrowing is not None:
        narrowed = _namespace_filter(narrowing)
        if narrowed is not None:
            found = narrowed if found is None else found & narrowed
    return found


def _namespace_filter(held: Held) -> Q | None:
    if held.catalog:
        return None
    granted = [name for name, privileges in held.namespaces.items() if privileges]
    return Q(pk__in=namespaces_under(granted, held.beneath))


def visible_namespace_names(principal: Principal, names: list[str]) -> list[str]:
    """The names among `names` the principal may see, in their order."""
    if principal.superuser and not principal.narrowed_superuser():
        return names
    return [name for name in names if principal.sees_namespace(name)]


def visible_grants(principal: Principal, queryset: QuerySet) -> QuerySet:
    """The grants of `queryset` the principal may list: its own (its user's, its groups',
    its credentials'), and every grant on what it may manage (anything under a namespace
    it manages, its objects)."""
    if not principal.active:
        return queryset.none()
    if principal.superuser:
        return queryset
    user_id = principal.user.pk
    memberships = get_user_model().groups.through.objects.filter(user_id=user_id)
    mine, _ = principal.held()
    if MANAGE in mine.catalog:
        return queryset
    found = (
        Q(user_id=user_id)
        | Q(group_id__in=memberships.values("group_id"))
        | Q(client__user_id=user_id)
        | Q(object_id__in=sorted(mine.objects_with(MANAGE)))
        | Q(object__owner_id=user_id)
    )
    for name in mine.namespaces_with(MANAGE):
        found |= under("namespace__name", name) | under("object__namespace__name", name)
    return queryset.filter(found)
