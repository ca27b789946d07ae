"""Row filters and column masks in the catalog (issue 51, items 1 and 4, and the app's
previews and file lists of item 2): set and dropped by a table's managers through the API
(catalog.services.policies), shown on the table's page, recorded in the audit; engines
subject to one are refused the table through the REST catalog, and the app shows no rows
or files of it to a reader they apply to."""

# ruff: noqa: F811 - the shared fixtures are imported by name
from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.test import Client

from catalog import access, policies, services
from catalog.core.access import MANAGE, READ_DATA, READ_METADATA
from catalog.core.errors import Forbidden, InvalidInput, NotFound, SqlError
from catalog.models import AccessEvent, CatalogEvent, CatalogObject, ColumnMask, RowFilter
from tests.integration.grant_fixtures import admin, alice, api_as, bob, engine, give  # noqa: F401
from tests.integration.test_iceberg_rest import BASE, assert_error, create_view_request
from tests.integration.test_table_preview_api import sales  # noqa: F401 - a fixture

pytestmark = pytest.mark.django_db

ORDERS = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": True},
        {"id": 2, "name": "region", "type": "string", "required": False},
        {"id": 3, "name": "email", "type": "string", "required": False},
    ],
}
POLICIES = "/api/namespaces/sales/tables/orders/policies"
ROW_FILTER = "/api/namespaces/sales/tables/orders/row-filter"
EMAIL_MASK = "/api/namespaces/sales/tables/orders/columns/email/mask"
EU_ONLY = "region = 'EU'"
MASKED = "concat('***@', split_part(email, '@', 2))"


@pytest.fixture
def finance() -> Group:
    return Group.objects.create(name="finance")


@pytest.fixture
def auditors() -> Group:
    return Group.objects.create(name="auditors")


@pytest.fixture
def orders(admin, alice, bob):
    """sales.orders, which alice manages and bob reads; hr.people, which bob cannot see
    (he holds a grant on sales only)."""
    services.create_namespace(name="sales", actor=admin)
    services.create_namespace(name="hr", actor=admin)
    table = services.create_table(namespace="sales", name="orders", schema=ORDERS, actor=admin)
    services.create_table(namespace="hr", name="people", schema=ORDERS, actor=admin)
    give(admin, MANAGE, alice, namespace="sales", name="orders")
    give(admin, READ_DATA, bob, namespace="sales")
    return table.obj


def eu_only(actor, *groups: str) -> RowFilter:
    return services.set_row_filter(
        namespace="sales", name="orders", expression=EU_ONLY, exempt_groups=groups, actor=actor
    )


def pages_as(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


# -- setting and dropping --------------------------------------------------------------------


def test_a_manager_sets_a_row_filter_and_the_api_lists_it_with_its_exempt_groups(
    orders, alice, finance, auditors
):
    client = api_as(alice)
    put = client.put(
        ROW_FILTER,
        {"expression": EU_ONLY, "exempt_groups": ["finance", "auditors"]},
        format="json",
    )
    assert put.status_code == 200, put.content
    assert put.json()["exempt_groups"] == ["auditors", "finance"]

    listed = client.get(POLICIES).json()
    assert listed["table"] == "sales.orders"
    assert listed["row_filter"]["expression"] == EU_ONLY
    assert listed["row_filter"]["exempt_groups"] == ["auditors", "finance"]
    assert listed["row_filter"]["updated_by"] == "alice"
    assert listed["masks"] == []


def test_a_manager_sets_a_column_mask_and_setting_it_again_replaces_it(orders, alice, finance):
    client = api_as(alice)
    first = client.put(EMAIL_MASK, {"expression": "'***'"}, format="json")
    assert first.status_code == 200, first.content
    second = client.put(
        EMAIL_MASK, {"expression": MASKED, "exempt_groups": ["finance"]}, format="json"
    )
    assert second.status_code == 200, second.content

    masks = client.get(POLICIES).json()["masks"]
    assert [(m["column"], m["expression"], m["exempt_groups"]) for m in masks] == [
        ("email", MASKED, ["finance"])
    ]
    assert ColumnMask.objects.count() == 1


def test_setting_a_policy_needs_manage_on_the_table(orders, bob):
    response = api_as(bob).put(ROW_FILTER, {"expression": EU_ONLY}, format="json")

    assert response.status_code == 403, response.content
    assert "manage" in response.json()["error"]
    assert not RowFilter.objects.exists()


def test_a_table_the_actor_may_not_see_answers_as_missing(orders, bob):
    response = api_as(bob).put(
        "/api/namespaces/hr/tables/people/row-filter", {"expression": EU_ONLY}, format="json"
    )

    assert response.status_code == 404, response.content
    assert response.json()["error"] == "Table does not exist: hr.people"
    with pytest.raises(NotFound):
        services.drop_column_mask(namespace="hr", name="people", column="email", actor=bob)


def test_bad_sql_is_a_400_naming_the_line_and_column(orders, alice):
    response = api_as(alice).put(
        ROW_FILTER, {"expression": "region = 'EU'\n  and country = 'FR'"}, format="json"
    )

    assert response.status_code == 400, response.content
    body = response.json()
    assert body["field"] == "expression"
    assert (body["line"], body["column"]) == (2, 7)
    assert "Unknown column 'country'" in body["error"]


def test_a_second_statement_in_a_mask_is_refused_and_nothing_is_kept(orders, alice):
    with pytest.raises(SqlError, match="one expression"):
        services.set_column_mask(
            namespace="sales",
            name="orders",
            column="email",
            expression="'***'; DROP TABLE sales.orders",
            actor=alice,
        )
    assert not ColumnMask.objects.exists()


def test_an_unknown_exempt_group_or_column_names_its_field(orders, alice):
    group = api_as(alice).put(
        ROW_FILTER, {"expression": EU_ONLY, "exempt_groups": ["nobody"]}, format="json"
    )
    assert group.status_code == 400 and group.json()["field"] == "exempt_groups", group.content

    column = api_as(alice).put(
        "/api/namespaces/sales/tables/orders/columns/phone/mask",
        {"expression": "'***'"},
        format="json",
    )
    assert column.status_code == 400 and column.json()["field"] == "column", column.content


def test_policies_are_set_on_tables_not_views(orders, admin):
    services.create_view(namespace="sales", name="recent", sql="SELECT 1 AS one", actor=admin)
    with pytest.raises(InvalidInput, match="is a view"):
        services.set_row_filter(namespace="sales", name="recent", expression="true", actor=admin)


def test_dropping_a_row_filter_the_table_lacks_is_a_404_naming_the_table(orders, alice):
    response = api_as(alice).delete(ROW_FILTER)

    assert response.status_code == 404, response.content
    assert "sales.orders has no row filter" in response.json()["error"]


def test_a_manager_drops_the_row_filter_and_the_mask(orders, alice):
    eu_only(alice)
    services.set_column_mask(
        namespace="sales", name="orders", column="email", expression=MASKED, actor=alice
    )
    client = api_as(alice)

    assert client.delete(ROW_FILTER).status_code == 204
    assert client.delete(EMAIL_MASK).status_code == 204
    assert client.get(POLICIES).json() == {"table": "sales.orders", "row_filter": None, "masks": []}


def test_a_policy_is_deleted_with_its_table(orders, admin):
    eu_only(admin)
    services.drop_table(namespace="sales", name="orders", actor=admin)

    assert not RowFilter.objects.exists()


def test_every_set_and_drop_is_an_object_change_in_the_audit(orders, admin, alice, finance):
    eu_only(alice, "finance")
    services.drop_row_filter(namespace="sales", name="orders", actor=alice)
    services.set_column_mask(
        namespace="sales", name="orders", column="email", expression=MASKED, actor=alice
    )
    services.drop_column_mask(namespace="sales", name="orders", column="email", actor=alice)

    response = api_as(admin).get("/api/audit/", {"kind": "object", "actor": "alice"})
    assert response.status_code == 200, response.content
    entries = response.json()["results"]
    assert [e["action"] for e in entries] == [
        "drop_column_mask",
        "set_column_mask",
        "drop_row_filter",
        "set_row_filter",
    ]
    assert {e["object"] for e in entries} == {"sales.orders"}
    assert entries[-1]["details"] == f"{EU_ONLY} (exempt groups: finance)"


def test_a_refused_expression_is_a_failed_event_in_the_tables_history(orders, alice):
    with pytest.raises(SqlError):
        services.set_row_filter(
            namespace="sales", name="orders", expression="reflect('a', 'b')", actor=alice
        )

    failed = CatalogEvent.objects.get(action="set_row_filter")
    assert failed.result == CatalogEvent.Result.FAILED
    assert "reflect()" in failed.message


# -- who they apply to -----------------------------------------------------------------------


def test_policies_apply_to_everyone_but_the_exempt_groups_superusers_included(
    orders, admin, alice, bob, finance
):
    eu_only(alice, "finance")
    services.set_column_mask(
        namespace="sales",
        name="orders",
        column="email",
        expression="if(is_member('finance'), email, concat(current_user(), '@masked'))",
        actor=alice,
    )
    bob.groups.add(finance)

    applied = policies.applies(access.Principal(admin), orders)
    assert applied.row_filter == EU_ONLY
    assert applied.masks == (("email", "IF(FALSE, email, CONCAT('root', '@masked'))"),)
    # bob is exempt from the row filter, not from the mask.
    for_bob = policies.for_principal(access.Principal(bob))
    assert [(p.table, p.row_filter, p.masks) for p in for_bob] == [
        (("sales", "orders"), None, (("email", "IF(TRUE, email, CONCAT('bob', '@masked'))"),))
    ]
    assert policies.protected(orders)


def test_a_reader_exempt_from_every_policy_meets_none(orders, alice, bob, finance):
    eu_only(alice, "finance")
    bob.groups.add(finance)

    assert policies.applies(access.Principal(bob), orders) is None
    assert policies.for_principal(access.Principal(bob)) == []


def test_the_policies_of_a_principal_are_read_in_a_few_queries(
    orders, alice, bob, finance, django_assert_max_num_queries
):
    eu_only(alice, "finance")
    services.set_column_mask(
        namespace="sales", name="orders", column="email", expression=MASKED, actor=alice
    )
    with django_assert_max_num_queries(3):
        policies.for_principal(access.Principal(bob))
    table = CatalogObject.objects.select_related("namespace").get(pk=orders.pk)
    with django_assert_max_num_queries(2):
        policies.applies(access.Principal(bob), table)


# -- engines ---------------------------------------------------------------------------------


def test_an_engine_subject_to_a_policy_is_refused_the_table_naming_it(orders, alice, bob):
    eu_only(alice)
    AccessEvent.objects.all().delete()

    response = engine(bob).get("/namespaces/sales/tables/orders")

    error = assert_error(response, 403, "ForbiddenException")
    assert "the row filter on sales.orders applies to bob" in error["message"]
    assert "console" in error["message"] and "view" in error["message"]
    assert "metadata" not in response.json()


def test_a_refused_load_is_a_refused_access_event(orders, alice, bob, settings):
    settings.AUDIT_READS = True
    services.set_column_mask(
        namespace="sales", name="orders", column="email", expression=MASKED, actor=alice
    )
    AccessEvent.objects.all().delete()

    engine(bob).get("/namespaces/sales/tables/orders")

    refused = AccessEvent.objects.get()
    assert (refused.outcome, refused.status, refused.object_name) == (
        "refused",
        403,
        "sales.orders",
    )
    assert "the mask of email on sales.orders" in refused.reason


def test_a_load_with_the_tables_etag_is_refused_too(orders, admin, alice, bob):
    tag = engine(bob).get("/namespaces/sales/tables/orders")["ETag"]
    eu_only(alice)
    rest = engine(bob)

    kept = rest.client.get(
        BASE + "/namespaces/sales/tables/orders", headers={**rest.headers, "If-None-Match": tag}
    )

    assert kept.status_code == 403


def test_an_engine_exempt_from_every_policy_or_managing_the_table_loads_it(
    orders, alice, bob, finance
):
    eu_only(alice, "finance")
    bob.groups.add(finance)

    assert engine(bob).get("/namespaces/sales/tables/orders").status_code == 200
    assert engine(alice).get("/namespaces/sales/tables/orders").status_code == 200


def test_scan_planning_and_commits_of_a_protected_table_are_refused(orders, alice, bob):
    eu_only(alice)
    give(alice, "write_data", bob, namespace="sales", name="orders")
    rest = engine(bob)

    plan = rest.post("/namespaces/sales/tables/orders/plan", {})
    assert_error(plan, 403, "ForbiddenException")
    assert "plan-tasks" not in plan.json() and "file-scan-tasks" not in plan.json()
    commit = rest.post(
        "/namespaces/sales/tables/orders",
        {"requirements": [], "updates": [{"action": "remove-snapshot-ref", "ref-name": "x"}]},
    )
    assert_error(commit, 403, "ForbiddenException")


def test_a_view_over_a_protected_table_loads(orders, admin, alice, bob):
    created = engine(admin).post(
        "/namespaces/sales/views", create_view_request("eu", "SELECT id FROM sales.orders")
    )
    assert created.status_code == 200, created.content
    eu_only(alice)

    assert engine(bob).get("/namespaces/sales/views/eu").status_code == 200
    assert engine(bob).get("/namespaces/sales/tables/orders").status_code == 403


# -- the app's previews, files and page --------------------------------------------------------


def test_a_preview_and_file_list_are_refused_to_a_reader_a_policy_applies_to(orders, alice, bob):
    eu_only(alice)
    client = api_as(bob)

    for path in ("preview", "files"):
        response = client.get(f"/api/namespaces/sales/tables/orders/{path}")
        assert response.status_code == 403, response.content
        body = response.json()
        assert "row filter on sales.orders applies to you" in body["error"]
        assert "console" in body["error"]
        assert "rows" not in body and "files" not in body


def test_an_exempt_reader_previews_and_lists_files(orders, alice, bob, finance):
    eu_only(alice, "finance")
    bob.groups.add(finance)
    client = api_as(bob)

    assert client.get("/api/namespaces/sales/tables/orders/files").status_code == 200
    preview = client.get("/api/namespaces/sales/tables/orders/preview")
    assert preview.status_code in (200, 202), preview.content


def test_an_attached_tables_rows_are_previewed_only_by_a_reader_exempt_from_its_filter(
    sales, editor, finance
):
    services.set_row_filter(
        namespace="ext",
        name="sales",
        expression="region = 'eu'",
        exempt_groups=["finance"],
        actor=editor,
    )
    # The editor manages the whole catalog, and the filter applies to them all the same.
    refused = api_as(editor).get("/api/namespaces/ext/tables/sales/preview")
    assert refused.status_code == 403, refused.content
    assert "row filter on ext.sales" in refused.json()["error"]

    editor.groups.add(finance)
    shown = api_as(editor).get("/api/namespaces/ext/tables/sales/preview")
    assert shown.status_code == 200, shown.content
    assert len(shown.json()["rows"]) == 6


def test_a_mask_is_dropped_by_its_column_name_in_any_case(orders, alice):
    services.set_column_mask(
        namespace="sales", name="orders", column="email", expression=MASKED, actor=alice
    )

    assert (
        api_as(alice).delete("/api/namespaces/sales/tables/orders/columns/EMAIL/mask").status_code
        == 204
    )
    assert not ColumnMask.objects.exists()


def test_the_table_page_shows_its_policies_to_a_metadata_reader(orders, admin, alice, finance):
    eu_only(alice, "finance")
    services.set_column_mask(
        namespace="sales", name="orders", column="email", expression=MASKED, actor=alice
    )
    reader = type(admin).objects.create_user("rita")
    give(admin, READ_METADATA, reader, namespace="sales")

    page = pages_as(reader).get("/namespaces/sales/tables/orders/")

    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="policies"' in html
    assert "region = &#x27;EU&#x27;" in html
    assert "concat(&#x27;***@&#x27;, split_part(email, &#x27;@&#x27;, 2))" in html
    assert "finance" in html and "alice" in html


def test_the_table_page_says_a_table_has_no_policies(orders, bob):
    page = pages_as(bob).get("/namespaces/sales/tables/orders/")

    assert "None: every reader sees every row and column." in page.content.decode()


def test_the_pages_preview_and_files_are_refused_to_a_reader_a_policy_applies_to(
    orders, alice, bob
):
    eu_only(alice)
    client = pages_as(bob)

    for query in ("?preview=1", "?files=1"):
        response = client.get(f"/namespaces/sales/tables/orders/{query}")
        assert response.status_code == 403
        assert "console" in response.content.decode()


def test_policies_checks_refuse_a_hidden_or_unmanaged_table_in_the_service(orders, bob):
    with pytest.raises(Forbidden):
        eu_only(bob)
