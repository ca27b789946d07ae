"""What the Iceberg REST endpoints and the API ask `catalog.access` before they act.

What a principal may not see answers exactly as what does not exist (the same exception,
so the same status and body); what it may see but not change is a 403 naming the privilege
it lacks."""

from __future__ import annotations

from django.http import HttpRequest

from catalog import access, access_events, selectors
from catalog.core.access import CREATE, MANAGE, READ_METADATA
from catalog.core.errors import Forbidden
from catalog.core.inputs import check_namespace_name, check_property_changes
from catalog.models import CatalogObject
from catalog.services import kernel
from catalog.services.namespaces import missing_parent


def principal(request: HttpRequest) -> access.Principal:
    return access.principal_of(request)


def refused(who: access.Principal, privilege: str, what: str) -> Forbidden:
    """The 403 of one who may see `what` but lacks `privilege` on it."""
    name = getattr(who.user, "username", "?")
    return Forbidden(f"Forbidden: {name} lacks the {privilege} privilege on {what}")


def namespace(request: HttpRequest, name: str, privilege: str | None = None) -> None:
    namespace_of(principal(request), name, privilege)


def namespace_of(who: access.Principal, name: str, privilege: str | None = None) -> None:
    """The namespace must be visible (else: as if it did not exist) and, when `privilege`
    is given, hold it there (inherited or its own: READ_METADATA then means reading
    everything in it, not only seeing it)."""
    if not who.sees_namespace(name):
        raise access_events.hidden(selectors.no_such_namespace(name))
    if privilege is not None and privilege not in who.privileges(access.namespace(name)):
        raise refused(who, privilege, f"namespace {name}")


def create_in(request: HttpRequest, parent: str | None) -> None:
    """CREATE in a namespace (the catalog for `None`): the namespace must be visible."""
    who = principal(request)
    if parent is None:
        if not access.may(who, CREATE, access.CATALOG):
            raise refused(who, CREATE, "the catalog")
        return
    namespace(request, parent, CREATE)


def allowed(request: HttpRequest, obj: CatalogObject, privilege: str) -> bool:
    return access.may(principal(request), privilege, access.of_object(obj))


def visible(request: HttpRequest, obj: CatalogObject) -> bool:
    return allowed(request, obj, READ_METADATA)


def obj(
    request: HttpRequest, kind: kernel.Kind, namespace_name: str, name: str, privilege: str
) -> CatalogObject:
    """The object, if the principal may see it (else the missing object's error) and holds
    `privilege` on it (else 403)."""
    found = kind.get(namespace_name, name)
    check(request, found, privilege, kind=kind)
    return found


def check(request: HttpRequest, found: CatalogObject, privilege: str, *, kind: kernel.Kind) -> None:
    who = principal(request)
    held = who.privileges(access.of_object(found))
    if READ_METADATA not in held:
        raise access_events.hidden(kind.missing(found.namespace.name, found.name))
    if privilege not in held:
        raise refused(who, privilege, f"{kind.name} {found.namespace.name}.{found.name}")


def create_namespace(request: HttpRequest, levels: object, properties: object) -> None:
    """CREATE in the new namespace's parent (the catalog's for a top-level one). What the
    service checks before it looks for the parent comes first, so that a parent the
    principal may not see is answered as the service answers a missing one."""
    name = check_namespace_name(levels)  # type: ignore[arg-type]
    check_property_changes(properties, None)  # type: ignore[arg-type]
    parent = name.rpartition(".")[0]
    if parent and not principal(request).sees_namespace(parent):
        raise access_events.hidden(missing_parent(name, parent))
    create_in(request, parent or None)


def rename(
    request: HttpRequest, kind: kernel.Kind, namespace_name: str, name: str, target: str
) -> None:
    """MANAGE on the object, and CREATE in the destination when it moves to another
    namespace."""
    obj(request, kind, namespace_name, name, MANAGE)
    if target != namespace_name:
        namespace(request, target, CREATE)
