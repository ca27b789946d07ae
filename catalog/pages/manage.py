"""Pages for what the API could do and the pages could not: rename a view, add a dialect to
a view, register a view or table from an existing metadata file. Each calls one service
function and shows its `CatalogError` beside the field it names."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from catalog import checks, services
from catalog.core.access import CREATE, MANAGE
from catalog.core.errors import CatalogError
from catalog.pages.access import catalog_page, namespace_for
from catalog.pages.forms import AddDialectForm, RegisterForm, RenameForm
from catalog.pages.sql_views import get_view
from catalog.services.kernel import VIEW


@require_http_methods(["GET", "HEAD", "POST"])
@catalog_page(editors_only=True)
def view_rename(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    view = get_view(request, namespace, name, MANAGE)
    form = RenameForm(
        request.POST or None,
        initial={"new_namespace": view.namespace.name, "new_name": view.name},
    )
    if request.method == "POST" and form.is_valid():
        try:
            # CREATE in another namespace it moves to (as the API asks: catalog.checks).
            checks.rename(
                request, VIEW, view.namespace.name, view.name,
                form.cleaned_data["new_namespace"].strip(),
            )  # fmt: skip
            renamed = services.rename_view(
                namespace=view.namespace.name,
                name=view.name,
                new_namespace=form.cleaned_data["new_namespace"].strip(),
                new_name=form.cleaned_data["new_name"].strip(),
                actor=request.user,
            )
        except CatalogError as error:
            form.add_catalog_error(error)
        else:
            messages.success(request, f"View {view} renamed to {renamed}.")
            return redirect(
                "catalog:view-detail", namespace=renamed.namespace.name, name=renamed.name
            )
    return render(
        request,
        "catalog/view_rename.html",
        {"form": form, "view": view, "namespace": view.namespace},
    )


@require_http_methods(["GET", "HEAD", "POST"])
@catalog_page(editors_only=True)
def view_add_dialect(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    view = get_view(request, namespace, name, MANAGE)
    current = view.current_version()
    present = sorted(r.dialect for r in current.representations.all()) if current else []
    form = AddDialectForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            view = services.add_view_representation(
                namespace=view.namespace.name,
                name=view.name,
                sql=form.cleaned_data["sql"],
                dialect=form.cleaned_data["dialect"],
                actor=request.user,
            )
        except CatalogError as error:
            form.add_catalog_error(error)
        else:
            messages.success(
                request,
                f"{form.cleaned_data['dialect']} SQL added to {view}: "
                f"now version {view.current_version_id}.",
            )
            return redirect("catalog:view-detail", namespace=view.namespace.name, name=view.name)
    return render(
        request,
        "catalog/view_add_dialect.html",
        {"form": form, "view": view, "namespace": view.namespace, "present": present},
    )


@require_http_methods(["GET", "HEAD", "POST"])
@catalog_page(editors_only=True)
def register(request: HttpRequest, namespace: str) -> HttpResponse:
    ns = namespace_for(request, namespace, CREATE)
    form = RegisterForm(request.POST or None, initial={"kind": request.GET.get("kind", "view")})
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        arguments = {
            "namespace": ns.name,
            "name": data["name"].strip(),
            "metadata_location": data["metadata_location"].strip(),
            "actor": request.user,
        }
        try:
            if data["kind"] == "table":
                obj = services.register_table(**arguments).obj
                route = "catalog:table-detail"
            else:
                obj = services.register_view(**arguments)
                route = "catalog:view-detail"
        except CatalogError as error:
            form.add_catalog_error(error)
        else:
            messages.success(request, f"{data['kind'].capitalize()} {obj} registered.")
            return redirect(route, namespace=ns.name, name=obj.name)
    return render(request, "catalog/register.html", {"form": form, "namespace": ns})
