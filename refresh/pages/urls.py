from django.urls import path

from refresh.pages import views

app_name = "refresh"

MT = "namespaces/<str:namespace>/materialized-tables/<str:name>/"

urlpatterns = [
    path("console/", views.console_page, name="console"),
    path("namespaces/<str:namespace>/materialized-tables/", views.mt_list, name="mt-list"),
    path(MT, views.mt_detail, name="mt-detail"),
    path(f"{MT}suspend", views.mt_suspend, name="mt-suspend"),
    path(f"{MT}resume", views.mt_resume, name="mt-resume"),
    path(f"{MT}refresh", views.mt_refresh, name="mt-refresh"),
    path(f"{MT}drop", views.mt_drop, name="mt-drop"),
]
