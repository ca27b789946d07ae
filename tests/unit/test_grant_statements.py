"""GRANT, REVOKE and SHOW GRANTS as the console reads them (refresh.core.grant_statements,
through refresh.core.statements.parse_statement): Unity Catalog's grammar, our privilege
names, refusals at their line and column."""

from __future__ import annotations

import pytest

from catalog.core.errors import SqlError
from refresh.core import statements as st
from refresh.core.grant_statements import (
    GrantPrivileges,
    Principal,
    RevokePrivileges,
    Securable,
    ShowGrants,
)


def parse(sql: str):
    return st.parse_statement(sql)


def refusal(sql: str) -> SqlError:
    with pytest.raises(SqlError) as caught:
        parse(sql)
    return caught.value


def test_a_grant_names_privileges_a_securable_and_a_principal():
    assert parse("GRANT read_data ON NAMESPACE sales TO USER alice") == GrantPrivileges(
        ("read_data",), Securable("namespace", ("sales",)), Principal("user", "alice")
    )


@pytest.mark.parametrize(
    ("written", "ours"),
    [
        ("SELECT", "read_data"),
        ("select", "read_data"),
        ("MODIFY", "write_data"),
        ("CREATE", "create"),
        ("CREATE TABLE", "create"),
        ("create schema", "create"),
        ("ALL PRIVILEGES", "manage"),
        ("USE SCHEMA", "read_metadata"),
        ("BROWSE", "read_metadata"),
        ("READ_METADATA", "read_metadata"),
        ("Write_Data", "write_data"),
        ("manage", "manage"),
    ],
)
def test_unity_catalogs_privilege_names_are_read_as_ours(written, ours):
    statement = parse(f"GRANT {written} ON CATALOG TO `alice`")
    assert statement.privileges == (ours,)


def test_several_privileges_are_read_in_order_and_one_named_twice_counts_once():
    statement = parse("REVOKE SELECT, modify, read_data ON TABLE a.b FROM GROUP analysts")
    assert isinstance(statement, RevokePrivileges)
    assert statement.privileges == ("read_data", "write_data")
    assert statement.principal == Principal("group", "analysts")


@pytest.mark.parametrize(
    ("written", "securable"),
    [
        ("CATALOG", Securable("catalog")),
        ("CATALOG lakeview", Securable("catalog", ("lakeview",))),
        ("SCHEMA sales.eu", Securable("namespace", ("sales", "eu"))),
        ("NAMESPACE `odd name`.`x;y`", Securable("namespace", ("odd name", "x;y"))),
        ("DATABASE sales", Securable("namespace", ("sales",))),
        ("TABLE sales.orders", Securable("table", ("sales", "orders"))),
        ("VIEW big_orders", Securable("view", ("big_orders",))),
        ("MATERIALIZED TABLE a.b.daily", Securable("materialized table", ("a", "b", "daily"))),
    ],
)
def test_every_kind_of_securable_is_read_with_its_dotted_name(written, securable):
    assert parse(f"GRANT SELECT ON {written} TO alice").securable == securable


@pytest.mark.parametrize(
    ("written", "principal"),
    [
        ("USER alice", Principal("user", "alice")),
        ("GROUP `data team`", Principal("group", "data team")),
        ("CREDENTIAL `lv_0123`", Principal("client", "lv_0123")),
        ("`alf@melmak.et`", Principal("user", "alf@melmak.et", implicit=True)),
        ("bob", Principal("user", "bob", implicit=True)),
        ("group", Principal("user", "group", implicit=True)),
    ],
)
def test_a_principal_is_a_user_a_group_or_a_credential_and_a_name_alone_is_a_user(
    written, principal
):
    assert parse(f"GRANT SELECT ON CATALOG TO {written}").principal == principal


def test_show_grants_takes_a_securable_and_a_principal_in_either_place():
    on = Securable("namespace", ("sales",))
    assert parse("SHOW GRANTS") == ShowGrants()
    assert parse("SHOW GRANT ON SCHEMA sales") == ShowGrants(on)
    assert parse("SHOW GRANTS ON SCHEMA sales TO GROUP g") == ShowGrants(
        on, Principal("group", "g")
    )
    assert parse("show grants `alice` on schema sales") == ShowGrants(
        on, Principal("user", "alice", implicit=True)
    )
    assert parse("SHOW GRANTS TO CREDENTIAL c1") == ShowGrants(None, Principal("client", "c1"))


def test_an_unknown_privilege_is_refused_at_its_place_naming_the_field():
    error = refusal("GRANT SELECT,\n  EXECUTE ON CATALOG TO alice")
    assert (error.line, error.column, error.field) == (2, 3, "privilege")
    assert "Unknown privilege 'EXECUTE'" in error.message and "read_data" in error.message


def test_an_unknown_securable_is_refused_naming_the_field():
    error = refusal("GRANT SELECT ON FUNCTION f TO alice")
    assert (error.line, error.column, error.field) == (1, 17, "securable")


def test_all_privileges_stands_alone():
    assert refusal("GRANT ALL PRIVILEGES, SELECT ON CATALOG TO alice").column == 7
    assert refusal("GRANT SELECT, ALL ON CATALOG TO alice").column == 15


@pytest.mark.parametrize(
    ("sql", "where", "words"),
    [
        ("GRANT ON CATALOG TO alice", (1, 7), "privilege"),
        ("GRANT SELECT CATALOG TO alice", (1, 14), "Expected ON"),
        ("GRANT SELECT ON CATALOG alice", (1, 30), "Expected TO"),
        ("REVOKE SELECT ON CATALOG TO alice", (1, 26), "Expected FROM"),
        ("GRANT SELECT ON SCHEMA TO alice", (1, 24), "Expected a namespace"),
        ("GRANT SELECT ON TABLE a. TO alice", (1, 26), "name after '.'"),
        ("GRANT SELECT ON CATALOG TO", (1, 27), "a principal"),
        ("GRANT SELECT ON CATALOG TO alice, bob", (1, 33), "Unexpected"),
        ("SHOW GRANTS alice ON CATALOG TO bob", (1, 30), "named once"),
    ],
)
def test_syntax_errors_carry_their_line_and_column(sql, where, words):
    error = refusal(sql)
    assert (error.line, error.column) == where, error.message
    assert words in error.message


@pytest.mark.parametrize(
    "name",
    ["``", "`   `", "`a\x00b`", "`a\x07b`", "`" + "x" * 1025 + "`"],
)
def test_empty_too_long_and_control_character_names_are_refused(name):
    assert refusal(f"GRANT SELECT ON CATALOG TO {name}").line == 1


def test_quotes_and_semicolons_inside_backticks_stay_part_of_the_name():
    statement = parse("GRANT SELECT ON SCHEMA `a'; DROP TABLE x; --` TO `b;c`")
    assert statement.securable.name == ("a'; DROP TABLE x; --",)
    assert statement.principal.name == "b;c"


def test_a_script_splits_grants_like_any_statement_and_keeps_their_places():
    script = "GRANT SELECT ON CATALOG TO a;\n\nREVOKE SELECT ON CATALOG FROM a; SHOW GRANTS"
    kinds = [type(statement) for statement in st.parse_script(script)]
    assert kinds == [GrantPrivileges, RevokePrivileges, ShowGrants]
    assert [(s.line, s.column) for s in st.split_statements(script)] == [(1, 1), (3, 1), (3, 34)]


@pytest.mark.parametrize("sql", ["0", "GRANT", "REVOKE", "SHOW", "`x`", "'x'"])
def test_a_statement_of_one_token_is_refused_with_its_place(sql):
    assert refusal(sql).line == 1


def test_a_misspelt_principal_kind_is_named_at_its_place():
    error = refusal("GRANT SELECT ON CATALOG\n  TO GRUP analysts")
    assert (error.line, error.column) == (2, 6)
    assert "Expected USER, GROUP or CREDENTIAL" in error.message and "'GRUP'" in error.message
