from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from catalog.throttle import ThrottledLoginView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("login/", ThrottledLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/", include("catalog.api.urls")),
    path("iceberg/", include("catalog.iceberg_rest.urls")),
    path("", include("refresh.pages.urls")),
    path("", include("catalog.pages.urls")),
]
