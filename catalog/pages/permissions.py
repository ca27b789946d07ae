"""The "Permissions" panel of the namespace and object pages: the owner, and every grant that
applies (on the catalog, on a namespace above, on the object itself) with where it comes
from, read by catalog.permissions as SHOW GRANTS reads it.

The panel is a section the page fills in once it has loaded (static/js/later.js, as the
maintenance section is), at its own address: the page itself costs nothing more.

Who sees what: the owners to whoever sees the page (whom to ask for access); every grant to
those who manage the namespace or object; anyone else only their own grants (their user's,
their groups', their credentials') and the privileges they hold there, as Unity Catalog
and Polaris show grants to those who manage an object. Two queries, whatever the catalog
holds: the grants that apply, and the owners."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from catalog import audit, permissions
from catalog.core.access import PRIVILEGES, READ_DATA, READ_METADATA
from catalog.models import CatalogObject, Namespace
from catalog.pages import access as page_access
from catalog.pages.access import catalog_page
from catalog.services.grants import Target

#: The most grants the panel lists (SHOW GRANTS in the console lists more).
PANEL_ROWS = 100
_KIND = {"user": "user", "group": "group", "credential": "credential"}


def panel(
    request: HttpRequest, *, namespace: Namespace | None = None, obj: CatalogObject | None = None
) -> dict[str, Any]:
    """The panel's context for a namespace's page or an object's (`obj.namespace` loaded)."""
    if obj is not None:
        target = Target("object", obj.namespace, obj)
        here = "this object"
        console = f"SHOW GRANTS ON {'VIEW' if obj.kind == 'view' else 'TABLE'} {target.label}"
    else:
        target = Target("namespace", namespace, None)
        here = "this namespace"
        console = f"SHOW GRANTS ON SCHEMA {target.label}"
    who = page_access.principal(request)
    found, more, managing = permissions.on_securable(who, target, limit=PANEL_ROWS)
    rows = sorted(permissions.owners(target) + found, key=permissions.order)
    held = who.privileges(target.securable)
    return {
        "rows": [_shown(row, here) for row in rows],
        "more": more,
        "managing": managing,
        "console": console,
        "yours": [name for name in PRIVILEGES if name in held],
        "audit_url": (
            reverse("catalog:audit") + "?" + urlencode({"object": target.label})
            if audit.may_see(who)
            else None
        ),
    }


def _shown(row: list[Any], here: str) -> dict[str, Any]:
    kind, name, privilege, securable_type, securable, granted_by, granted_at, inherited = row
    if not inherited:
        source = here
    elif securable_type == "catalog":
        source = "catalog"
    else:
        source = f"namespace {inherited}"
    return {
        "principal_type": _KIND.get(kind, kind),
        "principal": name,
        "privilege": privilege,
        "source": source,
        "granted_by": granted_by,
        "granted_at": granted_at.replace("T", " ") if granted_at else "",
    }


# -- the section, at its own address ---------------------------------------------------------


def later(namespace: str, name: str | None = None, *, kind: str = "") -> str:
    """The section's address for a page (a namespace's, or an object's of `kind`)."""
    if name is None:
        return reverse("catalog:namespace-permissions", args=[namespace])
    route = "catalog:view-permissions" if kind == "view" else "catalog:table-permissions"
    return reverse(route, args=[namespace, name])


def _section(request: HttpRequest, context: dict[str, Any]) -> HttpResponse:
    return render(request, "catalog/_permissions.html", {"permissions": context})


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def namespace_section(request: HttpRequest, namespace: str) -> HttpResponse:
    ns = page_access.namespace_for(request, namespace)
    return _section(request, panel(request, namespace=ns))


def _object(request: HttpRequest, namespace: str, name: str, kind: str, privilege: str) -> Any:
    """The object, checked as its page checks it (a hidden one is the missing one's 404)."""
    word = "View" if kind == CatalogObject.Kind.VIEW else "Table"
    missing = f"{word} does not exist: {namespace}.{name}"
    found = (
        CatalogObject.objects.select_related("namespace")
        .filter(namespace__name=namespace, name=name, kind=kind)
        .first()
    )
    if found is None:
        raise Http404(missing)
    page_access.check(request, found, privilege, missing=missing)
    return found


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def view_section(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    # A view's page needs read_data (its SQL is its data): so does its panel.
    view = _object(request, namespace, name, CatalogObject.Kind.VIEW, READ_DATA)
    return _section(request, panel(request, obj=view))


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def table_section(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    table = _object(request, namespace, name, CatalogObject.Kind.TABLE, READ_METADATA)
    return _section(request, panel(request, obj=table))
