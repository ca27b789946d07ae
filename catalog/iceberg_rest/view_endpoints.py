"""Iceberg views: list, create, load, exists, commit (replace), drop, rename."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from catalog import selectors, services
from catalog.iceberg_rest import bodies, objects
from catalog.models import View


def list_views(request: HttpRequest, user: Any, namespace: str) -> HttpResponse:
    return objects.list_identifiers(request, namespace, View)


def create_view(request: HttpRequest, user: Any, namespace: str) -> HttpResponse:
    document = bodies.body(request)
    view = services.create_view_from_parts(
        namespace=bodies.namespace_name(namespace),
        name=bodies.string(document, "name", is_required=True),
        schema=bodies.obj(document, "schema", is_required=True),
        view_version=bodies.obj(document, "view-version", is_required=True),
        properties=bodies.string_map(document, "properties"),
        location=bodies.string(document, "location"),
        actor=user,
    )
    return JsonResponse(objects.load_result(view.metadata_location, config={}))


def load_view(request: HttpRequest, user: Any, namespace: str, view: str) -> HttpResponse:
    found = selectors.get_view(bodies.namespace_name(namespace), view)
    return JsonResponse(objects.load_result(found.metadata_location, config={}))


def view_exists(request: HttpRequest, user: Any, namespace: str, view: str) -> HttpResponse:
    selectors.get_view(bodies.namespace_name(namespace), view)
    return HttpResponse(status=204)


def commit_view(request: HttpRequest, user: Any, namespace: str, view: str) -> HttpResponse:
    document = bodies.body(request)
    changed = services.commit_view(
        namespace=bodies.namespace_name(namespace),
        name=view,
        requirements=bodies.objects(document, "requirements"),
        updates=bodies.objects(document, "updates"),
        actor=user,
    )
    return JsonResponse(objects.load_result(changed.metadata_location, config={}))


def drop_view(request: HttpRequest, user: Any, namespace: str, view: str) -> HttpResponse:
    services.drop_view(namespace=bodies.namespace_name(namespace), name=view, actor=user)
    return HttpResponse(status=204)


def rename_view(request: HttpRequest, user: Any) -> HttpResponse:
    return objects.rename(request, user, services.rename_view)
