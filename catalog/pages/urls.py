from django.urls import path

from catalog import converters  # noqa: F401 - registers <version_id:...>
from catalog.pages import tables, views

app_name = "catalog"

view_prefix = "namespaces/<str:namespace>/views/<str:name>/"

urlpatterns = [
    path("", views.namespace_list, name="namespace-list"),
    path("search/", views.search, name="search"),
    path("namespaces/<str:namespace>/", views.namespace_detail, name="namespace-detail"),
    path("namespaces/<str:namespace>/views/new", views.view_create, name="view-create"),
    path(view_prefix, views.view_detail, name="view-detail"),
    path(f"{view_prefix}diff", views.view_diff, name="view-diff"),
    path(f"{view_prefix}replace", views.view_replace, name="view-replace"),
    path(
        f"{view_prefix}rollback/<version_id:version_id>", views.view_rollback, name="view-rollback"
    ),
    path(f"{view_prefix}properties", views.view_properties, name="view-properties"),
    path(f"{view_prefix}drop", views.view_drop, name="view-drop"),
    path("namespaces/<str:namespace>/tables/<str:name>/", tables.table_detail, name="table-detail"),
]
