"""No 304 keeps an answer a grant or a revoke has changed (issue 39: "revocation takes effect
on the next request"). The one answer whose content depends on the principal's grants and
carries an ETag is the Iceberg REST catalog's table: a materialized table's query
(`lakeview.materialized-table.query`) is left out for one who may not read every source
(catalog.redaction). Its tag says which form the principal got, so that after a grant
change a client holding the old form gets the new one, not a 304; a plain table's 304
still comes from the pointer row alone."""

# ruff: noqa: F811 - fixtures imported from other modules
from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from catalog.core.access import READ_DATA
from refresh.core.definition import QUERY_PROPERTY
from tests.integration.grant_fixtures import admin, alice, bob, engine, give, take  # noqa: F401
from tests.integration.test_owner_rights import QUERY
from tests.integration.test_statements_by_grants import daily  # noqa: F401

pytestmark = pytest.mark.django_db

DAILY = "/namespaces/sales/tables/daily"


def load(user, tag: str | None = None, path: str = DAILY):
    client = engine(user)
    headers = {**client.headers, **({"If-None-Match": tag} if tag else {})}
    return client.client.get(f"/iceberg/v1{path}", headers=headers)


def query_shown(response) -> bool:
    properties = response.json()["metadata"]["properties"]
    return properties.get(QUERY_PROPERTY) == QUERY


def test_a_grant_on_the_sources_answers_the_query_to_a_client_holding_the_redacted_tag(
    daily, admin, bob
):
    give(admin, READ_DATA, bob, namespace="sales", name="daily")
    first = load(bob)
    assert first.status_code == 200 and not query_shown(first)
    assert load(bob, first["ETag"]).status_code == 304  # nothing changed yet

    give(admin, READ_DATA, bob, namespace="sales", name="orders")  # now reads every source

    again = load(bob, first["ETag"])
    assert again.status_code == 200 and query_shown(again)
    assert again["ETag"] != first["ETag"]
    assert load(bob, again["ETag"]).status_code == 304


def test_a_revoke_on_a_source_answers_without_the_query_to_a_client_holding_the_whole_tag(
    daily, admin, alice
):
    give(admin, READ_DATA, alice, namespace="sales")
    give(admin, READ_DATA, alice, namespace="sales", name="daily")
    first = load(alice)
    assert first.status_code == 200 and query_shown(first)
    assert load(alice, first["ETag"]).status_code == 304

    take(admin, READ_DATA, alice, namespace="sales")  # daily still, its source no more

    again = load(alice, first["ETag"])
    assert again.status_code == 200 and not query_shown(again)
    assert again["ETag"] != first["ETag"]
    assert load(alice, again["ETag"]).status_code == 304
    # Either tag of this state, sent together, is answered by the form she gets now.
    both = f"{first['ETag']}, {again['ETag']}"
    assert (load(alice, both).status_code, load(alice, both)["ETag"]) == (304, again["ETag"])


def test_one_principals_tag_is_no_304_for_another_who_gets_the_other_form(daily, admin, alice, bob):
    give(admin, READ_DATA, bob, namespace="sales", name="daily")
    give(admin, READ_DATA, alice, namespace="sales")
    bobs, alices = load(bob)["ETag"], load(alice)["ETag"]
    assert bobs != alices
    assert query_shown(load(alice, bobs)) and not query_shown(load(bob, alices))


def test_a_commits_answer_carries_the_tag_its_principals_next_load_has(daily, admin, bob):
    give(admin, READ_DATA, bob, namespace="sales", name="daily")
    committed = engine(admin).post(
        DAILY,
        {
            "requirements": [],
            "updates": [{"action": "set-properties", "updates": {"owner-note": "kept"}}],
        },
    )
    assert committed.status_code == 200, committed.content
    assert committed.json()["metadata"]["properties"][QUERY_PROPERTY] == QUERY
    assert load(admin, committed["ETag"]).status_code == 304
    as_bob = load(bob, committed["ETag"])  # the superuser's form is not bob's
    assert as_bob.status_code == 200 and not query_shown(as_bob)


def test_a_plain_tables_304_is_still_decided_by_the_pointer_query_alone(daily, admin, alice):
    give(admin, READ_DATA, alice, namespace="sales")
    tag = load(alice, path="/namespaces/sales/tables/orders")["ETag"]
    with CaptureQueriesContext(connection) as queries:
        response = load(alice, tag, path="/namespaces/sales/tables/orders")
    assert response.status_code == 304
    # Signing in (the token) and the pointer: nothing about who may see which property.
    assert not any("refresh_materializedtable" in q["sql"] for q in queries.captured_queries)
