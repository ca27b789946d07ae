"""The two roles the console's changes and the materialized tables' API still ask about,
answered from grants on the catalog (catalog.access): a viewer reads the whole catalog
(read_data on it, which the viewer group holds), an editor changes it (manage on it, which
the editor group holds). Superusers hold everything; staff users only what they are
granted. `may_read` is a query's read decision, by grants."""

from __future__ import annotations

from collections.abc import Iterable
from functools import reduce
from operator import or_
from typing import Any

from django.db.models import Q

from catalog import access
from catalog.core.access import MANAGE, READ_DATA
from catalog.core.errors import Forbidden
from catalog.models import CatalogObject

#: The groups that held these roles before grants; they hold the grants now (migration
#: 0017, and catalog.apps makes them again, with their grants, when a database is new).
VIEWER = "viewer"
EDITOR = "editor"
ROLE_GRANTS = {VIEWER: READ_DATA, EDITOR: MANAGE}


def can_edit(user: Any) -> bool:
    return access.may(access.for_user(user), MANAGE, access.CATALOG)


def can_view(user: Any) -> bool:
    return access.may(access.for_user(user), READ_DATA, access.CATALOG)


def may_read(user: Any, objects: Iterable[tuple[str, ...]]) -> None:
    """Forbidden unless `user` may read every one of `objects`: the tables and views a
    statement reads, as Spark's analyzed plan names them (namespace levels..., name; a view
    as itself, not the tables its SQL reads). The one place that decides what a query may
    read: read_data on each (catalog.access), with one query for the objects' rows and one
    for the user's grants."""
    principal = access.for_user(user)
    wanted = [parts for parts in objects if len(parts) > 1]
    if not wanted:
        if not principal.holds_anything():
            raise Forbidden("Reading the catalog needs a grant")
        return
    refused = refused_reads(principal, wanted)
    if refused:
        raise Forbidden(f"Reading {', '.join(refused)} needs the read_data privilege")


def refused_reads(
    principal: access.Principal,
    objects: Iterable[tuple[str, ...]],
    privilege: str = READ_DATA,
) -> list[str]:
    """The names ("ns.name") among `objects` (namespace levels..., name) the principal may
    not read (read_data; or, given `privilege`, on which it lacks that one: READ_METADATA
    for those it may not even see), in their order: none without a query when it holds it
    on the whole catalog, else one query for the objects' rows (an object that is not
    there is judged by its namespace's grants)."""
    wanted = [(".".join(parts[:-1]), parts[-1]) for parts in objects if len(parts) > 1]
    if not wanted or access.may(principal, privilege, access.CATALOG):
        return []
    rows = CatalogObject.objects.select_related("namespace").filter(
        reduce(or_, (Q(namespace__name=namespace, name=name) for namespace, name in wanted))
    )
    found = {(row.namespace.name, row.name): row for row in rows}
    refused = []
    for namespace, name in wanted:
        row = found.get((namespace, name))
        securable = access.of_object(row) if row is not None else access.namespace(namespace)
        qualified = f"{namespace}.{name}"
        if privilege not in principal.privileges(securable) and qualified not in refused:
            refused.append(qualified)
    return refused
