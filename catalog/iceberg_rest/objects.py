"""What table and view endpoints share: listing identifiers, renaming, load results."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from catalog import selectors
from catalog.core import metadata_io
from catalog.iceberg_rest import bodies
from catalog.models import CatalogObject


def list_identifiers(
    request: HttpRequest, namespace: str, model: type[CatalogObject]
) -> JsonResponse:
    """ListTablesResponse / the views' equivalent: one page of identifiers."""
    name = bodies.namespace_name(namespace)
    selectors.get_namespace(name)
    names = list(
        model.objects.filter(namespace__name=name).order_by("name").values_list("name", flat=True)
    )
    page, token = bodies.page(request, names)
    return JsonResponse(
        {"identifiers": [bodies.identifier(name, n) for n in page], "next-page-token": token}
    )


def rename(request: HttpRequest, user: Any, service: Callable[..., Any]) -> HttpResponse:
    """RenameTableRequest ({source, destination}), for tables and views alike."""
    document = bodies.body(request)
    source_ns, source = bodies.parse_identifier(bodies.required(document, "source"), "source")
    target_ns, target = bodies.parse_identifier(
        bodies.required(document, "destination"), "destination"
    )
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
