"""Two roles, held as Django groups: viewers read, editors change. Superusers are editors."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from catalog.core.errors import Forbidden

VIEWER = "viewer"
EDITOR = "editor"


def _groups(user: Any) -> set[str]:
    cached = getattr(user, "_catalog_groups", None)
    if cached is None:
        cached = set(user.groups.values_list("name", flat=True))
        user._catalog_groups = cached
    return cached


def can_edit(user: Any) -> bool:
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return False
    return user.is_superuser or EDITOR in _groups(user)


def can_view(user: Any) -> bool:
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return False
    return can_edit(user) or VIEWER in _groups(user) or user.is_staff


def may_read(user: Any, objects: Iterable[tuple[str, ...]]) -> None:
    """Forbidden unless `user` may read every one of `objects`: the tables and views a
    statement reads, as Spark's analyzed plan names them (namespace levels..., name; a view
    as itself, not the tables its SQL reads). The one place that decides what a query may
    read: today any role in the catalog reads everything; grants decide here once they
    exist."""
    if not can_view(user):
        names = ", ".join(".".join(parts) for parts in objects) or "the catalog"
        raise Forbidden(f"Reading {names} needs the viewer role")
