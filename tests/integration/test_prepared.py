"""A query compiled once (catalog.prepared) answers as the ORM would with each call's values,
and refuses to run when a value is not one of the query's parameters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from unittest.mock import ANY
from uuid import UUID, uuid4

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from catalog.models import CatalogEvent, Namespace
from catalog.prepared import Prepared

pytestmark = pytest.mark.django_db

SAMPLE_TIME = datetime(1970, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


def _since(now: datetime, kind: str):
    return (
        CatalogEvent.objects.filter(occurred_at__gte=now, object_type=kind)
        .order_by("occurred_at")
        .values_list("object_name", "occurred_at")
    )


def test_a_prepared_query_answers_as_the_orm_with_each_calls_values():
    now = timezone.now()
    for minutes, name, kind in ((-10, "s.old", "view"), (5, "s.new", "view"), (20, "t", "table")):
        event = CatalogEvent.objects.create(action="create", object_type=kind, object_name=name)
        CatalogEvent.objects.filter(pk=event.pk).update(
            occurred_at=now + timedelta(minutes=minutes)
        )
    prepared = Prepared(_since, now=SAMPLE_TIME, kind="sample kind")
    for moment, kind in ((now, "view"), (now - timedelta(hours=1), "view"), (now, "table")):
        assert prepared.rows(now=moment, kind=kind) == list(_since(moment, kind))
    assert [name for name, _ in prepared.rows(now=now - timedelta(hours=1), kind="view")] == [
        "s.old",
        "s.new",
    ]
    # Aware datetimes come back, as the ORM gives them.
    assert prepared.rows(now=now, kind="table")[0][1].tzinfo is not None
    early = now - timedelta(hours=1)
    assert prepared.rows(now=early, kind="view", limit=1, offset=1) == [("s.new", ANY)]


def test_a_prepared_query_is_compiled_once_and_run_through_djangos_cursor():
    calls = []

    def build(name: str):
        calls.append(name)
        return Namespace.objects.filter(name=name).values_list("name", flat=True)

    Namespace.objects.create(name="sales")
    prepared = Prepared(build, name="sample name")
    with CaptureQueriesContext(connection) as queries:
        assert prepared.rows(name="sales") == [("sales",)]
        assert prepared.rows(name="hr") == []
    assert calls == ["sample name"]
    assert len(queries.captured_queries) == 2


def test_a_whole_number_is_a_value_too():
    for count in (1, 3, 5):
        CatalogEvent.objects.create(action="commit", object_type="table", count=count)
    prepared = Prepared(
        lambda least: CatalogEvent.objects.filter(count__gte=least)
        .order_by("count")
        .values_list("count", flat=True),
        least=7_654_321,
    )
    assert prepared.rows(least=3) == [(3,), (5,)]
    assert prepared.rows(least=6) == []


def test_a_value_the_query_does_not_take_as_a_parameter_is_refused():
    prepared = Prepared(lambda name: Namespace.objects.filter(name="sales"), name="sample name")
    with pytest.raises(RuntimeError, match="does not take"):
        prepared.rows(name="sales")
    with pytest.raises(TypeError):
        Prepared(lambda name: Namespace.objects.all(), name="x").rows(other="y")


def test_a_prepared_query_of_instances_gives_them_with_their_related_rows():
    sales = Namespace.objects.create(name="sales")
    Namespace.objects.create(name="hr")
    for name in ("a", "b"):
        CatalogEvent.objects.create(action="create", object_type="view", object_name=name)
    prepared = Prepared(
        lambda name: Namespace.objects.filter(name=name).order_by("pk"), name="sample name"
    )
    [found] = prepared.objects(name="sales")
    assert isinstance(found, Namespace) and found.pk == sales.pk and found.name == "sales"
    assert prepared.objects(name="nope") == []
    events = Prepared(
        lambda kind: CatalogEvent.objects.filter(object_type=kind).order_by("object_name"),
        kind="sample kind",
    )
    assert [e.object_name for e in events.objects(kind="view", limit=1, offset=1)] == ["b"]
    values = Prepared(lambda name: Namespace.objects.filter(name=name).values_list("pk"), name="x")
    with pytest.raises(RuntimeError, match="not model instances"):
        values.objects(name="sales")


def test_a_uuid_is_a_value_too():
    """A UUID is passed as the ORM passes it (text on SQLite, a uuid on PostgreSQL)."""
    events = [
        CatalogEvent.objects.create(action="create", object_type="table", object_uuid=uuid4())
        for _ in range(2)
    ]
    prepared = Prepared(
        lambda object_uuid: CatalogEvent.objects.filter(object_uuid=object_uuid).values_list(
            "pk", flat=True
        ),
        object_uuid=UUID("1a4e5c1e-0000-4000-8000-1a4e5c1e0000"),
    )
    for event in events:
        assert prepared.rows(object_uuid=event.object_uuid) == [(event.pk,)]
    assert prepared.rows(object_uuid=uuid4()) == []
