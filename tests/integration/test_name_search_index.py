"""Searching by name goes through a trigram index of qualified names on SQLite (migration
0007) when few names contain the text, and walks the (namespace, name) index when many do;
either way it finds what the plain search of every name finds, and the index follows
objects created, renamed, moved and dropped."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.models import Q
from django.test.utils import CaptureQueriesContext

from catalog import access, selectors, services
from catalog.core.access import READ_DATA
from catalog.models import CatalogObject, Namespace
from catalog.services import grants

pytestmark = pytest.mark.django_db

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}
NAMES = {
    "sales": ["region_revenue", "Région_Été", "100%_share", "a_b", 'q"uote', "it's"],
    "sales.eu": ["orders", "region"],
    "ops": ["region_revenue_daily"],
}


@pytest.fixture
def catalog():
    for namespace, names in NAMES.items():
        services.create_namespace(name=namespace)
        for name in names:
            services.create_table(namespace=namespace, name=name, schema=SCHEMA)


@pytest.fixture(params=["rare", "common", "deep"])
def frequency(request, monkeypatch):
    """Every way: through the index's candidates, (every text counting as common) the walk
    of the (namespace, name) index, and (a page far down) the index's whole list of
    candidates for the text's end, read inside the query."""
    if request.param in ("common", "deep"):
        monkeypatch.setattr(selectors, "NAME_CANDIDATES", 0)
    if request.param == "deep":
        monkeypatch.setattr(selectors, "DEEP_WALK_OBJECTS", 0)
        candidates = selectors._name_candidates
        monkeypatch.setattr(
            selectors, "_name_candidates", lambda text, upto=None: candidates(text, upto=10**9)
        )
    return request.param


def plain(text: str) -> list[str]:
    """What the search finds without any index: every qualified name, compared in Python
    as the database's `icontains` compares (SQLite's LIKE folds ASCII letters only;
    PostgreSQL compares UPPER() of both)."""
    if connection.vendor == "sqlite":
        fold = lambda value: value.translate(ASCII_LOWER)  # noqa: E731
    else:
        fold = str.upper
    objects = CatalogObject.objects.select_related("namespace").order_by("namespace__name", "name")
    return [str(o) for o in objects if fold(text) in fold(str(o))]


ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def found(text: str) -> list[str]:
    ids = selectors.all_ids(selectors.search_ids(text))
    objects = CatalogObject.objects.select_related("namespace").in_bulk(ids)
    return [str(objects[i]) for i in ids]


@pytest.mark.parametrize(
    "text",
    [
        "sales.region",  # across the dot
        "s.eu.or",  # across both dots of a two-level namespace
        "eu.region",
        "REGION_rev",  # case
        "région",  # not ASCII: LIKE keeps its case, the index folds it; the result is LIKE's
        "Été",
        "100%",  # % and _ are characters
        "a_b",
        'q"u',
        "it's",
        "xyz",  # in no name
        "ab",  # shorter than a trigram
    ],
)
def test_a_name_is_found_as_the_plain_search_finds_it(catalog, frequency, text):
    assert found(text) == plain(text)


def test_a_rare_text_reads_the_names_the_index_points_to(catalog):
    if connection.vendor != "sqlite":
        pytest.skip("the names' trigram index is SQLite's (PostgreSQL scans the names)")
    with CaptureQueriesContext(connection) as queries:
        assert found("nowhere_at_all") == []
    assert any(selectors.NAME_FTS_TABLE in q["sql"] for q in queries.captured_queries)
    ids = selectors.search_ids("eu.orders")
    assert selectors.all_ids(ids) and "IN (" in str(ids.query)


def test_a_page_far_down_a_common_text_reads_the_index_when_that_is_the_shorter_way(
    catalog, monkeypatch
):
    if connection.vendor != "sqlite":
        pytest.skip("the names' trigram index is SQLite's (PostgreSQL scans the names)")
    monkeypatch.setattr(selectors, "NAME_CANDIDATES", 0)  # "region" counts as common
    # A catalog this small is walked to any page: every name costs less than the count.
    walked = selectors.search_ids("region", upto=10**9)
    assert selectors.NAME_FTS_TABLE not in str(walked.query)
    monkeypatch.setattr(selectors, "DEEP_WALK_OBJECTS", 0)  # as if it were a large one
    first = selectors.search_ids("region", upto=None)
    assert selectors.NAME_FTS_TABLE not in str(first.query)
    deep = selectors.search_ids("region", upto=10**9)  # far down a catalog of 11 names
    assert isinstance(deep, selectors.NamePositions)
    assert deep.namespaces == [("ops", 1, 1), ("sales", 6, 1), ("sales.eu", 2, 1)]
    assert selectors.all_ids(deep) == selectors.all_ids(first)
    # Not when the walk to the page is the shorter read (a page near the top).
    near = selectors.search_ids("region", upto=1)
    assert selectors.NAME_FTS_TABLE not in str(near.query)


def test_a_deep_page_for_one_who_sees_part_of_the_catalog_lists_only_what_they_may_see(
    catalog, monkeypatch
):
    """Where the matches lie (`NamePositions`) counts every object's name: a principal who
    may see only some (grants) is walked through their own, never counted past them."""
    if connection.vendor != "sqlite":
        pytest.skip("the names' trigram index is SQLite's (PostgreSQL scans the names)")
    monkeypatch.setattr(selectors, "NAME_CANDIDATES", 0)
    monkeypatch.setattr(selectors, "DEEP_WALK_OBJECTS", 0)
    visible = Q(namespace__name="sales")
    deep = selectors.search_ids("region", upto=10**9, visible=visible)
    assert not isinstance(deep, selectors.NamePositions)
    names = CatalogObject.objects.filter(pk__in=list(deep)).values_list("namespace__name")
    assert {namespace for (namespace,) in names} == {"sales"}
    assert len(list(deep)) == len(list(selectors.search_ids("region", upto=None, visible=visible)))


@pytest.fixture
def crowded_names():
    """Namespaces whose order as qualified names differs from the list's (namespace, then
    name): "a" < "a-b" < "a.b" as namespaces, but "a-b.x" < "a.b.x" < "a.x" as text; one
    whose own name holds the text; names in mixed case; some without the text."""
    for namespace, count in (("a", 30), ("a-b", 7), ("a.b", 12), ("view_x", 5), ("z", 40)):
        services.create_namespace(name=namespace)
        for i in range(count):
            name = f"View_{i:02d}" if i % 3 else f"view_{i:02d}"
            services.create_table(namespace=namespace, name=name, schema=SCHEMA)
            services.create_table(namespace=namespace, name=f"other_{i:02d}", schema=SCHEMA)


@pytest.mark.parametrize("walk_from_namespace", [True, False])
def test_every_window_of_a_common_text_read_from_where_its_matches_lie_is_the_walks(
    crowded_names, monkeypatch, walk_from_namespace
):
    """A deep page of a text in many names (`NamePositions`) counts the matches namespace by
    namespace and walks from where the page starts (or sorts the candidates, when the
    namespaces it spans hold many objects): the same ids, in the same order, as the walk
    of every name, for any window, across namespaces and past the end."""
    if connection.vendor != "sqlite":
        pytest.skip("the names' trigram index is SQLite's (PostgreSQL scans the names)")
    monkeypatch.setattr(selectors, "NAME_CANDIDATES", 0)
    walked = selectors.all_ids(selectors.search_ids("VIEW_"))
    assert len(walked) == 94 + 5  # view_x's other_ names match by their namespace
    monkeypatch.setattr(selectors, "DEEP_WALK_OBJECTS", 0)
    positions = selectors.search_ids("VIEW_", upto=10**9)
    assert isinstance(positions, selectors.NamePositions) and len(positions) == len(walked)
    monkeypatch.setattr(selectors, "CANDIDATE_COST", 10**6 if walk_from_namespace else 0)
    assert [name for name, _, _ in positions.namespaces] == ["a", "a-b", "a.b", "view_x", "z"]
    for start in range(0, len(walked) + 3, 4):
        for size in (1, 13, 51):
            assert positions[start : start + size] == walked[start : start + size]
    assert selectors.all_ids(positions) == walked


def test_a_deep_page_of_a_common_text_past_its_bound_walks_the_names(crowded_names, monkeypatch):
    """More candidates than reading them is worth for the page asked: the walk, as before
    (one query counted them, and read no object)."""
    if connection.vendor != "sqlite":
        pytest.skip("the names' trigram index is SQLite's (PostgreSQL scans the names)")
    monkeypatch.setattr(selectors, "NAME_CANDIDATES", 0)
    monkeypatch.setattr(selectors, "DEEP_WALK_OBJECTS", 0)
    monkeypatch.setattr(selectors, "DEEP_CANDIDATES", 50)  # fewer than "view_" has
    walked = selectors.search_ids("view_", upto=10**9)
    assert not isinstance(walked, selectors.NamePositions)
    assert selectors.NAME_FTS_TABLE not in str(walked.query)


def test_the_index_follows_renames_moves_and_drops(catalog):
    services.rename_table(
        namespace="sales", name="a_b", new_namespace="ops", new_name="renamed_table"
    )
    assert found("renamed_table") == ["ops.renamed_table"] == plain("renamed_table")
    assert found("sales.a_b") == []
    services.drop_table(namespace="ops", name="renamed_table")
    assert found("renamed_table") == []
    services.create_view(namespace="sales.eu", name="brand_new", sql="SELECT 1 AS one")
    assert found("eu.brand") == ["sales.eu.brand_new"]
    Namespace.objects.filter(name="ops").update(name="operations")  # e.g. from the admin
    assert found("operations.region") == ["operations.region_revenue_daily"]


@pytest.mark.django_db(transaction=True)
def test_the_migration_unapplies_and_applies_cleanly(catalog):
    call_command("migrate", "catalog", "0006", verbosity=0)
    assert selectors.NAME_FTS_TABLE not in connection.introspection.table_names()
    # Every app forward again: going back unapplied the migrations of apps that depend on
    # later catalog migrations (maintenance's tables) as well.
    call_command("migrate", verbosity=0)
    if connection.vendor == "sqlite":
        assert selectors.NAME_FTS_TABLE in connection.introspection.table_names()
    assert found("sales.region") == plain("sales.region") != []


def test_a_search_by_one_who_sees_part_of_the_catalog_walks_the_names_in_order(
    catalog, django_user_model
):
    """Their visibility (granted objects, namespaces, their own) is tested on each entry of
    the (namespace, name, owner) index as the walk passes it: SQLite neither reads every
    object nor sorts them (at 11,000 objects: 40 ms against 1.3)."""
    if connection.vendor != "sqlite":
        pytest.skip("the plan read is SQLite's")
    reader = django_user_model.objects.create_user("rita", password="rita-password")
    grants.grant(
        privilege=READ_DATA,
        principal_type="user",
        principal="rita",
        securable_type="namespace",
        namespace="sales",
        actor=django_user_model.objects.create_superuser("root", password="root-password"),
    )
    who = access.Principal(reader)
    ids = selectors.search_ids(
        "region",
        sql=True,
        in_many_names=True,
        visible=access.objects_condition(who),
        readable=access.objects_condition(who, READ_DATA),
    )
    sql, params = ids[:201].query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        plan = "\n".join(str(row) for row in cursor.fetchall())
    assert "catalog_object_visible" in plan, plan
    assert "TEMP B-TREE" not in plan, plan
    names = CatalogObject.objects.filter(pk__in=list(ids)).values_list("namespace__name")
    assert {namespace for (namespace,) in names} == {"sales", "sales.eu"}
