"""The console's statements ask the grants of what they touch (refresh.checks), not a role on
the whole catalog: CREATE needs `create` in the namespace and read_data on every source,
ALTER / DROP / SUSPEND / REFRESH manage on the table, UPDATE / DELETE write_data on it, SHOW
and DESCRIBE read_metadata, a query read_data on what it reads. What one may not see is
answered as what does not exist. And a materialized table's query, kept in its table's
properties, is left out of the Iceberg REST catalog's answers, the table's page and its API
for those who may not read every source. Spark is faked (the schema it derives)."""

# ruff: noqa: F811 - the shared fixtures are imported by name
from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from catalog import services, workers
from catalog.core.access import CREATE, MANAGE, READ_DATA, READ_METADATA, WRITE_DATA
from catalog.core.errors import NeedsWorker
from catalog.models import Grant
from maintenance.models import MaintenanceRun
from refresh import console
from refresh import services as mts
from refresh.core.definition import QUERY_PROPERTY
from refresh.core.freshness import Freshness
from refresh.models import MaterializedTable
from tests.integration.grant_fixtures import admin, alice, api_as, bob, engine, give  # noqa: F401
from tests.integration.test_owner_rights import DAILY, ORDERS, QUERY

pytestmark = pytest.mark.django_db

MINE = "CREATE MATERIALIZED TABLE sales.mine FRESHNESS = INTERVAL '1' HOUR AS SELECT * FROM {}"


@pytest.fixture
def daily(admin, bob, monkeypatch) -> MaterializedTable:
    """sales.orders and sales.daily (reading it), the admin's; a namespace `hidden` no one
    else sees, and bob's own `attic` (he reads it, and nothing of sales)."""
    monkeypatch.setattr("refresh.analysis.query_schema", lambda query, **kw: DAILY)
    monkeypatch.setattr("refresh.runs.dispatch", lambda run, **kw: None)
    for name in ("sales", "hidden", "attic"):
        services.create_namespace(name=name, actor=admin)
    services.create_table(namespace="sales", name="orders", schema=ORDERS, actor=admin)
    give(admin, READ_DATA, bob, namespace="attic")
    return mts.create_materialized_table(
        namespace="sales", name="daily", query=QUERY, freshness=Freshness(1, "HOUR"), actor=admin
    )


def run(user, sql: str, namespace: str | None = None) -> console.StatementResult:
    """The statement as a new request runs it (the user's grants read afresh)."""
    fresh = get_user_model().objects.get(pk=user.pk)
    [result] = console.execute(sql, namespace=namespace, actor=fresh)
    return result


def same_but_the_name(hidden: dict, missing: dict, name: str, other: str) -> bool:
    return json.dumps(hidden) == json.dumps(missing).replace(other, name)


# -- CREATE ------------------------------------------------------------------------------------


def test_a_create_by_one_who_may_see_a_source_but_not_read_it_is_a_403_naming_both(
    daily, admin, alice
):
    give(admin, CREATE, alice, namespace="sales")
    give(admin, READ_METADATA, alice, namespace="sales", name="orders")

    result = run(alice, MINE.format("orders"))

    assert not result.ok
    assert result.error["status"] == 403
    assert result.error["message"].startswith(
        "alice lacks the read_data privilege on sales.orders, a source of the query"
    )
    assert (result.error["line"], result.error["column"]) == (1, MINE.index("{}") + 1)
    assert not MaterializedTable.objects.filter(table__name="mine").exists()


def test_a_source_the_creator_may_not_see_is_refused_exactly_as_a_missing_one(daily, admin, alice):
    give(admin, CREATE, alice, namespace="sales")  # a namespace grant, and nothing on orders

    hidden = run(alice, MINE.format("orders"))
    missing = run(alice, MINE.format("nobody"))

    assert hidden.error["status"] == 400
    assert hidden.error["message"].startswith("Table or view not found: sales.orders")
    assert same_but_the_name(hidden.error, missing.error, "orders", "nobody")
    assert not MaterializedTable.objects.filter(table__name="mine").exists()


def test_one_with_create_in_the_namespace_and_read_data_on_the_sources_creates_and_owns_it(
    daily, admin, alice
):
    give(admin, CREATE, alice, namespace="sales")
    give(admin, READ_DATA, alice, namespace="sales", name="orders")

    result = run(alice, MINE.format("orders"))

    assert result.ok, result.error
    assert MaterializedTable.objects.get(table__name="mine").table.owner_id == alice.pk


def test_a_create_without_create_in_the_namespace_is_a_403_and_one_it_may_not_see_is_missing(
    daily, admin, bob
):
    give(admin, READ_DATA, bob, namespace="sales", name="orders")  # sees sales, creates nothing

    refused = run(bob, MINE.format("orders"))
    hidden = run(bob, MINE.replace("sales.mine", "hidden.mine").format("x"))
    missing = run(bob, MINE.replace("sales.mine", "nowhere.mine").format("x"))

    assert refused.error["status"] == 403
    assert "bob lacks the create privilege on namespace sales" in refused.error["message"]
    assert hidden.error["status"] == 404
    assert same_but_the_name(hidden.error, missing.error, "hidden", "nowhere")


def test_create_or_alter_to_a_query_reading_what_one_may_not_see_is_missing_and_changes_nothing(
    daily, admin, alice
):
    give(admin, MANAGE, alice, namespace="sales", name="daily")
    services.create_table(namespace="hidden", name="secret", schema=ORDERS, actor=admin)
    statement = (
        "CREATE OR ALTER MATERIALIZED TABLE sales.daily FRESHNESS = INTERVAL '1' HOUR AS "
        "SELECT ds, sum(amount) AS total FROM hidden.{} GROUP BY ds"
    )

    hidden = run(alice, statement.format("secret"))
    missing = run(alice, statement.format("absent"))

    assert hidden.error["message"].startswith("Table or view not found: hidden.secret")
    assert same_but_the_name(hidden.error, missing.error, "secret", "absent")
    assert MaterializedTable.objects.get(pk=daily.pk).query == QUERY


# -- changes of a table ------------------------------------------------------------------------


def test_suspend_and_drop_need_manage_on_the_table_and_one_it_may_not_see_is_missing(
    daily, admin, alice, bob
):
    give(admin, READ_DATA, alice, namespace="sales")

    refused = run(alice, "ALTER MATERIALIZED TABLE sales.daily SUSPEND")
    hidden = run(bob, "DROP MATERIALIZED TABLE sales.daily")
    missing = run(bob, "DROP MATERIALIZED TABLE sales.nothing")
    if_exists = run(bob, "DROP MATERIALIZED TABLE IF EXISTS sales.daily")

    assert refused.error["status"] == 403
    assert (
        "alice lacks the manage privilege on materialized table sales.daily"
        in (refused.error["message"])
    )
    assert hidden.error["status"] == 404
    assert same_but_the_name(hidden.error, missing.error, "daily", "nothing")
    assert if_exists.ok and "does not exist; nothing dropped" in if_exists.message
    assert MaterializedTable.objects.get(pk=daily.pk).state == "ACTIVATED"

    give(admin, MANAGE, alice, namespace="sales", name="daily")
    assert run(alice, "ALTER MATERIALIZED TABLE sales.daily SUSPEND").ok
    assert MaterializedTable.objects.get(pk=daily.pk).state == "SUSPENDED"


def test_update_and_delete_need_write_data_on_the_target(daily, admin, alice):
    give(admin, READ_DATA, alice, namespace="sales")
    statement = "DELETE FROM sales.daily WHERE ds = '2026-01-01'"

    refused = run(alice, statement)

    assert refused.error["status"] == 403
    assert (
        "alice lacks the write_data privilege on materialized table sales.daily"
        in (refused.error["message"])
    )
    give(admin, WRITE_DATA, alice, namespace="sales", name="daily")
    with pytest.raises(NeedsWorker):  # allowed: Spark runs it, on a worker
        run(alice, statement)


def test_delete_from_a_table_one_may_read_but_not_write_is_a_403_naming_write_data(
    daily, admin, alice, bob
):
    give(admin, READ_DATA, alice, namespace="sales")
    statement = "DELETE FROM sales.{} WHERE ds = '2026-01-01'"

    refused = run(alice, statement.format("orders"))
    hidden = run(bob, statement.format("orders"))
    missing = run(bob, statement.format("nothing"))

    assert refused.error["status"] == 403
    assert (
        "alice lacks the write_data privilege on table sales.orders" in (refused.error["message"])
    )
    # One who may not see it gets what a missing table gets, byte for byte.
    assert hidden.error["status"] == 404
    assert same_but_the_name(hidden.error, missing.error, "orders", "nothing")
    # One who may write it learns that the console changes materialized tables only.
    give(admin, WRITE_DATA, alice, namespace="sales", name="orders")
    writer = run(alice, statement.format("orders"))
    assert writer.error["status"] == 400
    assert "change materialized tables only; sales.orders is a table" in writer.error["message"]


# -- reads -------------------------------------------------------------------------------------


def test_show_materialized_tables_lists_only_those_one_may_see(daily, admin, alice):
    services.create_table(namespace="hidden", name="secret", schema=ORDERS, actor=admin)
    mts.create_materialized_table(
        namespace="hidden",
        name="digest",
        query="SELECT ds, sum(amount) AS total FROM secret GROUP BY ds",
        freshness=Freshness(1, "HOUR"),
        actor=admin,
    )
    give(admin, READ_METADATA, alice, namespace="sales")

    shown = run(alice, "SHOW MATERIALIZED TABLES")

    assert shown.ok, shown.error
    assert [row[0] for row in shown.rows] == ["sales.daily"]
    assert [row[0] for row in run(admin, "SHOW MATERIALIZED TABLES").rows] == [
        "hidden.digest",
        "sales.daily",
    ]


def test_show_create_of_a_table_one_may_not_see_is_missing_and_hides_the_query_from_a_reader(
    daily, admin, bob
):
    hidden = run(bob, "SHOW CREATE MATERIALIZED TABLE sales.daily")
    missing = run(bob, "SHOW CREATE MATERIALIZED TABLE sales.nothing")
    assert same_but_the_name(hidden.error, missing.error, "daily", "nothing")

    give(admin, READ_DATA, bob, namespace="sales", name="daily")
    shown = run(bob, "SHOW CREATE MATERIALIZED TABLE sales.daily")
    assert shown.ok and QUERY not in shown.rows[0][0]


def test_a_user_with_only_a_namespace_grant_runs_queries_without_a_catalog_role(daily, alice):
    give_to = get_user_model().objects.get(username="root")
    give(give_to, READ_DATA, alice, namespace="sales")

    with pytest.raises(NeedsWorker):  # let through: the worker's Spark runs it
        run(alice, "SELECT * FROM sales.orders")


# -- the query in the table's properties -------------------------------------------------------


def test_the_rest_load_hides_the_query_from_a_reader_without_source_rights_not_from_one_with(
    daily, admin, alice, bob
):
    give(admin, READ_DATA, bob, namespace="sales", name="daily")
    give(admin, READ_DATA, alice, namespace="sales")

    as_bob = engine(bob).get("/namespaces/sales/tables/daily")
    as_alice = engine(alice).get("/namespaces/sales/tables/daily")

    assert as_bob.status_code == as_alice.status_code == 200
    bobs = as_bob.json()["metadata"]["properties"]
    alices = as_alice.json()["metadata"]["properties"]
    assert QUERY_PROPERTY not in bobs
    assert alices[QUERY_PROPERTY] == QUERY
    assert {k: v for k, v in alices.items() if k != QUERY_PROPERTY} == bobs
    assert as_bob["ETag"] != as_alice["ETag"]
    reader = engine(bob)
    again = reader.client.get(
        "/iceberg/v1/namespaces/sales/tables/daily",
        headers={**reader.headers, "If-None-Match": as_bob["ETag"]},
    )
    assert again.status_code == 304

    for user, shown in ((bob, False), (alice, True)):
        browser = Client()
        browser.force_login(user)
        page = browser.get("/namespaces/sales/tables/daily/")
        assert page.status_code == 200
        assert (QUERY_PROPERTY.encode() in page.content) is shown

    detail = api_as(bob).get("/api/namespaces/sales/tables/daily/")
    assert detail.status_code == 200, detail.content
    assert QUERY_PROPERTY not in detail.json()["properties"]
    assert api_as(alice).get("/api/namespaces/sales/tables/daily/").json()["properties"][
        QUERY_PROPERTY
    ] == (QUERY)


# -- the materialized tables' API --------------------------------------------------------------


def test_the_api_changes_a_table_for_its_manager_not_for_a_namespace_reader_or_a_stranger(
    daily, admin, alice, bob
):
    give(admin, READ_DATA, alice, namespace="sales")
    url = "/api/namespaces/sales/materialized-tables/{}/suspend"

    refused = api_as(alice).post(url.format("daily"))
    hidden = api_as(bob).post(url.format("daily"))
    missing = api_as(bob).post(url.format("nothing"))

    assert refused.status_code == 403, refused.content
    assert (
        "alice lacks the manage privilege on materialized table sales.daily"
        in (refused.json()["error"])
    )
    assert hidden.status_code == missing.status_code == 404
    assert hidden.content == missing.content.replace(b"nothing", b"daily")
    assert MaterializedTable.objects.get(pk=daily.pk).state == "ACTIVATED"

    give(admin, MANAGE, alice, namespace="sales", name="daily")
    assert api_as(alice).post(url.format("daily")).status_code == 200
    assert MaterializedTable.objects.get(pk=daily.pk).state == "SUSPENDED"


def test_an_api_create_reading_a_source_the_creator_may_not_see_answers_as_a_missing_one(
    daily, admin, alice
):
    workers.beat("host:1")  # a worker is alive: the request tries the create first
    give(admin, CREATE, alice, namespace="sales")
    body = {"name": "mine", "freshness": "INTERVAL '1' HOUR"}
    url = "/api/namespaces/sales/materialized-tables/"

    hidden = api_as(alice).post(url, {**body, "query": "SELECT * FROM orders"}, format="json")
    missing = api_as(alice).post(url, {**body, "query": "SELECT * FROM nobody"}, format="json")

    assert hidden.status_code == missing.status_code == 400, hidden.content
    assert hidden.content == missing.content.replace(b"nobody", b"orders")
    assert not MaterializedTable.objects.filter(table__name="mine").exists()

    give(admin, READ_METADATA, alice, namespace="sales", name="orders")
    refused = api_as(alice).post(url, {**body, "query": "SELECT * FROM orders"}, format="json")
    assert refused.status_code == 403, refused.content
    assert "alice lacks the read_data privilege on sales.orders" in refused.json()["error"]


# -- subscriptions -----------------------------------------------------------------------------


def test_subscriptions_follow_grants_listed_to_readers_made_by_managers_missing_to_others(
    daily, admin, alice, bob
):
    from alerts import services as alerts

    subscription = alerts.create_subscription(
        materialized_table="sales.daily", email="ops@example.com", actor=admin
    )
    url = "/api/subscriptions/"
    give(admin, READ_DATA, alice, namespace="sales")

    assert [s["id"] for s in api_as(alice).get(url).json()["results"]] == [subscription.pk]
    assert api_as(bob).get(url).json()["results"] == []
    hidden = api_as(bob).get(f"{url}{subscription.pk}/")
    missing = api_as(bob).get(f"{url}{subscription.pk + 1000}/")
    assert hidden.status_code == missing.status_code == 404
    assert hidden.content == missing.content.replace(
        str(subscription.pk + 1000).encode(), str(subscription.pk).encode()
    )

    body = {"materialized_table": "sales.daily", "email": "me@example.com"}
    refused = api_as(alice).post(url, body, format="json")
    assert refused.status_code == 403, refused.content
    assert (
        "alice lacks the manage privilege on materialized table sales.daily"
        in (refused.json()["error"])
    )
    unseen = api_as(bob).post(url, body, format="json")
    absent = api_as(bob).post(url, {**body, "materialized_table": "sales.nothing"}, format="json")
    assert unseen.status_code == absent.status_code == 404
    assert unseen.content == absent.content.replace(b"nothing", b"daily")
    assert api_as(alice).delete(f"{url}{subscription.pk}/").status_code == 403

    give(admin, MANAGE, alice, namespace="sales", name="daily")
    assert api_as(alice).post(url, body, format="json").status_code == 201
    assert api_as(alice).delete(f"{url}{subscription.pk}/").status_code == 204


# -- monitoring --------------------------------------------------------------------------------


def hidden_digest(admin) -> MaterializedTable:
    """hidden.digest, reading hidden.secret: a failing table in a namespace alice may not
    see."""
    services.create_table(namespace="hidden", name="secret", schema=ORDERS, actor=admin)
    digest = mts.create_materialized_table(
        namespace="hidden",
        name="digest",
        query="SELECT ds, sum(amount) AS total FROM secret GROUP BY ds",
        freshness=Freshness(1, "HOUR"),
        actor=admin,
    )
    MaterializedTable.objects.filter(pk=digest.pk).update(consecutive_failures=2)
    return digest


def test_monitoring_lists_only_the_tables_and_runs_one_may_see(daily, admin, alice):
    digest = hidden_digest(admin)
    for mt in (daily, digest, digest):
        MaintenanceRun.objects.create(
            table=mt.table,
            table_name=str(mt.table),
            action="EXPIRE_SNAPSHOTS",
            trigger=MaintenanceRun.Trigger.SCHEDULED,
        )
    give(admin, READ_METADATA, alice, namespace="sales")

    tables = api_as(alice).get("/api/monitoring/tables/")
    history = api_as(alice).get("/api/monitoring/history/")
    everything = api_as(admin).get("/api/monitoring/history/").json()["results"]

    assert tables.status_code == history.status_code == 200, tables.content
    assert [(t["namespace"], t["name"]) for t in tables.json()["results"]] == [("sales", "daily")]
    assert {h["table_name"] for h in history.json()["results"]} == {"sales.daily"}
    assert {h["kind"] for h in history.json()["results"]} == {"refresh", "maintenance"}
    # The counts are of what the reader may see too.
    assert history.json()["count"] == len(history.json()["results"])
    assert tables.json()["count"] == 1
    assert {h["table_name"] for h in everything} == {"sales.daily", "hidden.digest"}
    assert api_as(admin).get("/api/monitoring/tables/").json()["count"] == 2


def test_the_monitoring_page_shows_a_partial_reader_their_tables_runs_and_counts_only(
    daily, admin, alice
):
    hidden_digest(admin)
    give(admin, READ_METADATA, alice, namespace="sales")
    client = Client()
    client.force_login(alice)

    page = client.get("/monitoring/")
    everything = Client()
    everything.force_login(admin)
    whole = everything.get("/monitoring/").content.decode()

    assert page.status_code == 200, page.content
    shown = page.content.decode()
    assert "sales.daily" in shown and 'data-kind="refresh"' in shown
    assert "digest" not in shown and "secret" not in shown
    assert "0 failing" in shown and 'id="stream-hosts"' not in shown
    assert "hidden.digest" in whole and "1 failing" in whole and 'id="stream-hosts"' in whole
    # A filter names no more than the reader may see, nor a page beyond their tables.
    assert "digest" not in client.get("/monitoring/?namespace=hidden").content.decode()
    assert "digest" not in client.get("/monitoring/?status=failing").content.decode()


def test_a_revoke_takes_the_tables_off_the_monitoring_page_at_the_next_request(daily, admin, alice):
    give(admin, READ_METADATA, alice, namespace="sales")
    give(admin, READ_DATA, alice, namespace="attic")
    client = Client()
    client.force_login(alice)
    assert "sales.daily" in client.get("/monitoring/").content.decode()

    Grant.objects.filter(user=alice, namespace__name="sales").delete()

    page = client.get("/monitoring/")
    assert page.status_code == 200
    assert "sales.daily" not in page.content.decode()


# -- lineage -----------------------------------------------------------------------------------


def _graph(user, namespace: str, name: str) -> tuple[int, dict]:
    answer = api_as(user).get("/api/lineage/", {"namespace": namespace, "name": name})
    return answer.status_code, answer.json()


def test_the_lineage_api_shows_a_partial_reader_only_what_they_may_see(daily, admin, alice):
    hidden_digest(admin)
    give(admin, READ_METADATA, alice, namespace="sales", name="orders")

    status, graph = _graph(alice, "sales", "orders")
    assert status == 200, graph
    assert [node["id"] for node in graph["nodes"]] == ["sales.orders"]
    assert graph["edges"] == []
    # What they may not see answers as what does not exist, body and all.
    for (namespace, name), (missing_namespace, missing_name), changed in (
        (("sales", "daily"), ("sales", "no_such_table"), ("daily", "no_such_table")),
        (("hidden", "digest"), ("no_such_namespace", "digest"), ("hidden", "no_such_namespace")),
    ):
        status, hidden = _graph(alice, namespace, name)
        missing_status, missing = _graph(alice, missing_namespace, missing_name)
        assert status == missing_status == 404
        assert same_but_the_name(hidden, missing, *changed), (hidden, missing)

    give(admin, READ_METADATA, alice, namespace="sales", name="daily")
    status, graph = _graph(alice, "sales", "orders")
    assert {node["id"] for node in graph["nodes"]} == {"sales.orders", "sales.daily"}
    assert graph["edges"] == [{"source": "sales.orders", "target": "sales.daily"}]
    # The whole catalog's reader sees the hidden namespace's edge too.
    assert _graph(admin, "hidden", "digest")[1]["edges"] == [
        {"source": "hidden.secret", "target": "hidden.digest"}
    ]


def test_the_lineage_api_still_refuses_one_holding_nothing(daily, alice):
    answer = api_as(alice).get("/api/lineage/", {"namespace": "sales", "name": "orders"})
    assert answer.status_code == 403
