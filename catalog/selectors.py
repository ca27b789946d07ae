"""Reads shared by the services, pages, the API and the Iceberg REST adapter: objects by
name, with the catalog's not-found errors, and the columns of known tables and views."""

from __future__ import annotations

from collections.abc import Callable

from catalog.core.errors import NoSuchNamespace, NoSuchTable, NoSuchView
from catalog.core.types import sqlglot_type_from_iceberg
from catalog.models import CatalogObject, Namespace, Table, View, ViewSchemaField


def get_namespace(name: str) -> Namespace:
    try:
        return Namespace.objects.get(name=name)
    except Namespace.DoesNotExist:
        raise NoSuchNamespace(f"Namespace does not exist: {name}", field="namespace") from None


def get_view(namespace: str, name: str) -> View:
    try:
        return View.objects.select_related("namespace").get(namespace__name=namespace, name=name)
    except View.DoesNotExist:
        raise NoSuchView(f"View does not exist: {namespace}.{name}", field="name") from None


def get_table(namespace: str, name: str) -> Table:
    try:
        return Table.objects.select_related("namespace").get(namespace__name=namespace, name=name)
    except Table.DoesNotExist:
        raise NoSuchTable(f"Table does not exist: {namespace}.{name}", field="name") from None


def holder_of(namespace: Namespace, name: str) -> CatalogObject | None:
    """Whatever object holds this name, of any kind."""
    return CatalogObject.objects.filter(namespace=namespace, name=name).first()


def column_lookup(catalog_names: set[str]) -> Callable[[tuple[str, ...]], list | None]:
    """Columns of the tables and views this catalog holds, for typing queries: a function
    from (catalog, *namespace, name) to [(column, sqlglot type)], or None when unknown."""

    def lookup(parts: tuple[str, ...]) -> list[tuple[str, str]] | None:
        catalog, *namespace, name = parts
        if catalog and catalog not in catalog_names:
            return None
        namespace_name = ".".join(namespace)
        table = Table.objects.filter(namespace__name=namespace_name, name=name).first()
        if table is not None:
            return [(f.name, sqlglot_type_from_iceberg(f.type)) for f in table.schema_fields()]
        view = View.objects.filter(namespace__name=namespace_name, name=name).first()
        if view is None:
            return None
        version = view.current_version()
        if version is None:
            return None
        return [
            (f.name, sqlglot_type_from_iceberg(f.type))
            for f in ViewSchemaField.objects.filter(view=view, schema_id=version.schema_id)
        ]

    return lookup
