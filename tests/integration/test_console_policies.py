"""Row filters and column masks set from the console's API (POST /api/statements/, its dry
run) and from pipelines as code (apply_sql): the names resolved as the console resolves
them, `catalog.services.policies` called with exactly what the statement says, its
refusals answered as the console answers errors, the dry run rolled back.

FOR THE LEAD: until catalog/services/policies.py lands, `FakePolicies` stands in for it
(`policies` fixture: monkeypatched onto `catalog.services`) and `fake_rows` for the one
function that reads the models (console_policies.policy_rows). Once they land, drop both
monkeypatches (keep FakePolicies' assertions on what was written, reading RowFilter /
ColumnMask instead of its marker groups) and check SHOW POLICIES against the real rows."""

# The fixtures come from test_grants and test_apply_sql (imported, then named as test
# arguments).
# ruff: noqa: F811

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command
from rest_framework.test import APIClient

from catalog import access
from catalog import services as catalog_services
from catalog.core.access import MANAGE, READ_METADATA
from catalog.core.errors import Forbidden, InvalidInput, NotFound, SqlError
from catalog.models import CatalogObject
from refresh import console_policies
from tests.integration.grant_fixtures import admin, alice, give  # noqa: F401
from tests.integration.test_apply_sql import folder, sales  # noqa: F401
from tests.integration.test_grants import catalog  # noqa: F401

pytestmark = pytest.mark.django_db


@dataclass
class FakePolicies:
    """catalog.services.policies' four functions as the brief gives their signatures:
    `manage` on the table asked as the service will (a table one may not see is missing),
    an expression naming `no_such_column` refused as the service refuses one, and what is
    set kept as a marker group (a database row: a rolled-back dry run leaves none)."""

    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def _table(self, namespace: str, name: str, actor: Any) -> CatalogObject:
        obj = CatalogObject.objects.filter(namespace__name=namespace, name=name).first()
        who = access.for_user(actor)
        if obj is None or not access.may(who, READ_METADATA, access.of_object(obj)):
            raise NotFound(f"No table or view {namespace}.{name}", field="name")
        if not access.may(who, MANAGE, access.of_object(obj)):
            raise Forbidden(f"Forbidden: {actor.username} lacks the manage privilege")
        return obj

    def _set(self, kind: str, marker: str, arguments: dict[str, Any]) -> None:
        self.calls.append((kind, arguments))
        self._table(arguments["namespace"], arguments["name"], arguments["actor"])
        expression = arguments["expression"]
        if "no_such_column" in expression:  # placed in the expression, as the service does
            before = expression[: expression.index("no_such_column")]
            line, column = before.count("\n") + 1, len(before) - before.rfind("\n")
            raise SqlError("Unknown column", line=line, column=column, field="expression")
        if "unplaced" in expression:
            raise InvalidInput("The expression is not boolean", field="expression")
        Group.objects.get_or_create(name=marker)

    def _drop(self, kind: str, marker: str, arguments: dict[str, Any]) -> None:
        self.calls.append((kind, arguments))
        self._table(arguments["namespace"], arguments["name"], arguments["actor"])
        Group.objects.filter(name=marker).delete()

    def set_row_filter(self, *, namespace, name, expression, exempt_groups=(), actor):
        arguments = dict(namespace=namespace, name=name, expression=expression)
        arguments |= dict(exempt_groups=tuple(exempt_groups), actor=actor)
        self._set("set_row_filter", f"policy:{namespace}.{name}", arguments)

    def drop_row_filter(self, *, namespace, name, actor):
        arguments = dict(namespace=namespace, name=name, actor=actor)
        self._drop("drop_row_filter", f"policy:{namespace}.{name}", arguments)

    def set_column_mask(self, *, namespace, name, column, expression, exempt_groups=(), actor):
        arguments = dict(namespace=namespace, name=name, column=column, expression=expression)
        arguments |= dict(exempt_groups=tuple(exempt_groups), actor=actor)
        self._set("set_column_mask", f"policy:{namespace}.{name}:{column}", arguments)

    def drop_column_mask(self, *, namespace, name, column, actor):
        arguments = dict(namespace=namespace, name=name, column=column, actor=actor)
        self._drop("drop_column_mask", f"policy:{namespace}.{name}:{column}", arguments)


def markers() -> set[str]:
    return set(Group.objects.filter(name__startswith="policy:").values_list("name", flat=True))


def fake_rows(table: CatalogObject) -> list[list[Any]]:
    """SHOW POLICIES' rows from the fake's markers (the real ones read RowFilter and
    ColumnMask)."""
    prefix = f"policy:{table.namespace.name}.{table.name}"
    rows = []
    for marker in sorted(markers()):
        if marker == prefix:
            rows.append(["row filter", "", "(kept by the service)", "", "root", ""])
        elif marker.startswith(prefix + ":"):
            rows.append(["mask", marker.split(":")[-1], "(kept by the service)", "", "root", ""])
    return rows


@pytest.fixture
def policies(monkeypatch) -> FakePolicies:
    fake = FakePolicies()
    monkeypatch.setattr(catalog_services, "policies", fake, raising=False)
    monkeypatch.setattr(console_policies, "policy_rows", fake_rows)
    return fake


def run_sql(user, sql: str, namespace: str | None = None, **extra):
    client = APIClient()
    client.force_authenticate(user)
    body = {"sql": sql, "namespace": namespace, **extra}
    return client.post("/api/statements/", body, format="json")


def results_of(response, status: int = 200) -> list[dict]:
    assert response.status_code == status, response.content
    return response.json()["results"]


# -- setting and dropping ----------------------------------------------------------------------


def test_a_row_filter_set_in_sql_reaches_the_service_as_written(catalog, admin, policies):
    sql = (
        "ALTER TABLE sales.orders SET ROW FILTER region = 'EU' OR note = 'exempt, (really)'\n"
        "  EXEMPT GROUPS finance, `auditors`"
    )

    [result] = results_of(run_sql(admin, sql))

    assert result["ok"] and result["kind"] == "SetRowFilter"
    assert result["message"] == "Set the row filter of sales.orders (exempt: finance, auditors)"
    assert policies.calls == [
        (
            "set_row_filter",
            {
                "namespace": "sales",
                "name": "orders",
                "expression": "region = 'EU' OR note = 'exempt, (really)'",
                "exempt_groups": ("finance", "auditors"),
                "actor": admin,
            },
        )
    ]
    assert markers() == {"policy:sales.orders"}


def test_masks_and_drops_say_what_changed_on_which_table(catalog, admin, policies):
    script = (
        "ALTER TABLE orders ALTER COLUMN email SET MASK sha2(email, 256);\n"
        "ALTER TABLE orders SET ROW FILTER TRUE;\n"
        "ALTER TABLE orders CHANGE email DROP MASK;\n"
        "ALTER TABLE orders DROP ROW FILTER"
    )

    results = results_of(run_sql(admin, script, namespace="sales"))

    assert [result["message"] for result in results] == [
        "Set the mask of column email of sales.orders",
        "Set the row filter of sales.orders",
        "Dropped the mask of column email of sales.orders",
        "Dropped the row filter of sales.orders",
    ]
    assert [call[0] for call in policies.calls] == [
        "set_column_mask",
        "set_row_filter",
        "drop_column_mask",
        "drop_row_filter",
    ]
    assert policies.calls[0][1]["column"] == "email"
    assert markers() == set()


@pytest.mark.parametrize(
    "written",
    ["finance.eu.revenue", "lakeview.finance.eu.revenue", "`finance`.`eu`.`revenue`"],
)
def test_multi_level_namespaces_and_the_catalogs_name_resolve_as_elsewhere(
    catalog, admin, policies, written
):
    results_of(run_sql(admin, f"ALTER TABLE {written} DROP ROW FILTER", namespace="sales"))
    [(_, arguments)] = policies.calls
    assert (arguments["namespace"], arguments["name"]) == ("finance.eu", "revenue")


def test_an_unqualified_name_without_a_namespace_is_refused_naming_the_field(
    catalog, admin, policies
):
    [result] = results_of(run_sql(admin, "ALTER TABLE orders DROP ROW FILTER"), 400)
    assert result["error"]["field"] == "namespace"
    assert policies.calls == []


# -- refusals ------------------------------------------------------------------------------


def test_the_services_refusal_is_the_answer_and_the_statements_before_stay_done(
    catalog, admin, alice, policies
):
    give(admin, READ_METADATA, alice, namespace="sales")
    give(admin, MANAGE, alice, namespace="sales", name="big_orders")
    script = (
        "ALTER TABLE sales.big_orders SET ROW FILTER TRUE;\n"
        "ALTER TABLE sales.orders SET ROW FILTER TRUE;\n"
        "ALTER TABLE sales.orders DROP ROW FILTER"
    )

    results = results_of(run_sql(alice, script), 403)

    assert [result["ok"] for result in results] == [True, False]
    assert (results[1]["line"], results[1]["column"]) == (2, 1)
    assert "lacks the manage privilege" in results[1]["message"]
    assert markers() == {"policy:sales.big_orders"}


def test_a_table_one_may_not_see_answers_as_missing(catalog, admin, alice, policies):
    give(admin, READ_METADATA, alice, namespace="sales")
    response = run_sql(alice, "ALTER TABLE finance.ledger DROP ROW FILTER")
    [result] = results_of(response, 404)
    assert result["error"]["message"] == "No table or view finance.ledger"


@pytest.mark.parametrize(
    ("expression", "where"),
    [
        ("no_such_column > 1", (3, 3)),
        ("region = 'EU' OR no_such_column > 1", (3, 20)),
        ("region = 'EU'\n    OR no_such_column > 1", (4, 8)),
        ("unplaced", (3, 3)),
    ],
)
def test_the_services_refusal_of_an_expression_is_placed_in_the_script(
    catalog, admin, policies, expression, where
):
    script = (
        f"SHOW POLICIES ON sales.orders;\nALTER TABLE sales.orders SET ROW FILTER\n  {expression}"
    )

    results = results_of(run_sql(admin, script), 400)

    error = results[-1]["error"]
    assert (error["line"], error["column"], error["field"]) == (*where, "expression")
    assert error["message"].startswith(("Unknown column (line", "The expression is not boolean"))


def test_a_statement_that_does_not_parse_is_a_400_at_its_line_and_column(catalog, admin, policies):
    script = (
        "ALTER TABLE sales.orders DROP ROW FILTER;\nALTER TABLE sales.orders SET ROW FILTER a ="
    )
    results = results_of(run_sql(admin, script), 400)
    assert [result["ok"] for result in results] == [True, False]
    assert (results[1]["error"]["line"], results[1]["error"]["column"]) == (2, 43)


# -- the dry run -------------------------------------------------------------------------------


def test_the_dry_run_says_what_would_change_checks_it_and_keeps_nothing(
    catalog, admin, alice, policies
):
    give(admin, READ_METADATA, alice, namespace="sales")
    script = (
        "ALTER TABLE sales.orders ALTER COLUMN email SET MASK '***' EXEMPT GROUPS hr;\n"
        "SHOW POLICIES ON sales.orders"
    )

    response = run_sql(admin, script, dry_run=True)

    results = results_of(response)
    assert [result["plan"]["action"] for result in results] == ["set", "read"]
    assert results[0]["message"] == (
        "set: Would set the mask of column email of sales.orders (exempt: hr)"
    )
    assert results[0]["plan"]["table"] == "sales.orders"
    assert [call[0] for call in policies.calls] == ["set_column_mask"]
    assert markers() == set()

    refused = results_of(run_sql(alice, script, dry_run=True))
    assert refused[0]["plan"]["action"] == "refused"
    assert refused[0]["error"]["status"] == 403 and response.json()["refused"] == 0


# -- SHOW POLICIES ----------------------------------------------------------------------------


def test_show_policies_lists_the_tables_policies_to_whoever_sees_it(
    catalog, admin, alice, policies
):
    give(admin, READ_METADATA, alice, namespace="sales")
    results_of(run_sql(admin, "ALTER TABLE sales.orders ALTER COLUMN email SET MASK '***'"))

    [result] = results_of(run_sql(alice, "SHOW POLICIES ON orders", namespace="sales"))

    assert result["columns"] == console_policies.COLUMNS
    assert [row[:2] for row in result["rows"]] == [["mask", "email"]]
    assert result["message"] == "1 policy on sales.orders"
    [hidden] = results_of(run_sql(alice, "SHOW POLICIES ON finance.ledger"), 404)
    assert "finance.ledger" in hidden["message"]


def test_show_policies_on_a_view_says_policies_are_set_on_tables(catalog, admin, policies):
    [result] = results_of(run_sql(admin, "SHOW POLICIES ON sales.big_orders"), 400)
    assert "sales.big_orders is a view" in result["message"]


# -- scripts mixing statements, and pipelines as code ------------------------------------------


def test_a_script_mixes_policies_with_grants_in_order(catalog, admin, policies):
    Group.objects.create(name="analysts")
    script = (
        "GRANT SELECT ON TABLE sales.orders TO GROUP analysts;\n"
        "ALTER TABLE sales.orders SET ROW FILTER region = 'EU' EXEMPT GROUPS analysts;\n"
        "SHOW GRANTS ON TABLE sales.orders;\n"
        "SHOW POLICIES ON sales.orders"
    )

    results = results_of(run_sql(admin, script))

    assert [result["kind"] for result in results] == [
        "GrantPrivileges",
        "SetRowFilter",
        "ShowGrants",
        "ShowPolicies",
    ]
    assert results[-1]["rows"][0][0] == "row filter"


def test_apply_sql_sets_a_policy_after_the_definition_of_its_table(folder, sales, policies):
    (folder / "000_policies.sql").write_text(
        "ALTER MATERIALIZED TABLE daily ALTER COLUMN total SET MASK 0 EXEMPT GROUPS finance;\n"
        "ALTER TABLE sales.orders SET ROW FILTER amount > 0;\n"
    )
    out = io.StringIO()

    call_command("apply_sql", str(folder), "--namespace", "sales", "--user", "erin", stdout=out)

    output = out.getvalue()
    assert "10 create" in output and "2 set" in output, output
    plan = output.split("Applied")[0]
    assert plan.index("08_daily.sql") < plan.index("000_policies.sql:1")
    assert "Set the mask of column total of sales.daily (exempt: finance)" in output
    assert markers() == {"policy:sales.daily:total", "policy:sales.orders"}


def test_apply_sql_plan_only_keeps_nothing(folder: Path, sales, policies):
    (folder / "000_policies.sql").write_text("ALTER TABLE sales.orders SET ROW FILTER TRUE;\n")
    out = io.StringIO()
    call_command(
        "apply_sql", str(folder), "--namespace", "sales", "--user", "erin", "--plan", stdout=out
    )
    assert "Would set the row filter of sales.orders" in out.getvalue()
    assert markers() == set()
