"""What each protocol endpoint asks `catalog.access` before it acts.

What a principal may not see answers exactly as what does not exist (the same exception,
so the same status and body); what it may see but not change is a 403 naming the privilege
it lacks."""

from __future__ import annotations

from django.http import HttpRequest

from catalog import access, selectors
from catalog.core.access import CREATE, READ_METADATA
from catalog.iceberg_rest.errors import Forbidden
from catalog.models import CatalogObject
from catalog.services import kernel


def principal(request: HttpRequest) -> access.Principal:
    return access.principal_of(request)


def _refuse(who: access.Principal, privilege: str, what: str) -> Forbidden:
    name = getattr(who.user, "username", "?")
    return Forbidden(f"Forbidden: {name} lacks the {privilege} privilege on {what}")


def namespace(request: HttpRequest, name: str, privilege: str = READ_METADATA) -> None:
    """The namespace must be visible (else: as if it did not exist) and allow `privilege`."""
    who = principal(request)
    if not who.sees_namespace(name):
        raise selectors.no_such_namespace(name)
    if privilege != READ_METADATA and not access.may(who, privilege, access.namespace(name)):
        raise _refuse(who, privilege, f"namespace {name}")


def create_in(request: HttpRequest, parent: str | None) -> None:
    """CREATE in a namespace (the catalog for `None`): the namespace must be visible."""
    who = principal(request)
    if parent is None:
        if not access.may(who, CREATE, access.CATALOG):
            raise _refuse(who, CREATE, "the catalog")
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
        raise kind.missing(found.namespace.name, found.name)
    if privilege not in held:
        raise _refuse(who, privilege, f"{kind.name} {found.namespace.name}.{found.name}")
