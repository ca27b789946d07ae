from rest_framework.permissions import SAFE_METHODS, BasePermission

from catalog import access
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
