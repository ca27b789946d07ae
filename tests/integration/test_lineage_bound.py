"""The lineage draws at most lineage.FANOUT readers of an object: the others are a count
(of what the user may see) and a link to a page that lists them a page at a time, so that
the page's cost and size stay the same whatever the number of views reading a table."""

from __future__ import annotations

import json
import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from bench.pages import seed_tables, seed_views, write_shared_metadata
from catalog.core.access import READ_METADATA
from catalog.models import Grant, Namespace, View, ViewRead
from refresh import lineage

pytestmark = pytest.mark.django_db


def _readers(ns: Namespace, count: int, view_file: str, prefix: str = "reader") -> None:
    """`count` views of `ns` reading sales.orders."""
    seed_views(ns, [f"{prefix}_{i:03d}" for i in range(count)], view_file, reads=["orders"])
    if ns.name != "sales":
        ViewRead.objects.filter(view__namespace=ns).update(namespace="sales")
        View.objects.filter(namespace=ns).update(dependencies=[["", "sales", "orders"]])


@pytest.fixture
def files(warehouse):
    return write_shared_metadata(warehouse)


@pytest.fixture
def sales(files):
    view_file, table_file = files
    ns = Namespace.objects.create(name="sales")
    seed_tables(ns, ["orders"], table_file)
    return ns


@pytest.fixture
def admin(django_user_model):
    return django_user_model.objects.create_superuser("root", password="x")


def _graph(user) -> dict:
    api = APIClient()
    api.force_authenticate(user)
    response = api.get("/api/lineage/", {"namespace": "sales", "name": "orders"})
    assert response.status_code == 200, response.content
    return response.json()


def _page(user, path: str = "/lineage/sales/orders/") -> str:
    client = Client()
    client.force_login(user)
    response = client.get(path)
    assert response.status_code == 200
    return response.content.decode()


def _embedded(html: str) -> dict:
    found = re.search(r'<script id="lineage-data" type="application/json">(.*?)</script>', html)
    assert found
    return json.loads(found.group(1))


def test_the_lineage_draws_fanout_readers_and_counts_the_rest(sales, files, admin):
    _readers(sales, 130, files[0])
    graph = _graph(admin)
    focus = next(n for n in graph["nodes"] if n["focus"])
    assert graph["fanout"] == lineage.FANOUT == 50
    assert len(graph["nodes"]) == 51 and len(graph["edges"]) == 50
    assert graph["truncated"] is True
    assert focus["more_readers"] == 80 and focus["more_readers_at_least"] is False
    assert focus["readers_url"] == "/lineage/sales/orders/readers/"
    # The readers drawn have nothing cut.
    assert all("more_readers" not in n for n in graph["nodes"] if not n["focus"])

    html = _page(admin)
    assert len(_embedded(html)["nodes"]) == 51
    assert 'id="lineage-focus-more"' in html and ">80 more</a>" in html
    assert 'href="/lineage/sales/orders/readers/"' in html


def test_the_cost_and_size_of_the_page_do_not_grow_with_the_readers(sales, files, admin):
    _readers(sales, 60, files[0])
    client = Client()
    client.force_login(admin)
    with CaptureQueriesContext(connection) as few:
        small = client.get("/lineage/sales/orders/").content
    _readers(sales, 300, files[0], prefix="more")
    with CaptureQueriesContext(connection) as many:
        large = client.get("/lineage/sales/orders/").content
    assert len(many.captured_queries) == len(few.captured_queries)
    assert abs(len(large) - len(small)) < 200  # "10 more" against "310 more"
    assert b">310 more</a>" in large


def test_a_count_past_count_cap_says_more_than(sales, files, admin, monkeypatch):
    monkeypatch.setattr(lineage, "COUNT_CAP", 20)
    _readers(sales, 130, files[0])
    focus = next(n for n in _graph(admin)["nodes"] if n["focus"])
    assert focus["more_readers"] == 20 and focus["more_readers_at_least"] is True
    assert ">more than 20 more</a>" in _page(admin)


def test_few_readers_are_all_drawn_with_no_count(sales, files, admin):
    _readers(sales, 50, files[0])
    graph = _graph(admin)
    assert len(graph["nodes"]) == 51
    assert graph["truncated"] is False
    assert not any("more_readers" in n for n in graph["nodes"])
    assert 'id="lineage-more"' not in _page(admin)


def test_the_readers_page_pages_through_every_reader_by_name(sales, files, admin):
    _readers(sales, 130, files[0])
    first = _page(admin, "/lineage/sales/orders/readers/")
    assert first.count('href="/namespaces/sales/views/reader_') == 50
    assert "sales.reader_000<" in first and "sales.reader_049<" in first
    assert 'href="?page=2"' in first
    last = _page(admin, "/lineage/sales/orders/readers/?page=3")
    assert last.count('href="/namespaces/sales/views/reader_') == 30
    assert "sales.reader_129<" in last and "sales.reader_099<" not in last
    assert 'rel="next"' not in last and 'href="?page=2"' in last
    # Not a number: the first page.
    assert _page(admin, "/lineage/sales/orders/readers/?page=x").count("views/reader_0") == 50


def test_a_user_learns_no_hidden_reader_by_name_or_by_count(sales, files, admin, django_user_model):
    """60 readers in sales, which the user may see, and 200 in `vault`, which they may not:
    the graph draws 50 of sales, counts 10 more; the readers page lists 60."""
    _readers(sales, 60, files[0])
    vault = Namespace.objects.create(name="vault")
    _readers(vault, 200, files[0], prefix="secret")
    user = django_user_model.objects.create_user("lou", password="x")
    Grant.objects.create(user=user, privilege=READ_METADATA, namespace=sales)

    assert next(n for n in _graph(admin)["nodes"] if n["focus"])["more_readers"] == 210
    graph = _graph(user)
    focus = next(n for n in graph["nodes"] if n["focus"])
    assert len(graph["nodes"]) == 51
    assert all(n["namespace"] == "sales" for n in graph["nodes"])
    assert focus["more_readers"] == 10 and focus["more_readers_at_least"] is False
    html = _page(user)
    assert "vault" not in html and "secret_" not in html and ">10 more</a>" in html
    listed = _page(user, "/lineage/sales/orders/readers/") + _page(
        user, "/lineage/sales/orders/readers/?page=2"
    )
    assert "vault" not in listed and "secret_" not in listed
    assert listed.count('href="/namespaces/sales/views/reader_') == 60


def test_hidden_readers_beyond_the_visible_ones_are_not_even_said_to_exist(
    sales, files, django_user_model
):
    """30 readers the user sees, 100 they do not: nothing is cut for them."""
    _readers(sales, 30, files[0])
    vault = Namespace.objects.create(name="vault")
    _readers(vault, 100, files[0], prefix="secret")
    user = django_user_model.objects.create_user("lou", password="x")
    Grant.objects.create(user=user, privilege=READ_METADATA, namespace=sales)
    graph = _graph(user)
    assert len(graph["nodes"]) == 31 and graph["truncated"] is False
    assert not any("more_readers" in n for n in graph["nodes"])
    html = _page(user)
    assert "more</a>" not in html and "vault" not in html
    readers = _page(user, "/lineage/sales/orders/readers/")
    assert 'rel="next"' not in readers and "secret_" not in readers


def test_the_readers_page_of_a_hidden_object_is_its_missing_twins_404(
    sales, files, django_user_model
):
    vault = Namespace.objects.create(name="vault")
    seed_tables(vault, ["ledger"], files[1])
    user = django_user_model.objects.create_user("lou", password="x")
    Grant.objects.create(user=user, privilege=READ_METADATA, namespace=sales)
    client = Client()
    client.force_login(user)
    hidden = client.get("/lineage/vault/ledger/readers/")
    missing = client.get("/lineage/vault/no_such/readers/")
    assert hidden.status_code == missing.status_code == 404
