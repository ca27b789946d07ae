"""Writes to namespaces. A namespace has no metadata file: its row is the truth."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import ProtectedError
from django.utils import timezone

from catalog import history, selectors
from catalog.core.errors import AlreadyExists, NamespaceNotEmpty, NoSuchNamespace
from catalog.core.inputs import check_namespace_name, check_property_changes
from catalog.models import CatalogObject, Namespace

KIND = "namespace"


def missing_parent(name: str, parent: str) -> NoSuchNamespace:
    """A create's answer when the parent is not there (or the creator may not see it)."""
    return NoSuchNamespace(
        f"Cannot create namespace {name}: parent namespace {parent} does not exist", field="name"
    )


def create_namespace(
    *, name: str | Sequence[str], properties: Mapping[str, str] | None = None, actor: Any = None
) -> Namespace:
    name = check_namespace_name(name)
    properties, _ = check_property_changes(properties, None)
    with history.failures_recorded(
        actor=actor, action="create_namespace", object_type=KIND, object_name=name
    ):
        parent = name.rpartition(".")[0]
        if parent and not Namespace.objects.filter(name=parent).exists():
            # Iceberg's catalogs list a namespace only under its parent: one without a
            # parent could never be listed.
            raise missing_parent(name, parent)
        try:
            with transaction.atomic():
                namespace = Namespace.objects.create(
                    name=name,
                    properties=properties,
                    owner=actor if getattr(actor, "pk", None) else None,
                )
                history.record(
                    actor=actor, action="create_namespace", object_type=KIND, object_name=name
                )
        except IntegrityError:
            raise AlreadyExists(f"Namespace already exists: {name}", field="name") from None
    return namespace


def update_namespace_properties(
    *,
    name: str,
    updates: Mapping[str, str] | None = None,
    removals: Iterable[str] | None = None,
    actor: Any = None,
) -> Namespace:
    updates, removals = check_property_changes(updates, removals)
    with transaction.atomic():
        namespace = Namespace.objects.select_for_update().filter(name=name).first()
        if namespace is None:
            raise NoSuchNamespace(f"Namespace does not exist: {name}", field="namespace")
        properties = {**namespace.properties, **updates}
        for key in removals:
            properties.pop(key, None)
        namespace.properties = properties
        namespace.updated_at = timezone.now()
        namespace.save(update_fields=["properties", "updated_at"])
        history.record(actor=actor, action="update_namespace", object_type=KIND, object_name=name)
    return namespace


def drop_namespace(*, name: str, actor: Any = None) -> None:
    namespace = selectors.get_namespace(name)
    with (
        history.failures_recorded(
            actor=actor, action="drop_namespace", object_type=KIND, object_name=name
        ),
        transaction.atomic(),
    ):
        if CatalogObject.objects.filter(namespace=namespace).exists():
            raise NamespaceNotEmpty(f"Namespace {name} is not empty", field="namespace")
        if Namespace.objects.filter(name__startswith=f"{name}.").exists():
            raise NamespaceNotEmpty(f"Namespace {name} has child namespaces", field="namespace")
        try:
            namespace.delete()
        except ProtectedError:  # an object was created in it meanwhile
            raise NamespaceNotEmpty(f"Namespace {name} is not empty", field="namespace") from None
        history.record(actor=actor, action="drop_namespace", object_type=KIND, object_name=name)
