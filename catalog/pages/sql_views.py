"""The pages of views: create one (Spark types its columns, as a job, when sqlglot cannot),
its page (definition, versions, version log, history, properties, a preview of its rows),
the diff of two versions, replace (a conflict shows the newer version beside the user's
SQL), roll back, properties, drop. A view's SQL is its data: its page needs read_data.
Reads go through the ORM; every change calls a service function and shows its
`CatalogError` on the form that caused it."""

from __future__ import annotations

import uuid
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from catalog import services
from catalog.core.access import CREATE, MANAGE, READ_DATA
from catalog.core.errors import CatalogError, CommitConflict, NeedsWorker
from catalog.core.inputs import whole_number
from catalog.models import CatalogEvent, View, ViewSchemaField, ViewVersion, ViewVersionLogEntry
from catalog.pages import access as page_access
from catalog.pages import permissions, view_facts
from catalog.pages.access import catalog_page
from catalog.pages.diff import side_by_side
from catalog.pages.formatting import time_of
from catalog.pages.forms import (
    DiffForm,
    PropertyForm,
    ViewCreateForm,
    ViewReplaceForm,
    view_dialects,
)
from catalog.pages.paging import HISTORY_LENGTH
from catalog.pages.view_preview import preview_context
from catalog.prepared import Prepared


def _spark_job(kind: str, arguments: dict[str, Any], request: HttpRequest, summary: str) -> Any:
    """The job that does what needed a worker's Spark (catalog.jobs): the page never
    waits for it."""
    from catalog import jobs

    if kind == "create_view":
        summary = f"{summary}{arguments['name']} (Spark types its columns)"
    return jobs.submit(kind, arguments, actor=request.user, summary=summary)


# The view page's reads, built and compiled once (catalog.prepared): building them took
# longer than running them.
_VIEW = Prepared(
    lambda namespace, name: View.objects.select_related("namespace")
    .filter(namespace__name=namespace, name=name)
    .order_by()[:1],
    namespace="lakeview sample namespace",
    name="lakeview sample name",
)
_VERSION_LOG = Prepared(
    lambda view_id: ViewVersionLogEntry.objects.filter(view_id=view_id).order_by("position"),
    view_id=7_654_321,
)
_EVENTS = Prepared(
    # CatalogEvent.objects.for_object(view), by the view's uuid.
    lambda object_uuid: CatalogEvent.objects.filter(object_uuid=object_uuid).select_related(
        "actor"
    ),
    object_uuid=uuid.UUID("1a4e5c1e-0000-4000-8000-1a4e5c1e0001"),
)
_FIELDS = Prepared(
    lambda view_id, schema_id: ViewSchemaField.objects.filter(
        view_id=view_id, schema_id=schema_id
    ).order_by("position"),
    view_id=7_654_321,
    schema_id=7_654_322,
)


def get_view(request: HttpRequest, namespace: str, name: str, privilege: str) -> View:
    """The view, when the user may see it (else the missing view's 404) and holds
    `privilege` on it (else 403). Its SQL is its data: the page needs read_data."""
    found = _VIEW.objects(namespace=namespace, name=name)
    missing = f"View does not exist: {namespace}.{name}"
    if not found:
        raise Http404(missing)
    page_access.check(request, found[0], privilege, missing=missing)
    return found[0]


def _versions(view: View) -> list[ViewVersion]:
    """Retained versions, newest first, each with `created` (a datetime) and `is_current`."""
    versions = list(view.versions.with_sql().order_by("-version_id"))
    for version in versions:
        version.created = time_of(version.timestamp_ms)
        version.is_current = version.version_id == view.current_version_id
    return versions


def _version_log(view: View) -> list[Any]:
    """The version log, newest first. An entry is a rollback when its version appeared
    earlier in the log."""
    seen: set[int] = set()
    entries = _VERSION_LOG.objects(view_id=view.pk)
    for entry in entries:
        entry.created = time_of(entry.timestamp_ms)
        entry.is_rollback = entry.version_id in seen
        entry.is_current = False
        seen.add(entry.version_id)
    if entries:
        entries[-1].is_current = True
    return entries[::-1]


def _previous_version_id(
    view: View, versions: list[ViewVersion], log: list[Any] | None = None
) -> int:
    """The version that was current before the current one, if still retained; else the
    newest other retained version; else the current one. `log`: the version log newest
    first, when the caller has read it (`_version_log`)."""
    retained = {v.version_id for v in versions}
    for entry in view.log_entries.order_by("-position") if log is None else log:
        if entry.version_id != view.current_version_id and entry.version_id in retained:
            return entry.version_id
    others = [v for v in sorted(retained, reverse=True) if v != view.current_version_id]
    return others[0] if others else view.current_version_id


def _original(version: ViewVersion | None) -> Any:
    if version is None:
        return None
    representations = list(version.representations.all())
    return next((r for r in representations if r.is_original), None) or (
        representations[0] if representations else None
    )


def _diff_form(
    view: View, versions: list[ViewVersion], data: Any = None, log: list[Any] | None = None
) -> DiffForm:
    current = next((v for v in versions if v.is_current), None)
    original = _original(current)
    dialects = view_dialects(sorted({r.dialect for v in versions for r in v.representations.all()}))
    initial = {
        "left": _previous_version_id(view, versions, log),
        "right": view.current_version_id,
        "dialect": original.dialect if original else dialects[0],
    }
    if data is not None:
        data = {
            **initial,
            **{key: data[key] for key in ("left", "right", "dialect") if key in data},
        }
    return DiffForm(
        data,
        initial=initial,
        version_ids=[v.version_id for v in versions],
        dialects=dialects,
    )


def _view_page(
    request: HttpRequest,
    view: View,
    *,
    property_form: PropertyForm | None = None,
    extra_context: dict[str, Any] | None = None,
) -> HttpResponse:
    versions = _versions(view)
    current = next((v for v in versions if v.is_current), None)
    version_log = _version_log(view)
    context = {
        "view": view,
        "namespace": view.namespace,
        "current": current,
        "representations": list(current.representations.all()) if current else [],
        "fields": _FIELDS.objects(view_id=view.pk, schema_id=current.schema_id) if current else [],
        "versions": versions,
        "version_log": version_log,
        "properties": sorted(view.properties.items()),
        "events": _EVENTS.objects(object_uuid=view.uuid, limit=HISTORY_LENGTH),
        "diff_form": _diff_form(view, versions, log=version_log),
        "property_form": property_form or PropertyForm(),
        "can_edit": page_access.holds(request, view, MANAGE),
        "permissions_url": permissions.later(view.namespace.name, view.name, kind="view"),
        **view_facts.page_facts(view, current, versions),
        **(extra_context or {}),
    }
    return render(request, "catalog/view_detail.html", context)


@require_http_methods(["GET", "HEAD", "POST"])
@catalog_page(editors_only=True)
def view_create(request: HttpRequest, namespace: str) -> HttpResponse:
    ns = page_access.namespace_for(request, namespace, CREATE)
    form = ViewCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        arguments = {"namespace": ns.name, "name": form.cleaned_data["name"], **form.definition()}
        try:
            try:
                view = services.create_view(**arguments, actor=request.user)
            except NeedsWorker:
                # Spark types the columns sqlglot cannot: a job, whose page goes on to the
                # view when it is done.
                job = _spark_job("create_view", arguments, request, f"Create view {ns.name}.")
                return redirect("catalog:job", job_id=job.pk)
        except CatalogError as error:
            form.add_catalog_error(error)
        else:
            messages.success(request, f"View {view} created (version {view.current_version_id}).")
            return redirect("catalog:view-detail", namespace=ns.name, name=view.name)
    return render(request, "catalog/view_form.html", {"form": form, "namespace": ns, "view": None})


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def view_detail(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    view = get_view(request, namespace, name, READ_DATA)
    preview, status = preview_context(request, view)
    response = _view_page(request, view, extra_context=preview)
    response.status_code = status
    return response


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def view_diff(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    view = get_view(request, namespace, name, READ_DATA)
    versions = _versions(view)
    form = _diff_form(view, versions, data=request.GET)
    context: dict[str, Any] = {"view": view, "namespace": view.namespace, "form": form}
    expired = _expired_in_request(view, versions, request.GET)
    if expired:
        # An old link to a version that expired: say so, not "select a valid choice".
        context.update(
            expired=expired,
            history_size=view_facts.history_size(view),
            retained=sorted(v.version_id for v in versions),
        )
        return render(request, "catalog/view_diff.html", context, status=404)
    if not form.is_valid():
        return render(request, "catalog/view_diff.html", context, status=400)
    by_id = {v.version_id: v for v in versions}
    dialect = form.cleaned_data["dialect"]
    sides = []
    for key in ("left", "right"):
        version = by_id[form.cleaned_data[key]]
        representation = next(
            (r for r in version.representations.all() if r.dialect == dialect), None
        )
        sides.append({"version": version, "representation": representation})
    left, right = sides
    context.update(
        left=left,
        right=right,
        dialect=dialect,
        rows=side_by_side(
            left["representation"].sql if left["representation"] else "",
            right["representation"].sql if right["representation"] else "",
        ),
    )
    return render(request, "catalog/view_diff.html", context)


def _expired_in_request(view: View, versions: list[ViewVersion], params: Any) -> list[int]:
    """Version ids a diff link names that the view had once but no longer keeps."""
    expired = set(view_facts.expired_version_ids(view, versions))
    asked = []
    for key in ("left", "right"):
        number = whole_number(params.get(key, ""))
        if number is not None and number in expired:
            asked.append(number)
    return sorted(set(asked))


@require_http_methods(["GET", "HEAD", "POST"])
@catalog_page(editors_only=True)
def view_replace(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    view = get_view(request, namespace, name, MANAGE)
    newer = None
    if request.method == "POST":
        form = ViewReplaceForm(request.POST)
        if form.is_valid():
            before = view.metadata_location
            definition = form.definition()
            if definition["comment"] == view.comment:
                definition["comment"] = None  # unchanged: leave the property alone
            arguments = {
                "namespace": view.namespace.name,
                "name": view.name,
                "expected_metadata_location": form.cleaned_data["expected_metadata_location"]
                or None,
                **definition,
            }
            try:
                try:
                    view = services.replace_view(**arguments, actor=request.user)
                except NeedsWorker:
                    job = _spark_job("replace_view", arguments, request, f"Replace view {view}")
                    return redirect("catalog:job", job_id=job.pk)
            except CommitConflict as error:
                # Someone changed the view since the form was opened: show their version
                # beside the user's text, and let the next submit build on it.
                view = get_view(request, namespace, name, MANAGE)
                current = view.current_version()
                newer_sql, newer_dialect = view_facts.as_written(current)
                newer = {
                    "version_id": view.current_version_id,
                    "sql": newer_sql,
                    "dialect": newer_dialect,
                    "updated_at": view.updated_at,
                    "updated_by": view.updated_by,
                }
                data = request.POST.copy()
                data["expected_metadata_location"] = view.metadata_location
                form = ViewReplaceForm(data)
                form.is_valid()
                form.add_error(
                    None,
                    f"{error.message}. Version {view.current_version_id} is shown beside your "
                    "SQL; submit again to replace it with yours.",
                )
            except CatalogError as error:
                form.add_catalog_error(error)
            else:
                if view.metadata_location == before:
                    messages.info(request, f"No change: that is already the definition of {view}.")
                else:
                    messages.success(
                        request, f"View {view} replaced: now version {view.current_version_id}."
                    )
                return redirect(
                    "catalog:view-detail", namespace=view.namespace.name, name=view.name
                )
    else:
        current = view.current_version()
        sql, dialect = view_facts.as_written(current)
        form = ViewReplaceForm(
            initial={
                "sql": sql,
                "dialect": dialect,
                "comment": view.comment,
                "default_catalog": (current.default_catalog if current else None) or "",
                "default_namespace": ".".join(current.default_namespace) if current else "",
                "expected_metadata_location": view.metadata_location,
            }
        )
    return render(
        request,
        "catalog/view_form.html",
        {"form": form, "namespace": view.namespace, "view": view, "newer": newer},
    )


@require_http_methods(["GET", "HEAD", "POST"])
@catalog_page(editors_only=True)
def view_rollback(request: HttpRequest, namespace: str, name: str, version_id: int) -> HttpResponse:
    view = get_view(request, namespace, name, MANAGE)
    version = view.versions.with_sql().filter(version_id=version_id).first()
    if version is None:
        raise Http404(f"View {view} has no retained version {version_id}")
    version.created = time_of(version.timestamp_ms)
    error_message = None
    expected = view.metadata_location
    if request.method == "POST":
        expected = request.POST.get("expected_metadata_location") or None
        try:
            view = services.rollback_view(
                namespace=view.namespace.name,
                name=view.name,
                version_id=version_id,
                expected_metadata_location=expected,
                actor=request.user,
            )
        except CatalogError as error:
            error_message = error.message
        else:
            messages.success(request, f"View {view} rolled back to version {version_id}.")
            return redirect("catalog:view-detail", namespace=view.namespace.name, name=view.name)
    context = {
        "view": view,
        "namespace": view.namespace,
        "version": version,
        "original": _original(version),
        "expected_metadata_location": expected or "",
        "error": error_message,
    }
    return render(request, "catalog/view_rollback.html", context)


@require_POST
@catalog_page(editors_only=True)
def view_properties(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    view = get_view(request, namespace, name, MANAGE)
    if request.POST.get("action") == "remove":
        key = request.POST.get("key", "")
        try:
            services.remove_view_properties(
                namespace=view.namespace.name, name=view.name, keys=[key], actor=request.user
            )
        except CatalogError as error:
            messages.error(request, error.message)
        else:
            messages.success(request, f"Property {key} removed.")
        return redirect("catalog:view-detail", namespace=view.namespace.name, name=view.name)
    form = PropertyForm(request.POST)
    if form.is_valid():
        key, value = form.cleaned_data["key"], form.cleaned_data["value"]
        try:
            services.set_view_properties(
                namespace=view.namespace.name,
                name=view.name,
                updates={key: value},
                actor=request.user,
            )
        except CatalogError as error:
            form.add_catalog_error(error)
        else:
            messages.success(request, f"Property {key} set.")
            return redirect("catalog:view-detail", namespace=view.namespace.name, name=view.name)
    view.refresh_from_db()
    return _view_page(request, view, property_form=form)


@require_http_methods(["GET", "HEAD", "POST"])
@catalog_page(editors_only=True)
def view_drop(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    view = get_view(request, namespace, name, MANAGE)
    error_message = None
    if request.method == "POST":
        try:
            services.drop_view(namespace=view.namespace.name, name=view.name, actor=request.user)
        except CatalogError as error:
            error_message = error.message
        else:
            messages.success(request, f"View {view} dropped.")
            return redirect("catalog:namespace-detail", namespace=view.namespace.name)
    return render(
        request,
        "catalog/view_drop.html",
        {"view": view, "namespace": view.namespace, "error": error_message},
    )
