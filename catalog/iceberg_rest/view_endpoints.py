"""Iceberg views: list, create, register, load, exists, commit (replace), drop, rename. A
view the principal may not see answers as a missing one; a load needs read_data (an engine
runs its SQL), a replace, drop or rename manage, a create or a registration create in the
namespace (as a table's registration does)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from catalog import access_events, checks, services
from catalog.core.access import CREATE, MANAGE, READ_DATA, READ_METADATA
from catalog.iceberg_rest import bodies, objects
from catalog.models import View
from catalog.services.kernel import VIEW


def list_views(request: HttpRequest, user: Any, namespace: str) -> HttpResponse:
    return objects.list_identifiers(request, namespace, View)


def create_view(request: HttpRequest, user: Any, namespace: str) -> HttpResponse:
    name = bodies.namespace_name(namespace)
    checks.namespace(request, name, CREATE)
    document = bodies.body(request)
    view = services.create_view_from_parts(
        namespace=name,
        name=bodies.string(document, "name", is_required=True),
        schema=bodies.obj(document, "schema", is_required=True),
        view_version=bodies.obj(document, "view-version", is_required=True),
        properties=bodies.string_map(document, "properties"),
        location=bodies.string(document, "location"),
        actor=user,
    )
    return JsonResponse(objects.load_result(view.metadata_location, config={}))


def register_view(request: HttpRequest, user: Any, namespace: str) -> HttpResponse:
    """RegisterViewRequest ({name, metadata-location}): adopt an existing view metadata file
    as it is (services.register_view: inside the warehouse once normalized, readable, view
    metadata whose own location is inside the warehouse too); a LoadViewResult."""
    name = bodies.namespace_name(namespace)
    checks.namespace(request, name, CREATE)
    document = bodies.body(request)
    view = services.register_view(
        namespace=name,
        name=bodies.string(document, "name", is_required=True),
        metadata_location=bodies.string(document, "metadata-location", is_required=True),
        actor=user,
    )
    return JsonResponse(objects.load_result(view.metadata_location, config={}))


def load_view(request: HttpRequest, user: Any, namespace: str, view: str) -> HttpResponse:
    name = bodies.namespace_name(namespace)
    found = checks.obj(request, VIEW, name, view, READ_DATA)
    access_events.loaded(request, "view", name, view, uuid=found.uuid, status=200)
    return JsonResponse(objects.load_result(found.metadata_location, config={}))


def view_exists(request: HttpRequest, user: Any, namespace: str, view: str) -> HttpResponse:
    checks.obj(request, VIEW, bodies.namespace_name(namespace), view, READ_METADATA)
    return HttpResponse(status=204)


def commit_view(request: HttpRequest, user: Any, namespace: str, view: str) -> HttpResponse:
    name = bodies.namespace_name(namespace)
    checks.obj(request, VIEW, name, view, MANAGE)
    document = bodies.body(request)
    changed = services.commit_view(
        namespace=name,
        name=view,
        requirements=bodies.objects(document, "requirements"),
        updates=bodies.objects(document, "updates"),
        actor=user,
    )
    return JsonResponse(objects.load_result(changed.metadata_location, config={}))


def drop_view(request: HttpRequest, user: Any, namespace: str, view: str) -> HttpResponse:
    name = bodies.namespace_name(namespace)
    checks.obj(request, VIEW, name, view, MANAGE)
    services.drop_view(namespace=name, name=view, actor=user)
    return HttpResponse(status=204)


def rename_view(request: HttpRequest, user: Any) -> HttpResponse:
    return objects.rename(request, user, services.rename_view, VIEW)
