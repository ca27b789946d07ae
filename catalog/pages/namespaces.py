"""Namespace pages beyond the list and the detail: edit its properties, drop it (after a
confirmation; a namespace that holds objects or child namespaces is refused), and bring
back what was dropped from it with its files kept."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from catalog import selectors, services
from catalog.core.access import CREATE, MANAGE, READ_METADATA
from catalog.core.errors import CatalogError
from catalog.models import CatalogObject, Namespace
from catalog.pages.access import namespace_for
from catalog.pages.forms import NamespacePropertiesForm
from catalog.pages.views import catalog_page


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
