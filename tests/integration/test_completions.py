"""GET /api/completions/: what the SQL console's editor offers as one types. Names of the
namespaces, tables, views, materialized tables and columns a user may see, starting with
what is typed in any case, bounded in count, and found in the same few queries, each a
range of an index, however many objects a namespace holds."""

# ruff: noqa: F811 - the shared fixtures are imported by name
from __future__ import annotations

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from rest_framework.test import APIClient

from bench.pages import seed_materialized, seed_tables, seed_views, write_shared_metadata
from catalog import completions
from catalog.core.errors import InvalidInput
from catalog.models import CatalogObject, Namespace
from tests.integration.grant_fixtures import admin, alice, api_as, give, take  # noqa: F401

pytestmark = pytest.mark.django_db

URL = reverse("api:completions")


@pytest.fixture
def files(warehouse):
    return write_shared_metadata(warehouse)


@pytest.fixture
def sales(files):
    """sales: views region_revenue and orders; tables region_revenue_daily, Region_Upper,
    other, and region_revenue_mt (a materialized table's); sales.eu and sandbox besides.
    Every table and view has the columns id, region, revenue."""
    view_file, table_file = files
    ns = Namespace.objects.create(name="sales")
    Namespace.objects.create(name="sales.eu")
    Namespace.objects.create(name="sandbox")
    seed_views(ns, ["region_revenue", "orders"], view_file)
    ids = seed_tables(
        ns, ["region_revenue_daily", "region_revenue_mt", "Region_Upper", "other"], table_file
    )
    seed_materialized([ids[1]])
    return ns


@pytest.fixture
def viewer_api(viewer):
    client = APIClient()
    client.force_authenticate(viewer)
    return client


def labels(response) -> list[tuple[str, str]]:
    assert response.status_code == 200, response.content
    return [(item["label"], item["kind"]) for item in response.json()["results"]]


def test_a_prefix_completes_the_tables_views_and_materialized_tables_of_the_namespace(
    viewer_api, sales
):
    found = labels(viewer_api.get(URL, {"prefix": "reg", "namespace": "sales"}))
    assert found == [
        ("region_revenue", "view"),
        ("region_revenue_daily", "table"),
        ("region_revenue_mt", "materialized_table"),
        ("Region_Upper", "table"),
    ]


def test_names_match_whatever_their_case_and_the_case_typed(viewer_api, sales):
    upper = labels(viewer_api.get(URL, {"prefix": "REGION_U", "namespace": "sales"}))
    lower = labels(viewer_api.get(URL, {"prefix": "region_u", "namespace": "sales"}))
    assert upper == lower == [("Region_Upper", "table")]


def test_an_item_says_what_it_is_and_where(viewer_api, sales):
    item = viewer_api.get(URL, {"prefix": "sales.orders.rev"}).json()["results"][0]
    assert item == {
        "label": "revenue",
        "kind": "column",
        "qualified": "sales.orders",
        "type": "double",
    }


def test_a_qualified_prefix_completes_in_its_namespace_without_the_consoles(viewer_api, sales):
    found = labels(viewer_api.get(URL, {"prefix": "sales.o", "namespace": "sandbox"}))
    assert found == [("orders", "view"), ("other", "table")]


def test_the_catalogs_name_in_front_is_skipped(viewer_api, sales, settings):
    found = labels(viewer_api.get(URL, {"prefix": f"{settings.CATALOG_NAME}.sales.ord"}))
    assert found == [("orders", "view")]


def test_a_table_or_view_followed_by_a_dot_completes_its_columns(viewer_api, sales):
    of_table = labels(
        viewer_api.get(URL, {"prefix": "region_revenue_daily.r", "namespace": "sales"})
    )
    of_view = labels(viewer_api.get(URL, {"prefix": "sales.orders."}))
    assert of_table == [("region", "column"), ("revenue", "column")]
    assert of_view == [("id", "column"), ("region", "column"), ("revenue", "column")]


def test_a_bare_prefix_completes_the_columns_of_the_tables_the_statement_reads(viewer_api, sales):
    found = labels(
        viewer_api.get(
            URL, {"prefix": "rev", "namespace": "sandbox", "table": ["sales.orders", "nowhere"]}
        )
    )
    assert found == [("revenue", "column")]


def test_namespaces_complete_whole_and_after_a_qualifier(viewer_api, sales):
    assert labels(viewer_api.get(URL, {"prefix": "sa"})) == [
        ("sales", "namespace"),
        ("sales.eu", "namespace"),
        ("sandbox", "namespace"),
    ]
    assert labels(viewer_api.get(URL, {"prefix": "sales.e"})) == [("eu", "namespace")]


def test_like_wildcards_in_a_prefix_are_plain_characters(viewer_api, files):
    ns = Namespace.objects.create(name="w")
    seed_tables(ns, ["a_b", "axb", "a%c"], files[1])
    assert labels(viewer_api.get(URL, {"prefix": "a_", "namespace": "w"})) == [("a_b", "table")]
    assert labels(viewer_api.get(URL, {"prefix": "a%", "namespace": "w"})) == [("a%c", "table")]
    assert labels(viewer_api.get(URL, {"prefix": "w.a_b.%"})) == []


def test_unknown_namespaces_and_tables_complete_nothing_rather_than_fail(viewer_api, sales):
    assert labels(viewer_api.get(URL, {"prefix": "nowhere.x", "namespace": "nowhere"})) == []
    assert labels(viewer_api.get(URL, {"prefix": "sales.nothing.x"})) == []


def test_an_answer_holds_at_most_the_limit_and_says_it_was_cut(viewer_api, files):
    ns = Namespace.objects.create(name="big")
    seed_tables(ns, [f"t_{i:03d}" for i in range(120)], files[1])
    default = viewer_api.get(URL, {"prefix": "t_", "namespace": "big"}).json()
    assert len(default["results"]) == completions.LIMIT and default["truncated"] is True
    assert default["results"][0]["label"] == "t_000"
    small = viewer_api.get(URL, {"prefix": "t_11", "namespace": "big", "limit": 5}).json()
    assert [r["label"] for r in small["results"]] == [f"t_11{i}" for i in range(5)]
    assert small["truncated"] is True
    whole = viewer_api.get(URL, {"prefix": "t_11", "namespace": "big", "limit": 10}).json()
    assert len(whole["results"]) == 10 and whole["truncated"] is False


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": completions.MAX_LIMIT + 1}, "limit"),
        ({"limit": "0"}, "limit"),
        ({"limit": "many"}, "limit"),
        ({"prefix": "x" * (completions.MAX_PREFIX + 1)}, "prefix"),
        ({"namespace": "n" * (completions.MAX_PREFIX + 1)}, "namespace"),
        ({"table": [f"t{i}" for i in range(completions.MAX_TABLES + 1)]}, "table"),
    ],
)
def test_parameters_out_of_bounds_are_a_400_naming_the_parameter(viewer_api, params, field):
    response = viewer_api.get(URL, params)
    assert response.status_code == 400
    assert response.json()["field"] == field


def test_a_nul_in_a_parameter_is_refused_naming_it(viewer, sales):
    with pytest.raises(InvalidInput) as refused:
        completions.complete(viewer, prefix="sales.\x00")
    assert refused.value.field == "prefix"
    with pytest.raises(InvalidInput) as refused:
        completions.complete(viewer, prefix="", tables=["a\x00"])
    assert refused.value.field == "table"


def test_someone_without_a_role_is_refused_and_the_selector_names_nothing_to_them(
    django_user_model, sales
):
    nobody = django_user_model.objects.create_user(username="nora", password="nora-password")
    client = APIClient()
    client.force_authenticate(nobody)
    assert client.get(URL, {"prefix": "", "namespace": "sales"}).status_code == 403
    assert APIClient().get(URL, {"prefix": "s"}).status_code in (401, 403)
    # The selector decides what may be seen, whoever calls it.
    assert completions.complete(nobody, prefix="", namespace="sales").items == []
    assert completions.complete(nobody, prefix="sales.orders.").items == []


def test_the_page_session_of_a_viewer_is_enough(client, viewer, sales):
    client.force_login(viewer)
    response = client.get(URL, {"prefix": "sales.ord"})
    assert response.status_code == 200
    assert response.json()["results"][0]["label"] == "orders"


def test_the_endpoint_is_in_the_openapi_schema(viewer_api):
    schema = viewer_api.get(reverse("api:schema"), {"format": "json"}).json()
    operation = schema["paths"]["/api/completions/"]["get"]
    assert operation["operationId"] == "completions"
    assert {p["name"] for p in operation["parameters"]} >= {"prefix", "namespace", "table", "limit"}


# -- cost: the same queries whatever the size ---------------------------------------------------

PREFIXES = [
    {"prefix": "", "namespace": "big"},
    {"prefix": "t_1", "namespace": "big"},
    {"prefix": "zzz", "namespace": "big"},
    {"prefix": "big.v_"},
    {"prefix": "big.t_00001.re"},
    {"prefix": "v_00002.", "namespace": "big"},
    {"prefix": "re", "namespace": "big", "table": ["t_00001", "big.v_00003"]},
]


def _grow(files, count: int) -> None:
    ns = Namespace.objects.get_or_create(name="big")[0]
    have = CatalogObject.objects.filter(namespace=ns, kind="table").count()
    seed_tables(ns, [f"t_{i:05d}" for i in range(have, have + count)], files[1])
    seed_views(ns, [f"v_{i:05d}" for i in range(have, have + count)], files[0])


def _queries(client, params) -> tuple[int, list[tuple[str, str]]]:
    with CaptureQueriesContext(connection) as queries:
        found = labels(client.get(URL, params))
    return len(queries), found


def test_completion_asks_the_same_queries_in_a_namespace_of_40_objects_and_of_4000(
    viewer_api, files
):
    _grow(files, 20)
    small = [_queries(viewer_api, params) for params in PREFIXES]
    _grow(files, 1980)
    large = [_queries(viewer_api, params) for params in PREFIXES]
    assert [count for count, _ in small] == [count for count, _ in large]
    # The request's grants (catalog.access, read once per request) and the names.
    assert max(count for count, _ in large) <= 7
    assert len(large[0][1]) == completions.LIMIT
    assert ("region", "column") in large[4][1] and ("revenue", "column") in large[6][1]


def test_a_prefix_reads_one_range_of_the_name_index(viewer, files):
    """The objects of a namespace starting with a prefix come from migration 0015's index
    (a range, in order, stopping at the limit), not from a walk of the namespace."""
    _grow(files, 300)
    ns = Namespace.objects.get(name="big")
    objects = completions.starting_with(CatalogObject.objects.filter(namespace=ns), "t_0001")
    namespaces = completions.starting_with(Namespace.objects.all(), "bi")
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                # Tiny tables: PostgreSQL would rightly scan them; the question is whether
                # the index can serve the range.
                cursor.execute("SET LOCAL enable_seqscan = off")
                cursor.execute("SET LOCAL enable_bitmapscan = off")
        object_plan = objects[:50].explain()
        namespace_plan = namespaces[:50].explain()
    assert "catalog_object_name_prefix" in object_plan, object_plan
    assert "catalog_namespace_name_prefix" in namespace_plan, namespace_plan
    # Read in the index's order: no sort after the range.
    assert "TEMP B-TREE" not in object_plan and "Sort" not in object_plan, object_plan
    assert [o.name for o in objects[:3]] == ["t_00010", "t_00011", "t_00012"]


# -- a user who sees part of the catalog ---------------------------------------------------------
#
# alice holds no role: only what she is granted. A name she may not see must never complete,
# whichever way it is typed: a prefix, a dotted path, a path to a column, the statement's
# tables, the catalog's name in front, or a name one would quote in SQL.


@pytest.fixture
def partial(sales, files):
    """Beside `sales`: namespace secret (table salaries, view payroll, materialized table
    salaries_mt, and `sal ary-quoted`, a name SQL quotes) and, in sales, `region secret`."""
    view_file, table_file = files
    secret = Namespace.objects.create(name="secret")
    ids = seed_tables(secret, ["salaries", "salaries_mt", "sal ary-quoted"], table_file)
    seed_materialized([ids[1]])
    seed_views(secret, ["payroll"], view_file)
    seed_tables(sales, ["region secret"], table_file)
    return sales


def hidden_from(user, params: dict) -> list[tuple[str, str]]:
    return labels(api_as(user).get(URL, params))


def test_a_grant_on_one_namespace_completes_its_names_and_no_other_namespaces(
    admin, alice, partial, files
):
    seed_tables(Namespace.objects.get(name="sandbox"), ["sand_t", "secret_copy"], files[1])
    give(admin, "read_data", alice, namespace="sandbox")

    assert hidden_from(alice, {"prefix": "s"}) == [("sandbox", "namespace")]
    assert hidden_from(alice, {"prefix": ""}) == [("sandbox", "namespace")]
    assert hidden_from(alice, {"prefix": "", "namespace": "sandbox"}) == [
        ("sand_t", "table"),
        ("secret_copy", "table"),
        ("sandbox", "namespace"),
    ]
    assert hidden_from(alice, {"prefix": "sandbox.sand_t.re"}) == [
        ("region", "column"),
        ("revenue", "column"),
    ]
    for params in [
        {"prefix": "sec"},
        {"prefix": "SECRET"},
        {"prefix": "sal", "namespace": "secret"},
        {"prefix": "secret."},
        {"prefix": "secret.sal"},
        {"prefix": "secret.pay"},
        {"prefix": "secret.salaries."},
        {"prefix": "secret.salaries_mt.re"},
        {"prefix": "secret.payroll."},
        {"prefix": "SECRET.Salaries."},
        {"prefix": "lakeview.secret.sal"},
        {"prefix": "secret.sal ary"},
        {"prefix": "secret.sal ary-quoted."},
        {"prefix": "`secret`.`sal ary-quoted`."},
        {"prefix": "re", "table": ["secret.salaries", "secret.payroll"]},
        {"prefix": "re", "namespace": "secret", "table": ["salaries", "salaries_mt"]},
        {"prefix": "sales.o"},
        {"prefix": "sales.e"},
        {"prefix": "sales.orders."},
    ]:
        assert hidden_from(alice, params) == [], params


def test_a_grant_on_one_table_completes_it_and_its_columns_and_nothing_else_of_its_namespace(
    admin, alice, partial
):
    give(admin, "read_data", alice, namespace="sales", name="region_revenue_daily")

    # The namespace shows (she holds a grant in it); its other objects do not.
    assert hidden_from(alice, {"prefix": "sa"}) == [("sales", "namespace")]
    assert hidden_from(alice, {"prefix": "", "namespace": "sales"}) == [
        ("region_revenue_daily", "table"),
        ("sales", "namespace"),
    ]
    assert hidden_from(alice, {"prefix": "reg", "namespace": "sales"}) == [
        ("region_revenue_daily", "table")
    ]
    assert hidden_from(alice, {"prefix": "sales.REG"}) == [("region_revenue_daily", "table")]
    assert hidden_from(alice, {"prefix": "region_revenue_daily.rev", "namespace": "sales"}) == [
        ("revenue", "column")
    ]
    assert hidden_from(
        alice,
        {"prefix": "rev", "namespace": "sales", "table": ["orders", "region_revenue_daily"]},
    ) == [("revenue", "column")]
    for params in [
        # the view, the materialized table, the other tables and the namespaces around it
        {"prefix": "sales.orders."},
        {"prefix": "sales.ord"},
        {"prefix": "sales.region_revenue."},
        {"prefix": "sales.region_revenue_mt."},
        {"prefix": "region_revenue_mt.re", "namespace": "sales"},
        {"prefix": "sales.Region_Upper."},
        {"prefix": "SALES.REGION_UPPER.R"},
        {"prefix": "sales.other.id"},
        {"prefix": "sales.region secret."},
        {"prefix": "sales.region s"},
        {"prefix": "`sales`.`region secret`."},
        {"prefix": "lakeview.sales.orders."},
        {"prefix": "rev", "namespace": "sales", "table": ["orders", "region_revenue_mt"]},
        {"prefix": "rev", "table": ["sales.Region_Upper", "sales.region secret"]},
        {"prefix": "sales.e"},
        {"prefix": "sales.eu."},
        {"prefix": "sand"},
        {"prefix": "secret.sal"},
        {"prefix": "secret.salaries."},
    ]:
        assert hidden_from(alice, params) == [], params


def test_a_grant_on_a_child_namespace_shows_its_parents_name_and_none_of_its_objects(
    admin, alice, partial, files
):
    seed_tables(Namespace.objects.get(name="sales.eu"), ["eu_orders"], files[1])
    give(admin, "read_data", alice, namespace="sales.eu")

    assert hidden_from(alice, {"prefix": "sa"}) == [
        ("sales", "namespace"),
        ("sales.eu", "namespace"),
    ]
    assert hidden_from(alice, {"prefix": "sales.eu."}) == [("eu_orders", "table")]
    assert hidden_from(alice, {"prefix": "", "namespace": "sales"}) == [
        ("sales", "namespace"),
        ("sales.eu", "namespace"),
    ]
    for params in [
        {"prefix": "sales.o"},
        {"prefix": "sales.reg"},
        {"prefix": "sales.orders."},
        {"prefix": "sales.region_revenue_mt."},
        {"prefix": "rev", "namespace": "sales", "table": ["orders", "region_revenue_daily"]},
    ]:
        assert hidden_from(alice, params) == [], params


def test_a_revoked_grant_stops_its_names_completing(admin, alice, partial):
    give(admin, "read_data", alice, namespace="sandbox")
    give(admin, "read_data", alice, namespace="secret")
    assert hidden_from(alice, {"prefix": "secret.sal"}) == [
        ("sal ary-quoted", "table"),
        ("salaries", "table"),
        ("salaries_mt", "materialized_table"),
    ]
    take(admin, "read_data", alice, namespace="secret")
    assert hidden_from(alice, {"prefix": "secret.sal"}) == []
    assert hidden_from(alice, {"prefix": "secret.salaries."}) == []
