"""Two roles, held as Django groups: viewers read, editors change. Superusers are editors."""

from __future__ import annotations

from typing import Any

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
