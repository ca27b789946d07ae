"""The two roles pages and the console still ask about, answered from grants on the catalog
(catalog.access): a viewer reads the whole catalog (read_data on it, which the viewer group
holds), an editor changes it (manage on it, which the editor group holds). Superusers hold
everything; staff users read."""

from __future__ import annotations

from typing import Any

from catalog import access
from catalog.core.access import MANAGE, READ_DATA

#: The groups that held these roles before grants; they hold the grants now (migration
#: 0017, and catalog.apps makes them again, with their grants, when a database is new).
VIEWER = "viewer"
EDITOR = "editor"
ROLE_GRANTS = {VIEWER: READ_DATA, EDITOR: MANAGE}


def can_edit(user: Any) -> bool:
    return access.may(access.for_user(user), MANAGE, access.CATALOG)


def can_view(user: Any) -> bool:
    return access.may(access.for_user(user), READ_DATA, access.CATALOG)
