"""The lineage pages: what reads what upstream and downstream of an object, and the readers
of one, as the principal may see them."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_http_methods

from catalog.core.access import READ_METADATA
from catalog.core.errors import CatalogError
from catalog.core.inputs import whole_number
from catalog.models import CatalogObject
from catalog.pages import access as page_access
from catalog.pages.access import catalog_page
from refresh import lineage
from refresh.pages.common import duration_text


def _seen(request: HttpRequest, namespace: str, name: str) -> CatalogObject:
    """The table or view named, if the user may read its metadata (else a 404)."""
    missing = f"Table or view does not exist: {namespace}.{name}"
    held = CatalogObject.objects.select_related("namespace")
    found = held.filter(namespace__name=namespace, name=name).first()
    if found is None:
        raise Http404(missing)
    page_access.check(request, found, READ_METADATA, missing=missing)
    return found


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def lineage_page(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    """What an object reads and what reads it, drawn as a graph (static/js/lineage.js): of
    the objects the user may see (a hidden one, and its edges, are left out)."""
    _seen(request, namespace, name)
    try:
        graph = lineage.lineage(
            namespace,
            name,
            depth=request.GET.get("depth") or 10,
            principal=page_access.principal(request),
        )
    except CatalogError as error:
        raise Http404(error.message) from error
    focus = next(n for n in graph["nodes"] if n["focus"])
    for node in graph["nodes"]:
        if node.get("lag_seconds") is not None:
            node["lag_text"] = duration_text(node["lag_seconds"])
    nodes = sorted(graph["nodes"], key=lambda n: (not n["focus"], n["kind"], n["id"]))
    context = {
        "graph": graph,
        "focus": focus,
        "nodes": nodes,
        "namespace_name": namespace,
        "name": name,
        "upstream": [e["source"] for e in graph["edges"] if e["target"] == focus["id"]],
        "downstream": [e["target"] for e in graph["edges"] if e["source"] == focus["id"]],
        "cut": [n for n in nodes if n.get("more_readers") or n.get("more_sources")],
    }
    return render(request, "refresh/lineage.html", context)


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def lineage_readers_page(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    """What reads an object, a page at a time (the lineage draws lineage.FANOUT of them):
    of the objects the user may see."""
    found = _seen(request, namespace, name)
    page = whole_number(request.GET.get("page", "").strip(), digits=6) or 1
    try:
        listed = lineage.readers(
            namespace, name, page=page, principal=page_access.principal(request)
        )
    except CatalogError as error:
        raise Http404(error.message) from error
    context = {
        "namespace_name": namespace,
        "name": name,
        "focus_url": lineage.url_of(
            lineage.VIEW if found.kind == CatalogObject.Kind.VIEW else lineage.TABLE,
            namespace,
            name,
        ),
        "listed": listed,
        "first": (listed["page"] - 1) * lineage.READERS_PAGE + 1,
        "per_page": lineage.READERS_PAGE,
    }
    return render(request, "refresh/lineage_readers.html", context)
