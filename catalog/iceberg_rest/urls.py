"""The Iceberg REST catalog, mounted at /iceberg: engines use `uri=<app>/iceberg`. The
protocol's paths are routes.ROUTES; configuration and tokens are mounted beside them."""

from __future__ import annotations

import re

from django.urls import URLPattern, path, re_path

from catalog.iceberg_rest import token_endpoints as tokens
from catalog.iceberg_rest.resource import Resource
from catalog.iceberg_rest.routes import NAMESPACE, ROUTES
from infra.middleware import not_found


def _django_path(route: str) -> str:
    # The spec's `{plan-id}` is the handler's `plan_id` (a keyword has no hyphen).
    return "v1/" + re.sub(
        r"\{([\w-]+)\}", lambda found: f"<str:{found.group(1).replace('-', '_')}>", route
    )


# Load-table, what engines call most, is mounted by webapp/urls.py at the top level, before
# this module's include (`hot_route`): resolving it through the include took a sixth of a
# load's time in the app. No two routes match the same path (a converter never matches a
# slash), so the order is otherwise free.
_HOT = f"{NAMESPACE}/tables/{{table}}"
_HOT_VIEW = next(resource for route, resource in ROUTES if route == _HOT).as_view()


def hot_route(prefix: str) -> URLPattern:
    """The table's route (load, exists, commit, drop) under `prefix`, the include's mount."""
    return path(prefix + _django_path(_HOT), _HOT_VIEW)


urlpatterns = [
    path("v1/config", Resource(GET=tokens.config).as_view()),
    path("v1/oauth/tokens", tokens.oauth_tokens),
    *(path(_django_path(route), resource.as_view()) for route, resource in ROUTES if route != _HOT),
    # Any other path is a JSON 404, one with a line feed in it too ('.' would stop there).
    re_path(r"^[\s\S]*$", not_found),
]
