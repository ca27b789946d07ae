"""Namespaces: list (by parent), create, load, exists, drop, update properties. A list
shows the namespaces the principal may see; one it may not see is answered as missing."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from catalog import access, checks, selectors, services
from catalog.core.access import MANAGE
from catalog.core.errors import InvalidInput
from catalog.iceberg_rest import bodies
from catalog.models import Namespace


def list_namespaces(request: HttpRequest, user: Any) -> HttpResponse:
    names = Namespace.objects.order_by("name").values_list("name", flat=True)
    parent = request.GET.get("parent")
    if parent:
        prefix = bodies.namespace_name(parent)
        checks.namespace(request, prefix)
        selectors.get_namespace(prefix)
        depth = prefix.count(".") + 1
        names = [n for n in names if n.startswith(prefix + ".") and n.count(".") == depth]
    else:
        names = [n for n in names if "." not in n]
    names = access.visible_namespace_names(checks.principal(request), list(names))
    page, token = bodies.page(request, list(names))
    return JsonResponse({"namespaces": [bodies.levels(n) for n in page], "next-page-token": token})


def create_namespace(request: HttpRequest, user: Any) -> HttpResponse:
    document = bodies.body(request)
    levels = bodies.required(document, "namespace")
    if not isinstance(levels, list) or not levels or not all(isinstance(x, str) for x in levels):
        raise InvalidInput("Invalid request: namespace must be a non-empty list of strings")
    properties = bodies.string_map(document, "properties")
    checks.create_namespace(request, levels, properties)
    namespace = services.create_namespace(name=levels, properties=properties, actor=user)
    return JsonResponse({"namespace": namespace.levels, "properties": namespace.properties})


def load_namespace(request: HttpRequest, user: Any, namespace: str) -> HttpResponse:
    name = bodies.namespace_name(namespace)
    checks.namespace(request, name)
    found = selectors.get_namespace(name)
    return JsonResponse({"namespace": found.levels, "properties": found.properties})


def namespace_exists(request: HttpRequest, user: Any, namespace: str) -> HttpResponse:
    name = bodies.namespace_name(namespace)
    checks.namespace(request, name)
    selectors.get_namespace(name)
    return HttpResponse(status=204)


def drop_namespace(request: HttpRequest, user: Any, namespace: str) -> HttpResponse:
    name = bodies.namespace_name(namespace)
    checks.namespace(request, name, MANAGE)
    services.drop_namespace(name=name, actor=user)
    return HttpResponse(status=204)


def update_properties(request: HttpRequest, user: Any, namespace: str) -> HttpResponse:
    name = bodies.namespace_name(namespace)
    checks.namespace(request, name, MANAGE)
    document = bodies.body(request)
    updates = bodies.string_map(document, "updates")
    removals = bodies.strings(document, "removals")
    before = dict(selectors.get_namespace(name).properties)
    services.update_namespace_properties(name=name, updates=updates, removals=removals, actor=user)
    return JsonResponse(
        {
            "updated": sorted(updates),
            "removed": sorted(k for k in removals if k in before),
            "missing": sorted(k for k in removals if k not in before) or None,
        }
    )
