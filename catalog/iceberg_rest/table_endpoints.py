"""Tables: list, create (also staged), load, exists, commit, drop (with purge), register,
metrics, rename, and multi-table transactions.

Load, create, register and commit answers carry an ETag (`etags`); a load whose
If-None-Match names the current one is a 304 decided from the pointer row
(`table_loads`)."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse

from catalog import selectors, services
from catalog.core.tables import table_metadata_json
from catalog.iceberg_rest import bodies, etags, objects, table_loads
from catalog.iceberg_rest.resource import bearer_digest
from catalog.models import Table
from catalog.services import attached


def _loaded(loaded: services.LoadedTable, **extra: Any) -> JsonResponse:
    if loaded.metadata_location is None:  # a staged create: nothing is written yet, no tag
        return JsonResponse(
            {
                "metadata-location": None,
                "metadata": json.loads(table_metadata_json(loaded.metadata)),
                **extra,
            }
        )
    response = JsonResponse(objects.load_result(loaded.metadata_location, **extra))
    # The tag a load of this state in the default mode (all snapshots) will have, so that
    # a client caching the answer of its own commit can load with If-None-Match at once.
    state = etags.TableState(
        loaded.metadata_location,
        str(loaded.metadata.table_uuid),
        int(loaded.metadata.last_updated_ms),
    )
    response["ETag"] = etags.table_tag(state)
    return response


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
    name = bodies.namespace_name(namespace)
    snapshots = etags.snapshots_mode(request)
    found = table_loads.pointer(name, table, token_digest=bearer_digest(request))
    state = found.state
    if found.attached:
        # An attached table follows its writer before its tag is known: a newer metadata
        # file is picked up here (a listing and a read of the newest file, even for a 304).
        state = table_loads.state_of(attached.follow(selectors.get_table(name, table), actor=user))
    tag = etags.table_tag(state, snapshots)
    if etags.none_match_fails(request.META.get("HTTP_IF_NONE_MATCH"), tag):
        return etags.not_modified(tag)
    # Both modes answer every snapshot (`refs` is a subset the spec lets a server widen);
    # the tags still differ, as the spec asks, so that a client never mixes them up.
    response = HttpResponse(table_loads.body(state), content_type="application/json")
    response["ETag"] = tag
    return response


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
