"""Who may see the catalog's pages: the decorator every page view wears."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from catalog.roles import can_edit, can_view
from webapp.middleware import has_nul

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
NUL_MESSAGE = (
    "NUL characters are not allowed in addresses or their parameters: no name or value in "
    "the catalog can hold one."
)


def catalog_page(*, editors_only: bool = False, own_nul_message: bool = False) -> Callable:
    """Anonymous users go to the login page; users without a role get 403, and so does
    anyone but an editor on a change page or with a POST; a NUL in the address or its
    parameters is a 400 page, unless the view says so in its own words (`own_nul_message`:
    the search form shows its problem beside the text)."""

    def decorator(view_func: Callable) -> Callable:
        @wraps(view_func)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            user = request.user
            if not user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not can_view(user):
                raise PermissionDenied("You have no role in this catalog.")
            if (editors_only or request.method not in SAFE_METHODS) and not can_edit(user):
                raise PermissionDenied("Only editors can change the catalog.")
            if not own_nul_message and has_nul(request):
                # PostgreSQL refuses a NUL in any text value: a name or a parameter that
                # holds one would reach a query and fail it (a 500). No name can hold one.
                return render(request, "400.html", {"message": NUL_MESSAGE}, status=400)
            return view_func(request, *args, **kwargs)

        return wrapper

    return decorator
