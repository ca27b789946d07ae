from django.http import HttpRequest

from catalog.roles import can_edit


def roles(request: HttpRequest) -> dict[str, bool]:
    """`can_edit` in every template, so pages show change buttons only to editors. An error
    page rendered before the authentication middleware ran (a host ALLOWED_HOSTS does not
    list: 400) has no user: nobody may edit there."""
    return {"can_edit": can_edit(getattr(request, "user", None))}
