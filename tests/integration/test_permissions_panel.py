"""The "Permissions" panel of the namespace and object pages (issue 39, item 4): the owner and
every grant that applies, each with where it comes from; every grant to those who manage the
namespace or object, their own grants to the others; two queries whatever it shows."""

# ruff: noqa: F811 - pytest fixtures imported from other test modules, then named as arguments

# ruff: noqa: F811 - the shared fixtures are imported by name
from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from catalog import services
from catalog.core.access import CREATE, MANAGE, READ_DATA, READ_METADATA
from catalog.pages import permissions as panel_module
from tests.integration.grant_fixtures import admin, give  # noqa: F401
from tests.integration.test_iceberg_rest import SCHEMA
from tests.integration.test_mt_api import dispatched, sales, spark  # noqa: F401 - fixtures
from tests.integration.test_mt_pages import daily  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(django_user_model, admin):
    """ana owns sales (she made it) and sales.orders; bo reads sales; cy manages
    sales.orders alone; the group analysts reads the catalog; dee is one of them."""
    users = {
        name: django_user_model.objects.create_user(name, password=f"{name}-password")
        for name in ("ana", "bo", "cy", "dee")
    }
    give(admin, CREATE, users["ana"])
    services.create_namespace(name="sales", actor=users["ana"])
    services.create_namespace(name="sales.eu", actor=users["ana"])
    services.create_table(namespace="sales", name="orders", schema=SCHEMA, actor=users["ana"])
    services.create_table(namespace="sales.eu", name="rates", schema=SCHEMA, actor=users["ana"])
    services.create_view(namespace="sales", name="recent", sql="SELECT 1 AS id", actor=users["ana"])
    analysts = Group.objects.create(name="analysts")
    users["dee"].groups.add(analysts)

    give(admin, READ_DATA, users["bo"], namespace="sales")
    give(admin, MANAGE, users["cy"], namespace="sales", name="orders")
    give(admin, READ_METADATA, analysts)
    return users


def _section_url(client: Client, url: str) -> str:
    """The address the page fills its Permissions section in from (static/js/later.js)."""
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    found = re.search(
        r'<section class="card" id="permissions" data-later="([^"]+)">', response.content.decode()
    )
    assert found, url
    return found.group(1)


def _panel(client: Client, url: str) -> str:
    section = client.get(_section_url(client, url))
    assert section.status_code == 200, (url, section.status_code)
    found = re.search(
        r'<section class="card" id="permissions">.*?</section>', section.content.decode(), re.S
    )
    assert found, url
    return found.group(0)


def _rows(panel: str) -> list[list[str]]:
    body = re.search(r"<tbody>(.*?)</tbody>", panel, re.S)
    if body is None:
        return []
    rows = []
    for row in re.findall(r"<tr>(.*?)</tr>", body.group(1), re.S):
        cells = [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<td>(.*?)</td>", row, re.S)]
        rows.append([" ".join(cell.split()) for cell in cells])
    return rows


def _who_what_where(panel: str) -> set[tuple[str, str, str]]:
    return {(row[0], row[1], row[2]) for row in _rows(panel)}


def test_an_object_page_shows_its_owner_and_grants_inherited_from_the_namespace_and_catalog(
    people, admin
):
    client = Client()
    client.force_login(admin)
    panel = _panel(client, "/namespaces/sales/tables/orders/")
    shown = _who_what_where(panel)
    assert ("user ana", "owner", "this object") in shown
    assert ("user ana", "owner", "namespace sales") in shown
    assert ("user bo", "read_data", "namespace sales") in shown
    assert ("user cy", "manage", "this object") in shown
    assert ("group analysts", "read_metadata", "catalog") in shown
    assert ("user ana", "create", "catalog") in shown
    # Each grant says who granted it and when.
    bo = next(row for row in _rows(panel) if row[0] == "user bo")
    assert bo[3] == "root" and bo[4].startswith("20")


def test_a_namespace_page_shows_its_own_grants_and_those_above_it_not_those_below(people, admin):
    client = Client()
    client.force_login(admin)
    shown = _who_what_where(_panel(client, "/namespaces/sales.eu/"))
    assert ("user ana", "owner", "this namespace") in shown
    assert ("user ana", "owner", "namespace sales") in shown
    assert ("user bo", "read_data", "namespace sales") in shown
    assert ("group analysts", "read_metadata", "catalog") in shown
    # cy's grant is on sales.orders, not on anything above sales.eu.
    assert not any(row[0] == "user cy" for row in shown)
    shown = _who_what_where(_panel(client, "/namespaces/sales/"))
    assert ("user bo", "read_data", "this namespace") in shown


def test_a_views_page_shows_its_owner_and_the_grants_it_inherits(people, admin):
    client = Client()
    client.force_login(admin)
    shown = _who_what_where(_panel(client, "/namespaces/sales/views/recent/"))
    assert ("user ana", "owner", "this object") in shown
    assert ("user bo", "read_data", "namespace sales") in shown


def test_a_reader_without_manage_sees_the_owners_and_only_their_own_grants(people):
    client = Client()
    client.force_login(people["bo"])
    panel = _panel(client, "/namespaces/sales/tables/orders/")
    shown = _who_what_where(panel)
    assert ("user bo", "read_data", "namespace sales") in shown
    assert ("user ana", "owner", "this object") in shown
    assert not any(row[0] in ("user cy", "group analysts") for row in shown), shown
    assert "you see the owners and your own grants" in panel
    assert "You hold here: read_metadata, read_data." in panel
    # The audit is not theirs: no link to it.
    assert 'id="permissions-audit"' not in panel


def test_a_group_members_panel_shows_the_groups_grant(people):
    client = Client()
    client.force_login(people["dee"])
    shown = _who_what_where(_panel(client, "/namespaces/sales/"))
    assert ("group analysts", "read_metadata", "catalog") in shown
    assert not any(row[0] == "user bo" for row in shown)


def test_one_who_manages_the_object_sees_every_grant_on_it(people):
    client = Client()
    client.force_login(people["cy"])
    shown = _who_what_where(_panel(client, "/namespaces/sales/tables/orders/"))
    assert ("user bo", "read_data", "namespace sales") in shown
    assert ("group analysts", "read_metadata", "catalog") in shown


def test_the_panel_links_a_catalog_manager_to_the_audit_of_the_object(people, admin):
    client = Client()
    client.force_login(admin)
    panel = _panel(client, "/namespaces/sales/tables/orders/")
    link = re.search(r'href="([^"]+)" id="permissions-audit"', panel)
    assert link and link.group(1) == "/audit/?object=sales.orders"
    audit_page = client.get(link.group(1).replace("&amp;", "&")).content.decode()
    assert "create_table" in audit_page and "manage to user cy" in audit_page


def test_the_panel_lists_at_most_its_bound_and_says_where_the_rest_are(people, admin, monkeypatch):
    monkeypatch.setattr(panel_module, "PANEL_ROWS", 2)
    client = Client()
    client.force_login(admin)
    panel = _panel(client, "/namespaces/sales/tables/orders/")
    assert "SHOW GRANTS ON TABLE sales.orders" in panel


PAGES = [
    "/namespaces/sales/",
    "/namespaces/sales/tables/orders/",
    "/namespaces/sales/views/recent/",
]


@pytest.mark.parametrize("url", PAGES)
def test_a_page_reads_no_grant_for_its_panel_which_it_fills_in_later(people, admin, url):
    client = Client()
    client.force_login(people["bo"])
    client.get(url)
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    grants_read = [q["sql"] for q in queries.captured_queries if "catalog_grant" in q["sql"]]
    # The principal's own grants, loaded once (catalog.access), and nothing more.
    assert len(grants_read) == 1 and "UNION" in grants_read[0]


@pytest.mark.parametrize("url", PAGES)
@pytest.mark.parametrize("who", ["admin", "bo"])
def test_the_panel_costs_two_queries_however_many_grants_apply(people, admin, url, who):
    """Two queries (the grants that apply, with their names joined; the owners), and the
    same two with fifty more grants: no query per row."""
    user = admin if who == "admin" else people[who]
    client = Client()
    client.force_login(user)
    section = _section_url(client, url)
    client.get(section)  # warm: sessions, compiled queries

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(section).status_code == 200
        return len(queries.captured_queries)

    with_panel = count()
    original = panel_module.panel
    panel_module.panel = lambda request, **kwargs: {"rows": [], "yours": [], "managing": True}
    try:
        without = count()
    finally:
        panel_module.panel = original
    assert with_panel - without == 2, (with_panel, without)
    for number in range(50):
        give(admin, READ_METADATA, Group.objects.create(name=f"team{number}"), namespace="sales")
    assert count() == with_panel


def test_a_hidden_objects_panel_is_the_missing_ones_404(people, django_user_model):
    stranger = django_user_model.objects.create_user("eve", password="eve-password")
    give(people["ana"], READ_DATA, stranger, namespace="sales.eu")  # she owns it
    client = Client()
    client.force_login(stranger)
    hidden = client.get("/namespaces/sales/tables/orders/permissions")
    missing = client.get("/namespaces/sales/tables/no_such/permissions")
    assert hidden.status_code == missing.status_code == 404
    assert client.get("/namespaces/sales/views/recent/permissions").status_code == 404
    # A view's section is not a table's: the kinds are apart, as their pages are.
    assert client.get("/namespaces/sales.eu/views/rates/permissions").status_code == 404
    assert client.get("/namespaces/sales.eu/tables/rates/permissions").status_code == 200


def test_a_materialized_tables_page_shows_its_owner_and_the_editors_grant(daily, editor, viewer):
    """daily was made by the editor, who owns it; the editor role is a catalog grant."""
    client = Client()
    client.force_login(editor)
    shown = _who_what_where(_panel(client, "/namespaces/sales/materialized-tables/daily/"))
    assert (f"user {editor.username}", "owner", "this object") in shown
    assert ("group editor", "manage", "catalog") in shown
    # A viewer sees the owner and the viewers' grant (their group's), not the editors'.
    client.force_login(viewer)
    shown = _who_what_where(_panel(client, "/namespaces/sales/materialized-tables/daily/"))
    assert (f"user {editor.username}", "owner", "this object") in shown
    assert ("group viewer", "read_data", "catalog") in shown
    assert ("group editor", "manage", "catalog") not in shown
