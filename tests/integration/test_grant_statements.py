"""GRANT, REVOKE and SHOW GRANTS in the console's API (POST /api/statements/): the same
checks and records as /api/grants/ (catalog.services.grants), errors as the console's
other statements answer them."""

# The fixtures come from test_grants (imported, then named as test arguments).
# ruff: noqa: F811

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from catalog.core.access import MANAGE, READ_DATA
from catalog.models import Grant, GrantChange
from tests.integration.grant_fixtures import admin, alice, engine, give  # noqa: F401
from tests.integration.test_grants import catalog  # noqa: F401

pytestmark = pytest.mark.django_db


def api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def run_sql(user, sql: str, namespace: str | None = None, **extra):
    body = {"sql": sql, "namespace": namespace, **extra}
    return api(user).post("/api/statements/", body, format="json")


def counts() -> tuple[int, int]:
    """Grant and GrantChange rows (the roles' grants on the catalog are there from the
    start)."""
    return Grant.objects.count(), GrantChange.objects.count()


def rows_of(response) -> list[dict]:
    assert response.status_code == 200, response.content
    result = response.json()["results"][-1]
    return [dict(zip(result["columns"], row, strict=True)) for row in result["rows"]]


# -- GRANT and REVOKE ----------------------------------------------------------------------------


def test_a_grant_in_sql_lets_the_user_read_at_their_next_request(catalog, admin, alice):
    reader = engine(alice)
    assert reader.get("/namespaces/finance/tables/ledger").status_code in (403, 404)

    response = run_sql(admin, "GRANT SELECT ON SCHEMA finance TO `alice`")

    assert response.status_code == 200, response.content
    result = response.json()["results"][0]
    assert (
        result["ok"]
        and "Granted read_data on namespace finance to user alice" in (result["message"])
    )
    assert reader.get("/namespaces/finance/tables/ledger").status_code == 200
    assert reader.get("/namespaces/finance%1Feu/tables/revenue").status_code == 200
    change = GrantChange.objects.get()
    assert (change.action, change.privilege, change.principal_name, change.securable_name) == (
        "grant",
        READ_DATA,
        "alice",
        "finance",
    )
    assert change.actor_name == "root"


def test_a_revoke_in_sql_takes_the_grant_away_at_the_next_request(catalog, admin, alice):
    give(admin, READ_DATA, alice, namespace="finance")
    reader = engine(alice)
    assert reader.get("/namespaces/finance/tables/ledger").status_code == 200

    response = run_sql(admin, "revoke read_data on namespace finance from user alice")

    assert response.status_code == 200, response.content
    assert not Grant.objects.filter(user=alice).exists()
    assert reader.get("/namespaces/finance/tables/ledger").status_code in (403, 404)
    assert list(GrantChange.objects.values_list("action", flat=True)) == ["revoke", "grant"]


def test_unity_catalog_names_and_our_own_name_the_same_privileges(catalog, admin, alice):
    analysts = Group.objects.create(name="analysts")
    script = (
        "GRANT SELECT, MODIFY ON TABLE finance.ledger TO USER alice;\n"
        "GRANT ALL PRIVILEGES ON MATERIALIZED TABLE finance.ledger TO alice;\n"
        "GRANT CREATE TABLE ON NAMESPACE sales TO GROUP analysts;\n"
        "GRANT USE SCHEMA ON SCHEMA lakeview.finance.eu TO GROUP analysts;\n"
        "GRANT Read_Data ON VIEW big_orders TO GROUP analysts"
    )

    response = run_sql(admin, script, namespace="sales")

    results = response.json()["results"]
    assert response.status_code == 400, response.content
    assert [result["ok"] for result in results] == [True, False]
    assert results[1]["error"]["field"] == "securable"
    assert "finance.ledger is a table, not a materialized table" in results[1]["message"]
    assert "write TABLE finance.ledger" in results[1]["message"]
    held = set(
        Grant.objects.filter(user=alice).values_list("privilege", "user__username", "object__name")
    )
    assert held == {("read_data", "alice", "ledger"), ("write_data", "alice", "ledger")}

    rest = script.split(";\n", 2)[2]
    response = run_sql(admin, rest, namespace="sales")
    assert response.status_code == 200, response.content
    granted = set(
        Grant.objects.filter(group=analysts).values_list(
            "privilege", "namespace__name", "object__name"
        )
    )
    assert granted == {
        ("create", "sales", None),
        ("read_metadata", "finance.eu", None),
        ("read_data", None, "big_orders"),
    }


def test_granting_what_is_held_already_changes_nothing_and_says_so(catalog, admin, alice):
    give(admin, READ_DATA, alice, namespace="sales")
    before = counts()

    response = run_sql(admin, "GRANT read_data ON SCHEMA sales TO alice")

    assert response.status_code == 200
    assert "held already, unchanged" in response.json()["results"][0]["message"]
    assert counts() == before


def test_a_namespace_manager_without_a_catalog_role_grants_on_their_namespace_only(
    catalog, admin, alice, django_user_model
):
    bob = django_user_model.objects.create_user("bob")
    give(admin, MANAGE, alice, namespace="finance")

    granted = run_sql(alice, "GRANT SELECT ON TABLE finance.eu.revenue TO bob")
    refused = run_sql(alice, "GRANT SELECT ON SCHEMA sales TO bob")

    assert granted.status_code == 200, granted.content
    assert refused.status_code == 404, refused.content  # sales is not hers to see
    assert Grant.objects.filter(user=bob).count() == 1
    # The other statements ask the same grants: hers to see, without a catalog role.
    shown = run_sql(alice, "SHOW MATERIALIZED TABLES", namespace="finance")
    assert shown.status_code == 200, shown.content


def test_a_grant_by_one_who_may_not_manage_is_a_403_and_writes_nothing(
    catalog, admin, alice, viewer
):
    before = counts()

    response = run_sql(viewer, "GRANT SELECT ON SCHEMA finance TO alice")

    assert response.status_code == 403, response.content
    error = response.json()["error"]
    assert error["type"] == "Forbidden" and "manage" in error["message"]
    assert counts() == before
    give(admin, READ_DATA, alice, namespace="sales")
    revoke = run_sql(viewer, "REVOKE SELECT ON SCHEMA sales FROM alice")
    assert revoke.status_code == 403
    assert Grant.objects.filter(user=alice).exists()


def test_a_user_holding_nothing_is_refused_before_any_statement_runs(catalog, alice):
    response = run_sql(alice, "GRANT SELECT ON SCHEMA finance TO alice")

    assert response.status_code == 403
    assert not Grant.objects.filter(user=alice).exists()


def test_a_statement_naming_several_privileges_is_all_or_nothing(catalog, admin, alice):
    give(admin, READ_DATA, alice, namespace="sales")

    # write_data was never granted: the revoke of read_data before it is undone with it.
    response = run_sql(admin, "REVOKE read_data, write_data ON SCHEMA sales FROM alice")

    assert response.status_code == 404, response.content
    assert response.json()["error"]["field"] == "privilege"
    assert Grant.objects.filter(user=alice, privilege=READ_DATA).exists()
    assert list(GrantChange.objects.values_list("action", flat=True)) == ["grant"]


def test_a_later_failing_statement_leaves_the_earlier_ones_done_as_the_console_does(
    catalog, admin, alice
):
    script = "GRANT SELECT ON SCHEMA sales TO alice;\nGRANT SELECT ON SCHEMA sales TO nobody"

    response = run_sql(admin, script)

    assert response.status_code == 400, response.content
    first, second = response.json()["results"]
    assert first["ok"] and not second["ok"]
    assert second["line"] == 2 and second["error"]["field"] == "principal"
    assert "nobody" in second["message"]
    assert Grant.objects.filter(user=alice).count() == 1
    assert GrantChange.objects.count() == 1


def test_unknown_objects_privileges_and_principals_are_4xx_naming_the_field(catalog, admin):
    before = counts()
    cases = {
        "GRANT SELECT ON TABLE sales.missing TO root": (404, "name"),
        "GRANT SELECT ON SCHEMA nowhere TO root": (404, "namespace"),
        "GRANT SELECT ON CATALOG elsewhere TO root": (404, "securable"),
        "GRANT EXECUTE ON SCHEMA sales TO root": (400, "privilege"),
        "GRANT create ON TABLE sales.orders TO root": (400, "privilege"),
        "GRANT SELECT ON SCHEMA sales TO GROUP nobody": (400, "principal"),
        "GRANT SELECT ON SCHEMA sales TO CREDENTIAL nothing": (400, "principal"),
        "GRANT SELECT ON FUNCTION sales.f TO root": (400, "securable"),
        "GRANT SELECT ON TABLE orders TO root": (400, "namespace"),
    }
    for sql, (status, field) in cases.items():
        response = run_sql(admin, sql)
        assert response.status_code == status, (sql, response.content)
        assert response.json()["error"]["field"] == field, (sql, response.json())
    assert counts() == before


def test_a_syntax_error_is_a_400_at_its_line_and_column(catalog, admin):
    script = "GRANT SELECT ON SCHEMA sales TO root;\nGRANT SELECT\n  ON SCHEMA sales TOO root"

    response = run_sql(admin, script)

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "SqlError"
    assert (error["line"], error["column"]) == (3, 19)
    assert "Expected TO" in error["message"]


@pytest.mark.parametrize(
    "sql",
    [
        "GRANT SELECT ON SCHEMA `sales'; DROP TABLE catalog_grant; --` TO root",
        "GRANT SELECT ON SCHEMA sales TO `root; REVOKE`",
        "GRANT SELECT ON SCHEMA sales TO `ro\x00ot`",
        "GRANT SELECT ON SCHEMA sales TO `" + "x" * 5000 + "`",
        "GRANT SELECT ON TABLE `" + "a" * 300 + "`.`" + "b" * 300 + "` TO root",
        "GRANT SELECT ON SCHEMA sales TO 'root",
        "GRANT SELECT ON SCHEMA sales TO ``",
        "SHOW GRANTS TO USER `\u202eroot`",
        "GRANT SELECT ON SCHEMA " + ".".join(["a"] * 2000) + " TO root",
    ],
)
def test_hostile_names_are_4xx_and_change_nothing(catalog, admin, sql):
    before = counts()

    response = run_sql(admin, sql)

    assert 400 <= response.status_code < 500, response.content
    body = response.json()
    assert body.get("error") or body.get("detail")  # a NUL is refused with the request body
    assert counts() == before


def test_a_deep_or_odd_name_from_one_who_is_not_an_administrator_is_a_400(catalog, admin, alice):
    give(admin, MANAGE, alice, namespace="finance")
    deep = ".".join(["finance"] * 600)
    for sql in (
        f"GRANT SELECT ON SCHEMA {deep} TO alice",
        f"SHOW GRANTS ON TABLE {deep}.x",
        "GRANT SELECT ON SCHEMA finance.`a.b` TO alice",
        "GRANT SELECT ON TABLE finance.`a/b` TO alice",
    ):
        response = run_sql(alice, sql)
        assert response.status_code == 400, (sql[:80], response.content[:300])
        assert response.json()["error"]["field"] == "securable"


# -- SHOW GRANTS ---------------------------------------------------------------------------------


def test_show_grants_on_a_namespace_shows_the_ones_it_inherits_and_where_from(
    catalog, admin, alice
):
    analysts = Group.objects.create(name="analysts")
    give(admin, READ_DATA, analysts)  # the catalog
    give(admin, MANAGE, alice, namespace="finance")
    give(admin, READ_DATA, analysts, namespace="finance.eu")

    rows = rows_of(run_sql(admin, "SHOW GRANTS ON SCHEMA finance.eu"))

    found = {(r["principal"], r["privilege"], r["securable"], r["inherited_from"]) for r in rows}
    assert ("analysts", "read_data", "catalog", "catalog") in found
    assert ("alice", "manage", "finance", "finance") in found
    assert ("analysts", "read_data", "finance.eu", "") in found
    assert ("root", "own", "finance", "finance") in found  # its creator owns finance
    given = [r for r in rows if r["principal"] in ("alice", "analysts")]
    assert given and all(r["granted_by"] == "root" and r["granted_at"] for r in given)
    roles = [r for r in rows if r["principal"] in ("viewer", "editor")]
    assert {r["inherited_from"] for r in roles} == {"catalog"}  # the migrated roles' grants
    assert set(rows[0]) == {
        "principal_type",
        "principal",
        "privilege",
        "securable_type",
        "securable",
        "granted_by",
        "granted_at",
        "inherited_from",
    }

    # alice manages finance, so she sees everything that applies to what is under it
    as_alice = rows_of(run_sql(alice, "SHOW GRANT ON TABLE finance.eu.revenue"))
    assert {(r["principal"], r["privilege"]) for r in as_alice} >= {
        ("analysts", "read_data"),
        ("alice", "manage"),
    }


def test_show_grants_to_a_principal_and_a_non_managers_own_grants_only(
    catalog, admin, alice, django_user_model
):
    bob = django_user_model.objects.create_user("bob")
    give(admin, READ_DATA, alice, namespace="sales")
    give(admin, READ_DATA, bob, namespace="sales")
    give(admin, READ_DATA, bob, namespace="finance")

    to_bob = rows_of(run_sql(admin, "SHOW GRANTS TO USER bob"))
    unity = rows_of(run_sql(admin, "SHOW GRANTS `bob` ON SCHEMA sales"))
    mine = rows_of(run_sql(alice, "SHOW GRANTS ON NAMESPACE sales"))

    assert {r["securable"] for r in to_bob} == {"sales", "finance"}
    assert [(r["principal"], r["securable"]) for r in unity] == [("bob", "sales")]
    assert [(r["principal"], r["privilege"]) for r in mine] == [("alice", "read_data")]


def test_a_dry_run_checks_a_grant_and_keeps_nothing(catalog, admin, alice, viewer):
    planned = run_sql(admin, "GRANT SELECT ON SCHEMA sales TO alice", dry_run=True)
    refused = run_sql(viewer, "GRANT SELECT ON SCHEMA sales TO alice", dry_run=True)

    assert planned.status_code == 200, planned.content
    result = planned.json()["results"][0]
    assert result["plan"]["action"] == "grant" and "Would grant read_data" in result["message"]
    assert refused.json()["results"][0]["plan"]["action"] == "refused"
    assert refused.json()["results"][0]["error"]["status"] == 403
    assert not Grant.objects.filter(user=alice).exists()
    assert not GrantChange.objects.exists()


# -- the console page ----------------------------------------------------------------------------


def test_the_console_page_grants_and_shows_grants_as_a_table(client, catalog, admin, alice):
    from django.urls import reverse

    client.force_login(admin)
    script = "GRANT SELECT ON SCHEMA finance TO alice;\nSHOW GRANTS ON SCHEMA finance TO alice"

    response = client.post(reverse("refresh:console"), {"sql": script, "namespace": ""})

    assert response.status_code == 200, response.content[:500]
    html = response.content.decode()
    assert "Granted read_data on namespace finance to user alice" in html
    assert "inherited_from" in html
    assert "<td>alice</td>" in html and "<td>read_data</td>" in html
    assert Grant.objects.filter(user=alice, namespace__name="finance").exists()


def test_the_console_page_shows_a_grant_statements_syntax_error_at_its_line_and_column(
    client, catalog, admin
):
    from django.urls import reverse

    client.force_login(admin)

    response = client.post(
        reverse("refresh:console"), {"sql": "SHOW GRANTS;\nGRANT SELECT ON SCHEMA", "namespace": ""}
    )

    assert response.status_code == 400
    assert "At line 2, column 23 of the script" in response.content.decode()
