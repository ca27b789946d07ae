"""Subscriptions in the admin: the same checks as the API (an email address, or a webhook
URL that may be reached), a new secret for each webhook; deliveries, read-only."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.core.validators import validate_email

from alerts import services
from alerts.core import signing
from alerts.models import Delivery, Subscription
from catalog.core.errors import CatalogError


class SubscriptionForm(forms.ModelForm):
    class Meta:
        model = Subscription
        fields = ["materialized_table", "namespace", "channel", "address"]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if bool(data.get("materialized_table")) == bool(data.get("namespace")):
            raise ValidationError("Choose either a materialized table or a namespace")
        address = (data.get("address") or "").strip()
        data["address"] = address
        if data.get("channel") == Subscription.Channel.EMAIL:
            try:
                validate_email(address)
            except ValidationError:
                self.add_error("address", "Not an email address")
        elif data.get("channel") == Subscription.Channel.WEBHOOK:
            try:
                services.check_webhook_url(address, field="address")
            except CatalogError as error:
                self.add_error("address", error.message)
        return data


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):
    form = SubscriptionForm
    list_display = ["id", "address", "channel", "materialized_table", "namespace", "created_at"]
    list_filter = ["channel"]
    search_fields = ["address"]
    readonly_fields = ["secret", "created_by", "created_at"]
    raw_id_fields = ["materialized_table", "namespace"]

    def save_model(self, request: Any, obj: Subscription, form: Any, change: bool) -> None:
        if obj.channel == Subscription.Channel.WEBHOOK and not obj.secret:
            obj.secret = signing.new_secret()
        if obj.channel == Subscription.Channel.EMAIL:
            obj.secret = ""
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin):
    list_display = ["id", "event", "table_name", "subscription", "status", "attempts",
                    "response_code", "created_at"]  # fmt: skip
    list_filter = ["status", "event"]
    search_fields = ["table_name", "subscription__address"]

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False
