"""Notifications' part of the management API (mounted at /api/ by webapp/api_urls.py)."""

from __future__ import annotations

from django.urls import path

from alerts import api

urlpatterns = [
    path("subscriptions/", api.SubscriptionListView.as_view(), name="subscriptions"),
    path(
        "subscriptions/<int:subscription_id>/",
        api.SubscriptionDetailView.as_view(),
        name="subscription",
    ),
    path(
        "subscriptions/<int:subscription_id>/test",
        api.SubscriptionTestView.as_view(),
        name="subscription-test",
    ),
    path(
        "subscriptions/<int:subscription_id>/deliveries/",
        api.DeliveryListView.as_view(),
        name="subscription-deliveries",
    ),
]
