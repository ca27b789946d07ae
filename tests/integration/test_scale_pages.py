"""Pages and list endpoints stay small and cheap as the catalog grows: the home page lists
namespaces with counts, search and namespace pages are paginated, API lists too; search
looks at names first and reads views' SQL only when no name matches or when asked."""

from __future__ import annotations

import dataclasses
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import dateformat, timezone
from rest_framework.test import APIClient

from bench.pages import (
    BIG_NAMESPACE,
    TABLE_PAGE,
    History,
    seed_catalog,
    seed_history,
    seed_materialized,
    seed_tables,
    seed_views,
    write_shared_metadata,
)
from bench.pages import _pages as bench_pages
from catalog import selectors
from catalog.models import CatalogEvent, CatalogObject, Namespace, Table, View
from catalog.pages import search as search_pages
from maintenance.models import HealthSample, MaintenanceRun
from refresh.models import MaterializedTable, RefreshRun

pytestmark = pytest.mark.django_db


@pytest.fixture
def files(warehouse):
    return write_shared_metadata(warehouse)


@pytest.fixture
def crowded(files):
    """300 views in 3 namespaces (100 each) and 5 tables in each."""
    view_file, table_file = files
    for i in range(3):
        ns = Namespace.objects.create(name=f"ns_{i}")
        seed_views(ns, [f"view_{j:03d}" for j in range(100)], view_file)
        seed_tables(ns, [f"table_{j}" for j in range(5)], table_file)


@pytest.fixture
def sales(files):
    view_file, table_file = files
    ns = Namespace.objects.create(name="sales")
    seed_views(ns, ["region_revenue", "orders"], view_file)
    table_ids = seed_tables(ns, ["region_revenue_daily", "region_revenue_mt", "other"], table_file)
    seed_materialized([table_ids[1]])
    return ns


@pytest.fixture
def viewer_api(viewer):
    client = APIClient()
    client.force_authenticate(viewer)
    return client


def test_the_home_page_lists_namespaces_with_counts_not_every_view(client, viewer, crowded):
    client.force_login(viewer)
    response = client.get(reverse("catalog:namespace-list"))
    html = response.content.decode()
    assert response.status_code == 200
    assert "view_000" not in html and "view_099" not in html
    assert len(response.content) < 30_000
    for i in range(3):
        assert reverse("catalog:namespace-detail", args=[f"ns_{i}"]) in html
    assert "<td>100</td>" in html and "<td>5</td>" in html


def test_the_home_page_size_does_not_grow_with_the_number_of_views(client, viewer, files, crowded):
    client.force_login(viewer)
    before = len(client.get(reverse("catalog:namespace-list")).content)
    seed_views(Namespace.objects.get(name="ns_0"), [f"more_{j}" for j in range(200)], files[0])
    after = len(client.get(reverse("catalog:namespace-list")).content)
    assert abs(after - before) < 50


def test_the_home_page_counts_materialized_tables_apart_from_tables(client, viewer, sales):
    client.force_login(viewer)
    html = client.get(reverse("catalog:namespace-list")).content.decode()
    row = html[html.index('href="/namespaces/sales/"') :].split("</tr>")[0]
    assert "<td>2</td>" in row  # views, and tables that are not materialized
    assert reverse("refresh:mt-list", args=["sales"]) in row


def test_the_home_page_answers_in_a_bounded_number_of_queries(
    client, viewer, crowded, django_assert_max_num_queries
):
    client.force_login(viewer)
    client.get(reverse("catalog:namespace-list"))
    with django_assert_max_num_queries(8):
        assert client.get(reverse("catalog:namespace-list")).status_code == 200


def test_search_for_sales_region_finds_the_view_and_the_tables_by_qualified_name(
    client, viewer, sales, crowded
):
    client.force_login(viewer)
    html = client.get(reverse("catalog:search"), {"q": "sales.region"}).content.decode()
    assert 'id="search-results"' in html
    assert "sales.region_revenue<" in html
    assert reverse("catalog:view-detail", args=["sales", "region_revenue"]) in html
    assert reverse("catalog:table-detail", args=["sales", "region_revenue_daily"]) in html
    assert reverse("refresh:mt-detail", args=["sales", "region_revenue_mt"]) in html
    assert "sales.orders" not in html and "sales.other" not in html
    assert "view_000" not in html


def test_search_from_the_home_page_address_still_answers(client, viewer, sales):
    client.force_login(viewer)
    html = client.get(reverse("catalog:namespace-list"), {"q": "les.region_rev"}).content.decode()
    assert 'id="search-results"' in html and "sales.region_revenue" in html


def test_search_matches_across_the_dot_but_not_around_it(client, viewer, sales):
    client.force_login(viewer)
    html = client.get(reverse("catalog:search"), {"q": "sales.orders"}).content.decode()
    assert "sales.orders" in html and "region_revenue" not in html
    nothing = client.get(reverse("catalog:search"), {"q": "sale.sorders"})
    assert b"No view matches" in nothing.content


def test_search_results_are_paginated(client, viewer, crowded):
    client.force_login(viewer)
    first = client.get(reverse("catalog:search"), {"q": "view_"}).content.decode()
    assert "(more than 200)" in first and "page 1 of more than 4" in first
    assert "?q=view_&amp;page=2" in first
    last = client.get(reverse("catalog:search"), {"q": "view_", "page": 6}).content.decode()
    assert "ns_2.view_099" in last and "ns_0.view_000" not in last


def test_the_namespace_page_paginates_its_views(
    client, viewer, crowded, django_assert_max_num_queries
):
    client.force_login(viewer)
    url = reverse("catalog:namespace-detail", args=["ns_1"])
    client.get(url)
    with django_assert_max_num_queries(10):
        first = client.get(url).content.decode()
    assert "view_000" in first and "view_049" in first and "view_050" not in first
    assert "page 1 of 2" in first and "?views_page=2" in first
    second = client.get(url, {"views_page": 2}).content.decode()
    assert "view_050" in second and "view_099" in second and "view_000" not in second
    assert "table_0" in second  # the tables keep their own page


def test_search_by_name_leaves_view_sql_alone_unless_asked(client, viewer, sales):
    """Every seeded view's SQL reads orders_<name>: "orders" names sales.orders, so by
    default only it is listed; asked to, the search adds the views whose SQL says it."""
    client.force_login(viewer)
    with CaptureQueriesContext(connection) as queries:
        html = client.get(reverse("catalog:search"), {"q": "orders"}).content.decode()
    assert not any("viewrepresentation" in q["sql"] for q in queries.captured_queries)
    results = re.search(r'id="results">(.*?)</table>', html, re.S).group(1)
    assert "sales.orders<" in results and "region_revenue" not in results
    assert "(1)" in html
    assert 'href="/search/?q=orders&amp;sql=1"' in html  # "Search the SQL of views too"

    both = client.get(reverse("catalog:search"), {"q": "orders", "sql": "1"}).content.decode()
    results = re.search(r'id="results">(.*?)</table>', both, re.S).group(1)
    assert "sales.orders<" in results and "sales.region_revenue<" in results
    assert "region_revenue_daily" not in results  # tables have no SQL
    assert "(2)" in both and '<option value="1" selected>' in both


def test_text_that_no_name_contains_is_looked_for_in_view_sql(client, viewer, sales):
    client.force_login(viewer)
    html = client.get(reverse("catalog:search"), {"q": "FROM orders_region"}).content.decode()
    assert "No name contains" in html
    results = re.search(r'id="results">(.*?)</table>', html, re.S).group(1)
    assert reverse("catalog:view-detail", args=["sales", "region_revenue"]) in results
    assert "sales.orders<" not in results


def test_a_search_of_view_sql_keeps_that_choice_across_its_pages(client, viewer, crowded):
    client.force_login(viewer)
    html = client.get(reverse("catalog:search"), {"q": "view_", "sql": "1"}).content.decode()
    assert "(more than 200)" in html and "page 1 of more than 4" in html
    assert "?q=view_&amp;sql=1&amp;page=2" in html
    # The form sends sql= for "names first": the page links leave it out.
    names = client.get(reverse("catalog:search"), {"q": "view_", "sql": ""}).content.decode()
    assert "?q=view_&amp;page=2" in names and "sql=&amp;" not in names


def test_a_search_reads_its_first_matches_and_says_more_exist_beyond(
    client, viewer, crowded, monkeypatch
):
    """Beyond `SEARCH_READ` matches (100 here) a search (of views' SQL, or of names) says
    "more than" and links to the next page, not to a last one; the page after the read
    ones reads further, and the last page counts exactly."""
    monkeypatch.setattr(search_pages, "SEARCH_READ", 100)
    client.force_login(viewer)
    search = reverse("catalog:search")
    first = client.get(search, {"q": "view_", "sql": "1"}).content.decode()
    assert "(more than 100)" in first and "page 1 of more than 2" in first
    assert 'rel="last"' not in first and "?q=view_&amp;sql=1&amp;page=2" in first
    second = client.get(search, {"q": "view_", "sql": "1", "page": 2}).content.decode()
    assert "page 2 of more than 2" in second and "?q=view_&amp;sql=1&amp;page=3" in second
    assert "ns_0.view_099<" in second and "ns_0.view_049<" not in second
    # Past the ids read first, a page reads on to its own (and one more).
    third = client.get(search, {"q": "view_", "sql": "1", "page": 3}).content.decode()
    assert "page 3 of more than 3 (101–150 of more than 150)" in third
    assert (
        "ns_1.view_000<" in third
        and "ns_1.view_049<" in third
        and "?q=view_&amp;sql=1&amp;page=4" in third
    )
    last = client.get(search, {"q": "view_", "sql": "1", "page": 6}).content.decode()
    assert "(300)" in last and "page 6 of 6" in last and "ns_2.view_099<" in last
    assert 'rel="next"' not in last
    # A page just past the end (a shorter list than the link's): the last page, its ids
    # read in the one walk that found the end.
    with CaptureQueriesContext(connection) as queries:
        past = client.get(search, {"q": "view_", "sql": "1", "page": 7}).content.decode()
    assert "(300)" in past and "page 6 of 6" in past and "ns_2.view_099<" in past
    walks = [q for q in queries.captured_queries if 'ORDER BY "catalog_namespace"' in q["sql"]]
    assert len(walks) == 1, walks
    negative = client.get(search, {"q": "view_", "sql": "1", "page": "-4"})
    assert negative.status_code == 200 and b"of more than" in negative.content
    for odd in ("x", ""):
        answer = client.get(search, {"q": "view_", "sql": "1", "page": odd}).content.decode()
        assert "page 1 of more than 2" in answer and "ns_0.view_000<" in answer
    huge = client.get(search, {"q": "view_", "sql": "1", "page": "10" * 30}).content.decode()
    assert "(300)" in huge and "ns_2.view_099<" in huge  # past the end: the last page
    by_name = client.get(search, {"q": "view_"}).content.decode()  # names alone: the same
    assert "(more than 100)" in by_name and "page 1 of more than 2" in by_name
    assert 'rel="last"' not in by_name and "?q=view_&amp;page=2" in by_name


def test_a_search_of_a_text_in_many_names_reads_only_its_page_and_shows_the_same(
    client, viewer, crowded, monkeypatch
):
    """A text the names' index finds in more than `SEARCH_READ` names (SQLite): the first
    pages read only their own ids, and show what reading every id up to the limit shows."""
    monkeypatch.setattr(search_pages, "SEARCH_READ", 100)
    client.force_login(viewer)
    search = reverse("catalog:search")
    queries = [
        {"q": "view_", "sql": "1"},
        {"q": "VIEW_", "sql": "1", "page": 2},
        {"q": "view_"},
        {"q": "View_", "page": 2},
        {"q": "view_", "page": "-4"},
        {"q": "ns_1.view_0"},  # 100 names: not more than the limit
    ]

    def results(query: dict) -> str:
        html = client.get(search, query).content.decode()
        return re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", html)

    shown = [results(query) for query in queries]
    if connection.vendor == "sqlite":
        assert selectors.names_beyond("vIEW_", 100)
        assert not selectors.names_beyond("ns_1.view_0", 100)
    monkeypatch.setattr(selectors, "names_beyond", lambda text, count: False)
    assert shown == [results(query) for query in queries]
    assert "(more than 100)" in shown[0] and "page 2 of more than 2" in shown[1]
    assert "ns_0.view_099<" in shown[1] and "(100)" in shown[5]


def test_a_page_far_down_a_text_in_many_names_shows_what_the_walk_of_every_name_shows(
    client, viewer, crowded, monkeypatch
):
    """A page past the first read ones of a text the names' index finds in many names, in a
    catalog large enough (SQLite): the matches are counted namespace by namespace and the
    page is walked from where it starts; it shows what walking every name shows, the
    last page included, and past the end the last page."""
    monkeypatch.setattr(search_pages, "SEARCH_READ", 100)
    client.force_login(viewer)
    search = reverse("catalog:search")
    queries = [{"q": "view_", "page": page} for page in (6, 7, 8, 100)]
    queries.append({"q": "VIEW_0", "page": 6})

    def results(query: dict) -> str:
        html = client.get(search, query).content.decode()
        return re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", html)

    walked = [results(query) for query in queries]
    monkeypatch.setattr(selectors, "DEEP_WALK_OBJECTS", 0)  # as if it were large
    monkeypatch.setattr(selectors, "CANDIDATE_COST", 1)
    with CaptureQueriesContext(connection) as read:
        shown = [results(query) for query in queries]
    if connection.vendor == "sqlite":
        assert any(selectors._DEEP in q["sql"] for q in read.captured_queries)
    assert shown == walked
    assert "page 6 of 6" in shown[0] and "ns_2.view_099<" in shown[0]
    assert "page 6 of 6" in shown[3] and 'rel="next"' not in shown[3]


def test_search_counts_and_pages_every_match_by_name(client, viewer, crowded):
    client.force_login(viewer)
    first = client.get(reverse("catalog:search"), {"q": "ns_1.view_"}).content.decode()
    assert "(100)" in first and "page 1 of 2" in first
    second = client.get(reverse("catalog:search"), {"q": "ns_1.view_", "page": 2}).content
    assert b"ns_1.view_099<" in second and b"ns_1.view_049<" not in second
    few = client.get(reverse("catalog:search"), {"q": "ns_1.view_04"}).content.decode()
    assert "(10)" in few and "ns_1.view_049<" in few and "page 1 of" not in few
    beyond = client.get(reverse("catalog:search"), {"q": "ns_1.view_", "page": 9}).content
    assert b"ns_1.view_099<" in beyond  # out of range: the last page


def test_search_answers_in_a_bounded_number_of_queries(
    client, viewer, crowded, django_assert_max_num_queries
):
    client.force_login(viewer)
    client.get(reverse("catalog:search"), {"q": "view_"})
    for query in ({"q": "view_"}, {"q": "view_", "page": 3}, {"q": "ns_2.view_01"}):
        with django_assert_max_num_queries(8):  # 8: the names' trigram index is one
            assert client.get(reverse("catalog:search"), query).status_code == 200


def test_list_links_and_facts_are_those_of_each_object(client, viewer, files):
    """Rows are built from plain values, their links filled in from one reversed address:
    for any name they must be what reverse() gives, and every column as before."""
    view_file, table_file = files
    ns = Namespace.objects.create(name="équipe b")
    odd = ["my view", "vue_été", "a%b#c?d&e'f", "日本"]
    seed_views(ns, odd, view_file)
    table_ids = seed_tables(ns, ["t 1", "mt#2"], table_file)
    seed_materialized([table_ids[1]])
    client.force_login(viewer)

    home = client.get(reverse("catalog:namespace-list")).content.decode()
    assert f'href="{reverse("catalog:namespace-detail", args=[ns.name])}"' in home
    assert f'href="{reverse("refresh:mt-list", args=[ns.name])}">1</a>' in home
    page = client.get(reverse("catalog:namespace-detail", args=[ns.name])).content.decode()
    found = client.get(reverse("catalog:search"), {"q": "équipe b."}).content.decode()
    for name in odd:
        link = reverse("catalog:view-detail", args=[ns.name, name]).replace("&", "&amp;")
        link = link.replace("'", "&#x27;")
        assert f'href="{link}"' in page and f'href="{link}"' in found
    for name, kind in (("t 1", "catalog:table-detail"), ("mt#2", "catalog:table-detail")):
        assert f'href="{reverse(kind, args=[ns.name, name])}"' in page
    assert f'href="{reverse("refresh:mt-detail", args=[ns.name, "mt#2"])}"' in page
    assert f'href="{reverse("refresh:mt-detail", args=[ns.name, "mt#2"])}"' in found
    assert f'href="{reverse("catalog:table-detail", args=[ns.name, "t 1"])}"' in found

    view = CatalogObject.objects.get(namespace=ns, name="my view")
    updated = dateformat.format(timezone.localtime(view.updated_at), "Y-m-d H:i")
    row = page[page.index(">my view</a>") :].split("</tr>")[0]
    assert "<td>view my view</td>" in row and "<td>v1</td>" in row
    assert f"<td>{updated} UTC</td>" in row
    table_row = page[page.index(">mt#2</a>") :].split("</tr>")[0]
    assert ">materialized</a>" in table_row and "<td>v2</td>" in table_row
    result = found[found.index(">équipe b.mt#2</a>") :].split("</tr>")[0]
    assert '<span class="badge">materialized table</span>' in result
    assert f"<td>{updated} UTC</td>" in found


def test_api_lists_are_paginated(viewer_api, admin_client, crowded):
    views = viewer_api.get("/api/namespaces/ns_0/views/").json()
    assert views["count"] == 100 and len(views["results"]) == 50
    assert views["next"].endswith("/api/namespaces/ns_0/views/?page=2")
    second = viewer_api.get("/api/namespaces/ns_0/views/", {"page": 2}).json()
    assert second["results"][-1]["name"] == "view_099" and second["next"] is None
    namespaces = viewer_api.get("/api/namespaces/").json()
    assert namespaces["count"] == 3 and [n["name"] for n in namespaces["results"]][0] == "ns_0"
    assert "results" in admin_client.get("/api/history/").json()


def test_the_view_list_endpoint_answers_in_a_bounded_number_of_queries(
    viewer_api, crowded, django_assert_max_num_queries
):
    with django_assert_max_num_queries(6):
        assert viewer_api.get("/api/namespaces/ns_0/views/").status_code == 200


def test_tables_are_listed_and_read_through_the_api(
    viewer_api, sales, django_assert_max_num_queries
):
    with django_assert_max_num_queries(6):
        listed = viewer_api.get("/api/namespaces/sales/tables/").json()
    assert listed["count"] == 3
    by_name = {t["name"]: t for t in listed["results"]}
    assert by_name["region_revenue_mt"]["materialized"] is True
    assert by_name["other"]["materialized"] is False

    table = viewer_api.get("/api/namespaces/sales/tables/region_revenue_daily/").json()
    assert [f["name"] for f in table["schema"]["fields"]] == ["id", "region", "revenue"]
    assert table["current_snapshot"]["snapshot_id"] == table["current_snapshot_id"]
    assert table["current_snapshot"]["operation"] == "append"
    assert table["partition_spec"] == {"spec-id": 0, "fields": []}
    assert table["location"] and table["properties"] == {"comment": "table region_revenue_daily"}


def test_unknown_tables_and_namespaces_are_json_404s(viewer_api, sales):
    missing = viewer_api.get("/api/namespaces/sales/tables/nope/")
    assert missing.status_code == 404 and missing.json()["type"] == "NoSuchTable"
    no_namespace = viewer_api.get("/api/namespaces/nope/tables/")
    assert no_namespace.status_code == 404 and "error" in no_namespace.json()


def test_the_api_root_answers_with_its_endpoints(viewer_api):
    response = viewer_api.get("/api/")
    assert response.status_code == 200
    body = response.json()
    assert body["endpoints"]["namespaces"].endswith("/api/namespaces/")
    assert body["endpoints"]["tables"].endswith("/api/namespaces/{namespace}/tables/")
    assert body["docs"].endswith("/api/docs/")
    assert APIClient().get("/api/").status_code == 200


def test_the_openapi_schema_describes_the_tables_endpoints_and_paginated_lists(viewer_api):
    schema = viewer_api.get("/api/schema/", {"format": "json"}).json()
    paths = schema["paths"]
    assert "/api/namespaces/{namespace}/tables/" in paths
    assert "/api/namespaces/{namespace}/tables/{name}/" in paths
    listed = paths["/api/namespaces/{namespace}/views/"]["get"]
    assert any(p["name"] == "page" for p in listed["parameters"])


@pytest.mark.parametrize("text", ["ab\x00cd", "\x00", "x" * 1001])
def test_a_search_text_no_name_or_sql_can_hold_is_a_400_that_says_why(client, viewer, sales, text):
    client.force_login(viewer)
    for extra in ({}, {"sql": "1"}):
        response = client.get(reverse("catalog:search"), {"q": text, **extra})
        assert response.status_code == 400
        problem = re.search(r'id="search-problem">(.*?)</div>', response.content.decode())
        assert ("NUL" if "\x00" in text else "longer than 1,000") in problem.group(1)


# -- queries per page at two sizes ----------------------------------------------------------

#: A small catalog's history: every kind of row the pages' panels read, a few of each.
SMALL_HISTORY = History(
    full_hours=6,
    batch_seconds=600,
    batch_hours=3,
    days=2,
    expiry_minutes=120,
    expiry_days=1,
    sample_minutes=240,
    snapshots=5,
)


def _grow(files, now) -> None:
    """More of everything the pages read: namespaces, views and tables (in the measured
    namespace too), materialized tables with their history, and more history for the ones
    there were (runs, events, maintenance runs, samples of days before)."""
    view_file, table_file = files
    for i in range(4):
        ns = Namespace.objects.create(name=f"grown_{i}")
        names = [f"t_{j}" for j in range(15)]
        seed_tables(ns, names, table_file)
        seed_views(ns, [f"v_{j:03d}" for j in range(120)], view_file, names)
    big = Namespace.objects.get(name=BIG_NAMESPACE)
    more_tables = [f"more_{j}" for j in range(20)]
    seed_tables(big, more_tables, table_file)
    seed_views(big, [f"more_{j:03d}" for j in range(150)], view_file, [TABLE_PAGE, *more_tables])
    sales = Namespace.objects.get(name="sales")
    existing = list(MaterializedTable.objects.values_list("table_id", flat=True))
    added = seed_tables(sales, [f"mt_new_{j}" for j in range(10)], table_file)
    seed_materialized(added)
    plain = list(Table.objects.filter(namespace=big, name=TABLE_PAGE).values_list("pk", flat=True))
    longer = dataclasses.replace(SMALL_HISTORY, full_hours=30, batch_hours=8, days=6, snapshots=1)
    # The same tables a week earlier (the history grows backwards), then the new ones.
    seed_history(existing, plain, history=longer, now=now - timedelta(days=7))
    seed_history(added, [], continuous=2, history=longer, now=now)


def _page_queries(client, api) -> dict[str, int]:
    if connection.vendor == "postgresql":
        # Statistics of the rows just seeded, as autovacuum would have them: without any,
        # PostgreSQL plans the view-SQL search's joins as nested loops over every row,
        # which takes minutes (this test counts queries, it does not time them).
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    counts = {}
    for name, path in bench_pages():
        if path.startswith("/admin/"):
            continue
        caller = api if path.startswith("/api/") else client
        assert caller.get(path).status_code == 200, path  # a first request reads its groups
        with CaptureQueriesContext(connection) as queries:
            assert caller.get(path).status_code == 200, path
        counts[name] = len(queries.captured_queries)
    return counts


def test_no_page_or_list_the_benchmark_measures_makes_more_queries_as_the_catalog_grows(
    client, viewer, viewer_api, warehouse
):
    """Every page and list endpoint of bench/pages.py, on a small seeded catalog and on one
    with more namespaces, views, tables, materialized tables and more of their history
    (refresh runs, micro-batches, commits, maintenance runs, health samples): the same
    number of queries (a count that follows the catalog would grow without bound)."""
    now = timezone.now()
    seed_catalog(
        warehouse, namespaces=3, tables=60, views=300, materialized=12, history=SMALL_HISTORY
    )
    client.force_login(viewer)
    small = _page_queries(client, viewer_api)
    before = {
        "views": View.objects.count(),
        "materialized": MaterializedTable.objects.count(),
        "runs": RefreshRun.objects.count(),
        "maintenance": MaintenanceRun.objects.count(),
        "samples": HealthSample.objects.count(),
        "events": CatalogEvent.objects.count(),
    }
    _grow(write_shared_metadata(warehouse), now)
    large = _page_queries(client, viewer_api)
    assert all(
        model.objects.count() > before[key]
        for key, model in (
            ("views", View),
            ("materialized", MaterializedTable),
            ("runs", RefreshRun),
            ("maintenance", MaintenanceRun),
            ("samples", HealthSample),
            ("events", CatalogEvent),
        )
    )
    grew = {name: (small[name], large[name]) for name in small if large[name] != small[name]}
    assert grew == {}
    assert set(small) == {name for name, path in bench_pages() if not path.startswith("/admin/")}


def test_the_materialized_tables_list_pages_its_tables_in_name_order(
    client, viewer, files, monkeypatch
):
    """The list's pages (read through a compiled query) are the query's, in name order,
    with each table's last refresh."""
    from refresh.pages import listing
    from refresh.selectors import materialized_tables

    monkeypatch.setattr(listing, "LIST_PAGE_SIZE", 4)
    ns = Namespace.objects.create(name="sales")
    ids = seed_tables(ns, [f"mt_{i:02d}" for i in range(10)], files[1])
    seed_materialized(ids)
    seed_history(ids[:3], [], history=SMALL_HISTORY, now=timezone.now())
    client.force_login(viewer)
    url = reverse("refresh:mt-list", args=["sales"])
    shown = []
    for number in (1, 2, 3):
        html = client.get(url, {"page": number}).content.decode()
        shown += re.findall(r'<tr id="mt-(mt_\d+)"', html)
    assert "page 3 of 3" in html
    expected = list(materialized_tables("sales", with_freshness=True))
    assert shown == [mt.table.name for mt in expected]
    first = client.get(url).content.decode()
    row = re.search(r'<tr id="mt-mt_00".*?</tr>', first).group(0)
    last = expected[0].last_run_state
    assert (f"run-state-{last.lower()}" in row) if last else ("never" in row)
