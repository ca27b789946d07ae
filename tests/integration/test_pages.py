"""The catalog's web pages, through Django's test client."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils.html import escape

from catalog import services
from catalog.core.errors import SqlError
from catalog.core.sql import parse_query
from catalog.models import CatalogEvent, Namespace, View

pytestmark = pytest.mark.django_db

FIRST_SQL = "SELECT 1 AS id, 'first' AS label"
SECOND_SQL = "SELECT 2 AS id, 'second' AS label"
BROKEN_SQL = "SELECT id,\nFROM orders WHERE"


@pytest.fixture
def sales_view(editor) -> View:
    services.create_namespace(name="sales", actor=editor)
    services.create_view(namespace="sales", name="orders", sql=FIRST_SQL, actor=editor)
    return services.replace_view(namespace="sales", name="orders", sql=SECOND_SQL, actor=editor)


def view_url(name: str, view: View, **kwargs) -> str:
    return reverse(name, kwargs={"namespace": view.namespace.name, "name": view.name, **kwargs})


def field_block(html: str, field: str) -> str:
    """The HTML of one rendered form field, up to the next field."""
    match = re.search(rf'id="field-{field}".*?(?=id="field-|</form>)', html, re.S)
    assert match, f"no field {field} on the page"
    return match.group(0)


def files_under(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file()]


def test_anonymous_user_is_redirected_to_the_login_page(client, sales_view):
    for url in (reverse("catalog:namespace-list"), view_url("catalog:view-detail", sales_view)):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"].startswith("/login/?next=")


def test_login_page_renders_a_form(client):
    response = client.get("/login/")
    assert response.status_code == 200
    assert b'name="username"' in response.content


def test_user_without_a_role_gets_403(client, django_user_model):
    client.force_login(django_user_model.objects.create_user("nobody", password="pw-nobody"))
    assert client.get(reverse("catalog:namespace-list")).status_code == 403


def test_viewer_can_see_the_view_page_but_gets_403_on_post_replace(client, viewer, sales_view):
    client.force_login(viewer)
    page = client.get(view_url("catalog:view-detail", sales_view))
    assert page.status_code == 200
    assert b"Replace" not in page.content
    response = client.post(
        view_url("catalog:view-replace", sales_view), {"sql": "SELECT 3 AS id", "dialect": "spark"}
    )
    assert response.status_code == 403
    assert client.get(view_url("catalog:view-replace", sales_view)).status_code == 403
    sales_view.refresh_from_db()
    assert sales_view.current_version_id == 2


def test_viewer_cannot_create_a_namespace(client, viewer):
    client.force_login(viewer)
    assert b"New namespace" not in client.get(reverse("catalog:namespace-list")).content
    response = client.post(reverse("catalog:namespace-list"), {"name": "sales"})
    assert response.status_code == 403
    assert not Namespace.objects.exists()


def test_editor_creates_a_namespace_through_the_form(client, editor):
    client.force_login(editor)
    client.post(reverse("catalog:namespace-list"), {"name": "sales"})
    response = client.post(reverse("catalog:namespace-list"), {"name": "sales.eu"}, follow=True)
    assert response.redirect_chain[-1][0] == reverse(
        "catalog:namespace-detail", kwargs={"namespace": "sales.eu"}
    )
    assert Namespace.objects.filter(name="sales.eu").exists()


def test_invalid_namespace_name_is_shown_beside_the_name_field(client, editor):
    client.force_login(editor)
    response = client.post(reverse("catalog:namespace-list"), {"name": "bad/name"})
    assert response.status_code == 200
    assert "Invalid namespace level" in field_block(response.content.decode(), "name")


def test_editor_creates_a_view_through_the_form_and_it_appears(client, editor, warehouse):
    services.create_namespace(name="sales")
    client.force_login(editor)
    url = reverse("catalog:view-create", kwargs={"namespace": "sales"})
    assert client.get(url).status_code == 200
    response = client.post(
        url,
        {
            "name": "daily",
            "sql": "SELECT 1 AS id, 'x' AS label",
            "dialect": "spark",
            "column_names": "order_id, tag",
            "column_comments": "The order\nA tag",
            "comment": "Daily orders",
            "default_namespace": "sales",
        },
        follow=True,
    )
    view = View.objects.get(namespace__name="sales", name="daily")
    assert response.redirect_chain[-1][0] == view_url("catalog:view-detail", view)
    page = response.content.decode()
    assert "Daily orders" in page
    assert "order_id" in page and "The order" in page
    assert [f.name for f in view.schema_fields(0)] == ["order_id", "tag"]
    assert [f.doc for f in view.schema_fields(0)] == ["The order", "A tag"]
    listing = client.get(reverse("catalog:namespace-detail", kwargs={"namespace": "sales"}))
    assert b"daily" in listing.content
    assert len(list((warehouse / "sales" / "daily" / "metadata").glob("*.metadata.json"))) == 1


def test_sql_that_does_not_parse_shows_the_error_beside_the_sql_field_and_writes_nothing(
    client, editor, warehouse
):
    services.create_namespace(name="sales")
    client.force_login(editor)
    with pytest.raises(SqlError) as expected:
        parse_query(BROKEN_SQL, "spark")
    assert "line 2, column" in expected.value.message
    response = client.post(
        reverse("catalog:view-create", kwargs={"namespace": "sales"}),
        {"name": "broken", "sql": BROKEN_SQL, "dialect": "spark"},
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert escape(expected.value.message) in field_block(page, "sql")
    assert escape(expected.value.message) not in field_block(page, "name")
    assert not View.objects.exists()
    assert files_under(warehouse) == []


def test_a_column_name_count_mismatch_is_shown_beside_the_column_names_field(client, editor):
    services.create_namespace(name="sales")
    client.force_login(editor)
    response = client.post(
        reverse("catalog:view-create", kwargs={"namespace": "sales"}),
        {"name": "v", "sql": FIRST_SQL, "dialect": "spark", "column_names": "only_one"},
    )
    assert "column names" in field_block(response.content.decode(), "column_names")
    assert not View.objects.exists()


def test_view_page_shows_sql_schema_versions_and_log(client, viewer, sales_view):
    client.force_login(viewer)
    page = client.get(view_url("catalog:view-detail", sales_view)).content.decode()
    assert escape(sales_view.metadata_location) in page
    assert "original" in page and "trino" in page
    assert re.findall(r'<li class="[^"]*" data-version-id="(\d+)"', page) == ["2", "1"]
    assert "label" in page  # a schema column


def test_replace_form_is_prefilled_and_makes_a_new_version(client, editor, sales_view):
    client.force_login(editor)
    form = client.get(view_url("catalog:view-replace", sales_view)).content.decode()
    # The form starts from the SQL as its author typed it, not the qualified rewrite.
    assert escape(SECOND_SQL) in form
    assert escape(sales_view.metadata_location) in form
    response = client.post(
        view_url("catalog:view-replace", sales_view),
        {
            "sql": "SELECT 3 AS id",
            "dialect": "spark",
            "expected_metadata_location": sales_view.metadata_location,
        },
        follow=True,
    )
    assert b"now version 3" in response.content
    sales_view.refresh_from_db()
    assert sales_view.current_version_id == 3


def test_a_stale_replace_form_gets_a_conflict_error(client, editor, sales_view):
    client.force_login(editor)
    seen = sales_view.metadata_location
    services.rollback_view(namespace="sales", name="orders", version_id=1)
    response = client.post(
        view_url("catalog:view-replace", sales_view),
        {"sql": "SELECT 3 AS id", "dialect": "spark", "expected_metadata_location": seen},
    )
    assert response.status_code == 200
    assert b"has changed since it was loaded" in response.content
    sales_view.refresh_from_db()
    assert sales_view.current_version_id == 1
    assert sales_view.versions.count() == 2


def test_rollback_through_the_confirmation_page_makes_a_new_log_entry(client, editor, sales_view):
    client.force_login(editor)
    url = view_url("catalog:view-rollback", sales_view, version_id=1)
    confirmation = client.get(url)
    assert confirmation.status_code == 200
    assert b"Roll back to version 1" in confirmation.content
    assert sales_view.log_entries.count() == 2  # the GET changed nothing
    response = client.post(
        url, {"expected_metadata_location": sales_view.metadata_location}, follow=True
    )
    assert b"rolled back to version 1" in response.content
    sales_view.refresh_from_db()
    assert sales_view.current_version_id == 1
    assert list(sales_view.log_entries.values_list("version_id", flat=True)) == [1, 2, 1]
    assert b"rollback" in response.content


def test_rolling_back_to_the_current_version_shows_an_error(client, editor, sales_view):
    client.force_login(editor)
    response = client.post(view_url("catalog:view-rollback", sales_view, version_id=2))
    assert b"already the current version" in response.content
    assert sales_view.log_entries.count() == 2


def test_diff_page_shows_both_versions_sql(client, viewer, sales_view):
    client.force_login(viewer)
    response = client.get(
        view_url("catalog:view-diff", sales_view), {"left": 1, "right": 2, "dialect": "spark"}
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert "first" in page and "second" in page
    assert "<mark>" in page
    assert re.search(r'<table class="diff"', page)


def test_diff_page_defaults_to_previous_against_current(client, viewer, sales_view):
    client.force_login(viewer)
    page = client.get(view_url("catalog:view-diff", sales_view)).content.decode()
    assert "v1 ·" in page and "v2 ·" in page


def test_diff_of_an_unknown_version_is_a_bad_request(client, viewer, sales_view):
    client.force_login(viewer)
    response = client.get(view_url("catalog:view-diff", sales_view), {"left": 9, "right": 2})
    assert response.status_code == 400


def test_user_sql_is_escaped(client, editor):
    services.create_namespace(name="sales")
    services.create_view(
        namespace="sales", name="tricky", sql="SELECT '<script>x</script>' AS s", comment="<b>c</b>"
    )
    client.force_login(editor)
    view = View.objects.get(name="tricky")
    page = client.get(view_url("catalog:view-detail", view)).content.decode()
    assert "<script>x</script>" not in page
    assert "&lt;script&gt;" in page
    assert "<b>c</b>" not in page


def test_editor_sets_and_removes_a_property(client, editor, sales_view):
    client.force_login(editor)
    url = view_url("catalog:view-properties", sales_view)
    client.post(url, {"action": "set", "key": "owner", "value": "team-a"})
    sales_view.refresh_from_db()
    assert sales_view.properties["owner"] == "team-a"
    client.post(url, {"action": "remove", "key": "owner"})
    sales_view.refresh_from_db()
    assert "owner" not in sales_view.properties


def test_an_invalid_property_value_is_shown_on_the_view_page(client, editor, sales_view):
    client.force_login(editor)
    response = client.post(
        view_url("catalog:view-properties", sales_view),
        {"action": "set", "key": "version.history.num-entries", "value": "many"},
    )
    assert response.status_code == 200
    assert b"must be a whole number" in response.content


def test_history_shows_the_views_events(client, viewer, sales_view):
    client.force_login(viewer)
    page = client.get(view_url("catalog:view-detail", sales_view)).content.decode()
    assert "create_view" in page and "replace_view" in page


def test_search_finds_views_by_sql(client, viewer, sales_view):
    client.force_login(viewer)
    page = client.get(reverse("catalog:namespace-list"), {"q": "second"}).content.decode()
    assert 'id="search-results"' in page
    assert view_url("catalog:view-detail", sales_view) in page
    empty = client.get(reverse("catalog:namespace-list"), {"q": "nothing-like-this"})
    assert b"No view matches" in empty.content


def test_editor_drops_a_view_after_confirmation(client, editor, sales_view):
    client.force_login(editor)
    url = view_url("catalog:view-drop", sales_view)
    assert client.get(url).status_code == 200
    assert View.objects.exists()
    response = client.post(url, follow=True)
    assert b"dropped" in response.content
    assert not View.objects.exists()
    assert CatalogEvent.objects.filter(action="drop_view").exists()


def test_unknown_view_is_404(client, viewer):
    client.force_login(viewer)
    url = reverse("catalog:view-detail", kwargs={"namespace": "no", "name": "such"})
    assert client.get(url).status_code == 404
