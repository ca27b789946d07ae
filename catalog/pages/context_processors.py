from django.http import HttpRequest

from catalog.roles import can_edit


def roles(request: HttpRequest) -> dict[str, bool]:
    """`can_edit` in every template, so pages show change buttons only to editors."""
    return {"can_edit": can_edit(request.user)}
