"""What a newcomer hit (issue 10), outside its "Scale" part: production looks like
development, the UI does what the API does, tables say what they hold, engines get
credentials from a page, and view pages do not mislead."""

from __future__ import annotations

import re

import pytest
from django.test import override_settings
from django.urls import reverse
from django.utils.html import escape

from catalog import services
from catalog.core.view_metadata import REPLACE_DROP_DIALECT_ALLOWED
from catalog.models import CatalogClient, Namespace, View
from catalog.services import credentials as auth

pytestmark = pytest.mark.django_db

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": False},
        {"id": 2, "name": "amount", "type": "double", "required": False},
    ],
}


@pytest.fixture
def sales(editor) -> Namespace:
    return services.create_namespace(name="sales", actor=editor)


@pytest.fixture
def orders_table(sales):
    loaded = services.create_table(namespace="sales", name="orders", schema=SCHEMA)
    snapshot = {
        "snapshot-id": 7,
        "sequence-number": 1,
        "timestamp-ms": 1_700_000_000_000,
        "manifest-list": "/nowhere/snap-7.avro",
        "summary": {
            "operation": "append",
            "added-records": "1234",
            "total-records": "1234",
            "added-data-files": "2",
            "spark.app.id": "local-1",
        },
        "schema-id": 0,
    }
    services.commit_table(
        namespace="sales",
        name="orders",
        requirements=[{"type": "assert-table-uuid", "uuid": str(loaded.metadata.table_uuid)}],
        updates=[
            {"action": "add-snapshot", "snapshot": snapshot},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 7},
        ],
    )
    return loaded


@pytest.fixture
def orders_view(sales, orders_table, editor) -> View:
    return services.create_view(
        namespace="sales", name="big_orders", sql="SELECT id FROM orders WHERE amount > 10",
        actor=editor,
    )  # fmt: skip


def page(client, route: str, **kwargs) -> str:
    response = client.get(reverse(route, kwargs=kwargs))
    assert response.status_code == 200, response.content[:500]
    return response.content.decode()


def post(client, route: str, data: dict, **kwargs):
    return client.post(reverse(route, kwargs=kwargs), data)


# -- production looks like development ------------------------------------------------------


def test_the_favicon_is_linked_from_every_page_and_the_browsers_own_request_finds_it(
    client, viewer
):
    client.force_login(viewer)
    html = page(client, "catalog:namespace-list")
    assert re.search(r'<link rel="icon" href="/static/favicon\.svg"', html)
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"] == "/static/favicon.svg"
    icon = client.get("/static/favicon.svg")
    assert icon.status_code == 200
    assert b"<svg" in b"".join(icon.streaming_content)


@pytest.mark.parametrize("debug", [False, True])
def test_a_missing_page_is_the_styled_not_found_page_and_lists_no_url_patterns(
    client, viewer, debug
):
    client.force_login(viewer)
    with override_settings(DEBUG=debug):
        for path in ("/no/such/page/", "/namespaces/nowhere/"):
            response = client.get(path)
            assert response.status_code == 404
            html = response.content.decode()
            assert "Not found" in html and "/static/css/app.css" in html
            assert "URLconf" not in html and "api/schema/" not in html


def test_machines_still_get_json_for_a_missing_api_path_with_debug_on(client):
    with override_settings(DEBUG=True):
        response = client.get("/api/no-such-endpoint/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")


def test_a_path_without_its_trailing_slash_still_redirects(client, viewer, sales):
    client.force_login(viewer)
    with override_settings(DEBUG=True):
        response = client.get("/namespaces/sales")
    assert response.status_code == 301 and response["Location"] == "/namespaces/sales/"


# -- the UI does what the API does ----------------------------------------------------------


def test_an_editor_renames_a_view_on_its_page(client, editor, orders_view):
    client.force_login(editor)
    html = page(client, "catalog:view-detail", namespace="sales", name="big_orders")
    assert reverse("catalog:view-rename", args=["sales", "big_orders"]) in html
    services.create_namespace(name="archive")
    response = post(
        client,
        "catalog:view-rename",
        {"new_namespace": "archive", "new_name": "old_orders"},
        namespace="sales",
        name="big_orders",
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("catalog:view-detail", args=["archive", "old_orders"])
    assert View.objects.get(name="old_orders").namespace.name == "archive"


def test_a_rename_to_a_taken_or_invalid_name_is_a_form_error(client, editor, orders_view):
    client.force_login(editor)
    for new_name, expected in (("orders", "already exists"), ("a/b", "")):
        response = post(
            client,
            "catalog:view-rename",
            {"new_namespace": "sales", "new_name": new_name},
            namespace="sales",
            name="big_orders",
        )
        assert response.status_code == 200
        assert 'class="errorlist' in response.content.decode()
        assert expected in response.content.decode()


def test_an_editor_adds_a_dialect_written_by_hand_and_it_is_not_called_transpiled(
    client, editor, orders_view
):
    client.force_login(editor)
    response = post(
        client,
        "catalog:view-add-dialect",
        {"dialect": "duckdb", "sql": "SELECT id FROM sales.orders WHERE amount > 10"},
        namespace="sales",
        name="big_orders",
    )
    assert response.status_code == 302
    html = page(client, "catalog:view-detail", namespace="sales", name="big_orders")
    duckdb = re.search(r"<h3>duckdb(.*?)</h3>", html).group(1)
    trino = re.search(r"<h3>trino(.*?)</h3>", html).group(1)
    assert "written by hand" in duckdb and "transpiled" not in duckdb
    assert "transpiled" in trino


def test_adding_a_dialect_the_version_has_or_sql_that_does_not_parse_is_a_form_error(
    client, editor, orders_view
):
    client.force_login(editor)
    for data in ({"dialect": "trino", "sql": "SELECT 1"}, {"dialect": "duckdb", "sql": "SELEC"}):
        response = post(
            client, "catalog:view-add-dialect", data, namespace="sales", name="big_orders"
        )
        assert response.status_code == 200
        assert 'class="errorlist' in response.content.decode()


def test_an_editor_registers_a_dropped_view_and_a_table_from_their_metadata_files(
    client, editor, orders_view, orders_table
):
    client.force_login(editor)
    view_file = orders_view.metadata_location
    services.drop_view(namespace="sales", name="big_orders")
    table_file = orders_table.metadata_location
    html = page(client, "catalog:namespace-detail", namespace="sales")
    assert reverse("catalog:register", args=["sales"]) in html

    response = post(
        client,
        "catalog:register",
        {"kind": "view", "name": "big_orders_again", "metadata_location": view_file},
        namespace="sales",
    )
    assert response.status_code == 302
    assert View.objects.filter(name="big_orders_again").exists()

    services.drop_table(namespace="sales", name="orders")
    response = post(
        client,
        "catalog:register",
        {"kind": "table", "name": "orders_again", "metadata_location": table_file},
        namespace="sales",
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("catalog:table-detail", args=["sales", "orders_again"])


@pytest.mark.parametrize(
    "location", ["/etc/passwd", "../../outside.metadata.json", "file:///tmp/x.json", "\x00"]
)
def test_registering_a_file_outside_the_warehouse_is_a_form_error_not_a_crash(
    client, editor, sales, location
):
    client.force_login(editor)
    response = post(
        client,
        "catalog:register",
        {"kind": "view", "name": "v", "metadata_location": location},
        namespace="sales",
    )
    assert response.status_code in (200, 400)
    if response.status_code == 200:
        assert 'class="errorlist' in response.content.decode()


def test_an_editor_edits_namespace_properties_on_a_page(client, editor, sales):
    client.force_login(editor)
    response = post(
        client,
        "catalog:namespace-properties",
        {"updates": "owner = erin\nteam=data", "removals": ""},
        namespace="sales",
    )
    assert response.status_code == 302
    assert Namespace.objects.get(name="sales").properties == {"owner": "erin", "team": "data"}
    post(
        client,
        "catalog:namespace-properties",
        {"updates": "", "removals": "team"},
        namespace="sales",
    )
    assert Namespace.objects.get(name="sales").properties == {"owner": "erin"}
    response = post(
        client, "catalog:namespace-properties", {"updates": "no equals sign"}, namespace="sales"
    )
    assert response.status_code == 200 and "is not key=value" in response.content.decode()


def test_a_namespace_is_dropped_after_confirmation_and_only_when_empty(client, editor, orders_view):
    client.force_login(editor)
    html = page(client, "catalog:namespace-drop", namespace="sales")
    assert "drop or move them first" in html
    response = post(client, "catalog:namespace-drop", {}, namespace="sales")
    assert response.status_code == 409 and "not empty" in response.content.decode()

    services.create_namespace(name="empty")
    assert "The namespace is empty" in page(client, "catalog:namespace-drop", namespace="empty")
    response = post(client, "catalog:namespace-drop", {}, namespace="empty")
    assert response.status_code == 302
    assert not Namespace.objects.filter(name="empty").exists()


def test_viewers_cannot_open_the_new_change_pages(client, viewer, orders_view):
    client.force_login(viewer)
    for name, kwargs in (
        ("catalog:view-rename", {"namespace": "sales", "name": "big_orders"}),
        ("catalog:view-add-dialect", {"namespace": "sales", "name": "big_orders"}),
        ("catalog:register", {"namespace": "sales"}),
        ("catalog:namespace-properties", {"namespace": "sales"}),
        ("catalog:namespace-drop", {"namespace": "sales"}),
        ("catalog:credentials", {}),
    ):
        assert client.get(reverse(name, kwargs=kwargs)).status_code == 403, name


def test_the_api_docs_are_swagger_ui_and_the_schema_shows_in_the_browser(client, viewer):
    client.force_login(viewer)
    docs = client.get("/api/docs/").content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in docs
    assert "cdn" not in docs.lower()
    browser_accept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
    schema = client.get("/api/schema/", HTTP_ACCEPT=browser_accept)
    assert schema.status_code == 200
    assert schema["Content-Type"].startswith("application/json")
    assert "attachment" not in schema.get("Content-Disposition", "")
    assert "/api/namespaces/" in schema.json()["paths"]
    yaml = client.get("/api/schema/", {"format": "yaml"})
    assert yaml["Content-Type"].startswith("text/yaml") and b"openapi:" in yaml.content


# -- a table page says what the table holds -------------------------------------------------


def test_a_table_page_shows_the_row_count_a_readable_summary_and_the_views_that_read_it(
    client, viewer, orders_view
):
    client.force_login(viewer)
    services.create_view(namespace="sales", name="unrelated", sql="SELECT 1 AS one")
    html = page(client, "catalog:table-detail", namespace="sales", name="orders")
    assert re.search(r'id="row-count">1234<', html)
    assert "added-records=" not in html
    assert 'data-later="/namespaces/sales/tables/orders/snapshots"' in html
    snapshots = client.get(reverse("catalog:table-snapshots", args=["sales", "orders"]))
    summary = re.search(
        r'id="snapshot-summaries".*?</table>\s*</div>', snapshots.content.decode(), re.S
    ).group(0)
    assert "Rows added" in summary and '<td class="num">1234</td>' in summary
    assert "spark.app.id" in summary
    readers = re.search(r'id="readers".*?</section>', html, re.S).group(0)
    assert reverse("catalog:view-detail", args=["sales", "big_orders"]) in readers
    assert "unrelated" not in readers


def test_a_table_without_snapshots_has_zero_rows(client, viewer, sales):
    services.create_table(namespace="sales", name="empty", schema=SCHEMA)
    client.force_login(viewer)
    html = page(client, "catalog:table-detail", namespace="sales", name="empty")
    assert re.search(r'id="row-count">0 ', html)


# -- engine credentials on a page -----------------------------------------------------------


def test_an_editor_makes_a_credential_sees_the_secret_once_and_revokes_it(client, editor):
    client.force_login(editor)
    response = client.post(reverse("catalog:credentials"), {"name": "laptop-spark"})
    assert response.status_code == 200
    html = response.content.decode()
    credential = re.search(r'id="credential">([^<]+)<', html).group(1)
    client_id, _, secret = credential.partition(":")
    assert "spark.sql.catalog.lv.credential=" + escape(credential) in html
    assert "RestCatalog(" in html and "http://testserver/iceberg" in html
    assert auth.issue_token(client_id=client_id, client_secret=secret).access_token
    assert response["Cache-Control"] == "no-store"

    listing = page(client, "catalog:credentials")
    assert client_id in listing and secret not in listing

    response = client.post(reverse("catalog:credential-revoke", args=[client_id]))
    assert response.status_code == 302
    assert not CatalogClient.objects.get(client_id=client_id).active
    with pytest.raises(auth.InvalidCredentials):
        auth.issue_token(client_id=client_id, client_secret=secret)


def test_an_editor_cannot_revoke_someone_elses_client(client, editor, django_user_model):
    other = django_user_model.objects.create_user("olga", password="olga-password")
    theirs, _ = auth.create_client(name="theirs", user=other)
    client.force_login(editor)
    response = client.post(reverse("catalog:credential-revoke", args=[theirs.client_id]))
    assert response.status_code == 404
    assert CatalogClient.objects.get(pk=theirs.pk).active
    assert theirs.client_id not in page(client, "catalog:credentials")


def test_a_credential_without_a_name_is_a_form_error(client, editor):
    client.force_login(editor)
    response = client.post(reverse("catalog:credentials"), {"name": "   "})
    assert response.status_code == 200
    assert 'id="credential"' not in response.content.decode()
    assert not CatalogClient.objects.exists()


# -- views that mislead ----------------------------------------------------------------------


def test_a_view_over_an_unknown_table_is_refused_with_the_line_and_column(client, editor, sales):
    client.force_login(editor)
    response = post(
        client,
        "catalog:view-create",
        {"name": "v", "sql": "SELECT id\nFROM   sales.nowhere", "dialect": "spark"},
        namespace="sales",
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "Unknown table or view sales.nowhere" in html and "(line 2, column 8)" in html
    assert not View.objects.filter(name="v").exists()


def test_the_api_refuses_an_unknown_table_unless_the_view_comes_before_its_sources(
    client, editor, sales
):
    client.force_login(editor)
    url = "/api/namespaces/sales/views/"
    body = {"name": "early", "sql": "SELECT id FROM orders_later"}
    refused = client.post(url, body, content_type="application/json")
    assert refused.status_code == 400 and "orders_later" in refused.content.decode()
    body["allow_unknown_sources"] = True
    accepted = client.post(url, body, content_type="application/json")
    assert accepted.status_code == 201, accepted.content


def test_a_view_made_before_its_sources_says_its_types_are_unknown_and_reads_has_no_dot(
    client, editor, sales
):
    client.force_login(editor)
    response = post(
        client,
        "catalog:view-create",
        {
            "name": "early",
            "sql": "SELECT id FROM sales.orders_later",
            "dialect": "spark",
            "allow_unknown_sources": "on",
        },
        namespace="sales",
    )
    assert response.status_code == 302
    html = page(client, "catalog:view-detail", namespace="sales", name="early")
    notice = re.search(r'id="unknown-sources">(.*?)</p>', html, re.S).group(1)
    assert "sales.orders_later" in notice and "types of its columns are unknown" in notice
    reads = re.search(r'id="reads">(.*?)</dd>', html, re.S).group(1)
    assert "<code>sales.orders_later</code>" in reads and ".sales" not in reads


def test_reads_links_to_the_tables_the_view_reads(client, viewer, orders_view):
    client.force_login(viewer)
    html = page(client, "catalog:view-detail", namespace="sales", name="big_orders")
    reads = re.search(r'id="reads">(.*?)</dd>', html, re.S).group(1)
    assert reverse("catalog:table-detail", args=["sales", "orders"]) in reads
    assert 'id="unknown-sources"' not in html


def test_the_view_page_says_how_many_versions_are_kept_and_which_expired(client, editor, sales):
    services.create_view(
        namespace="sales", name="v", sql="SELECT 0 AS n",
        properties={"version.history.num-entries": "2"},
    )  # fmt: skip
    for n in range(1, 4):
        services.replace_view(namespace="sales", name="v", sql=f"SELECT {n} AS n")
    client.force_login(editor)
    html = page(client, "catalog:view-detail", namespace="sales", name="v")
    retention = re.search(r'id="version-retention">(.*?)</p>', html, re.S).group(1)
    assert "last 2 versions" in retention and "v1, v2" in retention

    response = client.get(
        reverse("catalog:view-diff", args=["sales", "v"]), {"left": "1", "right": "4"}
    )
    assert response.status_code == 404
    text = response.content.decode()
    assert "v1 of <code>sales.v</code> expired" in text and "keeps its last 2 versions" in text
    assert "Select a valid choice" not in text


def test_the_default_retention_is_ten_versions(client, viewer, orders_view):
    client.force_login(viewer)
    html = page(client, "catalog:view-detail", namespace="sales", name="big_orders")
    assert "keeps its last 10 versions" in html and "expired" not in html


def test_updated_shows_the_time_of_the_last_change(client, editor, orders_view):
    View.objects.filter(pk=orders_view.pk).update(
        updated_at=orders_view.updated_at.replace(year=2020)
    )
    client.force_login(editor)
    before = re.search(r'id="updated-at">([^<]+)', page(
        client, "catalog:view-detail", namespace="sales", name="big_orders"
    )).group(1)  # fmt: skip
    assert before.startswith("2020")
    services.replace_view(namespace="sales", name="big_orders", sql="SELECT id FROM orders")
    after = re.search(r'id="updated-at">([^<]+)', page(
        client, "catalog:view-detail", namespace="sales", name="big_orders"
    )).group(1)  # fmt: skip
    assert not after.startswith("2020")


def test_the_replace_form_starts_from_the_sql_as_the_user_wrote_it(client, editor, orders_view):
    written = "select id   -- the id only\nfrom orders where amount > 10"
    services.replace_view(namespace="sales", name="big_orders", sql=written)
    client.force_login(editor)
    html = page(client, "catalog:view-replace", namespace="sales", name="big_orders")
    textarea = re.search(r'<textarea name="sql"[^>]*>(.*?)</textarea>', html, re.S).group(1)
    assert textarea.strip() == escape(written)


def test_an_edit_conflict_shows_the_newer_version_and_a_resubmit_builds_on_it(
    client, editor, orders_view
):
    client.force_login(editor)
    opened = orders_view.metadata_location
    services.replace_view(namespace="sales", name="big_orders", sql="SELECT amount FROM orders")
    mine = "SELECT id, amount FROM orders"
    response = post(
        client,
        "catalog:view-replace",
        {"sql": mine, "dialect": "spark", "expected_metadata_location": opened},
        namespace="sales",
        name="big_orders",
    )
    assert response.status_code == 200
    html = response.content.decode()
    newer = re.search(r'id="newer-version">(.*?)</div>', html, re.S).group(1)
    assert "Version 2" in newer and "SELECT amount FROM orders" in newer
    assert escape(mine) in html
    current = View.objects.get(pk=orders_view.pk).metadata_location
    assert f'name="expected_metadata_location" value="{escape(current)}"' in html

    response = post(
        client,
        "catalog:view-replace",
        {"sql": mine, "dialect": "spark", "expected_metadata_location": current},
        namespace="sales",
        name="big_orders",
    )
    assert response.status_code == 302
    assert View.objects.get(pk=orders_view.pk).current_version_id == 3


def test_the_internal_drop_dialect_property_has_no_remove_button(client, editor, orders_view):
    client.force_login(editor)
    services.set_view_properties(namespace="sales", name="big_orders", updates={"team": "a"})
    html = page(client, "catalog:view-detail", namespace="sales", name="big_orders")
    assert REPLACE_DROP_DIALECT_ALLOWED in html
    assert f'title="Remove {REPLACE_DROP_DIALECT_ALLOWED}"' not in html
    assert 'title="Remove team"' in html
