"""`ViewRead`: what a view's current version reads, as rows the (namespace, name) index
finds, so that "which views read this table" does not read every view."""

from __future__ import annotations

import re

import pytest
from django.apps import apps
from django.core.management import call_command
from django.urls import reverse

from catalog import services
from catalog.models import View, ViewRead
from catalog.pages import tables as tables_pages
from refresh import lineage
from refresh.sources import readers_of

pytestmark = pytest.mark.django_db

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}


@pytest.fixture
def sales(editor):
    services.create_namespace(name="sales", actor=editor)
    for name in ("orders", "orders_2", "refunds"):
        services.create_table(namespace="sales", name=name, schema=SCHEMA)


def reads_of(view_name: str) -> set[tuple[str, str, str]]:
    return set(
        ViewRead.objects.filter(view__name=view_name).values_list("catalog", "namespace", "name")
    )


def readers(table: str) -> list[str]:
    return [str(v) for v in View.objects.reading("sales", table).order_by("name")]


def test_the_rows_follow_the_current_version_and_go_with_the_view(sales):
    view = services.create_view(namespace="sales", name="report", sql="SELECT id FROM orders")
    assert reads_of("report") == {("", "sales", "orders")}

    services.replace_view(
        namespace="sales",
        name="report",
        sql="SELECT o.id FROM orders_2 AS o JOIN refunds AS r ON o.id = r.id",
    )
    assert reads_of("report") == {("", "sales", "orders_2"), ("", "sales", "refunds")}
    assert readers("orders") == [] and readers("refunds") == ["sales.report"]

    services.drop_view(namespace="sales", name="report")
    assert not ViewRead.objects.filter(view_id=view.pk).exists()


def test_a_lookalike_name_or_spark_s_session_catalog_is_not_a_reader(sales):
    services.create_view(namespace="sales", name="of_orders", sql="SELECT id FROM orders")
    services.create_view(namespace="sales", name="of_orders_2", sql="SELECT id FROM orders_2")
    services.create_view(
        namespace="sales",
        name="elsewhere",
        sql="SELECT id FROM spark_catalog.sales.orders",
        allow_unknown_sources=True,
    )
    assert reads_of("elsewhere") == {("spark_catalog", "sales", "orders")}
    assert readers("orders") == ["sales.of_orders"]
    assert readers_of("sales", "orders") == ["view sales.of_orders"]
    graph = lineage.lineage("sales", "orders", depth=1)
    assert graph["edges"] == [{"source": "sales.orders", "target": "sales.of_orders"}]


def test_an_engines_own_name_for_the_catalog_reads_it_unless_a_namespace_has_that_name(
    editor, sales
):
    """Spark as `lake` writes `lake.sales.orders` into the views it makes: the app reads it
    as its own sales.orders, stored as written. Where a namespace `lake...` exists, the name
    is that namespace's (as Spark reads a name whose first part is no catalog)."""
    services.create_view(
        namespace="sales",
        name="by_engine",
        sql="SELECT id FROM lake.sales.orders",
        allow_unknown_sources=True,
    )
    assert reads_of("by_engine") == {("lake", "sales", "orders")}
    assert readers("orders") == ["sales.by_engine"]
    assert readers_of("sales", "orders") == ["view sales.by_engine"]
    graph = lineage.lineage("sales", "orders", depth=1)
    assert graph["edges"] == [{"source": "sales.orders", "target": "sales.by_engine"}]

    services.create_namespace(name="lake", actor=editor)
    services.create_namespace(name="lake.sales", actor=editor)
    assert readers("orders") == []
    assert lineage.lineage("sales", "orders", depth=1)["edges"] == []


def test_the_table_page_lists_the_views_that_read_the_table(client, viewer, sales):
    services.create_view(namespace="sales", name="report", sql="SELECT id FROM orders")
    services.create_view(namespace="sales", name="other", sql="SELECT id FROM refunds")
    client.force_login(viewer)
    html = client.get(reverse("catalog:table-detail", args=["sales", "orders"])).content.decode()
    section = re.search(r'id="readers".*?</section>', html, re.S).group(0)
    assert reverse("catalog:view-detail", args=["sales", "report"]) in section
    assert "other" not in section


def test_rebuilding_the_mirror_and_the_migration_both_derive_the_rows_from_the_views(sales):
    services.create_view(namespace="sales", name="report", sql="SELECT id FROM refunds")
    ViewRead.objects.all().delete()
    call_command("rebuild_catalog_mirror", verbosity=0)
    assert reads_of("report") == {("", "sales", "refunds")}

    ViewRead.objects.all().delete()
    migration = __import__("catalog.migrations.0005_view_reads", fromlist=["fill_reads"])
    migration.fill_reads(apps, None)
    assert reads_of("report") == {("", "sales", "refunds")}


def test_the_table_page_lists_the_first_readers_and_counts_the_rest(
    client, viewer, sales, monkeypatch
):
    monkeypatch.setattr(tables_pages, "READERS_LISTED", 2)
    for name in ("c_report", "a_report", "b_report"):
        services.create_view(namespace="sales", name=name, sql="SELECT id FROM orders")
    client.force_login(viewer)
    html = client.get(reverse("catalog:table-detail", args=["sales", "orders"])).content.decode()
    section = re.search(r'id="readers".*?</section>', html, re.S).group(0)
    assert "sales.a_report" in section and "sales.b_report" in section
    assert "sales.c_report" not in section
    assert "2 of 3 shown" in section
    assert reverse("refresh:lineage", args=["sales", "orders"]) in section


def test_the_names_the_app_s_spark_registers_are_the_engines_names_views_use(editor, sales):
    from catalog.selectors import engine_catalogs

    for name, sql in [
        ("a", "SELECT id FROM lake.sales.orders"),
        ("b", "SELECT id FROM spark_catalog.sales.orders"),
        ("c", "SELECT id FROM other.sales.orders"),
        ("d", "SELECT id FROM orders"),
    ]:
        services.create_view(namespace="sales", name=name, sql=sql, allow_unknown_sources=True)
    assert engine_catalogs() == {"lake", "other"}
    services.create_namespace(name="other", actor=editor)
    assert engine_catalogs() == {"lake"}


def test_a_name_no_spark_catalog_can_have_is_not_registered_and_the_names_are_bounded(sales):
    """A dot in a name would make the app's Spark set another catalog's property
    (`spark.sql.catalog.lakeview.uri`); thousands of names would burden every session."""
    from catalog import selectors

    services.create_view(
        namespace="sales",
        name="odd",
        sql="SELECT id FROM `lakeview.uri`.sales.orders",
        allow_unknown_sources=True,
    )
    assert selectors.engine_catalogs() == set()
    assert readers("orders") == []
    for i in range(selectors.MAX_ENGINE_CATALOGS + 3):
        services.create_view(
            namespace="sales",
            name=f"v{i}",
            sql=f"SELECT id FROM c{i}.sales.orders",
            allow_unknown_sources=True,
        )
    for name in ("w1", "w2"):  # the name most views use, though last in order
        services.create_view(
            namespace="sales",
            name=name,
            sql="SELECT id FROM zz.sales.orders",
            allow_unknown_sources=True,
        )
    found = selectors.engine_catalogs()
    assert len(found) == selectors.MAX_ENGINE_CATALOGS and "zz" in found
