"""Namespace pages: the list of namespaces (and creating one), a namespace's page (its views
and tables, a page of each), editing its properties, dropping it (after a confirmation; a
namespace that holds objects or child namespaces is refused), and bringing back what was
dropped from it with its files kept."""

from __future__ import annotations

from django.contrib import messages
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from catalog import access, checks, selectors, services
from catalog.core.access import CREATE, MANAGE, READ_METADATA
from catalog.core.errors import CatalogError
from catalog.models import CatalogObject, Namespace
from catalog.pages import access as page_access
from catalog.pages import permissions
from catalog.pages.access import catalog_page, namespace_for
from catalog.pages.formatting import linker, minute
from catalog.pages.forms import NamespaceForm, NamespacePropertiesForm
from catalog.pages.paging import page_of
from catalog.pages.search import search_page


@require_http_methods(["GET", "HEAD", "POST"])
@catalog_page(own_nul_message=True)  # ?q= is the search page's (search_page)
def namespace_list(request: HttpRequest) -> HttpResponse:
    form = NamespaceForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            checks.create_namespace(request, form.cleaned_data["name"], {})
            namespace = services.create_namespace(
                name=form.cleaned_data["name"], actor=request.user
            )
        except CatalogError as error:
            form.add_catalog_error(error)
        else:
            messages.success(request, f"Namespace {namespace.name} created.")
            return redirect("catalog:namespace-detail", namespace=namespace.name)
    query = request.GET.get("q", "").strip()
    if query and request.method != "POST":
        # Old links to /?q=... keep working: they are the search page.
        return search_page(request, query)
    # The counts are kept on each namespace's row (catalog.counts): nothing is counted here.
    listed = Namespace.objects.order_by("name").only(
        "name", "view_total", "table_total", "materialized_total"
    )
    shown = page_access.visible_namespaces(request)
    if shown is not None:
        listed = listed.filter(shown)
    page = page_of(request, listed)
    page.object_list = list(page.object_list)
    if shown is not None:
        _count_visible(request, page.object_list)
    link = linker()
    for ns in page.object_list:
        ns.view_count = ns.view_total
        ns.plain_table_count = ns.table_total - ns.materialized_total
        ns.materialized_count = ns.materialized_total
        ns.url = link("catalog:namespace-detail", ns.name)
        ns.mt_url = link("refresh:mt-list", ns.name)
    # The late and failing counts come from refresh's template tag (refresh/templatetags).
    context = {"form": form, "page": page, "sees_catalog": page_access.sees_catalog(request)}
    return render(request, "catalog/namespace_list.html", context)


def _count_visible(request: HttpRequest, namespaces: list[Namespace]) -> None:
    """The kept counts of a page's namespaces, recounted where the user sees only some of
    what a namespace holds (a grant on one object in it, say): in one query for the page,
    of the objects they may see."""
    who = page_access.principal(request)
    partial = {
        ns.pk: ns
        for ns in namespaces
        if READ_METADATA not in who.privileges(access.namespace(ns.name))
    }
    if not partial:
        return
    for ns in partial.values():
        ns.view_total = ns.table_total = ns.materialized_total = 0
    visible = page_access.visible(request) or Q()
    rows = (
        CatalogObject.objects.filter(visible, namespace_id__in=list(partial))
        .order_by()
        .values("namespace_id", "kind")
        .annotate(total=Count("pk"), materialized=Count("table__materialized", distinct=True))
    )
    for row in rows:
        ns = partial[row["namespace_id"]]
        if row["kind"] == CatalogObject.Kind.VIEW:
            ns.view_total = row["total"]
        else:
            ns.table_total, ns.materialized_total = row["total"], row["materialized"]


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def namespace_detail(request: HttpRequest, namespace: str) -> HttpResponse:
    ns = namespace_for(request, namespace)
    link = linker()
    visible = page_access.visible(request, namespace=ns.name)
    views = page_of(request, selectors.namespace_views(ns, visible), "views_page")
    views.object_list = [
        {
            "name": view["name"],
            "url": link("catalog:view-detail", ns.name, view["name"]),
            "comment": selectors.comment_of(view["properties"]),
            "current_version_id": view["current_version_id"],
            "updated": minute(view["updated_at"]),
        }
        for view in views.object_list
    ]
    tables = page_of(request, selectors.namespace_tables(ns, visible), "tables_page")
    tables.object_list = [
        {
            **table,
            "url": link("catalog:table-detail", ns.name, table["name"]),
            "mt_url": (
                link("refresh:mt-detail", ns.name, table["name"])
                if table["materialized_id"] is not None
                else None
            ),
            "updated": minute(table["updated_at"]),
        }
        for table in tables.object_list
    ]
    context = {
        "namespace": ns,
        "views": views,
        "tables": tables,
        "properties": sorted(ns.properties.items()),
        "can_edit": CREATE in page_access.principal(request).privileges(access.namespace(ns.name)),
        "permissions_url": permissions.later(ns.name),
    }
    return render(request, "catalog/namespace_detail.html", context)


@require_http_methods(["GET", "HEAD", "POST"])
@catalog_page(editors_only=True)
def namespace_properties(request: HttpRequest, namespace: str) -> HttpResponse:
    ns = namespace_for(request, namespace, MANAGE)
    form = NamespacePropertiesForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        updates, removals = form.cleaned_data["updates"], form.cleaned_data["removals"]
        try:
            services.update_namespace_properties(
                name=ns.name, updates=updates, removals=removals, actor=request.user
            )
        except CatalogError as error:
            form.add_catalog_error(error)
        else:
            messages.success(request, f"Properties of namespace {ns.name} updated.")
            return redirect("catalog:namespace-detail", namespace=ns.name)
    context = {"form": form, "namespace": ns, "properties": sorted(ns.properties.items())}
    return render(request, "catalog/namespace_properties.html", context)


@require_http_methods(["GET", "HEAD", "POST"])
@catalog_page(editors_only=True)
def namespace_drop(request: HttpRequest, namespace: str) -> HttpResponse:
    ns = namespace_for(request, namespace, MANAGE)
    error_message = None
    if request.method == "POST":
        try:
            services.drop_namespace(name=ns.name, actor=request.user)
        except CatalogError as error:
            error_message = error.message
        else:
            messages.success(request, f"Namespace {ns.name} dropped.")
            return redirect("catalog:namespace-list")
    context = {
        "namespace": ns,
        "error": error_message,
        "object_count": CatalogObject.objects.filter(namespace=ns).count(),
        "child_count": Namespace.objects.filter(name__startswith=f"{ns.name}.").count(),
    }
    return render(
        request, "catalog/namespace_drop.html", context, status=409 if error_message else 200
    )


@require_http_methods(["GET", "HEAD", "POST"])
@catalog_page()
def namespace_dropped(request: HttpRequest, namespace: str) -> HttpResponse:
    """Tables and views dropped from the namespace with their files kept; an editor's POST
    (`uuid`, optional `name`) brings one back (services.restore_dropped): the list needs
    read_metadata on the namespace (everything in it), bringing back needs create."""
    ns = namespace_for(request, namespace, CREATE if request.method == "POST" else READ_METADATA)
    error_message = None
    if request.method == "POST":
        name = request.POST.get("name", "").strip() or None
        try:
            obj = services.restore_dropped(
                namespace=ns.name, uuid=request.POST.get("uuid", ""), name=name, actor=request.user
            )
        except CatalogError as error:
            error_message = error.message
        else:
            messages.success(request, f"{obj.kind.capitalize()} {obj} restored.")
            page = "catalog:table-detail" if obj.kind == "table" else "catalog:view-detail"
            return redirect(page, namespace=ns.name, name=obj.name)
    context = {"namespace": ns, "dropped": selectors.dropped(ns.name), "error": error_message}
    return render(
        request,
        "catalog/namespace_dropped.html",
        context,
        status=409 if error_message else 200,
    )
