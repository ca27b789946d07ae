"""Grants (issue 39): who may see and change which namespace, table and view.

The decision (catalog.access) is asked by the Iceberg REST catalog and the API; a
principal that may not see an object gets exactly the answer a missing object gets."""

# ruff: noqa: F811 - the shared fixtures are imported by name
from __future__ import annotations

import importlib
import json

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext

from catalog import access, services
from catalog.core.access import CREATE, MANAGE, OWN, READ_DATA, READ_METADATA, WRITE_DATA
from catalog.iceberg_rest import table_loads
from catalog.models import CatalogClient, CatalogObject, Grant, GrantChange, Namespace, Table
from catalog.roles import EDITOR, VIEWER
from catalog.services import credentials as auth
from catalog.services.credentials import create_client
from tests.integration.grant_fixtures import (  # noqa: F401 - fixtures
    admin,
    alice,
    api_as,
    engine,
    give,
    take,
)
from tests.integration.test_iceberg_rest import (
    SCHEMA,
    Iceberg,
    create_view_request,
    request_token,
)

pytestmark = pytest.mark.django_db


# -- fixtures --------------------------------------------------------------------------------


@pytest.fixture
def catalog(admin):
    """finance (with finance.eu under it) and sales, a table in each, and a view in sales."""
    for name in ("finance", "finance.eu", "sales"):
        services.create_namespace(name=name, actor=admin)
    services.create_table(namespace="finance", name="ledger", schema=SCHEMA, actor=admin)
    services.create_table(namespace="finance.eu", name="revenue", schema=SCHEMA, actor=admin)
    services.create_table(namespace="sales", name="orders", schema=SCHEMA, actor=admin)
    request = create_view_request("big_orders", "SELECT id FROM sales.orders")
    services.create_view_from_parts(
        namespace="sales",
        name="big_orders",
        schema=request["schema"],
        view_version={**request["view-version"], "default-namespace": ["sales"]},
        actor=admin,
    )


def principal(user, client=None) -> access.Principal:
    """A principal as a new request makes one (nothing cached from before)."""
    user.refresh_from_db()
    return access.Principal(user, client)


def table(namespace: str, name: str) -> access.Securable:
    return access.of_object(
        CatalogObject.objects.select_related("namespace").get(namespace__name=namespace, name=name)
    )


def answer(response) -> tuple[int, bytes]:
    return response.status_code, response.content


# -- the decision ------------------------------------------------------------------------------


def test_a_namespace_grant_covers_every_namespace_and_object_under_it(catalog, admin, alice):
    give(admin, READ_DATA, alice, namespace="finance")
    who = principal(alice)

    assert access.may(who, READ_DATA, table("finance", "ledger"))
    assert access.may(who, READ_DATA, table("finance.eu", "revenue"))
    assert access.may(who, READ_METADATA, access.namespace("finance.eu"))
    assert not access.may(who, WRITE_DATA, table("finance.eu", "revenue"))
    assert not access.may(who, READ_METADATA, table("sales", "orders"))
    assert not access.may(who, READ_METADATA, access.namespace("sales"))
    assert not access.may(who, READ_DATA, access.CATALOG)


def test_a_grant_on_one_object_shows_the_namespaces_above_it_but_not_their_other_objects(
    catalog, admin, alice
):
    give(admin, READ_METADATA, alice, namespace="finance.eu", name="revenue")
    who = principal(alice)

    assert who.sees_namespace("finance") and who.sees_namespace("finance.eu")
    assert access.may(who, READ_METADATA, table("finance.eu", "revenue"))
    assert not access.may(who, READ_DATA, table("finance.eu", "revenue"))
    assert not access.may(who, READ_METADATA, table("finance", "ledger"))
    assert not who.sees_namespace("sales")


def test_the_lists_show_what_lies_under_a_granted_namespace_and_nothing_named_like_it(
    catalog, admin, alice
):
    lookalikes = ("Finance", "financex", "finance_eu", "fin%", "Finance.eu")
    for name in lookalikes:
        services.create_namespace(name=name, actor=admin)
        services.create_table(namespace=name, name="ledger", schema=SCHEMA, actor=admin)
    give(admin, READ_DATA, alice, namespace="finance")
    give(admin, READ_METADATA, alice, namespace="sales", name="orders")
    who = principal(alice)

    namespaces = Namespace.objects.filter(access.namespaces_condition(who))
    objects = CatalogObject.objects.filter(access.objects_condition(who))
    readable = CatalogObject.objects.filter(access.objects_condition(who, READ_DATA))

    assert sorted(namespaces.values_list("name", flat=True)) == ["finance", "finance.eu", "sales"]
    assert sorted(objects.values_list("namespace__name", "name")) == [
        ("finance", "ledger"),
        ("finance.eu", "revenue"),
        ("sales", "orders"),
    ]
    assert sorted(readable.values_list("namespace__name", "name")) == [
        ("finance", "ledger"),
        ("finance.eu", "revenue"),
    ]
    assert access.namespaces_condition(principal(admin)) is None


def test_a_groups_grant_is_held_by_its_members_and_only_them(catalog, admin, alice, editor):
    analysts = Group.objects.create(name="analysts")
    give(admin, READ_DATA, analysts, namespace="sales")
    alice.groups.add(analysts)

    assert access.may(principal(alice), READ_DATA, table("sales", "orders"))
    outsider = type(alice).objects.create_user("bob")
    assert not access.may(principal(outsider), READ_METADATA, table("sales", "orders"))


def test_create_in_a_namespace_does_not_show_what_others_made_there(catalog, admin, alice):
    give(admin, CREATE, alice, namespace="sales")
    who = principal(alice)

    assert who.sees_namespace("sales")
    assert access.may(who, CREATE, access.namespace("sales"))
    assert not access.may(who, READ_METADATA, table("sales", "orders"))


def test_the_creator_owns_what_they_make_and_holds_everything_on_it(catalog, admin, alice):
    give(admin, CREATE, alice, namespace="sales")
    services.create_table(namespace="sales", name="mine", schema=SCHEMA, actor=alice)
    services.create_namespace(name="sales.alice", actor=alice)
    services.create_table(namespace="sales.alice", name="deep", schema=SCHEMA, actor=admin)
    who = principal(alice)

    assert Table.objects.get(name="mine").owner == alice
    assert Namespace.objects.get(name="sales.alice").owner == alice
    assert OWN in who.privileges(table("sales", "mine"))
    # A namespace's owner holds everything under it, what others made there included.
    assert access.may(who, MANAGE, table("sales.alice", "deep"))
    assert not access.may(who, READ_METADATA, table("sales", "orders"))


def test_a_narrowed_credential_holds_what_both_it_and_its_user_hold(catalog, admin, alice):
    give(admin, MANAGE, alice, namespace="finance")
    client, _ = create_client(name="etl", user=alice)
    give(alice, READ_DATA, client, namespace="finance.eu")
    client.refresh_from_db()
    who = principal(alice, client)

    assert client.narrowed
    assert access.may(who, READ_DATA, table("finance.eu", "revenue"))
    assert not access.may(who, WRITE_DATA, table("finance.eu", "revenue"))
    assert not access.may(who, READ_METADATA, table("finance", "ledger"))
    # The user alone keeps all of theirs; an unnarrowed credential acts as its user.
    assert access.may(principal(alice), MANAGE, table("finance", "ledger"))
    other, _ = create_client(name="other", user=alice)
    assert access.may(principal(alice, other), MANAGE, table("finance", "ledger"))


def test_a_narrowing_grant_cannot_widen_past_the_user(catalog, admin, alice):
    give(admin, READ_DATA, alice, namespace="finance")
    client, _ = create_client(name="etl", user=alice)
    give(alice, MANAGE, client, namespace="finance")
    client.refresh_from_db()

    assert not access.may(principal(alice, client), WRITE_DATA, table("finance", "ledger"))
    assert access.may(principal(alice, client), READ_DATA, table("finance", "ledger"))


def test_superusers_hold_everything_without_a_query(catalog, admin):
    who = principal(admin)
    with CaptureQueriesContext(connection) as queries:
        assert access.may(who, MANAGE, access.namespace("sales"))
        assert who.sees_namespace("finance.eu")
        assert access.may(who, READ_DATA, access.CATALOG)
    assert len(queries.captured_queries) == 0


def test_a_grant_check_costs_at_most_one_query_per_request(catalog, admin, alice):
    give(admin, READ_DATA, alice, namespace="finance")
    give(admin, READ_METADATA, alice, namespace="sales", name="orders")
    securables = [
        table("finance", "ledger"),
        table("finance.eu", "revenue"),
        table("sales", "orders"),
    ]
    who = principal(alice)

    with CaptureQueriesContext(connection) as queries:
        for _ in range(50):
            for securable in securables:
                access.may(who, READ_DATA, securable)
            who.sees_namespace("sales")
            access.may(who, CREATE, access.CATALOG)

    assert len(queries.captured_queries) == 1


def test_a_rest_request_loads_the_grants_once_and_load_table_runs_one_query(catalog, admin, alice):
    give(admin, READ_DATA, alice, namespace="finance")
    for number in range(20):
        services.create_table(namespace="finance", name=f"t{number}", schema=SCHEMA, actor=admin)
    api = engine(alice)
    api.get("/namespaces/finance/tables/ledger")  # the token is verified and kept

    with CaptureQueriesContext(connection) as queries:
        listed = api.get("/namespaces/finance/tables", pageSize=100)
    grant_reads = [q for q in queries.captured_queries if '"catalog_grant"' in q["sql"]]
    assert listed.status_code == 200 and len(listed.json()["identifiers"]) == 21
    assert len(grant_reads) == 1

    with CaptureQueriesContext(connection) as queries:
        loaded = api.get("/namespaces/finance%1Feu/tables/revenue")
    assert loaded.status_code == 200, loaded.content
    assert len(queries.captured_queries) == 1


def test_load_tables_read_check_in_its_one_query_allows_only_what_may_allows(
    catalog, admin, django_user_model
):
    # finance.e is a prefix of finance.eu's name but not a namespace above it.
    services.create_namespace(name="finance.e", actor=admin)
    team = Group.objects.create(name="team")
    # (case, privilege, namespace, object or "group", the answer to load-table)
    cases = [
        ("read_data on the table's namespace", READ_DATA, "finance.eu", None, 200),
        ("read_data on the namespace above it", READ_DATA, "finance", None, 200),
        ("write_data on the namespace above it", WRITE_DATA, "finance", None, 200),
        ("manage on the catalog", MANAGE, None, None, 200),
        ("read_data on the table", READ_DATA, "finance.eu", "revenue", 200),
        ("a group's read_data above it", READ_DATA, "finance", "group", 200),
        ("owning the namespace above it", OWN, "finance", None, 200),
        ("read_metadata on the namespace above it", READ_METADATA, "finance", None, 403),
        ("create on the table's namespace", CREATE, "finance.eu", None, 404),
        ("read_data on a namespace whose name is a prefix", READ_DATA, "finance.e", None, 404),
        ("read_data on another namespace", READ_DATA, "sales", None, 404),
    ]
    for number, (case, privilege, namespace, name, status) in enumerate(cases):
        user = django_user_model.objects.create_user(f"user{number}")
        if privilege == OWN:
            Namespace.objects.filter(name=namespace).update(owner=user)
        elif name == "group":
            team.user_set.set([user])
            Grant.objects.filter(group=team).delete()
            give(admin, privilege, team, namespace=namespace)
        else:
            give(admin, privilege, user, namespace=namespace, name=name)
        api = engine(user)
        client = CatalogClient.objects.get(user=user)
        digest = auth.digest_of(api.headers["Authorization"].removeprefix("Bearer "))

        found = table_loads.pointer(
            "finance.eu", "revenue", token_digest=digest, user_id=user.pk, client_id=client.pk
        )
        may = access.may(principal(user, client), READ_DATA, table("finance.eu", "revenue"))
        loaded = api.get("/namespaces/finance%1Feu/tables/revenue")

        assert (found.read_ok, may) == (status == 200, status == 200), case
        assert loaded.status_code == status, case
        team.user_set.clear()


def test_a_narrowed_credential_is_never_let_through_by_load_tables_one_query(catalog, admin, alice):
    give(admin, READ_DATA, alice, namespace="finance")
    client, secret = create_client(name="etl", user=alice)
    give(alice, READ_METADATA, client, namespace="finance")
    token = request_token(client.client_id, secret).json()["access_token"]

    found = table_loads.pointer(
        "finance",
        "ledger",
        token_digest=auth.digest_of(token),
        user_id=alice.pk,
        client_id=client.pk,
    )
    loaded = Iceberg(token).get("/namespaces/finance/tables/ledger")

    assert found.read_ok is False  # left to `may`, which sees the narrowing
    assert loaded.status_code == 403


def test_a_revoked_grant_is_gone_at_the_next_request(catalog, admin, alice):
    give(admin, READ_DATA, alice, namespace="finance")
    api = engine(alice)
    assert api.get("/namespaces/finance/tables/ledger").status_code == 200

    take(admin, READ_DATA, alice, namespace="finance")

    assert api.get("/namespaces/finance/tables/ledger").status_code == 403  # holds nothing now
    give(admin, READ_METADATA, alice, namespace="sales")
    assert api.get("/namespaces/finance/tables/ledger").status_code == 404


# -- the Iceberg REST catalog ------------------------------------------------------------------


def test_the_rest_lists_show_only_what_the_principal_may_see(catalog, admin, alice):
    give(admin, READ_DATA, alice, namespace="finance.eu")
    give(admin, READ_METADATA, alice, namespace="sales", name="orders")
    api = engine(alice)

    assert api.get("/namespaces").json()["namespaces"] == [["finance"], ["sales"]]
    assert api.get("/namespaces", parent="finance").json()["namespaces"] == [["finance", "eu"]]
    assert api.get("/namespaces/finance/tables").json()["identifiers"] == []
    assert api.get("/namespaces/sales/tables").json()["identifiers"] == [
        {"namespace": ["sales"], "name": "orders"}
    ]
    assert api.get("/namespaces/sales/views").json()["identifiers"] == []
    everything = engine(admin).get("/namespaces/sales/views").json()["identifiers"]
    assert everything == [{"namespace": ["sales"], "name": "big_orders"}]


def test_a_hidden_object_answers_byte_for_byte_as_a_missing_one(catalog, admin, alice):
    give(admin, READ_DATA, alice, namespace="finance")
    api = engine(alice)
    commit = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"a": "b"}}]}
    probes = {
        "load table": lambda: api.get("/namespaces/sales/tables/orders"),
        "table exists": lambda: api.head("/namespaces/sales/tables/orders"),
        "commit table": lambda: api.post("/namespaces/sales/tables/orders", commit),
        "drop table": lambda: api.delete("/namespaces/sales/tables/orders"),
        "load view": lambda: api.get("/namespaces/sales/views/big_orders"),
        "view exists": lambda: api.head("/namespaces/sales/views/big_orders"),
        "drop view": lambda: api.delete("/namespaces/sales/views/big_orders"),
        "list tables": lambda: api.get("/namespaces/sales/tables"),
        "list views": lambda: api.get("/namespaces/sales/views"),
        "load namespace": lambda: api.get("/namespaces/sales"),
        "namespace exists": lambda: api.head("/namespaces/sales"),
        "child namespaces": lambda: api.get("/namespaces", parent="sales"),
        "create in it": lambda: api.post("/namespaces", {"namespace": ["sales", "x"]}),
        "table in it": lambda: api.post(
            "/namespaces/sales/tables", {"name": "new", "schema": SCHEMA}
        ),
        "rename it": lambda: api.post(
            "/tables/rename",
            {
                "source": {"namespace": ["sales"], "name": "orders"},
                "destination": {"namespace": ["finance"], "name": "orders"},
            },
        ),
    }
    hidden = {name: answer(probe()) for name, probe in probes.items()}
    assert Table.objects.filter(name="orders").exists()  # nothing was changed

    services.drop_view(namespace="sales", name="big_orders", actor=admin)
    services.drop_table(namespace="sales", name="orders", actor=admin)
    services.drop_namespace(name="sales", actor=admin)
    missing = {name: answer(probe()) for name, probe in probes.items()}

    assert hidden == missing
    assert {status for status, _ in hidden.values()} == {404}


def test_read_metadata_lists_a_table_but_loading_it_needs_read_data(catalog, admin, alice):
    give(admin, READ_METADATA, alice, namespace="sales")
    api = engine(alice)

    assert api.get("/namespaces/sales/tables").json()["identifiers"]
    assert api.head("/namespaces/sales/tables/orders").status_code == 204
    refused = api.get("/namespaces/sales/tables/orders")
    assert refused.status_code == 403
    assert "read_data" in refused.json()["error"]["message"]
    assert api.get("/namespaces/sales/views/big_orders").status_code == 403


def test_each_write_needs_its_privilege(catalog, admin, alice):
    api = engine(alice)
    properties = {
        "requirements": [],
        "updates": [{"action": "set-properties", "updates": {"a": "b"}}],
    }
    give(admin, WRITE_DATA, alice, namespace="sales")

    assert api.post("/namespaces/sales/tables/orders", properties).status_code == 403
    assert api.delete("/namespaces/sales/tables/orders").status_code == 403
    assert api.post("/namespaces/sales/tables", {"name": "n", "schema": SCHEMA}).status_code == 403
    assert api.post("/namespaces", {"namespace": ["sales", "x"]}).status_code == 403

    give(admin, CREATE, alice, namespace="sales")
    assert api.post("/namespaces/sales/tables", {"name": "n", "schema": SCHEMA}).status_code == 200
    assert api.post("/namespaces", {"namespace": ["sales", "x"]}).status_code == 200
    assert api.post("/namespaces", {"namespace": ["top"]}).status_code == 403

    give(admin, MANAGE, alice, namespace="sales", name="orders")
    assert api.post("/namespaces/sales/tables/orders", properties).status_code == 200
    assert api.delete("/namespaces/sales/tables/orders").status_code == 204


def test_a_data_only_commit_needs_write_data_and_a_scan_report_read_data(catalog, admin, alice):
    api = engine(alice)
    snapshots = {
        "requirements": [],
        "updates": [{"action": "remove-snapshot-ref", "ref-name": "x"}],
    }
    give(admin, READ_DATA, alice, namespace="sales")
    assert api.post("/namespaces/sales/tables/orders", snapshots).status_code == 403
    assert (
        api.post(
            "/namespaces/sales/tables/orders/metrics", {"report-type": "scan-report"}
        ).status_code
        == 204
    )

    give(admin, WRITE_DATA, alice, namespace="sales", name="orders")
    assert api.post("/namespaces/sales/tables/orders", snapshots).status_code == 200


def test_a_transaction_touching_a_hidden_table_changes_nothing(catalog, admin, alice):
    give(admin, MANAGE, alice, namespace="finance")
    change = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"a": "b"}}]}
    body = {
        "table-changes": [
            {"identifier": {"namespace": ["finance"], "name": "ledger"}, **change},
            {"identifier": {"namespace": ["sales"], "name": "orders"}, **change},
        ]
    }

    response = engine(alice).post("/transactions/commit", body)

    assert response.status_code == 404
    assert "a" not in Table.objects.get(name="ledger").properties


# -- the roles, migrated -----------------------------------------------------------------------


def test_the_viewer_and_editor_groups_hold_grants_on_the_catalog():
    assert Grant.objects.filter(
        group__name=VIEWER, privilege=READ_DATA, namespace=None, object=None
    ).exists()
    assert Grant.objects.filter(
        group__name=EDITOR, privilege=MANAGE, namespace=None, object=None
    ).exists()


def test_a_viewer_still_reads_everything_and_an_editor_still_changes_everything(
    catalog, viewer, editor
):
    reader, writer = engine(viewer), engine(editor)
    commit = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"a": "b"}}]}

    assert reader.get("/namespaces/finance%1Feu/tables/revenue").status_code == 200
    assert reader.get("/namespaces/sales/views/big_orders").status_code == 200
    assert reader.post("/namespaces/sales/tables/orders", commit).status_code == 403
    assert writer.post("/namespaces/sales/tables/orders", commit).status_code == 200
    assert writer.post("/namespaces", {"namespace": ["new"]}).status_code == 200
    assert writer.delete("/namespaces/sales/views/big_orders").status_code == 204


def test_a_staff_user_reads_no_tables_rows_or_history_by_being_staff(
    catalog, admin, django_user_model
):
    from django.test import Client

    from catalog.core.errors import Forbidden
    from catalog.roles import may_read

    staff = django_user_model.objects.create_user("stan", password="stan-password", is_staff=True)
    pages = Client()
    pages.force_login(staff)

    # Let into the admin site, and nothing more: no engine load, query or preview.
    assert pages.get("/admin/").status_code == 200
    assert engine(staff).get("/namespaces/sales/tables/orders").status_code == 403
    with pytest.raises(Forbidden):
        may_read(staff, [("sales", "orders")])
    assert pages.get("/namespaces/sales/tables/orders/?preview=1").status_code == 403
    assert api_as(staff).get("/api/history/").status_code == 403
    assert pages.get("/audit/").status_code == 403

    # Granted to see sales, the table is listed, and its rows are still refused.
    give(admin, READ_METADATA, staff, namespace="sales")
    assert engine(staff).head("/namespaces/sales/tables/orders").status_code == 204
    refused = engine(staff).get("/namespaces/sales/tables/orders")
    assert refused.status_code == 403
    assert "stan lacks the read_data privilege" in refused.json()["error"]["message"]
    assert not access.may(principal(staff), READ_DATA, access.CATALOG)
    # A superuser keeps everything.
    assert engine(admin).get("/namespaces/sales/tables/orders").status_code == 200
    assert api_as(admin).get("/api/history/").status_code == 200


def test_the_migration_turns_roles_into_grants_and_creators_into_owners(catalog, admin, editor):
    migration = importlib.import_module("catalog.migrations.0017_roles_become_grants")
    Grant.objects.all().delete()
    CatalogObject.objects.update(owner=None)
    Namespace.objects.update(owner=None)
    CatalogObject.objects.filter(name="orders").update(created_by=editor)

    from django.apps import apps

    migration.forwards(apps, None)

    assert set(Grant.objects.values_list("group__name", "privilege")) == {
        (VIEWER, READ_DATA),
        (EDITOR, MANAGE),
    }
    assert CatalogObject.objects.get(name="orders").owner == editor
    assert CatalogObject.objects.get(name="ledger").owner == admin  # its creator
    # The history names who created each namespace.
    assert Namespace.objects.get(name="sales").owner == admin


# -- the grants API ------------------------------------------------------------------------------


def test_the_grants_api_grants_lists_and_revokes_and_records_who_and_when(catalog, admin, alice):
    body = {
        "privilege": "read_data",
        "principal_type": "user",
        "principal": "alice",
        "securable_type": "namespace",
        "namespace": "finance",
    }
    created = api_as(admin).post("/api/grants/", body, format="json")
    again = api_as(admin).post("/api/grants/", body, format="json")

    assert created.status_code == 201, created.content
    assert again.status_code == 200
    assert created.json() | {"id": 0, "granted_at": ""} == {
        "id": 0,
        "privilege": "read_data",
        "principal_type": "user",
        "principal": "alice",
        "securable_type": "namespace",
        "namespace": "finance",
        "name": None,
        "granted_by": "root",
        "granted_at": "",
    }
    mine = api_as(alice).get("/api/grants/").json()
    assert [g["namespace"] for g in mine["results"]] == ["finance"]

    revoked = api_as(admin).delete("/api/grants/", body, format="json")
    assert revoked.status_code == 204
    assert api_as(admin).delete("/api/grants/", body, format="json").status_code == 404
    changes = list(
        GrantChange.objects.order_by("id").values_list(
            "action", "actor_name", "principal_name", "securable_name"
        )
    )
    assert changes == [
        ("grant", "root", "alice", "finance"),
        ("revoke", "root", "alice", "finance"),
    ]
    assert GrantChange.objects.filter(occurred_at__isnull=False).count() == 2


def test_only_who_manages_a_securable_may_grant_on_it(catalog, admin, alice, django_user_model):
    give(admin, READ_DATA, alice, namespace="finance")
    bob = django_user_model.objects.create_user("bob")
    body = {
        "privilege": "read_data",
        "principal_type": "user",
        "principal": "bob",
        "securable_type": "object",
        "namespace": "finance",
        "name": "ledger",
    }

    refused = api_as(alice).post("/api/grants/", body, format="json")
    assert refused.status_code == 403
    assert "manage" in refused.json()["error"]

    give(admin, MANAGE, alice, namespace="finance")
    assert api_as(alice).post("/api/grants/", body, format="json").status_code == 201
    assert access.may(principal(bob), READ_DATA, table("finance", "ledger"))
    # A namespace she may not see is answered as a missing one.
    hidden = api_as(alice).post(
        "/api/grants/", body | {"namespace": "sales", "name": "orders"}, format="json"
    )
    assert hidden.status_code == 404


def test_a_credential_is_narrowed_by_its_user_and_no_one_else(catalog, admin, alice, editor):
    give(admin, READ_DATA, alice, namespace="finance")
    client, secret = create_client(name="etl", user=alice)
    body = {
        "privilege": "read_data",
        "principal_type": "client",
        "principal": client.client_id,
        "securable_type": "namespace",
        "namespace": "finance.eu",
    }

    assert api_as(editor).post("/api/grants/", body, format="json").status_code == 400
    assert api_as(alice).post("/api/grants/", body, format="json").status_code == 201
    token = request_token(client.client_id, secret).json()["access_token"]
    narrowed = Iceberg(token)
    assert narrowed.get("/namespaces/finance/tables/ledger").status_code == 404
    assert narrowed.get("/namespaces/finance%1Feu/tables/revenue").status_code == 200


def test_bad_grants_are_a_400_naming_the_field(catalog, admin):
    base = {"principal_type": "user", "principal": "root", "securable_type": "catalog"}
    cases = [
        ({"privilege": "own"}, "privilege"),
        ({"privilege": "fly"}, "privilege"),
        (
            {
                "privilege": "create",
                "securable_type": "object",
                "namespace": "sales",
                "name": "orders",
            },
            "privilege",
        ),
        ({"privilege": "read_data", "principal": "nobody"}, "principal"),
        ({"privilege": "read_data", "principal_type": "robot"}, "principal_type"),
        ({"privilege": "read_data", "securable_type": "namespace"}, "namespace"),
    ]
    for change, field in cases:
        response = api_as(admin).post("/api/grants/", base | change, format="json")
        assert response.status_code == 400, (change, response.content)
        body = response.json()
        assert body.get("field") == field or field in body, (change, body)
    assert not GrantChange.objects.exists()


def test_an_administrator_transfers_ownership_and_it_is_recorded(catalog, admin, alice, editor):
    body = {"securable_type": "object", "namespace": "sales", "name": "orders", "owner": "alice"}

    assert api_as(editor).post("/api/grants/owner", body, format="json").status_code == 403
    moved = api_as(admin).post("/api/grants/owner", body, format="json")

    assert moved.status_code == 200, moved.content
    assert Table.objects.get(name="orders").owner == alice
    assert access.may(principal(alice), MANAGE, table("sales", "orders"))
    change = GrantChange.objects.get(action="transfer_owner")
    assert (change.principal_name, change.previous_owner, change.actor_name) == (
        "alice",
        "root",
        "root",
    )


def test_the_schema_documents_the_grants_endpoints(admin):
    schema = api_as(admin).get("/api/schema/", {"format": "json"})
    paths = json.loads(schema.content)["paths"]
    assert {"get", "post", "delete"} <= set(paths["/api/grants/"])
    assert "post" in paths["/api/grants/owner"]


# -- the API's lists and details ---------------------------------------------------------------


def test_the_apis_lists_and_details_follow_grants(catalog, admin, alice):
    give(admin, READ_DATA, alice, namespace="finance")
    client = api_as(alice)

    names = [n["name"] for n in client.get("/api/namespaces/").json()["results"]]
    assert names == ["finance", "finance.eu"]
    assert [t["name"] for t in client.get("/api/namespaces/finance/tables/").json()["results"]] == [
        "ledger"
    ]
    assert client.get("/api/namespaces/finance/tables/ledger/").status_code == 200

    probes = {
        "tables": lambda: client.get("/api/namespaces/sales/tables/"),
        "table": lambda: client.get("/api/namespaces/sales/tables/orders/"),
        "views": lambda: client.get("/api/namespaces/sales/views/"),
        "view": lambda: client.get("/api/namespaces/sales/views/big_orders/"),
        "namespace": lambda: client.get("/api/namespaces/sales/"),
    }
    hidden = {name: answer(probe()) for name, probe in probes.items()}
    services.drop_view(namespace="sales", name="big_orders", actor=admin)
    services.drop_table(namespace="sales", name="orders", actor=admin)
    services.drop_namespace(name="sales", actor=admin)
    assert hidden == {name: answer(probe()) for name, probe in probes.items()}
    assert {status for status, _ in hidden.values()} == {404}


def test_the_api_refuses_changes_without_the_privilege_and_allows_them_with_it(
    catalog, admin, alice
):
    give(admin, READ_DATA, alice, namespace="sales")
    client = api_as(alice)

    assert client.delete("/api/namespaces/sales/views/big_orders/").status_code == 403
    assert (
        client.post(
            "/api/namespaces/sales/properties", {"updates": {"a": "b"}}, format="json"
        ).status_code
        == 403
    )
    give(admin, MANAGE, alice, namespace="sales", name="big_orders")
    assert client.delete("/api/namespaces/sales/views/big_orders/").status_code == 204


def test_a_querys_reads_are_decided_by_read_data_on_each_table_and_view(catalog, admin, alice):
    from catalog.core.errors import Forbidden
    from catalog.roles import may_read

    give(admin, READ_DATA, alice, namespace="finance")
    give(admin, READ_METADATA, alice, namespace="sales")
    alice.refresh_from_db()

    may_read(alice, [("finance", "ledger"), ("finance", "eu", "revenue")])
    with pytest.raises(Forbidden, match="sales.orders, sales.big_orders"):
        may_read(alice, [("finance", "ledger"), ("sales", "orders"), ("sales", "big_orders")])
    fresh = type(alice).objects.get(pk=alice.pk)
    with pytest.raises(Forbidden, match="sales.nothing"):
        may_read(fresh, [("sales", "nothing")])
