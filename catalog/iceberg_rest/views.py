"""The Iceberg REST catalog protocol (open-api/rest-catalog-open-api.yaml, Iceberg 1.10).

Plain Django views: each checks the bearer token and the caller's role, parses the JSON
body, calls one service (the same services the pages and the API use) and answers in the
protocol's shapes. Errors use the protocol's body, `{"error": {message, type, code}}`, with
the status codes and exception types Iceberg's clients map."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from catalog import services, table_services
from catalog.api.errors import status_for
from catalog.core import metadata_io
from catalog.core.errors import CatalogError, InvalidInput
from catalog.iceberg_rest import auth
from catalog.models import Namespace, Table, View
from catalog.roles import can_edit, can_view

logger = logging.getLogger(__name__)

# Every endpoint this server implements; the Java client calls only what is listed here.
ENDPOINTS = [
    "GET /v1/{prefix}/namespaces",
    "POST /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "DELETE /v1/{prefix}/namespaces/{namespace}",
    "POST /v1/{prefix}/namespaces/{namespace}/properties",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/register",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
    "POST /v1/{prefix}/tables/rename",
    "POST /v1/{prefix}/transactions/commit",
    "GET /v1/{prefix}/namespaces/{namespace}/views",
    "POST /v1/{prefix}/namespaces/{namespace}/views",
    "GET /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "POST /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/views/{view}",
    "POST /v1/{prefix}/views/rename",
]

READ_METHODS = {"GET", "HEAD"}


class Forbidden(CatalogError):
    iceberg_type = "ForbiddenException"


class MethodNotAllowed(CatalogError):
    iceberg_type = "BadRequestException"


def error_response(error: CatalogError) -> JsonResponse:
    if isinstance(error, auth.InvalidCredentials):
        status = 401
    elif isinstance(error, Forbidden):
        status = 403
    elif isinstance(error, MethodNotAllowed):
        status = 405
    else:
        status = status_for(error)
    body = {"error": {"message": error.message, "type": error.iceberg_type, "code": status}}
    return JsonResponse(body, status=status)


def _bearer(request: HttpRequest) -> str:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise auth.InvalidCredentials("Not authorized: a bearer token is required")
    return token.strip()


def iceberg_endpoint(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Authenticate, authorize by role, map domain errors to the protocol's error body."""

    @csrf_exempt
    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            user = auth.authenticate(_bearer(request)).client.user
            allowed = can_view(user) if request.method in READ_METHODS else can_edit(user)
            if not allowed:
                raise Forbidden(f"Forbidden: {user.username} may not {request.method} here")
            request.catalog_user = user
            return view(request, *args, **kwargs)
        except CatalogError as error:
            if request.method == "HEAD":
                return HttpResponse(status=error_response(error).status_code)
            return error_response(error)

    return wrapper


def _body(request: HttpRequest) -> dict[str, Any]:
    try:
        document = json.loads(request.body or b"{}")
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InvalidInput(f"Malformed request body: {error}") from error
    if not isinstance(document, dict):
        raise InvalidInput("Malformed request body: expected a JSON object")
    return document


def _required(body: dict[str, Any], key: str) -> Any:
    if key not in body or body[key] is None:
        raise InvalidInput(f"Invalid request: missing required field {key}")
    return body[key]


def _object(body: dict[str, Any], key: str, *, required: bool = False) -> dict[str, Any]:
    """A JSON object field (absent or null is {} unless required)."""
    value = _required(body, key) if required else body.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInput(f"Invalid request: {key} must be a JSON object")
    return value


def _strings(body: dict[str, Any], key: str) -> dict[str, str]:
    value = _object(body, key)
    if not all(isinstance(v, str | int | float | bool) for v in value.values()):
        raise InvalidInput(f"Invalid request: {key} must map strings to strings")
    return {str(k): str(v) for k, v in value.items()}


def _objects(body: dict[str, Any], key: str, *, required: bool = False) -> list[dict[str, Any]]:
    """A list of JSON objects (absent or null is [] unless required)."""
    value = _required(body, key) if required else body.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise InvalidInput(f"Invalid request: {key} must be a list of JSON objects")
    return value


def _string_list(body: dict[str, Any], key: str) -> list[str]:
    value = body.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise InvalidInput(f"Invalid request: {key} must be a list of strings")
    return value


def _optional_string(body: dict[str, Any], key: str, *, required: bool = False) -> str | None:
    value = _required(body, key) if required else body.get(key)
    if value is not None and not isinstance(value, str):
        raise InvalidInput(f"Invalid request: {key} must be a string")
    return value


def _namespace_name(encoded: str) -> str:
    """The URL's namespace (levels joined by the unit separator) as our dotted name."""
    levels = encoded.split("\x1f")
    for level in levels:
        if not level or "." in level:
            raise InvalidInput(f"Invalid namespace level: {level!r}")
    return ".".join(levels)


def _levels(name: str) -> list[str]:
    return name.split(".")


def _identifier(namespace: str, name: str) -> dict[str, Any]:
    return {"namespace": _levels(namespace), "name": name}


def _parse_identifier(value: Any, what: str) -> tuple[str, str]:
    if not isinstance(value, dict) or "name" not in value or "namespace" not in value:
        raise InvalidInput(f"Invalid request: {what} must be an identifier {{namespace, name}}")
    levels = value["namespace"]
    if not isinstance(levels, list) or not all(isinstance(x, str) for x in levels):
        raise InvalidInput(f"Invalid request: {what}.namespace must be a list of strings")
    return ".".join(levels), str(value["name"])


def _page(request: HttpRequest, items: list) -> tuple[list, str | None]:
    token = request.GET.get("pageToken") or "0"
    size = request.GET.get("pageSize")
    try:
        start = int(token)
        count = int(size) if size else None
    except ValueError as error:
        raise InvalidInput("pageToken and pageSize must be whole numbers") from error
    if start < 0 or (count is not None and count < 1):
        raise InvalidInput("pageToken must be >= 0 and pageSize >= 1")
    if count is None:
        return items[start:], None
    end = start + count
    return items[start:end], (str(end) if end < len(items) else None)


def _list_identifiers(
    request: HttpRequest, namespace: str, model: type[Table | View]
) -> JsonResponse:
    """ListTablesResponse / the views' equivalent: one page of identifiers."""
    services.get_namespace(namespace)
    names = list(
        model.objects.filter(namespace__name=namespace)
        .order_by("name")
        .values_list("name", flat=True)
    )
    page, token = _page(request, names)
    return JsonResponse(
        {"identifiers": [_identifier(namespace, n) for n in page], "next-page-token": token}
    )


def _rename(request: HttpRequest, rename: Callable[..., Any]) -> HttpResponse:
    """RenameTableRequest ({source, destination}), for tables and views alike."""
    if request.method != "POST":
        raise _not_allowed(request)
    body = _body(request)
    source_ns, source = _parse_identifier(_required(body, "source"), "source")
    target_ns, target = _parse_identifier(_required(body, "destination"), "destination")
    rename(
        namespace=source_ns,
        name=source,
        new_namespace=target_ns,
        new_name=target,
        actor=request.catalog_user,
    )
    return HttpResponse(status=204)


def _not_allowed(request: HttpRequest) -> MethodNotAllowed:
    return MethodNotAllowed(f"Method {request.method} is not allowed here")


def _load_table_result(loaded: table_services.LoadedTable) -> dict[str, Any]:
    if loaded.metadata_location:
        metadata = metadata_io.read_json(loaded.metadata_location)
    else:
        metadata = json.loads(loaded.metadata.model_dump_json(by_alias=True, exclude_none=True))
    return {"metadata-location": loaded.metadata_location, "metadata": metadata, "config": {}}


def _load_view_result(view: View) -> dict[str, Any]:
    return {
        "metadata-location": view.metadata_location,
        "metadata": metadata_io.read_json(view.metadata_location),
        "config": {},
    }


# -- configuration and tokens --------------------------------------------------------------


@iceberg_endpoint
def config(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"defaults": {}, "overrides": {}, "endpoints": ENDPOINTS})


@csrf_exempt
def oauth_tokens(request: HttpRequest) -> HttpResponse:
    """Client credentials, or a token exchange to refresh a token (form-encoded, RFC 6749)."""
    if request.method != "POST":
        return JsonResponse({"error": "invalid_request"}, status=405)
    grant = request.POST.get("grant_type", "")
    try:
        if grant == "client_credentials":
            issued = auth.issue_token(
                client_id=request.POST.get("client_id", ""),
                client_secret=request.POST.get("client_secret", ""),
            )
        elif grant == "urn:ietf:params:oauth:grant-type:token-exchange":
            issued = auth.exchange_token(subject_token=request.POST.get("subject_token", ""))
        else:
            return JsonResponse(
                {"error": "unsupported_grant_type", "error_description": f"Unknown: {grant}"},
                status=400,
            )
    except auth.InvalidCredentials as error:
        return JsonResponse(
            {"error": "invalid_client", "error_description": error.message}, status=401
        )
    return JsonResponse(
        {
            "access_token": issued.access_token,
            "token_type": "bearer",
            "expires_in": issued.expires_in,
            "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
        }
    )


# -- namespaces ----------------------------------------------------------------------------


@iceberg_endpoint
def namespaces(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        parent = request.GET.get("parent")
        names = list(Namespace.objects.order_by("name").values_list("name", flat=True))
        if parent:
            prefix = _namespace_name(parent)
            services.get_namespace(prefix)
            depth = prefix.count(".") + 1
            names = [n for n in names if n.startswith(prefix + ".") and n.count(".") == depth]
        else:
            names = [n for n in names if "." not in n]
        page, token = _page(request, names)
        return JsonResponse({"namespaces": [_levels(n) for n in page], "next-page-token": token})
    if request.method == "POST":
        body = _body(request)
        levels = _required(body, "namespace")
        if not isinstance(levels, list) or not levels:
            raise InvalidInput("Invalid request: namespace must be a non-empty list of strings")
        namespace = services.create_namespace(
            name=[str(level) for level in levels],
            properties=_strings(body, "properties"),
            actor=request.catalog_user,
        )
        return JsonResponse({"namespace": namespace.levels, "properties": namespace.properties})
    raise _not_allowed(request)


@iceberg_endpoint
def namespace(request: HttpRequest, namespace: str) -> HttpResponse:
    name = _namespace_name(namespace)
    if request.method in READ_METHODS:
        found = services.get_namespace(name)
        if request.method == "HEAD":
            return HttpResponse(status=204)
        return JsonResponse({"namespace": found.levels, "properties": found.properties})
    if request.method == "DELETE":
        services.drop_namespace(name=name, actor=request.catalog_user)
        return HttpResponse(status=204)
    raise _not_allowed(request)


@iceberg_endpoint
def namespace_properties(request: HttpRequest, namespace: str) -> HttpResponse:
    if request.method != "POST":
        raise _not_allowed(request)
    name = _namespace_name(namespace)
    body = _body(request)
    updates = _strings(body, "updates")
    removals = _string_list(body, "removals")
    before = dict(services.get_namespace(name).properties)
    services.update_namespace_properties(
        name=name, updates=updates, removals=removals, actor=request.catalog_user
    )
    return JsonResponse(
        {
            "updated": sorted(updates),
            "removed": sorted(k for k in removals if k in before),
            "missing": sorted(k for k in removals if k not in before) or None,
        }
    )


# -- tables --------------------------------------------------------------------------------


@iceberg_endpoint
def tables(request: HttpRequest, namespace: str) -> HttpResponse:
    name = _namespace_name(namespace)
    if request.method == "GET":
        return _list_identifiers(request, name, Table)
    if request.method == "POST":
        body = _body(request)
        loaded = table_services.create_table(
            namespace=name,
            name=str(_required(body, "name")),
            schema=_object(body, "schema", required=True),
            location=_optional_string(body, "location"),
            partition_spec=_object(body, "partition-spec") or None,
            write_order=_object(body, "write-order") or None,
            properties=_strings(body, "properties"),
            stage_create=bool(body.get("stage-create")),
            actor=request.catalog_user,
        )
        return JsonResponse(_load_table_result(loaded))
    raise _not_allowed(request)


@iceberg_endpoint
def table(request: HttpRequest, namespace: str, table: str) -> HttpResponse:
    name = _namespace_name(namespace)
    if request.method == "HEAD":
        table_services.get_table(name, table)
        return HttpResponse(status=204)
    if request.method == "GET":
        # The file's JSON as it is: parsing it only to serialize it again costs time.
        found = table_services.get_table(name, table)
        return JsonResponse(
            {
                "metadata-location": found.metadata_location,
                "metadata": metadata_io.read_json(found.metadata_location),
                "config": {},
            }
        )
    if request.method == "POST":
        body = _body(request)
        loaded = table_services.commit_table(
            namespace=name,
            name=table,
            requirements=_objects(body, "requirements"),
            updates=_objects(body, "updates"),
            actor=request.catalog_user,
        )
        result = _load_table_result(loaded)
        return JsonResponse(
            {"metadata-location": result["metadata-location"], "metadata": result["metadata"]}
        )
    if request.method == "DELETE":
        purge = request.GET.get("purgeRequested", "false").lower() == "true"
        table_services.drop_table(
            namespace=name, name=table, purge=purge, actor=request.catalog_user
        )
        return HttpResponse(status=204)
    raise _not_allowed(request)


@iceberg_endpoint
def register_table(request: HttpRequest, namespace: str) -> HttpResponse:
    if request.method != "POST":
        raise _not_allowed(request)
    body = _body(request)
    loaded = table_services.register_table(
        namespace=_namespace_name(namespace),
        name=str(_required(body, "name")),
        metadata_location=_optional_string(body, "metadata-location", required=True),
        overwrite=bool(body.get("overwrite")),
        actor=request.catalog_user,
    )
    return JsonResponse(_load_table_result(loaded))


@iceberg_endpoint
def table_metrics(request: HttpRequest, namespace: str, table: str) -> HttpResponse:
    if request.method != "POST":
        raise _not_allowed(request)
    table_services.record_metrics(
        namespace=_namespace_name(namespace), name=table, report=_body(request)
    )
    return HttpResponse(status=204)


@iceberg_endpoint
def rename_table(request: HttpRequest) -> HttpResponse:
    return _rename(request, table_services.rename_table)


@iceberg_endpoint
def commit_transaction(request: HttpRequest) -> HttpResponse:
    if request.method != "POST":
        raise _not_allowed(request)
    changes = []
    for change in _objects(_body(request), "table-changes", required=True):
        namespace, name = _parse_identifier(change.get("identifier"), "identifier")
        changes.append(
            table_services.TableChange(
                namespace, name, _objects(change, "requirements"), _objects(change, "updates")
            )
        )
    table_services.commit_tables(changes=changes, actor=request.catalog_user)
    return HttpResponse(status=204)


# -- views ---------------------------------------------------------------------------------


@iceberg_endpoint
def views(request: HttpRequest, namespace: str) -> HttpResponse:
    name = _namespace_name(namespace)
    if request.method == "GET":
        return _list_identifiers(request, name, View)
    if request.method == "POST":
        body = _body(request)
        view = services.create_view_from_parts(
            namespace=name,
            name=str(_required(body, "name")),
            schema=_object(body, "schema", required=True),
            view_version=_object(body, "view-version", required=True),
            properties=_strings(body, "properties"),
            location=_optional_string(body, "location"),
            actor=request.catalog_user,
        )
        return JsonResponse(_load_view_result(view))
    raise _not_allowed(request)


@iceberg_endpoint
def view(request: HttpRequest, namespace: str, view: str) -> HttpResponse:
    name = _namespace_name(namespace)
    if request.method == "HEAD":
        services.get_view(name, view)
        return HttpResponse(status=204)
    if request.method == "GET":
        return JsonResponse(_load_view_result(services.get_view(name, view)))
    if request.method == "POST":
        body = _body(request)
        changed = services.commit_view(
            namespace=name,
            name=view,
            requirements=_objects(body, "requirements"),
            updates=_objects(body, "updates"),
            actor=request.catalog_user,
        )
        return JsonResponse(_load_view_result(changed))
    if request.method == "DELETE":
        services.drop_view(namespace=name, name=view, actor=request.catalog_user)
        return HttpResponse(status=204)
    raise _not_allowed(request)


@iceberg_endpoint
def rename_view(request: HttpRequest) -> HttpResponse:
    return _rename(request, services.rename_view)
