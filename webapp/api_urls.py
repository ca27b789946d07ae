"""/api/: the management API of every app under one URL namespace ("api"), composed here
so that catalog/, which refresh/, maintenance/ and alerts/ build on, imports none of them. Anything
else under /api/ is a JSON 404."""

from __future__ import annotations

from django.urls import re_path

from alerts.api_urls import urlpatterns as alerts_api
from catalog.api.urls import urlpatterns as catalog_api
from infra.middleware import not_found
from maintenance.api_urls import urlpatterns as maintenance_api
from refresh.api.urls import urlpatterns as refresh_api

app_name = "api"

# Any other path is a JSON 404, one with a line feed in it too ('.' would stop there).
urlpatterns = [
    *catalog_api,
    *maintenance_api,
    *refresh_api,
    *alerts_api,
    re_path(r"^[\s\S]*$", not_found),
]
