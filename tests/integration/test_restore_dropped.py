"""Bringing back a table or view dropped without purge (Snowflake's UNDROP, Lakekeeper's
soft deletion): listed per namespace from the history, restored at the metadata file it had
when dropped, through the API and the namespace's page; a purged one cannot come back."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from catalog import selectors, services
from catalog.models import CatalogEvent, Table, View

pytestmark = pytest.mark.django_db

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}


def api_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def sales(editor):
    services.create_namespace(name="sales", actor=editor)
    services.create_namespace(name="sales.eu", actor=editor)
    table = services.create_table(namespace="sales", name="orders", schema=SCHEMA).obj
    view = services.create_view(namespace="sales", name="big", sql="SELECT 1 AS id")
    return table, view


def listed(client: APIClient, namespace: str = "sales") -> list[dict]:
    answer = client.get(f"/api/namespaces/{namespace}/dropped/")
    assert answer.status_code == 200, answer.content
    return answer.json()


def test_a_dropped_table_is_listed_and_comes_back_at_the_metadata_file_it_had(
    sales, editor, viewer
):
    table, _ = sales
    location, uuid = table.metadata_location, str(table.uuid)
    services.drop_table(namespace="sales", name="orders", actor=editor)
    [dropped] = listed(api_for(viewer))
    assert (dropped["uuid"], dropped["kind"], dropped["name"]) == (uuid, "table", "orders")
    assert dropped["metadata_location"] == location and dropped["dropped_by"] == editor.username

    url = f"/api/namespaces/sales/dropped/{uuid}/restore"
    assert api_for(viewer).post(url, {}, format="json").status_code == 403
    restored = api_for(editor).post(url, {}, format="json")
    assert restored.status_code == 201, restored.content
    assert restored.json() == {"kind": "table", "namespace": "sales", "name": "orders"}
    back = Table.objects.get(namespace__name="sales", name="orders")
    assert back.metadata_location == location and str(back.uuid) == uuid
    assert CatalogEvent.objects.filter(action="restore_table", object_uuid=back.uuid).exists()
    # In the catalog again: no longer listed, and a second restore finds nothing to restore.
    assert listed(api_for(viewer)) == []
    again = api_for(editor).post(url, {}, format="json")
    assert again.status_code == 404 and "was dropped from sales" in again.json()["error"]


def test_a_dropped_view_comes_back_under_a_new_name_from_the_namespace_page(sales, editor, client):
    _, view = sales
    services.drop_view(namespace="sales", name="big", actor=editor)
    client.force_login(editor)
    page = client.get(reverse("catalog:namespace-dropped", kwargs={"namespace": "sales"}))
    assert page.status_code == 200 and "sales.big" in page.content.decode()
    answer = client.post(
        reverse("catalog:namespace-dropped", kwargs={"namespace": "sales"}),
        {"uuid": str(view.uuid), "name": "big_again"},
    )
    assert answer.status_code == 302
    assert answer["Location"] == reverse(
        "catalog:view-detail", kwargs={"namespace": "sales", "name": "big_again"}
    )
    assert View.objects.get(namespace__name="sales", name="big_again").uuid == view.uuid


def test_a_purged_table_is_not_listed_and_cannot_come_back(sales, editor):
    table, _ = sales
    services.drop_table(namespace="sales", name="orders", purge=True, actor=editor)
    assert selectors.dropped("sales") == []
    answer = api_for(editor).post(
        f"/api/namespaces/sales/dropped/{table.uuid}/restore", {}, format="json"
    )
    assert answer.status_code == 404 and "purged one cannot come back" in answer.json()["error"]


def test_a_taken_name_or_folder_is_a_409_and_restores_nothing(sales, editor):
    table, _ = sales
    services.drop_table(namespace="sales", name="orders", actor=editor)
    services.create_table(namespace="sales", name="orders", schema=SCHEMA)
    answer = api_for(editor).post(
        f"/api/namespaces/sales/dropped/{table.uuid}/restore", {}, format="json"
    )
    assert answer.status_code == 409, answer.content
    assert not Table.objects.filter(uuid=table.uuid).exists()
    # Under another name it still may not share the new table's folder (its old one).
    url = f"/api/namespaces/sales/dropped/{table.uuid}/restore"
    elsewhere = api_for(editor).post(url, {"name": "old_orders"}, format="json")
    assert elsewhere.status_code == 409 and "overlaps" in elsewhere.json()["error"]
    # Once the folder is free again, it comes back.
    services.drop_table(namespace="sales", name="orders", actor=editor)
    back = api_for(editor).post(url, {"name": "old_orders"}, format="json")
    assert back.status_code == 201, back.content
    assert Table.objects.get(uuid=table.uuid).name == "old_orders"


def test_a_child_namespaces_drops_are_its_own(sales, editor, viewer):
    services.create_table(namespace="sales.eu", name="orders", schema=SCHEMA)
    services.drop_table(namespace="sales.eu", name="orders", actor=editor)
    assert listed(api_for(viewer)) == []
    assert [d["name"] for d in listed(api_for(viewer), "sales.eu")] == ["orders"]


@pytest.mark.parametrize(
    "uuid, body, statuses",
    [
        ("..%2f..%2fetc", {}, (404,)),
        ("not-a-uuid", {}, (404,)),
        ("x" * 5000, {}, (404,)),
        ("{table}", {"name": "a/b"}, (400,)),
        ("{table}", {"name": "a\x00b"}, (400,)),
        ("{table}", {"name": ["x"]}, (400,)),
        ("{table}", {"name": ""}, (400,)),
    ],
)
def test_hostile_restores_are_json_4xx_and_restore_nothing(sales, editor, uuid, body, statuses):
    table, _ = sales
    services.drop_table(namespace="sales", name="orders", actor=editor)
    answer = api_for(editor).post(
        f"/api/namespaces/sales/dropped/{uuid.format(table=table.uuid)}/restore",
        body,
        format="json",
    )
    assert answer.status_code in statuses, answer.content
    assert answer["Content-Type"] == "application/json"
    assert not Table.objects.filter(uuid=table.uuid).exists()


def test_an_unknown_namespace_is_a_404(editor):
    assert api_for(editor).get("/api/namespaces/nope/dropped/").status_code == 404


def test_a_drop_whose_files_an_engine_deleted_is_not_listed_and_cannot_come_back(sales, editor):
    # Spark's DROP TABLE ... PURGE drops without purging, then deletes the files itself.
    from pathlib import Path

    table, _ = sales
    services.drop_table(namespace="sales", name="orders", actor=editor)
    Path(table.metadata_location.removeprefix("file://").removeprefix("file:")).unlink()
    assert selectors.dropped("sales") == []
    answer = api_for(editor).post(
        f"/api/namespaces/sales/dropped/{table.uuid}/restore", {}, format="json"
    )
    assert answer.status_code == 404 and "an engine deleted" in answer.json()["error"]
