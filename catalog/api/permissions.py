"""Who may call the management API: the viewer and editor roles, or a privilege held somewhere
in the catalog when the view checks grants per object."""

from rest_framework.permissions import SAFE_METHODS, BasePermission

from catalog import access, audit
from catalog.roles import can_edit, can_view


class CatalogRolePermission(BasePermission):
    """Viewers may read; editors may also change."""

    message = (
        "Your role does not allow this: reading needs the viewer role, changes the editor role."
    )

    def has_permission(self, request, view) -> bool:
        if request.method in SAFE_METHODS:
            return can_view(request.user)
        return can_edit(request.user)


class HoldsAPrivilege(BasePermission):
    """Whoever holds a privilege somewhere in the catalog; the view then asks
    catalog.access about each object it touches (catalog.checks)."""

    message = "You hold no privilege in this catalog: ask its administrators for a grant."

    def has_permission(self, request, view) -> bool:
        return access.principal_of(request).holds_anything()


class SeesTheAudit(BasePermission):
    """Superusers and those who manage the whole catalog (catalog.audit.may_see): the audit
    and the catalog's history (/api/history/), which name every change to every object, are
    theirs, as on the audit page; reading the whole catalog is not enough."""

    message = "The audit is for administrators and those who manage the whole catalog."

    def has_permission(self, request, view) -> bool:
        return audit.may_see(access.principal_of(request))
