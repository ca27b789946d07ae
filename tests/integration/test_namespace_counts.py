"""Each namespace's counts of views, tables and materialized tables (catalog.counts) follow
its objects through every way they come and go: creates, renames into another namespace,
drops, a restore of a dropped object, a materialized table and its drop. The home page
shows them without counting."""

from __future__ import annotations

import pytest
from django.urls import reverse

from catalog import counts, selectors, services
from catalog.core.errors import AlreadyExists
from catalog.models import Namespace
from refresh.models import MaterializedTable

pytestmark = pytest.mark.django_db

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}


def _kept() -> dict[str, tuple[int, int, int]]:
    return {
        ns.name: (ns.view_total, ns.table_total, ns.materialized_total)
        for ns in Namespace.objects.order_by("name")
    }


def _counted() -> dict[str, tuple[int, int, int]]:
    counts.recount()
    return _kept()


def _materialized(namespace: str, name: str) -> MaterializedTable:
    table = services.create_table(namespace=namespace, name=name, schema=SCHEMA).obj
    return MaterializedTable.objects.create(
        table=table,
        query="SELECT id FROM src",
        freshness_value=1,
        freshness_unit="HOUR",
        refresh_mode="FULL",
        state="ACTIVATED",
    )


def test_counts_follow_creates_renames_drops_and_restores():
    for name in ("sales", "ops"):
        services.create_namespace(name=name)
    services.create_view(namespace="sales", name="orders", sql="SELECT 1 AS id")
    services.create_view(namespace="sales", name="returns", sql="SELECT 2 AS id")
    services.create_table(namespace="sales", name="events", schema=SCHEMA)
    services.create_table(namespace="ops", name="logs", schema=SCHEMA)
    _materialized("sales", "daily")
    assert _kept() == {"ops": (0, 1, 0), "sales": (2, 2, 1)}

    services.rename_view(namespace="sales", name="returns", new_namespace="ops", new_name="ret")
    services.rename_table(namespace="sales", name="daily", new_namespace="ops", new_name="day")
    services.rename_table(namespace="ops", name="logs", new_namespace="ops", new_name="log")
    assert _kept() == {"ops": (1, 2, 1), "sales": (1, 1, 0)}

    services.drop_view(namespace="sales", name="orders")
    services.drop_table(namespace="ops", name="day")  # its materialized table goes with it
    assert _kept() == {"ops": (1, 1, 0), "sales": (0, 1, 0)}
    assert not MaterializedTable.objects.exists()

    dropped = next(e for e in selectors.dropped("sales") if e.object_name == "sales.orders")
    services.restore_dropped(namespace="sales", uuid=str(dropped.object_uuid))
    assert _kept() == {"ops": (1, 1, 0), "sales": (1, 1, 0)}
    assert _kept() == _counted()


def test_a_failed_create_leaves_the_counts_as_they_were():
    services.create_namespace(name="sales")
    services.create_table(namespace="sales", name="events", schema=SCHEMA)
    with pytest.raises(AlreadyExists):
        services.create_table(namespace="sales", name="events", schema=SCHEMA)
    assert _kept() == {"sales": (0, 1, 0)} == _counted()


def test_the_home_page_shows_the_kept_counts(client, viewer):
    services.create_namespace(name="sales")
    services.create_view(namespace="sales", name="orders", sql="SELECT 1 AS id")
    services.create_table(namespace="sales", name="events", schema=SCHEMA)
    _materialized("sales", "daily")
    client.force_login(viewer)
    html = client.get(reverse("catalog:namespace-list")).content.decode()
    row = html[html.index('href="/namespaces/sales/"') :].split("</tr>")[0]
    assert row.count("<td>1</td>") == 2  # one view, one table that is not materialized
    assert f'href="{reverse("refresh:mt-list", args=["sales"])}">1</a>' in row
