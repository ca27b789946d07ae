"""`manage.py load_samples`: a `samples` namespace of three related tables, about a million
rows, written with pyiceberg through the catalog's own commit path, once."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from pyiceberg.table import StaticTable

from catalog import services
from catalog.models import CatalogEvent, Namespace, Table
from catalog.services.samples import SAMPLES_USERNAME

pytestmark = pytest.mark.django_db


def load(*args: str) -> str:
    out = StringIO()
    call_command("load_samples", *args, stdout=out)
    return out.getvalue()


def read(table: Table):
    return StaticTable.from_metadata(table.metadata_location)


def test_load_samples_writes_three_described_partitioned_tables_through_the_commit_path():
    output = load()

    namespace = Namespace.objects.get(name="samples")
    assert "sample data" in namespace.properties["comment"].lower()
    tables = {t.name: t for t in Table.objects.filter(namespace=namespace)}
    assert sorted(tables) == ["customers", "events", "orders"]
    counts = {name: read(table).scan().to_arrow().num_rows for name, table in tables.items()}
    assert counts == {"customers": 30_000, "orders": 800_000, "events": 150_000}
    for name, table in tables.items():
        assert table.properties["comment"], name
    assert "Created table samples.orders: 800,000 rows" in output

    orders = read(tables["orders"])
    assert [str(f.transform) for f in orders.spec().fields] == ["month"]
    assert orders.schema().find_field("amount").doc == "Total, in USD"
    events = read(tables["events"])
    assert [str(f.transform) for f in events.spec().fields] == ["day"]
    # Appended over time: one snapshot per batch, each adding its rows.
    assert [s.summary["added-records"] for s in events.snapshots()] == ["30000"] * 5
    assert tables["events"].snapshots.count() == 5

    # Every commit is the samples' own account's, recorded like any other commit.
    actors = set(
        CatalogEvent.objects.filter(object_name__startswith="samples").values_list(
            "actor__username", flat=True
        )
    )
    assert actors == {SAMPLES_USERNAME}


def test_a_second_run_changes_nothing_and_says_so():
    load()
    pointers = dict(Table.objects.values_list("name", "metadata_location"))
    events = CatalogEvent.objects.count()

    output = load()

    assert "nothing changed" in output
    assert dict(Table.objects.values_list("name", "metadata_location")) == pointers
    assert CatalogEvent.objects.count() == events


def test_a_run_makes_only_what_is_missing(editor):
    load()
    services.drop_table(namespace="samples", name="orders", purge=True, actor=editor)

    output = load()

    assert "Created table samples.orders" in output
    assert "Kept samples.customers as it is" in output
    assert Table.objects.filter(namespace__name="samples").count() == 3


def test_make_run_leaves_samples_someone_dropped_dropped(editor):
    load()
    for name in ("customers", "orders", "events"):
        services.drop_table(namespace="samples", name=name, purge=True, actor=editor)
    services.drop_namespace(name="samples", actor=editor)

    output = load("--not-if-dropped")

    assert "dropped" in output
    assert not Namespace.objects.filter(name="samples").exists()
    # Asked for by name, they come back.
    load()
    assert Table.objects.filter(namespace__name="samples").count() == 3


def test_the_launchers_load_nothing_when_load_samples_is_0(settings):
    # `make run` and compose's migrate pass --unless-turned-off.
    settings.LOAD_SAMPLES = False

    output = load("--not-if-dropped", "--unless-turned-off")

    assert "LOAD_SAMPLES=0" in output
    assert not Namespace.objects.filter(name="samples").exists()
    # Asked for by name, they are loaded whatever it says.
    load()
    assert Table.objects.filter(namespace__name="samples").count() == 3
