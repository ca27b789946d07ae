"""The Iceberg REST catalog, mounted at /iceberg: engines use `uri=<app>/iceberg`."""

from django.urls import path

from catalog.iceberg_rest import views

urlpatterns = [
    path("v1/config", views.config),
    path("v1/oauth/tokens", views.oauth_tokens),
    path("v1/namespaces", views.namespaces),
    path("v1/namespaces/<str:namespace>", views.namespace),
    path("v1/namespaces/<str:namespace>/properties", views.namespace_properties),
    path("v1/namespaces/<str:namespace>/tables", views.tables),
    path("v1/namespaces/<str:namespace>/register", views.register_table),
    path("v1/namespaces/<str:namespace>/tables/<str:table>", views.table),
    path("v1/namespaces/<str:namespace>/tables/<str:table>/metrics", views.table_metrics),
    path("v1/tables/rename", views.rename_table),
    path("v1/transactions/commit", views.commit_transaction),
    path("v1/namespaces/<str:namespace>/views", views.views),
    path("v1/namespaces/<str:namespace>/views/<str:view>", views.view),
    path("v1/views/rename", views.rename_view),
]
