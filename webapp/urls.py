"""The project's URL conf: the admin, sign-in, /api/, /iceberg and every app's pages."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from catalog.iceberg_rest import urls as iceberg_urls
from catalog.throttle import ThrottledLoginView, admin_login

# The admin site's login checks the same passwords as /login/: the same throttle.
admin.site.login = admin_login(admin.site.login)  # type: ignore[method-assign]

# /healthz and /readyz are answered by webapp.health.HealthMiddleware, first in MIDDLEWARE.
urlpatterns = [
    # Browsers ask for /favicon.ico on their own; the icon is an SVG under static/.
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    path("admin/", admin.site.urls),
    path("login/", ThrottledLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/", include("webapp.api_urls")),
    iceberg_urls.hot_route("iceberg/"),
    path("iceberg/", include("catalog.iceberg_rest.urls")),
    path("", include("refresh.pages.urls")),
    path("", include("maintenance.page_urls")),
    path("", include("alerts.page_urls")),
    path("", include("catalog.pages.urls")),
]
