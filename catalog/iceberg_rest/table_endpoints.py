"""Tables: list, create (also staged), load, exists, commit, drop (with purge), register,
metrics, rename, and multi-table transactions."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from catalog import selectors, services
from catalog.core.tables import table_metadata_json
from catalog.iceberg_rest import bodies, objects
from catalog.models import Table
from catalog.services import attached


def _loaded(loaded: services.LoadedTable, **extra: Any) -> JsonResponse:
    if loaded.metadata_location is None:  # a staged create: nothing is written yet
        return JsonResponse(
            {
                "metadata-location": None,
                "metadata": json.loads(table_metadata_json(loaded.metadata)),
                **extra,
            }
        )
    return JsonResponse(objects.load_result(loaded.metadata_location, **extra))


def list_tables(request: HttpRequest, user: Any, namespace: str) -> HttpResponse:
    return objects.list_identifiers(request, namespace, Table)


def create_table(request: HttpRequest, user: Any, namespace: str) -> HttpResponse:
    document = bodies.body(request)
    loaded = services.create_table(
        namespace=bodies.namespace_name(namespace),
        name=bodies.string(document, "name", is_required=True),
        schema=bodies.obj(document, "schema", is_required=True),
        location=bodies.string(document, "location"),
        partition_spec=bodies.obj(document, "partition-spec") or None,
        write_order=bodies.obj(document, "write-order") or None,
        properties=bodies.string_map(document, "properties"),
        stage_create=bool(document.get("stage-create")),
        actor=user,
    )
    return _loaded(loaded, config={})


def load_table(request: HttpRequest, user: Any, namespace: str, table: str) -> HttpResponse:
    found = selectors.get_table(bodies.namespace_name(namespace), table)
    # An attached table follows its writer: a newer metadata file is picked up here.
    found = attached.follow(found, actor=user)
    return JsonResponse(objects.load_result(found.metadata_location, config={}))


def table_exists(request: HttpRequest, user: Any, namespace: str, table: str) -> HttpResponse:
    selectors.get_table(bodies.namespace_name(namespace), table)
    return HttpResponse(status=204)


def commit_table(request: HttpRequest, user: Any, namespace: str, table: str) -> HttpResponse:
    document = bodies.body(request)
    loaded = services.commit_table(
        namespace=bodies.namespace_name(namespace),
        name=table,
        requirements=bodies.objects(document, "requirements"),
        updates=bodies.objects(document, "updates"),
        actor=user,
    )
    return _loaded(loaded)


def drop_table(request: HttpRequest, user: Any, namespace: str, table: str) -> HttpResponse:
    purge = request.GET.get("purgeRequested", "false").lower() == "true"
    services.drop_table(
        namespace=bodies.namespace_name(namespace), name=table, purge=purge, actor=user
    )
    return HttpResponse(status=204)


def register_table(request: HttpRequest, user: Any, namespace: str) -> HttpResponse:
    document = bodies.body(request)
    loaded = services.register_table(
        namespace=bodies.namespace_name(namespace),
        name=bodies.string(document, "name", is_required=True),
        metadata_location=bodies.string(document, "metadata-location", is_required=True),
        overwrite=bool(document.get("overwrite")),
        actor=user,
    )
    return _loaded(loaded, config={})


def report_metrics(request: HttpRequest, user: Any, namespace: str, table: str) -> HttpResponse:
    services.record_metrics(
        namespace=bodies.namespace_name(namespace), name=table, report=bodies.body(request)
    )
    return HttpResponse(status=204)


def rename_table(request: HttpRequest, user: Any) -> HttpResponse:
    return objects.rename(request, user, services.rename_table)


def commit_transaction(request: HttpRequest, user: Any) -> HttpResponse:
    changes = []
    for change in bodies.objects(bodies.body(request), "table-changes", is_required=True):
        namespace, name = bodies.parse_identifier(change.get("identifier"), "identifier")
        changes.append(
            services.TableChange(
                namespace,
                name,
                bodies.objects(change, "requirements"),
                bodies.objects(change, "updates"),
            )
        )
    services.commit_tables(changes=changes, actor=user)
    return HttpResponse(status=204)
