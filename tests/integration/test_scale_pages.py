"""Pages and list endpoints stay small and cheap as the catalog grows: the home page lists
namespaces with counts, search and namespace pages are paginated, API lists too."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from bench.pages import seed_materialized, seed_tables, seed_views, write_shared_metadata
from catalog.models import Namespace

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
    assert "(300)" in first and "page 1 of 6" in first
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


def test_api_lists_are_paginated(viewer_api, crowded):
    views = viewer_api.get("/api/namespaces/ns_0/views/").json()
    assert views["count"] == 100 and len(views["results"]) == 50
    assert views["next"].endswith("/api/namespaces/ns_0/views/?page=2")
    second = viewer_api.get("/api/namespaces/ns_0/views/", {"page": 2}).json()
    assert second["results"][-1]["name"] == "view_099" and second["next"] is None
    namespaces = viewer_api.get("/api/namespaces/").json()
    assert namespaces["count"] == 3 and [n["name"] for n in namespaces["results"]][0] == "ns_0"
    assert "results" in viewer_api.get("/api/history/").json()


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
