"""The Iceberg REST protocol's path table (without the optional prefix, which this catalog
does not use): each path's `Resource`. `GET /v1/config` (token_endpoints.config) lists
exactly these endpoints, since Iceberg's Java client calls only what is listed; urls.py
mounts them. The handlers marked `idempotent` are the mutations the spec lets an
Idempotency-Key guard (idempotency.py); metrics reports are not among them."""

from __future__ import annotations

from catalog.iceberg_rest import namespace_endpoints as ns
from catalog.iceberg_rest import scan_endpoints as scans
from catalog.iceberg_rest import table_endpoints as tables
from catalog.iceberg_rest import view_endpoints as views
from catalog.iceberg_rest.resource import Resource, idempotent

NAMESPACE = "namespaces/{namespace}"
ROUTES: list[tuple[str, Resource]] = [
    ("namespaces", Resource(GET=ns.list_namespaces, POST=idempotent(ns.create_namespace))),
    (
        NAMESPACE,
        Resource(
            GET=ns.load_namespace, HEAD=ns.namespace_exists, DELETE=idempotent(ns.drop_namespace)
        ),
    ),
    (f"{NAMESPACE}/properties", Resource(POST=idempotent(ns.update_properties))),
    (f"{NAMESPACE}/tables", Resource(GET=tables.list_tables, POST=idempotent(tables.create_table))),
    (
        f"{NAMESPACE}/tables/{{table}}",
        Resource(
            GET=tables.load_table,
            HEAD=tables.table_exists,
            POST=idempotent(tables.commit_table),
            DELETE=idempotent(tables.drop_table),
        ),
    ),
    (f"{NAMESPACE}/register", Resource(POST=idempotent(tables.register_table))),
    (
        f"{NAMESPACE}/tables/{{table}}/metrics",
        Resource(POST=tables.report_metrics),
    ),
    # Server-side scan planning (catalog.iceberg_rest.scan_endpoints).
    (f"{NAMESPACE}/tables/{{table}}/plan", Resource(POST=scans.plan_table_scan)),
    (
        f"{NAMESPACE}/tables/{{table}}/plan/{{plan-id}}",
        Resource(GET=scans.fetch_planning_result, DELETE=scans.cancel_planning),
    ),
    (f"{NAMESPACE}/tables/{{table}}/tasks", Resource(POST=scans.fetch_scan_tasks)),
    ("tables/rename", Resource(POST=idempotent(tables.rename_table))),
    ("transactions/commit", Resource(POST=idempotent(tables.commit_transaction))),
    (f"{NAMESPACE}/views", Resource(GET=views.list_views, POST=idempotent(views.create_view))),
    (
        f"{NAMESPACE}/views/{{view}}",
        Resource(
            GET=views.load_view,
            HEAD=views.view_exists,
            POST=idempotent(views.commit_view),
            DELETE=idempotent(views.drop_view),
        ),
    ),
    (f"{NAMESPACE}/register-view", Resource(POST=idempotent(views.register_view))),
    ("views/rename", Resource(POST=idempotent(views.rename_view))),
]

ENDPOINTS = [
    f"{method} /v1/{{prefix}}/{route}" for route, resource in ROUTES for method in resource.methods
]
