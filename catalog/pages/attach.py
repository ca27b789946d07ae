"""Pages that attach a table another system writes (read-only, from its folder) and detach
it again. Each calls one service function and shows its `CatalogError` beside the field it
names; detaching forgets the table and touches none of its files."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from catalog import services
from catalog.core.access import CREATE, MANAGE
from catalog.core.errors import CatalogError
from catalog.models import Attachment, Table
from catalog.pages.access import catalog_page, check, namespace_for
from catalog.pages.forms import AttachForm


@require_http_methods(["GET", "HEAD", "POST"])
@catalog_page(editors_only=True)
def attach(request: HttpRequest, namespace: str) -> HttpResponse:
    ns = namespace_for(request, namespace, CREATE)
    form = AttachForm(request.POST or None)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                table = services.attach_table(
                    namespace=ns.name, actor=request.user, **form.arguments()
                )
            except CatalogError as error:
                form.add_catalog_error(error)
            else:
                messages.success(
                    request,
                    f"Table {table} attached read-only from {table.location}; "
                    f"it reads {table.metadata_location.rsplit('/', 1)[-1]}.",
                )
                return redirect("catalog:table-detail", namespace=ns.name, name=table.name)
        status = 400
    return render(
        request,
        "catalog/attach.html",
        {
            "form": form,
            "namespace": ns,
            "attach_locations": settings.ATTACH_LOCATIONS,
            # Open the advanced options when one of them is set or wrong.
            "advanced_open": any(
                form[name].value() not in (None, "", "version") or form[name].errors
                for name in ("metadata_file_path", "table_uuid", "newest_by")
            ),
        },
        status=status,
    )


@require_http_methods(["GET", "HEAD", "POST"])
@catalog_page(editors_only=True)
def detach(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    table = get_object_or_404(
        Table.objects.select_related("namespace"), namespace__name=namespace, name=name
    )
    check(request, table, MANAGE, missing="No Table matches the given query.")
    attachment = Attachment.objects.filter(table_id=table.pk).first()
    if attachment is None:
        raise Http404(f"Table {table} is not attached: only attached tables can be detached.")
    error = None
    if request.method == "POST":
        try:
            services.detach_table(namespace=namespace, name=name, actor=request.user)
        except CatalogError as failure:
            error = failure.message
        else:
            messages.success(
                request, f"Table {table} detached. Its files in {table.location} were not touched."
            )
            return redirect("catalog:namespace-detail", namespace=namespace)
    return render(
        request,
        "catalog/table_detach.html",
        {"table": table, "namespace": table.namespace, "attachment": attachment, "error": error},
        status=400 if error else 200,
    )
