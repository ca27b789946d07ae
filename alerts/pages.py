"""The Notifications section of a materialized table's page (templates/alerts/_section.html,
shown once the page has loaded: static/js/later.js) and its forms: subscribe an email
address or a webhook to the table, send a test message, delete a subscription. Thin: they
call alerts.services and go back to the page."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from alerts import services
from alerts.models import Delivery, Subscription
from catalog.core.access import MANAGE, READ_DATA
from catalog.core.errors import CatalogError
from catalog.models import Table
from catalog.pages import access as page_access
from catalog.pages.access import catalog_page

DELIVERIES_SHOWN = 10


def later(request: HttpRequest, table: Table) -> dict[str, Any]:
    """The section's place on the page: where static/js/later.js fetches it from."""
    return {
        "later": True,
        "url": reverse("alerts:section", args=[table.namespace.name, table.name]),
    }


def _table(request: HttpRequest, namespace: str, name: str, privilege: str) -> Table:
    """The materialized table's data table, when the user sees it (else the missing table's
    404) and holds `privilege` on it (else 403), as the table's own page asks."""
    table = get_object_or_404(
        Table.objects.select_related("namespace"),
        namespace__name=namespace,
        name=name,
        materialized__isnull=False,
    )
    missing = f"Materialized table does not exist: {namespace}.{name}"
    page_access.check(request, table, privilege, missing=missing)
    return table


@require_http_methods(["GET", "HEAD"])
@catalog_page()
def section_page(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    table = _table(request, namespace, name, READ_DATA)
    subscriptions = services.covering(table)
    editor = page_access.holds(request, table, MANAGE)
    for subscription in subscriptions:
        subscription.shown = _shown(subscription, editor)
    shown = {subscription.pk: subscription.shown for subscription in subscriptions}
    deliveries = list(
        Delivery.objects.filter(subscription__in=subscriptions, table_name=str(table)).order_by(
            "-created_at", "-id"
        )[:DELIVERIES_SHOWN]
    )
    for delivery in deliveries:
        delivery.shown = shown[delivery.subscription_id]
    context = {
        "table": table,
        "notifications": {
            "subscriptions": subscriptions,
            "deliveries": deliveries,
            "can_edit": editor,
        },
    }
    return render(request, "alerts/_section.html", context)


def _shown(subscription: Subscription, editor: bool) -> str:
    """A webhook's path and query often hold a token of the receiver's: editors only."""
    if subscription.channel == Subscription.Channel.EMAIL or editor:
        return subscription.address
    parts = urlsplit(subscription.address)
    return f"{parts.scheme}://{parts.netloc}/..."


def _back(table: Table) -> HttpResponse:
    url = reverse("refresh:mt-detail", args=[table.namespace.name, table.name])
    return redirect(f"{url}#notifications")


@require_POST
@catalog_page(editors_only=True)
def subscribe(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    table = _table(request, namespace, name, MANAGE)
    address = request.POST.get("address", "").strip()
    is_url = address.lower().startswith(("http://", "https://"))
    try:
        subscription = services.create_subscription(
            actor=request.user,
            materialized_table=str(table),
            email=None if is_url else address,
            webhook_url=address if is_url else None,
        )
    except CatalogError as error:
        messages.error(request, error.message)
    else:
        text = f"{subscription.address} is told about {table}."
        if subscription.secret:
            text += f" Its signing secret (shown once): {subscription.secret}"
        messages.success(request, text)
    return _back(table)


def _subscription(request: HttpRequest, table: Table) -> Subscription | None:
    """The subscription the form names (`subscription`), if it is one of `table`'s own (a
    namespace's subscriptions are changed in the API, by those who manage it)."""
    value = request.POST.get("subscription", "")
    if value.isascii() and value.isdigit() and len(value) < 19:
        found = Subscription.objects.filter(pk=int(value), materialized_table__table=table).first()
        if found is not None:
            return found
    messages.error(request, "No such subscription of this table")
    return None


@require_POST
@catalog_page(editors_only=True)
def send_test(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    table = _table(request, namespace, name, MANAGE)
    subscription = _subscription(request, table)
    if subscription is not None:
        services.send_test(subscription.pk, actor=request.user)
        messages.success(request, f"A test message is on its way to {subscription.address}.")
    return _back(table)


@require_POST
@catalog_page(editors_only=True)
def unsubscribe(request: HttpRequest, namespace: str, name: str) -> HttpResponse:
    table = _table(request, namespace, name, MANAGE)
    subscription = _subscription(request, table)
    if subscription is not None:
        services.delete_subscription(subscription.pk, actor=request.user)
        messages.success(
            request, f"{subscription.address} is no longer told about {subscription.subject}."
        )
    return _back(table)
