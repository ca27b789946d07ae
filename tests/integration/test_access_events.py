"""The audit of reads and refusals (issue 51, item 5): each path that reads or refuses
records one access event with who, which credential, what, when, the outcome and why; the
audit lists them to those who manage the catalog, filtered and as CSV, and prunes them.

The test settings record nothing unless a test turns AUDIT_READS on (these do), and then
write each event at once (AUDIT_READS_FLUSH_SECONDS=0): the rows are in the test's
transaction; tests/integration/test_access_log.py runs the background flusher."""

# ruff: noqa: F811 - the shared fixtures are imported by name
from __future__ import annotations

import csv
import io
import json
import logging
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from catalog import audit, services
from catalog.core.access import MANAGE, READ_DATA, READ_METADATA
from catalog.models import AccessEvent, CatalogClient, Table
from refresh.models import Query
from refresh.tasks import run_console_job
from tests.integration.grant_fixtures import admin, alice, api_as, engine, give  # noqa: F401
from tests.integration.test_iceberg_rest import BASE, SCHEMA
from tests.integration.test_queries import alive, spark, submitted  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def recording(settings):
    settings.AUDIT_READS = True


@pytest.fixture
def world(admin, alice):
    """sales.orders and the view sales.recent, which alice reads; finance.ledger, which she
    sees but may not read; hr.people, which she may not see."""
    for name in ("sales", "finance", "hr"):
        services.create_namespace(name=name, actor=admin)
    services.create_table(namespace="sales", name="orders", schema=SCHEMA, actor=admin)
    services.create_table(namespace="finance", name="ledger", schema=SCHEMA, actor=admin)
    services.create_table(namespace="hr", name="people", schema=SCHEMA, actor=admin)
    services.create_view(namespace="sales", name="recent", sql="SELECT 1 AS one", actor=admin)
    give(admin, READ_DATA, alice, namespace="sales")
    give(admin, READ_METADATA, alice, namespace="finance")
    AccessEvent.objects.all().delete()
    return alice


def events(**where) -> list[AccessEvent]:
    return list(AccessEvent.objects.filter(**where).order_by("id"))


def pages_as(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_rest_table_load_and_its_304_are_each_a_load_with_the_engines_credential(world):
    rest = engine(world)
    loaded = rest.get("/namespaces/sales/tables/orders")
    assert loaded.status_code == 200
    kept = rest.client.get(
        BASE + "/namespaces/sales/tables/orders",
        headers={**rest.headers, "If-None-Match": loaded["ETag"]},
    )
    assert kept.status_code == 304
    first, second = events(action="load-table")
    client_id = CatalogClient.objects.get(user=world).client_id
    table = Table.objects.get(name="orders")
    assert (first.actor_name, first.actor_id, first.credential, first.channel) == (
        "alice", world.pk, client_id, "rest"
    )  # fmt: skip
    assert (first.object_type, first.object_name, first.object_uuid) == (
        "table", "sales.orders", table.uuid
    )  # fmt: skip
    assert (first.outcome, first.status, second.status) == ("allowed", 200, 304)


def test_a_rest_view_load_is_recorded(world):
    assert engine(world).get("/namespaces/sales/views/recent").status_code == 200
    [load] = events(action="load-view")
    assert (load.object_type, load.object_name, load.outcome) == ("view", "sales.recent", "allowed")


def test_a_rest_403_is_a_refusal_that_names_the_missing_privilege(world):
    assert engine(world).get("/namespaces/finance/tables/ledger").status_code == 403
    [refused] = events()
    assert (refused.action, refused.outcome, refused.status, refused.channel) == (
        "refused", "refused", 403, "rest"
    )  # fmt: skip
    assert refused.object_name == "finance.ledger" and "read_data" in refused.reason


def test_a_rest_404_hiding_a_table_is_a_hidden_refusal_and_a_plain_miss_is_no_event(world):
    rest = engine(world)
    hidden = rest.get("/namespaces/hr/tables/people")
    missing = rest.get("/namespaces/sales/tables/nothing")
    assert hidden.status_code == missing.status_code == 404
    # The caller cannot tell: the same type of error, and no word of hiding.
    assert hidden.json()["error"]["type"] == missing.json()["error"]["type"]
    assert "hidden" not in hidden.content.decode()
    [refused] = events()
    assert (refused.status, refused.object_name) == (404, "hr.people")
    assert refused.reason.startswith("hidden: ")


def test_the_apis_403_and_hiding_404_are_refusals(world):
    api = api_as(world)
    assert api.get("/api/namespaces/finance/tables/ledger/preview").status_code == 403
    assert api.get("/api/namespaces/hr/tables/people/").status_code == 404
    assert api.get("/api/namespaces/sales/tables/nothing/").status_code == 404
    forbidden, hidden = events()
    assert (forbidden.channel, forbidden.credential, forbidden.status) == ("api", "session", 403)
    assert forbidden.object_name == "finance.ledger" and "read_data" in forbidden.reason
    assert (hidden.status, hidden.object_name) == (404, "hr.people")
    assert hidden.reason.startswith("hidden: ")


def test_the_pages_403_and_hiding_404_are_refusals(world):
    pages = pages_as(world)
    assert pages.get("/namespaces/finance/tables/ledger/?preview=1").status_code == 403
    assert pages.get("/namespaces/hr/tables/people/").status_code == 404
    assert pages.get("/namespaces/sales/tables/nothing/").status_code == 404
    forbidden, hidden = events()
    assert (forbidden.channel, forbidden.status, forbidden.object_name) == (
        "page", 403, "finance.ledger"
    )  # fmt: skip
    assert (hidden.channel, hidden.status) == ("page", 404)
    assert hidden.reason.startswith("hidden: ")


def test_previews_of_tables_and_views_are_recorded_on_the_api_and_the_pages(world):
    api = api_as(world)
    api.get("/api/namespaces/sales/tables/orders/preview")
    api.get("/api/namespaces/sales/views/recent/preview")
    assert pages_as(world).get("/namespaces/sales/tables/orders/?preview=1").status_code == 200
    found = [(e.channel, e.object_type, e.object_name) for e in events(action="preview")]
    assert found == [
        ("api", "table", "sales.orders"),
        ("api", "view", "sales.recent"),
        ("page", "table", "sales.orders"),
    ]


def test_a_console_query_is_recorded_on_the_worker_with_what_its_plan_read_and_its_download(
    viewer, alive, spark
):
    spark.reads = [("sales", "orders"), ("sales", "customers")]
    client = api_as(viewer)
    job = submitted(client)["job"]
    assert run_console_job(job["id"]) == "SUCCEEDED"
    query = Query.objects.get()
    [ran] = events(action="query")
    assert (ran.actor_name, ran.credential, ran.channel, ran.object_name) == (
        "vic", "console", "worker", str(query.pk)
    )  # fmt: skip
    assert ran.tables == ["sales.orders", "sales.customers"]
    assert client.get(f"/api/queries/{query.pk}/result.csv").status_code == 200
    [download] = events(action="download")
    assert (download.channel, download.object_type, download.object_name) == (
        "api", "query", str(query.pk)
    )  # fmt: skip


def test_a_console_query_its_plan_refuses_is_a_refusal_with_what_it_read(world, alive, spark):
    spark.reads = [("finance", "ledger")]
    refused = submitted(api_as(world), "SELECT * FROM finance.ledger")["job"]
    assert run_console_job(refused["id"]) == "FAILED"
    spark.reads = [("hr", "people")]
    hidden = submitted(api_as(world), "SELECT * FROM hr.people")["job"]
    assert run_console_job(hidden["id"]) == "FAILED"
    forbidden, unseen = events(action="query")
    assert (forbidden.outcome, forbidden.status, forbidden.tables) == (
        "refused", 403, ["finance.ledger"]
    )  # fmt: skip
    assert forbidden.credential == "console" and "read_data" in forbidden.reason
    assert (unseen.status, unseen.reason) == (404, "hidden: hr.people")


def test_each_event_is_one_json_line_on_the_access_logger(world):
    written = io.StringIO()
    handler = logging.StreamHandler(written)
    access_logger = logging.getLogger("lakeview.access")
    access_logger.addHandler(handler)
    try:
        engine(world).get("/namespaces/finance/tables/ledger\n")
        engine(world).get("/namespaces/finance/tables/ledger")
    finally:
        access_logger.removeHandler(handler)
    # One line per event, each one JSON object, whatever a name holds.
    lines = [json.loads(text) for text in written.getvalue().splitlines()]
    assert len(lines) == AccessEvent.objects.count()
    line = lines[-1]
    assert (line["actor"], line["action"], line["object"], line["outcome"], line["status"]) == (
        "alice", "refused", "finance.ledger", "refused", 403
    )  # fmt: skip
    assert set(line) >= {"at", "credential", "channel", "reason", "tables", "object_uuid"}


def test_nothing_is_recorded_with_audit_reads_off(world, settings):
    settings.AUDIT_READS = False
    assert engine(world).get("/namespaces/sales/tables/orders").status_code == 200
    assert events() == []


# -- the audit -------------------------------------------------------------------------------


@pytest.fixture
def recorded(world, admin):
    """alice loads sales.orders, is refused finance.ledger, and cannot see hr.people."""
    rest = engine(world)
    rest.get("/namespaces/sales/tables/orders")
    rest.get("/namespaces/finance/tables/ledger")
    rest.get("/namespaces/hr/tables/people")
    return world


def _audit(user, query: str = "") -> list[dict]:
    response = api_as(user).get(f"/api/audit/{query}")
    assert response.status_code == 200, response.content
    return response.json()["results"]


def test_the_audit_lists_reads_and_refusals_beside_changes_for_a_manager(recorded, admin):
    found = _audit(admin)
    kinds = {entry["kind"] for entry in found}
    assert {"read", "refusal", "object", "grant"} <= kinds
    reads = _audit(admin, "?kind=reads")
    assert [(e["action"], e["object"], e["outcome"]) for e in reads] == [
        ("load-table", "sales.orders", "allowed")
    ]
    refusals = _audit(admin, "?kind=refusals&actor=alice")
    assert [(e["object"], e["status"]) for e in refusals] == [
        ("hr.people", 404),
        ("finance.ledger", 403),
    ]
    assert refusals[0]["reason"].startswith("hidden: ")
    assert _audit(admin, "?outcome=refused&object=finance") == refusals[1:]
    assert {e["kind"] for e in _audit(admin, "?kind=changes")} <= set(audit.CHANGE_KINDS)
    assert _audit(admin, "?kind=reads&actor=nobody") == []
    assert api_as(admin).get("/api/audit/?outcome=maybe").status_code == 400


def test_the_audit_pages_keyset_walks_across_all_three_records(recorded, admin):
    walked, cursor = [], None
    while True:
        query = "?page_size=2" + (f"&cursor={cursor}" if cursor else "")
        response = api_as(admin).get(f"/api/audit/{query}").json()
        walked += response["results"]
        if not response["next"]:
            break
        cursor = response["next"].split("cursor=")[1].split("&")[0]
    assert walked == _audit(admin, "?page_size=500")


def test_the_csv_export_and_the_page_show_outcome_and_reason(recorded, admin):
    export = pages_as(admin).get("/audit/export.csv?kind=refusals")
    rows = list(csv.DictReader(io.StringIO(b"".join(export.streaming_content).decode())))
    assert [(row["object"], row["outcome"], row["status"]) for row in rows] == [
        ("hr.people", "refused", "404"),
        ("finance.ledger", "refused", "403"),
    ]
    assert "read_data" in rows[1]["reason"] and rows[1]["channel"] == "rest"
    page = pages_as(admin).get("/audit/?kind=refusals&outcome=refused").content.decode()
    assert 'class="audit-outcome">refused' in page and "hidden: " in page


def test_a_non_manager_is_refused_the_audit_and_the_refusal_is_recorded(recorded, alice):
    assert api_as(alice).get("/api/audit/?kind=reads").status_code == 403
    assert pages_as(alice).get("/audit/").status_code == 403
    refused = events(channel__in=["api", "page"])
    assert [(e.channel, e.status, e.object_name) for e in refused] == [
        ("api", 403, "/api/audit/"),
        ("page", 403, "/audit/"),
    ]


def test_a_manager_of_the_catalog_sees_the_audit(recorded, admin, alice):
    give(admin, MANAGE, alice)
    assert _audit(alice, "?kind=reads")


def test_prune_deletes_access_events_past_the_days_kept(recorded):
    old = timezone.now() - timedelta(days=400)
    AccessEvent.objects.filter(object_name="hr.people").update(occurred_at=old)
    assert audit.prune(keep_days=365, batch=1) >= 1
    assert not AccessEvent.objects.filter(object_name="hr.people").exists()
    assert AccessEvent.objects.filter(object_name="sales.orders").exists()
