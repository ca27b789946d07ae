from django.http import HttpRequest

from catalog import access, audit
from catalog.core.access import MANAGE


def roles(request: HttpRequest) -> dict[str, bool]:
    """`can_edit` in every template (manage on the whole catalog), so pages show change
    buttons only to those who may use them; a page about one namespace or object sets its
    own. Asked of the request's principal, whose grants the page's checks have loaded
    already. An error page rendered before the authentication middleware ran (a host
    ALLOWED_HOSTS does not list: 400) has no user: nobody may edit there."""
    user = getattr(request, "user", None)
    if user is None:
        return {"can_edit": False, "sees_audit": False}
    principal = access.principal_of(request)
    return {
        "can_edit": access.may(principal, MANAGE, access.CATALOG),
        "sees_audit": audit.may_see(principal),
    }
