"""What every template knows of the signed-in user: whether they may change things, and the
header's role badge."""

from typing import Any

from django.http import HttpRequest

from catalog import access, audit
from catalog.core.access import MANAGE

#: The header's badge: what the signed-in user is, said where it grants more than grants do.
SUPERUSER_BADGE = {
    "label": "superuser",
    "title": "A superuser holds every privilege on everything, whatever the grants say",
}
EDITOR_BADGE = {
    "label": "editor",
    "title": "Manages the whole catalog: changes, grants and revokes on everything in it",
}


def roles(request: HttpRequest) -> dict[str, Any]:
    """`can_edit` in every template (manage on the whole catalog), so pages show change
    buttons only to those who may use them; a page about one namespace or object sets its
    own. `role_badge`, the header's: a superuser is said to be one (they hold everything,
    not only what an editor holds), one who manages the catalog an editor. Asked of the
    request's principal, whose grants the page's checks have loaded already. An error page
    rendered before the authentication middleware ran (a host ALLOWED_HOSTS does not list:
    400) has no user: nobody may edit there."""
    user = getattr(request, "user", None)
    if user is None:
        return {"can_edit": False, "sees_audit": False, "role_badge": None}
    principal = access.principal_of(request)
    can_edit = access.may(principal, MANAGE, access.CATALOG)
    badge = SUPERUSER_BADGE if principal.superuser else EDITOR_BADGE if can_edit else None
    return {
        "can_edit": can_edit,
        "sees_audit": audit.may_see(principal),
        "role_badge": badge,
    }
