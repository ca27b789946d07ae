"""How many views, tables and materialized tables each namespace holds, kept on its row as
objects come and go, so that the home page lists namespaces with their counts without
counting their objects (a count over each namespace's objects grew with the catalog: 17 ms
of the home page at 100,000 views).

Kept by signals for every object created or deleted through the ORM (the kernel's creates
and drops; refresh/apps.py connects a table's materialized table), by the kernel's rename
(an UPDATE, which sends no signal), and set from the rows by `recount` (the migrations that
added them, `manage.py rebuild_catalog_mirror`, and seeds written in bulk). A change and
its counts commit or roll back together (one transaction); rows of two namespaces are
updated in the order of their ids, as the kernel locks rows."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from django.db.models import Count, F

from catalog.models import CatalogObject, Namespace, Table

FIELDS = {"views": "view_total", "tables": "table_total", "materialized": "materialized_total"}


def adjust(namespace_id: int, *, views: int = 0, tables: int = 0, materialized: int = 0) -> None:
    deltas = {"views": views, "tables": tables, "materialized": materialized}
    changes = {FIELDS[key]: F(FIELDS[key]) + delta for key, delta in deltas.items() if delta}
    if changes:
        Namespace.objects.filter(pk=namespace_id).update(**changes)


def of_kind(kind: str) -> str:
    return "views" if kind == CatalogObject.Kind.VIEW else "tables"


def moved(obj: CatalogObject, *, source_id: int, target_id: int) -> None:
    """An object renamed from one namespace into another."""
    if source_id == target_id:
        return
    key = of_kind(obj.kind)
    materialized = (
        obj.kind == CatalogObject.Kind.TABLE
        and Table.objects.filter(pk=obj.pk, materialized__isnull=False).exists()
    )
    for namespace_id, sign in sorted(((source_id, -1), (target_id, 1))):
        adjust(namespace_id, **{key: sign, "materialized": sign if materialized else 0})


def recount(namespace_ids: Iterable[int] | None = None) -> None:
    """Set the counts of these namespaces (all when None) from their rows."""
    namespaces = Namespace.objects.all()
    objects = CatalogObject.objects.all()
    materialized = Table.objects.filter(materialized__isnull=False)
    if namespace_ids is not None:
        ids = list(namespace_ids)
        namespaces = namespaces.filter(pk__in=ids)
        objects = objects.filter(namespace_id__in=ids)
        materialized = materialized.filter(namespace_id__in=ids)
    found: dict[int, Counter] = {}
    for namespace_id, kind, n in (
        objects.order_by().values_list("namespace_id", "kind").annotate(n=Count("pk"))
    ):
        found.setdefault(namespace_id, Counter())[of_kind(kind)] += n
    for namespace_id, n in (
        materialized.order_by().values_list("namespace_id").annotate(n=Count("pk"))
    ):
        found.setdefault(namespace_id, Counter())["materialized"] += n
    rows = list(namespaces.only("pk"))
    for namespace in rows:
        counts = found.get(namespace.pk, Counter())
        for key, field in FIELDS.items():
            setattr(namespace, field, counts[key])
    Namespace.objects.bulk_update(rows, list(FIELDS.values()), batch_size=500)


# -- signals (catalog/apps.py connects these) ---------------------------------------------


def object_saved(sender: Any, instance: CatalogObject, created: bool, **kwargs: Any) -> None:
    if created and not kwargs.get("raw"):
        adjust(instance.namespace_id, **{of_kind(instance.kind): 1})


def object_deleted(sender: Any, instance: CatalogObject, **kwargs: Any) -> None:
    adjust(instance.namespace_id, **{of_kind(instance.kind): -1})
