"""Who may see the catalog's pages: the decorator every page view wears, and what a page
asks `catalog.access` about the namespace or object it shows or changes.

A namespace or object the user may not see is answered exactly as a missing one (the same
404 page); one they may see but not change (or read the rows of) is a 403 naming the
privilege they lack."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from catalog import access, access_events
from catalog.core.access import CREATE, MANAGE, READ_METADATA, WRITE_DATA
from catalog.models import CatalogObject, Namespace
from infra.middleware import has_nul

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
NUL_MESSAGE = (
    "NUL characters are not allowed in addresses or their parameters: no name or value in "
    "the catalog can hold one."
)
#: What lets one change something somewhere: a page that only changes things is closed to
#: whoever holds none of these anywhere, before its own check of the object.
CHANGES = (CREATE, WRITE_DATA, MANAGE)


def catalog_page(*, editors_only: bool = False, own_nul_message: bool = False) -> Callable:
    """Anonymous users go to the login page; users holding no privilege anywhere get 403,
    and so do users who may change nothing anywhere on a change page or with a POST (each
    view then checks the namespace or object it changes: `namespace_for`, `check`); a NUL
    in the address or its parameters is a 400 page, unless the view says so in its own
    words (`own_nul_message`: the search form shows its problem beside the text)."""

    def decorator(view_func: Callable) -> Callable:
        @wraps(view_func)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            user = request.user
            if not user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            who = principal(request)
            if not who.holds_anything():
                raise PermissionDenied("You have no role in this catalog.")
            if (editors_only or request.method not in SAFE_METHODS) and not who.holds_any(CHANGES):
                raise PermissionDenied("You hold no privilege to change the catalog.")
            if not own_nul_message and has_nul(request):
                # PostgreSQL refuses a NUL in any text value: a name or a parameter that
                # holds one would reach a query and fail it (a 500). No name can hold one.
                return render(request, "400.html", {"message": NUL_MESSAGE}, status=400)
            return view_func(request, *args, **kwargs)

        return wrapper

    return decorator


def principal(request: HttpRequest) -> access.Principal:
    return access.principal_of(request)


def _refused(request: HttpRequest, privilege: str, what: str) -> PermissionDenied:
    name = getattr(request.user, "username", "?")
    return PermissionDenied(f"{name} lacks the {privilege} privilege on {what}.")


def namespace_for(request: HttpRequest, name: str, privilege: str | None = None) -> Namespace:
    """The namespace, when the user may see it (else the missing namespace's 404) and,
    given `privilege`, holds it there (else 403)."""
    who = principal(request)
    if not who.sees_namespace(name):
        raise access_events.hidden(Http404(f"Namespace does not exist: {name}"))
    found = Namespace.objects.filter(name=name).first()
    if found is None:
        raise Http404(f"Namespace does not exist: {name}")
    if privilege is not None and privilege not in who.privileges(access.namespace(name)):
        raise _refused(request, privilege, f"namespace {name}")
    return found


def check(request: HttpRequest, obj: CatalogObject, privilege: str, *, missing: str) -> None:
    """The user must see `obj` (else Http404(`missing`), the message its missing twin
    gets) and hold `privilege` on it (else 403). `obj.namespace` is loaded."""
    held = principal(request).privileges(access.of_object(obj))
    if READ_METADATA not in held:
        raise access_events.hidden(Http404(missing))
    if privilege not in held:
        raise _refused(request, privilege, f"{obj.namespace.name}.{obj.name}")


def holds(request: HttpRequest, obj: CatalogObject, privilege: str) -> bool:
    return privilege in principal(request).privileges(access.of_object(obj))


def sees_catalog(request: HttpRequest) -> bool:
    """Whether the user sees every object (read_metadata on the whole catalog): the pages
    that list all tables at once (monitoring) are for them."""
    return READ_METADATA in principal(request).privileges(access.CATALOG)


def visible(request: HttpRequest, privilege: str = READ_METADATA, **kwargs: Any) -> Q | None:
    """`access.objects_condition` for the request's user."""
    return access.objects_condition(principal(request), privilege, **kwargs)


def visible_namespaces(request: HttpRequest) -> Q | None:
    return access.namespaces_condition(principal(request))
