"""Who holds what on a namespace or an object, and where each privilege comes from: the rows
SHOW GRANTS answers (refresh/console_grants.py) and the "Permissions" panel of the namespace
and object pages (catalog/pages/permissions.py) show, read here once for both.

A row is [principal_type, principal, privilege, securable_type, securable, granted_by,
granted_at, inherited_from]: `inherited_from` is "" for a grant on the securable itself,
else the namespace (or "catalog") it is held on. Owners are rows of the privilege `own`.

Cost: the grants that apply are one query (joins for the names), the owners of the
securable and of the namespaces above it one more."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import CharField, Q, QuerySet, Value
from django.db.models.functions import Cast

from catalog import access
from catalog.core.access import MANAGE, OWN, ancestors
from catalog.models import CatalogObject, Grant, Namespace

#: Column names of a row.
COLUMNS = [
    "principal_type",
    "principal",
    "privilege",
    "securable_type",
    "securable",
    "granted_by",
    "granted_at",
    "inherited_from",
]
RELATED = ("user", "group", "client", "namespace", "object__namespace", "granted_by")


def grants() -> QuerySet:
    """Grants with what their rows name loaded in the same query."""
    return Grant.objects.select_related(*RELATED)


def applying_to(target: Any) -> Q:
    """Grants on the target (a catalog.services.grants.Target), on each namespace above it
    and on the catalog."""
    found = Q(namespace__isnull=True, object__isnull=True)
    if target.namespace is not None:
        levels = ancestors(target.namespace.name)
        if target.obj is None:
            found |= Q(namespace__name__in=levels)
        else:
            found |= Q(namespace__name__in=levels) | Q(object=target.obj)
    return found


def row(grant: Grant, target: Any) -> list[Any]:
    if grant.user is not None:
        kind, name = "user", grant.user.get_username()
    elif grant.group is not None:
        kind, name = "group", grant.group.name
    else:
        kind, name = "credential", grant.client.client_id
    if grant.object is not None:
        securable_type = grant.object.kind
        securable = f"{grant.object.namespace.name}.{grant.object.name}"
    elif grant.namespace is not None:
        securable_type, securable = "namespace", grant.namespace.name
    else:
        securable_type, securable = "catalog", "catalog"
    inherited = ""
    if target is not None and grant.object is None:
        same = target.obj is None and (
            (grant.namespace is None and target.namespace is None)
            or (grant.namespace is not None and grant.namespace_id == target.namespace.pk)
        )
        inherited = "" if same else securable
    return [
        kind,
        name,
        grant.privilege,
        securable_type,
        securable,
        grant.granted_by.get_username() if grant.granted_by is not None else "",
        grant.granted_at.isoformat(timespec="seconds"),
        inherited,
    ]


def owners(target: Any) -> list[list[Any]]:
    """The owner of the target and of each namespace above it (owners hold every
    privilege), as rows of the privilege `own`: one query."""
    if target.namespace is None:
        return []
    username = f"owner__{get_user_model().USERNAME_FIELD}"
    text = CharField()
    levels = ancestors(target.namespace.name)
    found = (
        Namespace.objects.filter(name__in=levels, owner__isnull=False)
        .order_by()
        .values_list("name", username)
    )
    obj = target.obj
    if obj is not None:
        # The object's owner beside the namespaces' (a NULL name marks it).
        owner = (
            CatalogObject.objects.filter(pk=obj.pk, owner__isnull=False)
            .order_by()
            .annotate(ns=Cast(Value(None), text))
            .values_list("ns", username)
        )
        found = found.union(owner, all=True)
    rows = []
    for name, owner_name in found:
        if name is None:
            rows.append(["user", owner_name, OWN, obj.kind, target.label, "", "", ""])
            continue
        inherited = "" if obj is None and name == target.label else name
        rows.append(["user", owner_name, OWN, "namespace", name, "", "", inherited])
    return rows


def order(row: list[Any]) -> tuple:
    # Where it is held, the catalog first and the nearest last; then who and what.
    level = {"catalog": 0, "namespace": 1}.get(row[3], 2)
    depth = row[4].count(".") if row[3] == "namespace" else 0
    return (level, depth, row[0], row[1], row[2])


def on_securable(
    who: access.Principal, target: Any, *, limit: int, rows: QuerySet | None = None
) -> tuple[list[list[Any]], bool, bool]:
    """What applies to `target` as `who` may see it: (rows in order, whether more grants
    than `limit` were found, whether `who` manages the target). One who manages it sees
    every grant and the owners; anyone else sees only the grants they may list
    (`access.visible_grants`: their own, their groups', their credentials'), as Unity
    Catalog and Polaris show grants to those who manage an object. `rows` narrows the
    grants further (SHOW GRANTS ... TO a principal)."""
    rows = grants() if rows is None else rows
    rows = rows.filter(applying_to(target))
    managing = access.may(who, MANAGE, target.securable)
    if not managing:
        rows = access.visible_grants(who, rows)
    found = list(rows.order_by("id")[: limit + 1])
    shown = [row(grant, target) for grant in found[:limit]]
    return shown, len(found) > limit, managing
