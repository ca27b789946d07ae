"""A file becomes a table, in two steps on a namespace's pages.

1. `upload`: the file is streamed to disk (catalog.uploads), checked, and its first block
   read for the columns and types it would get and its first rows; the file is kept under
   a random name and the page goes on to the review.
2. `upload_review`: shows what step 1 recorded (never reading the file again on GET);
   "Create table" (or "Append rows") writes it through the service; "Discard" deletes it.

static/js/upload.js sends step 1 with XMLHttpRequest to show the upload's progress; without
JavaScript the form posts as any other."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from catalog import access_events, services, uploads
from catalog.core.access import CREATE, READ_METADATA, WRITE_DATA
from catalog.core.errors import CatalogError, http_status
from catalog.models import Namespace, Table
from catalog.pages.access import catalog_page, check, holds, namespace_for
from catalog.pages.forms import UploadForm, UploadTargetForm
from catalog.services.kernel import TABLE


def _upload_page(
    request: HttpRequest, ns: Namespace, form: UploadForm, *, status: int = 200
) -> HttpResponse:
    context = {"namespace": ns, "form": form, "max_bytes": uploads.upload_limit()}
    return render(request, "catalog/upload.html", context, status=status)


@require_http_methods(["GET", "HEAD", "POST"])
@catalog_page(editors_only=True)
def upload(request: HttpRequest, namespace: str) -> HttpResponse:
    ns = namespace_for(request, namespace)
    if request.method != "POST":
        return _upload_page(request, ns, UploadForm(initial={"mode": "create"}))
    form = UploadForm(request.POST, request.FILES)  # reads the upload, which may be refused
    refused = uploads.refusal(request)
    if refused is not None:
        form.is_valid()
        form.errors.clear()
        form.add_catalog_error(refused)
        return _upload_page(request, ns, form, status=413)
    if not form.is_valid():
        return _upload_page(request, ns, form, status=400)
    staged_file = form.cleaned_data["file"]
    data = form.cleaned_data
    uploads.discard_old()
    try:
        _may_write(request, ns, data["table"], data["mode"])
        asked = services.UploadRequest(
            namespace=ns.name,
            name=data["table"],
            path=staged_file.temporary_file_path(),
            filename=staged_file.name,
            format=data["format"] or None,
            mode=data["mode"],
        )
        preview = services.inspect_upload(upload=asked)
    except CatalogError as error:
        form.add_catalog_error(error)
        return _upload_page(request, ns, form, status=http_status(error))
    staged = uploads.Staged(
        token=staged_file.keep(),
        user_id=request.user.pk,
        namespace=ns.name,
        filename=staged_file.name or "",
        size=staged_file.size,
        table=data["table"],
        mode=data["mode"],
        format=preview.format,
        preview=preview.as_dict(),
    )
    staged.save()
    return redirect("catalog:upload-review", namespace=ns.name, token=staged.token)


def _may_write(request: HttpRequest, ns: Namespace, table: str, mode: str) -> None:
    """As the API asks: write_data on the table appended to, create in the namespace for a
    new one. A table the user may not see is, for an append, a missing one: the same error
    shown on the form, in the same words (the refusal is recorded as the hidden one's)."""
    if mode != "append":
        namespace_for(request, ns.name, CREATE)
        return
    found = Table.objects.select_related("namespace").filter(namespace=ns, name=table).first()
    if found is None or not holds(request, found, READ_METADATA):
        missing = TABLE.missing(ns.name, table)
        if found is not None:
            access_events.refused(request, access_events.hidden(missing), 404, "page")
        raise missing
    check(request, found, WRITE_DATA, missing=f"Table does not exist: {ns.name}.{table}")


def _staged(request: HttpRequest, ns: Namespace, token: str) -> uploads.Staged:
    staged = uploads.Staged.load(token, user=request.user, namespace=ns.name)
    if staged is None:
        raise Http404("No such upload: it was written, discarded, or kept too long.")
    return staged


def _review_page(
    request: HttpRequest,
    ns: Namespace,
    staged: uploads.Staged,
    form: UploadTargetForm,
    *,
    status: int = 200,
) -> HttpResponse:
    context = {"namespace": ns, "staged": staged, "form": form, "preview": staged.preview}
    return render(request, "catalog/upload_review.html", context, status=status)


@require_http_methods(["GET", "HEAD", "POST"])
@catalog_page(editors_only=True)
def upload_review(request: HttpRequest, namespace: str, token: str) -> HttpResponse:
    ns = namespace_for(request, namespace)
    staged = _staged(request, ns, token)
    if request.method != "POST":
        form = UploadTargetForm(initial={"table": staged.table, "mode": staged.mode})
        return _review_page(request, ns, staged, form)
    form = UploadTargetForm(request.POST)
    if not form.is_valid():
        return _review_page(request, ns, staged, form, status=400)
    try:
        _may_write(request, ns, form.cleaned_data["table"], form.cleaned_data["mode"])
        asked = services.UploadRequest(
            namespace=ns.name,
            name=form.cleaned_data["table"],
            path=staged.path,
            format=staged.format,
            mode=form.cleaned_data["mode"],
        )
        done = services.upload_table(upload=asked, actor=request.user)
    except CatalogError as error:
        form.add_catalog_error(error)
        return _review_page(request, ns, staged, form, status=http_status(error))
    staged.discard()
    verb = "Created" if done.mode == "create" else "Appended to"
    messages.success(
        request, f"{verb} table {done.table} from {staged.filename}: {done.rows:,} rows."
    )
    return redirect("catalog:table-detail", namespace=ns.name, name=done.table.name)


@require_POST
@catalog_page(editors_only=True)
def upload_discard(request: HttpRequest, namespace: str, token: str) -> HttpResponse:
    ns = namespace_for(request, namespace)
    _staged(request, ns, token).discard()
    messages.success(request, "Upload discarded.")
    return redirect("catalog:namespace-detail", namespace=ns.name)
