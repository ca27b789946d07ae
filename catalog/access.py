"""The one place that decides "may this principal do this on that": `may(principal,
privilege, securable)`, and the list filters built from the same grants.

A principal is a user (with the groups they belong to), or an engine credential acting for
its user; a narrowed credential holds only what both its own grants and its user's allow.
Superusers hold everything and cost no query; inactive users hold nothing. Staff users
(the Django admin's) read the whole catalog, as they did before grants.

Cost: a principal's grants are read in one query, the first time a request asks anything
(`Principal.held`): the grants of the user, of their groups and of the credential, the
namespaces the user owns, the namespaces of the objects the user owns, and whether the
credential is narrowed, as one UNION ALL over indexed columns. Every later check in the
request is answered in memory by walking the namespace's levels (`core.access.Held`). The
principal lives as long as the request (`principal_of`), so a revoked grant is gone at the
next request. An object's owner is read from its own row, which the caller has loaded."""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce
from operator import or_
from typing import Any

from django.contrib.auth import get_user_model
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
        if not self.active:
            return False
        if self.superuser and not self.narrowed_superuser():
            return True
        mine, narrowing = self.held()
        if self.superuser:
            return narrowing is None or not narrowing.is_empty()
        return not mine.is_empty() and (narrowing is None or not narrowing.is_empty())

    def holds_any(self, privileges: tuple[str, ...]) -> bool:
        """Whether the principal holds one of `privileges` anywhere (owning counts)."""
        if not self.active:
            return False
        if self.superuser and not self.narrowed_superuser():
            return True
        mine, narrowing = self.held()
        return (self.superuser or mine.holds_any(privileges)) and (
            narrowing is None or narrowing.holds_any(privileges)
        )

    def sees_namespace(self, name: str) -> bool:
        """A namespace is visible to whoever holds anything on it, above it or under it."""
        if not self.active:
            return False
        if self.superuser and not self.narrowed_superuser():
            return True
        mine, narrowing = self.held()
        if self.superuser:
            return narrowing is None or narrowing.sees_namespace(name)
        return mine.sees_namespace(name) and (narrowing is None or narrowing.sees_namespace(name))


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


def _load(user: Any, client: CatalogClient | None) -> tuple[Held, Held | None]:
    client_id = client.pk if client is not None else None
    mine: list[tuple] = []
    narrowing: list[tuple] = []
    narrowed = False
    for privilege, ns_name, object_id, object_ns, from_client in _rows(user.pk, client_id):
        if privilege == _NARROWED:
            narrowed = True
        elif from_client:
            narrowing.append((privilege, ns_name, object_id, object_ns))
        else:
            mine.append((privilege, ns_name, object_id, object_ns))
    if getattr(user, "is_staff", False):
        mine.append((READ_DATA, None, None, None))
    return Held.from_rows(mine), Held.from_rows(narrowing) if narrowed else None


# -- one object's read, inside another query ------------------------------------------------


def may_read_condition(namespace_name: str, user_id: int, client_id: int) -> Q:
    """`may(principal, READ_DATA, table)` for the table row of the query that carries it
    (OuterRef("pk"), its owner_id), as one SQL condition, so that load-table needs no query
    of its own for the grant. It answers true only where `may` does: a user's or group's
    grant implying read_data on the catalog, on the table or on its namespace or one above
    it; owning the table or one of those namespaces; and never for a narrowed credential
    (which `may` then decides, with a query). False means "ask `may`"."""
    memberships = get_user_model().groups.through.objects.filter(user_id=user_id)
    # The namespace and every one above it: a name equal to it, or a prefix of it ending at
    # a level (compared as text, never with LIKE, whose wildcards a name may hold).
    above = Namespace.objects.annotate(
        head=Substr(Value(namespace_name), 1, Length("name") + 1)
    ).filter(Q(name=namespace_name) | Q(head=Concat("name", Value("."), output_field=CharField())))
    readers = [p for p, implied in IMPLIES.items() if READ_DATA in implied and p != OWN]
    granted = Grant.objects.filter(
        Q(user_id=user_id) | Q(group_id__in=memberships.values("group_id")),
        Q(namespace__isnull=True, object__isnull=True)
        | Q(object_id=OuterRef("pk"))
        | Q(namespace_id__in=above.values("pk")),
        privilege__in=readers,
    )
    narrowed = CatalogClient.objects.filter(pk=client_id, narrowed=True)
    return (
        Q(Exists(granted)) | Q(Exists(above.filter(owner_id=user_id))) | Q(owner_id=user_id)
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
        names = reduce(or_, (under("name", name) for name in sorted(granted)))
        found |= Q(**{f"{prefix}namespace_id__in": Namespace.objects.filter(names).values("pk")})
    if owner_id is not None:
        found |= Q(**{f"{prefix}owner_id": owner_id})
    return found


def under(field: str, name: str) -> Q:
    """`field` (a namespace's name) is `name` or a namespace under it. LIKE (startswith)
    lets an index narrow the rows, but SQLite's LIKE ignores case ("Finance.x" would pass
    for "finance"): the prefix is then compared exactly, as `may` compares it."""
    prefix = name + "."
    return Q(**{field: name}) | (
        Q(**{f"{field}__startswith": prefix})
        & Q(Exact(Substr(F(field), 1, len(prefix)), Value(prefix, output_field=CharField())))
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
    granted = sorted(name for name, privileges in held.namespaces.items() if privileges)
    found = Q(name__in=sorted(held.beneath | set(granted)))
    for name in granted:
        found |= under("name", name)
    return found


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
