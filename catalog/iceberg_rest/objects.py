"""What table and view endpoints share: listing identifiers, renaming, load results."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from catalog import access, checks, selectors
from catalog.core import metadata_io
from catalog.iceberg_rest import bodies
from catalog.models import CatalogObject
from catalog.services.kernel import Kind


def list_identifiers(
    request: HttpRequest, namespace: str, model: type[CatalogObject]
) -> JsonResponse:
    """ListTablesResponse / the views' equivalent: one page of the identifiers the
    principal may see."""
    name = bodies.namespace_name(namespace)
    checks.namespace(request, name)
    selectors.get_namespace(name)
    listed = access.visible_objects(
        checks.principal(request), model.objects.filter(namespace__name=name)
    )
    names = list(listed.order_by("name").values_list("name", flat=True))
    page, token = bodies.page(request, names)
    return JsonResponse(
        {"identifiers": [bodies.identifier(name, n) for n in page], "next-page-token": token}
    )


def rename(
    request: HttpRequest, user: Any, service: Callable[..., Any], kind: Kind
) -> HttpResponse:
    """RenameTableRequest ({source, destination}), for tables and views alike: MANAGE on
    the object, and CREATE in the destination namespace when it moves to another."""
    document = bodies.body(request)
    source_ns, source = bodies.parse_identifier(bodies.required(document, "source"), "source")
    target_ns, target = bodies.parse_identifier(
        bodies.required(document, "destination"), "destination"
    )
    checks.rename(request, kind, source_ns, source, target_ns)
    service(namespace=source_ns, name=source, new_namespace=target_ns, new_name=target, actor=user)
    return HttpResponse(status=204)


def load_result(metadata_location: str, **extra: Any) -> dict[str, Any]:
    """LoadTableResult / LoadViewResult: the metadata file's JSON as it is on disk (parsing
    it only to serialize it again costs time)."""
    return {
        "metadata-location": metadata_location,
        "metadata": metadata_io.read_json(metadata_location),
        **extra,
    }
