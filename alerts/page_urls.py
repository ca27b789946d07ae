"""A materialized table's Notifications section and its forms (mounted by webapp/urls.py)."""

from __future__ import annotations

from django.urls import path

from alerts import pages

app_name = "alerts"

TABLE = "namespaces/<str:namespace>/materialized-tables/<str:name>/notifications"

urlpatterns = [
    path(f"{TABLE}/", pages.section_page, name="section"),
    path(f"{TABLE}/subscribe", pages.subscribe, name="subscribe"),
    path(f"{TABLE}/test", pages.send_test, name="test"),
    path(f"{TABLE}/delete", pages.unsubscribe, name="unsubscribe"),
]
