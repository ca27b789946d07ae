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

from catalog import access, services
from catalog.core.access import READ_METADATA
from catalog.models import CatalogEvent, CatalogObject, Namespace
from catalog.prepared import Prepared
from catalog.services import grants

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


def test_a_prepared_count_counts_as_the_orm_up_to_its_limit():
    now = timezone.now()
    for name in ("a", "b", "c"):
        CatalogEvent.objects.create(action="create", object_type="view", object_name=name)
    prepared = Prepared(_since, now=SAMPLE_TIME, kind="sample kind")
    past = now - timedelta(hours=1)
    assert prepared.count(now=past, kind="view") == _since(past, "view").count() == 3
    assert prepared.count(now=past, kind="view", limit=2) == 2
    assert prepared.count(now=past, kind="table") == 0


def test_a_visibility_compiled_once_finds_what_the_grants_filter_finds(django_user_model):
    """catalog.access's `visible_where` with a principal's `visibility` (the SQL of a list
    compiled once) keeps the objects `objects_condition` keeps: granted by id, in a granted
    namespace or one under it, and their own; not a namespace whose name merely starts the
    same."""
    root = django_user_model.objects.create_superuser("root", password="root-password")
    reader = django_user_model.objects.create_user("rita", password="rita-password")
    schema = {"type": "struct", "schema-id": 0, "fields": []}
    for namespace in ("sales", "sales.eu", "salesx", "ops", "hr"):
        services.create_namespace(name=namespace, actor=root)
        for name in ("a", "b"):
            services.create_table(namespace=namespace, name=name, schema=schema, actor=root)
    services.create_table(namespace="hr", name="mine", schema=schema, actor=reader)
    for securable, namespace, name in (("namespace", "sales", None), ("object", "ops", "a")):
        grants.grant(
            privilege=READ_METADATA,
            principal_type="user",
            principal="rita",
            securable_type=securable,
            namespace=namespace,
            name=name,
            actor=root,
        )
    who = access.Principal(django_user_model.objects.get(pk=reader.pk))
    visibility = access.visibility(who)
    assert visibility is not None

    def names(condition) -> list[str]:
        rows = CatalogObject.objects.filter(condition).values_list("namespace__name", "name")
        return sorted(f"{namespace}.{name}" for namespace, name in rows)

    found = names(access.visible_where(**visibility.values()))
    assert found == names(access.objects_condition(who))
    assert found == ["hr.mine", "ops.a", "sales.a", "sales.b", "sales.eu.a", "sales.eu.b"]
    # One who sees everything needs no filter at all.
    assert access.visibility(access.Principal(root)) is None
