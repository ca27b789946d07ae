"""The Iceberg REST protocol's path table (without the optional prefix, which this catalog
does not use): each path's `Resource`. `GET /v1/config` (token_endpoints.config) lists
exactly these endpoints, since Iceberg's Java client calls only what is listed; urls.py
mounts them."""

from __future__ import annotations

from catalog.iceberg_rest import namespace_endpoints as ns
from catalog.iceberg_rest import table_endpoints as tables
from catalog.iceberg_rest import view_endpoints as views
from catalog.iceberg_rest.resource import Resource

NAMESPACE = "namespaces/{namespace}"
ROUTES: list[tuple[str, Resource]] = [
    ("namespaces", Resource(GET=ns.list_namespaces, POST=ns.create_namespace)),
    (
        NAMESPACE,
        Resource(GET=ns.load_namespace, HEAD=ns.namespace_exists, DELETE=ns.drop_namespace),
    ),
    (f"{NAMESPACE}/properties", Resource(POST=ns.update_properties)),
    (f"{NAMESPACE}/tables", Resource(GET=tables.list_tables, POST=tables.create_table)),
    (
        f"{NAMESPACE}/tables/{{table}}",
        Resource(
            GET=tables.load_table,
            HEAD=tables.table_exists,
            POST=tables.commit_table,
            DELETE=tables.drop_table,
        ),
    ),
    (f"{NAMESPACE}/register", Resource(POST=tables.register_table)),
    (
        f"{NAMESPACE}/tables/{{table}}/metrics",
        Resource(POST=tables.report_metrics),
    ),
    ("tables/rename", Resource(POST=tables.rename_table)),
    ("transactions/commit", Resource(POST=tables.commit_transaction)),
    (f"{NAMESPACE}/views", Resource(GET=views.list_views, POST=views.create_view)),
    (
        f"{NAMESPACE}/views/{{view}}",
        Resource(
            GET=views.load_view,
            HEAD=views.view_exists,
            POST=views.commit_view,
            DELETE=views.drop_view,
        ),
    ),
    (f"{NAMESPACE}/register-view", Resource(POST=views.register_view)),
    ("views/rename", Resource(POST=views.rename_view)),
]

ENDPOINTS = [
    f"{method} /v1/{{prefix}}/{route}" for route, resource in ROUTES for method in resource.methods
]
