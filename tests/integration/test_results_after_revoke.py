"""Job results follow grants (issue 39: "revocation takes effect on the next request ...
job results"). A kept query result is read only while its user may still read what the
query read: its rows (at its own URL and its job's), its downloads, its page and running it
again ask the same decision the query asked (catalog.roles.may_read), on each request, from
the tables and views the query's analyzed plan read (kept on its row). Another job's answer
(a preview's rows) is shown only while its user may still read the object it names. No
worker runs here: the worker's side is called directly with its Spark faked, as in
test_queries."""

# ruff: noqa: F811 - fixtures imported from other modules
from __future__ import annotations

import pytest

from catalog import services
from catalog.core.access import READ_DATA, READ_METADATA
from catalog.models import SparkJob
from refresh.models import Query
from refresh.tasks import run_console_job
from tests.integration.grant_fixtures import admin, alice, api_as, bob, give, take  # noqa: F401
from tests.integration.test_owner_rights import ORDERS
from tests.integration.test_queries import alive, items, spark  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db

REFUSED = "Reading sales.customers needs the read_data privilege"


@pytest.fixture
def sales(admin, alice):
    """alice may read sales.orders and sales.customers (grants on each table, no role)."""
    services.create_namespace(name="sales", actor=admin)
    for name in ("orders", "customers"):
        services.create_table(namespace="sales", name=name, schema=ORDERS, actor=admin)
        give(admin, READ_DATA, alice, namespace="sales", name=name)


def revoke(admin, alice, name: str) -> None:
    take(admin, READ_DATA, alice, namespace="sales", name=name)


@pytest.fixture
def kept(sales, alice, alive, spark):
    """A result alice's query over both tables keeps: (her client, its query row)."""
    spark.reads = [("sales", "orders"), ("sales", "customers")]
    client = api_as(alice)
    response = client.post(
        "/api/statements/",
        {"sql": "SELECT * FROM orders JOIN customers USING (id)", "namespace": "sales"},
        format="json",
    )
    assert response.status_code == 202, response.content
    assert run_console_job(response.json()["job"]["id"]) == "SUCCEEDED"
    query = Query.objects.get()
    assert query.reads == [["sales", "orders"], ["sales", "customers"]]
    return client, query


def readers(query: Query) -> dict[str, str]:
    return {
        "rows": f"/api/queries/{query.pk}/rows",
        "job rows": f"/api/jobs/{query.job_id}/rows",
        "csv": f"/api/queries/{query.pk}/result.csv",
        "parquet": f"/api/queries/{query.pk}/result.parquet",
    }


def test_a_revoke_on_a_table_the_query_read_refuses_its_result_at_the_next_request(
    kept, admin, alice
):
    client, query = kept
    for url in readers(query).values():
        assert client.get(url).status_code == 200, url

    revoke(admin, alice, "customers")

    for what, url in readers(query).items():
        response = client.get(url)
        assert response.status_code == 403, what
        assert response.json() == {"error": REFUSED, "type": "Forbidden"}, what
    again = client.post(f"/api/queries/{query.pk}/run")
    assert again.status_code == 403 and again.json()["error"] == REFUSED
    assert Query.objects.count() == 1  # nothing was run again


def test_the_refusal_is_the_one_a_query_of_that_table_gets(
    kept,
    admin,
    alice,
    spark,
):
    client, _ = kept
    revoke(admin, alice, "customers")
    give(admin, READ_METADATA, alice, namespace="sales")  # sees it, may not read it
    spark.reads = [("sales", "customers")]
    fresh = client.post(
        "/api/statements/", {"sql": "SELECT * FROM customers", "namespace": "sales"}, format="json"
    ).json()
    assert run_console_job(fresh["job"]["id"]) == "FAILED"
    answer = client.get(fresh["job"]["url"]).json()
    assert (answer["status"], answer["error"]["message"]) == (403, REFUSED)


def test_granting_it_back_makes_the_result_readable_again(kept, admin, alice):
    client, query = kept
    revoke(admin, alice, "customers")
    assert client.get(readers(query)["rows"]).status_code == 403
    give(admin, READ_DATA, alice, namespace="sales")  # on the namespace this time
    page = client.get(readers(query)["rows"]).json()
    assert page["rows"] == [[0, "row-0"], [1, "row-1"], [2, "row-2"]]


def test_the_results_page_says_why_and_shows_no_rows(kept, admin, alice, client):
    _, query = kept
    client.force_login(alice)
    shown = client.get(f"/queries/{query.pk}/")
    assert shown.status_code == 200 and "<td>row-2</td>" in shown.content.decode()

    revoke(admin, alice, "customers")

    refused = client.get(f"/queries/{query.pk}/")
    html = refused.content.decode()
    assert refused.status_code == 403
    assert REFUSED in html and "<td>row-" not in html
    assert "query-gone" not in html and "is gone" not in html  # not gone: refused
    assert 'class="query-download query-csv" href' in html and "hidden>CSV</a>" in html


def test_a_superuser_still_reads_anyones_result(kept, admin, alice):
    _, query = kept
    revoke(admin, alice, "customers")
    root = api_as(admin)
    assert root.get(readers(query)["rows"]).json()["row_count"] == 3
    assert root.get(readers(query)["csv"]).status_code == 200


def test_a_result_kept_without_its_reads_is_read_by_superusers_only(kept, admin):
    client, query = kept
    Query.objects.filter(pk=query.pk).update(reads=None)
    response = client.get(readers(query)["rows"])
    assert response.status_code == 403
    assert response.json()["error"] == (
        f"Query {query.pk} does not record what it read; run it again to read its result"
    )
    assert client.post(f"/api/queries/{query.pk}/run").status_code == 202
    assert api_as(admin).get(readers(query)["rows"]).status_code == 200


def test_a_plain_read_answered_without_spark_keeps_the_table_it_read(
    admin,
    bob,
    alive,
    spark,
    items,
    monkeypatch,
):
    def no_spark(sql, *, namespace):
        raise AssertionError(f"Spark was asked: {sql}")

    monkeypatch.setattr("refresh.analysis.prepare_query", no_spark)
    give(admin, READ_DATA, bob, namespace="sales", name="items")
    client = api_as(bob)
    body = client.post(
        "/api/statements/", {"sql": "SELECT id FROM items", "namespace": "sales"}, format="json"
    ).json()
    assert run_console_job(body["job"]["id"]) == "SUCCEEDED"
    query = Query.objects.get()
    assert query.reads == [["sales", "items"]]
    assert client.get(readers(query)["rows"]).json()["row_count"] == 8
    take(admin, READ_DATA, bob, namespace="sales", name="items")
    assert client.get(readers(query)["rows"]).status_code == 403


# -- other jobs' answers -----------------------------------------------------------------------


@pytest.fixture
def previewed(sales, alice, admin, alive):
    """A preview of sales.recent (a view over sales.orders) alice asked for, answered by a
    worker with its rows: (her client, the job's URL)."""
    services.create_view(namespace="sales", name="recent", sql="SELECT ds FROM orders")
    give(admin, READ_DATA, alice, namespace="sales", name="recent")
    client = api_as(alice)
    response = client.get("/api/namespaces/sales/views/recent/preview")
    assert response.status_code == 202, response.content
    job = response.json()["job"]
    body = {"columns": [{"name": "ds", "type": "string"}], "rows": [[7]], "read_by": "spark"}
    SparkJob.objects.filter(pk=job["id"]).update(state="SUCCEEDED", status=200, result=body)
    return client, job


def test_a_previews_rows_are_kept_from_its_user_once_they_may_no_longer_read_it(
    previewed, admin, alice, client
):
    api, job = previewed
    assert api.get(job["url"]).json()["result"]["rows"] == [[7]]

    revoke(admin, alice, "recent")
    give(admin, READ_METADATA, alice, namespace="sales")  # sees it, may not read it

    answer = api.get(job["url"]).json()
    assert (answer["state"], answer["status"], answer["result"]) == ("SUCCEEDED", 403, None)
    assert answer["error"]["message"] == "Reading sales.recent needs the read_data privilege"
    [listed] = api.get("/api/jobs/").json()["results"]
    assert (listed["status"], listed["result"]) == (403, None)
    client.force_login(alice)
    page = client.get(job["page_url"])
    assert page.status_code == 403
    html = page.content.decode()
    assert "Reading sales.recent needs the read_data privilege" in html and ">7<" not in html

    give(admin, READ_DATA, alice, namespace="sales", name="recent")
    assert api.get(job["url"]).json()["result"]["rows"] == [[7]]
    assert client.get(job["page_url"]).status_code == 200


def test_a_superuser_still_sees_anyones_preview(previewed, admin, alice):
    _, job = previewed
    revoke(admin, alice, "recent")
    assert api_as(admin).get(job["url"]).json()["result"]["rows"] == [[7]]


@pytest.fixture
def script(sales, alice):
    """A console script of alice's that a worker ran: its statements printed what her grants
    let them (a SHOW GRANTS' rows), kept as the job's answer."""
    printed = {
        "results": [
            {
                "statement": "SHOW GRANTS ON TABLE customers",
                "ok": True,
                "columns": ["principal", "privilege"],
                "rows": [["user carol", "read_data"]],
            }
        ]
    }
    job = SparkJob.objects.create(
        kind="statements",
        arguments={"sql": "SHOW GRANTS ON TABLE customers", "namespace": "sales", "start": 0},
        requested_by=alice,
        state="SUCCEEDED",
        status=200,
        result=printed,
    )
    return api_as(alice), f"/api/jobs/{job.pk}/"


def test_a_console_scripts_printed_answer_is_withheld_after_a_revoke_of_its_user(
    script, admin, alice, bob
):
    client, url = script
    assert client.get(url).json()["result"]["results"][0]["rows"] == [["user carol", "read_data"]]

    # Someone else's revoke changes nothing for alice.
    give(admin, READ_DATA, bob, namespace="sales", name="orders")
    take(admin, READ_DATA, bob, namespace="sales", name="orders")
    assert client.get(url).json()["result"]["results"][0]["rows"] == [["user carol", "read_data"]]

    revoke(admin, alice, "orders")

    answer = client.get(url).json()
    assert (answer["status"], answer["result"]) == (403, None)
    assert "a privilege of yours was revoked after this script ran" in answer["error"]["message"]
    [listed] = client.get("/api/jobs/").json()["results"]
    assert listed["result"] is None
    # The user's grants may come back; what the old script printed stays withheld: run
    # again, it prints what they allow now.
    give(admin, READ_DATA, alice, namespace="sales", name="orders")
    assert client.get(url).json()["result"] is None
    # A superuser still sees it.
    assert api_as(admin).get(url).json()["result"]["results"][0]["rows"]


def test_a_revoke_from_one_of_the_users_groups_withholds_the_scripts_answer_too(
    script, admin, alice
):
    from django.contrib.auth.models import Group

    client, url = script
    analysts = Group.objects.create(name="analysts")
    analysts.user_set.add(alice)
    give(admin, READ_METADATA, analysts, namespace="sales")
    assert client.get(url).json()["result"] is not None
    take(admin, READ_METADATA, analysts, namespace="sales")
    assert client.get(url).json()["result"] is None
