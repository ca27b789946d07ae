"""The Django admin shows the catalog to operators, read-only where the metadata rules."""

from __future__ import annotations

import pytest
from django.urls import reverse

from catalog import services
from catalog.models import CatalogEvent, Namespace, View

pytestmark = pytest.mark.django_db


@pytest.fixture
def orders_view(admin_user) -> View:
    services.create_namespace(name="sales", actor=admin_user)
    return services.create_view(
        namespace="sales",
        name="orders_v",
        sql="SELECT id, amount FROM orders",
        allow_unknown_sources=True,
        actor=admin_user,
    )


@pytest.mark.parametrize("model", ["view", "viewversion", "catalogevent"])
def test_a_superuser_opens_the_changelists_of_views_versions_and_events(
    admin_client, orders_view, model
):
    response = admin_client.get(reverse(f"admin:catalog_{model}_changelist"))

    assert response.status_code == 200
    assert "orders_v" in response.content.decode()


def test_a_superuser_opens_a_views_change_page_and_sees_its_pointer_read_only(
    admin_client, orders_view
):
    response = admin_client.get(reverse("admin:catalog_view_change", args=[orders_view.pk]))

    assert response.status_code == 200
    page = response.content.decode()
    assert orders_view.metadata_location in page
    assert 'name="metadata_location"' not in page


def test_the_other_admin_pages_open(admin_client, orders_view):
    version = orders_view.versions.get()
    pages = [
        reverse("admin:catalog_namespace_changelist"),
        reverse("admin:catalog_viewversion_change", args=[version.pk]),
        reverse("admin:catalog_viewversionlogentry_changelist"),
        reverse("admin:catalog_viewschemafield_changelist"),
        reverse("admin:catalog_table_changelist"),
        reverse("admin:catalog_catalogevent_changelist") + "?result__exact=ok",
    ]

    assert [admin_client.get(page).status_code for page in pages] == [200] * len(pages)


def test_a_namespace_added_in_the_admin_is_recorded_in_the_history(admin_client):
    response = admin_client.post(
        reverse("admin:catalog_namespace_add"), {"name": "finance", "properties": '{"a": 1}'}
    )

    assert response.status_code == 302
    assert Namespace.objects.get(name="finance").properties == {"a": "1"}
    assert CatalogEvent.objects.get().action == "create_namespace"


def test_an_invalid_namespace_name_is_refused_in_the_admin(admin_client):
    response = admin_client.post(
        reverse("admin:catalog_namespace_add"), {"name": "bad/name", "properties": "{}"}
    )

    assert response.status_code == 200
    assert not Namespace.objects.exists()


def test_an_operator_adds_engine_credentials_and_sees_the_secret_once(admin_client, admin_user):
    from catalog.models import CatalogClient
    from catalog.services.credentials import issue_token

    response = admin_client.post(
        reverse("admin:catalog_catalogclient_add"),
        {"name": "spark-prod", "user": admin_user.pk},
        follow=True,
    )

    assert response.status_code == 200
    client = CatalogClient.objects.get(name="spark-prod")
    [message] = [str(m) for m in response.context["messages"] if "credential=" in str(m)]
    credential = message.split("credential=")[1]
    client_id, secret = credential.split(":")
    assert client_id == client.client_id
    assert secret not in client.secret_hash
    assert issue_token(client_id=client_id, client_secret=secret).access_token
