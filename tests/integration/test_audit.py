"""The audit (issue 39, item 4): every change to the catalog (namespaces, objects and their
definitions, grants, revokes and changes of owner, engine credentials), filterable by actor,
object, time and kind, paged by keyset, exported as CSV, kept AUDIT_KEEP_DAYS; for
superusers and those who manage the catalog."""

# ruff: noqa: F811 - the shared fixtures are imported by name
from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from catalog import audit, services
from catalog.core.access import MANAGE, READ_DATA
from catalog.models import CatalogEvent, GrantChange
from catalog.services.credentials import create_client, revoke_client
from catalog.tasks import prune_audit
from tests.integration.grant_fixtures import admin, give  # noqa: F401
from tests.integration.test_iceberg_rest import SCHEMA
from tests.integration.test_pages_fuzz import HOSTILE_QUERY

pytestmark = pytest.mark.django_db


@pytest.fixture
def changes(django_user_model, admin):
    """root makes sales and sales.orders and finance.ledger; ana is granted read_data on
    sales then manage on the catalog; she makes a credential, revokes it; salesy is a
    namespace whose name starts as sales does."""
    ana = django_user_model.objects.create_user("ana", password="ana-password")
    for name in ("sales", "salesy", "finance"):
        services.create_namespace(name=name, actor=admin)
    services.create_table(namespace="sales", name="orders", schema=SCHEMA, actor=admin)
    services.create_table(namespace="finance", name="ledger", schema=SCHEMA, actor=admin)
    services.create_table(namespace="salesy", name="t", schema=SCHEMA, actor=admin)
    give(admin, READ_DATA, ana, namespace="sales")
    give(admin, MANAGE, ana)
    client, _ = create_client(name="ana-spark", user=ana, actor=ana)
    revoke_client(client=client, actor=ana)
    return {"ana": ana, "client": client}


def _api(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def _entries(user, query: str = "") -> list[dict]:
    response = _api(user).get(f"/api/audit/{query}")
    assert response.status_code == 200, response.content
    return response.json()["results"]


def test_the_audit_lists_objects_definitions_grants_and_credentials_newest_first(changes, admin):
    found = _entries(admin)
    actions = [entry["action"] for entry in found]
    for action in ("create_namespace", "create_table", "grant", "create_client", "revoke_client"):
        assert action in actions
    moments = [entry["occurred_at"] for entry in found]
    assert moments == sorted(moments, reverse=True)
    revoked = next(entry for entry in found if entry["action"] == "revoke_client")
    assert revoked["kind"] == "credential" and revoked["actor"] == "ana"
    assert changes["client"].client_id in revoked["details"]
    granted = next(entry for entry in found if entry["action"] == "grant")
    assert granted["kind"] == "grant" and granted["actor"] == "root"


def test_a_revoked_credential_is_recorded_once_with_its_revocation(changes):
    assert revoke_client(client=changes["client"], actor=changes["ana"]) is False
    assert CatalogEvent.objects.filter(action="revoke_client").count() == 1


def test_the_audit_filters_by_actor(changes, admin):
    assert {entry["actor"] for entry in _entries(admin, "?actor=ana")} == {"ana"}
    assert {entry["action"] for entry in _entries(admin, "?actor=ana")} == {
        "create_client",
        "revoke_client",
    }
    assert _entries(admin, "?actor=nobody") == []


def test_the_audit_filters_by_object_name_and_what_is_under_it_or_a_prefix(changes, admin):
    under = {entry["object"] for entry in _entries(admin, "?object=sales")}
    assert under == {"sales", "sales.orders"}
    exact = _entries(admin, "?object=sales.orders")
    assert {entry["object"] for entry in exact} == {"sales.orders"}
    prefix = {entry["object"] for entry in _entries(admin, "?object=sales*")}
    assert prefix == {"sales", "sales.orders", "salesy", "salesy.t"}


def test_the_audit_filters_by_kind_and_action(changes, admin):
    assert {entry["kind"] for entry in _entries(admin, "?kind=grant")} == {"grant"}
    assert {entry["action"] for entry in _entries(admin, "?kind=namespace")} == {"create_namespace"}
    assert {entry["kind"] for entry in _entries(admin, "?kind=object")} == {"object"}
    assert [
        entry["object"] for entry in _entries(admin, "?action=create_table&object=finance")
    ] == ["finance.ledger"]


def test_the_audit_filters_by_time(changes, admin):
    old = CatalogEvent.objects.get(action="create_table", object_name="finance.ledger")
    CatalogEvent.objects.filter(pk=old.pk).update(occurred_at=datetime(2020, 3, 1, 12, tzinfo=UTC))
    day = _entries(admin, "?from=2020-03-01&to=2020-03-01")
    assert [entry["object"] for entry in day] == ["finance.ledger"]
    assert _entries(admin, "?from=2020-03-01T12:00:01Z&to=2020-03-02") == []
    recent = _entries(admin, "?from=2021-01-01")
    assert "finance.ledger" not in {entry["object"] for entry in recent}


def test_the_audit_pages_by_keyset_through_every_entry_once(changes, admin):
    everything = _entries(admin, "?page_size=500")
    seen = []
    url = "/api/audit/?page_size=3"
    while url:
        body = _api(admin).get(url).json()
        seen += body["results"]
        url = body["next"]
    assert seen == everything
    assert len(everything) > 6


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("?from=yesterday", "from"),
        ("?to=2026-13-45", "to"),
        ("?from=2026-02-01&to=2026-01-01", "to"),
        ("?kind=tables", "kind"),
        ("?action=drop%20table;", "action"),
        ("?cursor=not-a-cursor", "cursor"),
        ("?page_size=0", "page_size"),
        ("?actor=" + "a" * 200, "actor"),
    ],
)
def test_a_bad_filter_is_a_400_naming_it(changes, admin, query, field):
    response = _api(admin).get(f"/api/audit/{query}")
    assert response.status_code == 400, response.content
    assert response.json()["field"] == field
    export = _api(admin).get(f"/api/audit/export{query}")
    if field not in ("cursor", "page_size"):
        assert export.status_code == 400 and export.json()["field"] == field


def test_a_bad_filter_on_the_page_is_a_form_error(changes, admin):
    client = Client()
    client.force_login(admin)
    response = client.get("/audit/?from=yesterday")
    assert response.status_code == 400
    assert 'data-field="from"' in response.content.decode()
    assert client.get("/audit/export.csv?kind=nope").status_code == 400


def test_the_csv_export_holds_every_filtered_entry_with_a_header(changes, admin, monkeypatch):
    monkeypatch.setattr(audit, "CHUNK", 2)  # several chunks
    client = Client()
    client.force_login(admin)
    response = client.get("/audit/export.csv?object=sales")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [row["object"] for row in rows] == [
        entry["object"] for entry in _entries(admin, "?object=sales&page_size=500")
    ]
    assert {row["action"] for row in rows} >= {"create_namespace", "create_table", "grant"}
    assert list(rows[0]) == audit.CSV_COLUMNS


def test_the_csv_export_writes_a_formula_as_text(changes, admin):
    services.create_namespace(name="=cmd", actor=admin)
    body = b"".join(_api(admin).get("/api/audit/export?kind=namespace").streaming_content)
    assert "'=cmd" in body.decode()


def test_only_superusers_and_catalog_managers_see_the_audit(changes, admin, django_user_model):
    reader = django_user_model.objects.create_user("rita", password="rita-password")
    give(admin, MANAGE, reader, namespace="sales")
    assert _api(reader).get("/api/audit/").status_code == 403
    assert _api(reader).get("/api/audit/export").status_code == 403
    page = Client()
    page.force_login(reader)
    assert page.get("/audit/").status_code == 403
    assert page.get("/audit/export.csv").status_code == 403
    assert 'id="monitoring-audit"' not in page.get("/monitoring/").content.decode()
    # ana manages the catalog.
    assert _api(changes["ana"]).get("/api/audit/").status_code == 200
    page.force_login(changes["ana"])
    monitoring = page.get("/monitoring/").content.decode()
    assert 'id="monitoring-audit"' in monitoring
    listed = page.get("/audit/?kind=grant").content.decode()
    assert "read_data to user ana" in listed


def test_the_catalogs_history_api_answers_as_the_audit_does(changes, admin, viewer):
    # A reader of the whole catalog (the viewer group's read_data on it) sees neither.
    assert _api(viewer).get("/api/history/").status_code == 403
    assert _api(viewer).get("/api/audit/").status_code == 403
    page = Client()
    page.force_login(viewer)
    assert page.get("/audit/").status_code == 403
    # Those who manage the catalog and superusers see both, the same events.
    for user in (changes["ana"], admin):
        history = _api(user).get("/api/history/")
        assert history.status_code == 200
        actions = {entry["action"] for entry in history.json()["results"]}
        assert {"create_namespace", "create_table"} <= actions
        assert _api(user).get("/api/audit/").status_code == 200


def test_a_page_of_the_audit_is_a_few_queries_however_long_the_history(changes, admin):
    with CaptureQueriesContext(connection) as queries:
        _entries(admin, "?actor=root&object=sales")
    few = len(queries.captured_queries)
    for number in range(30):
        services.create_namespace(name=f"sales.n{number}", actor=admin)
    with CaptureQueriesContext(connection) as queries:
        _entries(admin, "?actor=root&object=sales")
    assert len(queries.captured_queries) == few


def test_retention_deletes_only_rows_older_than_audit_keep_days(changes, admin, settings):
    settings.AUDIT_KEEP_DAYS = 30
    now = datetime.now(UTC)
    old_event = CatalogEvent.objects.order_by("id").first()
    old_change = GrantChange.objects.order_by("id").first()
    CatalogEvent.objects.filter(pk=old_event.pk).update(occurred_at=now - timedelta(days=31))
    GrantChange.objects.filter(pk=old_change.pk).update(occurred_at=now - timedelta(days=31))
    kept_event = CatalogEvent.objects.exclude(pk=old_event.pk).first()
    CatalogEvent.objects.filter(pk=kept_event.pk).update(occurred_at=now - timedelta(days=29))
    events, changes_before = CatalogEvent.objects.count(), GrantChange.objects.count()
    assert prune_audit() == 2
    assert not CatalogEvent.objects.filter(pk=old_event.pk).exists()
    assert not GrantChange.objects.filter(pk=old_change.pk).exists()
    assert CatalogEvent.objects.count() == events - 1
    assert GrantChange.objects.count() == changes_before - 1
    assert prune_audit() == 0


def test_retention_deletes_in_batches_and_zero_keeps_everything(changes, settings):
    old = datetime.now(UTC) - timedelta(days=400)
    CatalogEvent.objects.update(occurred_at=old)
    total = CatalogEvent.objects.count()
    settings.AUDIT_KEEP_DAYS = 0
    assert audit.prune() == 0
    settings.AUDIT_KEEP_DAYS = 365
    with CaptureQueriesContext(connection) as queries:
        assert (
            audit.prune(batch=3) == total + GrantChange.objects.filter(occurred_at__lt=old).count()
        )
    deletes = [q for q in queries.captured_queries if q["sql"].startswith("DELETE")]
    assert len(deletes) >= total // 3
    assert CatalogEvent.objects.count() == 0


def test_celery_beat_prunes_the_audit_hourly(settings):
    assert settings.CELERY_BEAT_SCHEDULE["prune-audit"] == {
        "task": "catalog.prune_audit",
        "schedule": 3600.0,
    }
    assert settings.AUDIT_KEEP_DAYS == 365


@pytest.mark.parametrize(
    "parameter", ["actor", "object", "from", "to", "kind", "action", "cursor", "page_size"]
)
def test_any_hostile_filter_value_is_a_page_or_a_400_never_a_5xx(changes, admin, parameter):
    page = Client()
    page.force_login(admin)
    api = _api(admin)
    for value in HOSTILE_QUERY:
        query = urlencode({parameter: value})
        for response in (
            page.get(f"/audit/?{query}"),
            page.get(f"/audit/export.csv?{query}"),
            api.get(f"/api/audit/?{query}"),
            api.get(f"/api/audit/export?{query}"),
        ):
            assert response.status_code in (200, 400), (parameter, value, response.status_code)
            if response.status_code == 200 and response.streaming:
                b"".join(response.streaming_content)


def _plan(rows) -> str:
    sql, params = rows.query.sql_with_params()
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # The tables here are a few rows: without these PostgreSQL walks the whole
            # time index, which is cheaper at that size; at scale the name's range is.
            cursor.execute("SET enable_seqscan = off")
            cursor.execute("SET enable_indexscan = off")
            cursor.execute(f"EXPLAIN {sql}", params)
            plan = "\n".join(row[0] for row in cursor.fetchall())
            cursor.execute("RESET enable_seqscan")
            cursor.execute("RESET enable_indexscan")
            return plan
        cursor.execute(f"EXPLAIN QUERY PLAN {sql}", params)
        return "\n".join(str(row) for row in cursor.fetchall())


@pytest.mark.parametrize("wanted", ["sales", "sales.orders", "sales.ord*", "s" * 300])
def test_the_audits_name_filter_reads_the_name_indexes(changes, wanted):
    events = audit._by_name(CatalogEvent.objects.all(), "object_name", wanted)
    assert "catalog_event_name" in _plan(events.order_by("-occurred_at", "-id")[:51])
    grant_changes = audit._by_name(GrantChange.objects.all(), "securable_name", wanted)
    assert "catalog_grant_change_name" in _plan(grant_changes.order_by("-occurred_at")[:51])


def test_a_name_longer_than_the_index_key_is_found_exactly_and_under(changes, admin):
    long = "n" * 250
    services.create_namespace(name=long, actor=admin)
    services.create_namespace(name=long + "x", actor=admin)
    services.create_table(namespace=long, name="t", schema=SCHEMA, actor=admin)
    assert {entry["object"] for entry in _entries(admin, f"?object={long}")} == {
        long,
        f"{long}.t",
    }
    prefix = {entry["object"] for entry in _entries(admin, f"?object={long}*")}
    assert prefix == {long, long + "x", f"{long}.t"}


def test_the_audits_actor_filter_reads_the_actor_indexes(changes, admin):
    filters = audit.Filters(actor="root")
    events = audit._events(filters, [admin.pk]).order_by("-occurred_at", "-id")[:51]
    # The actor's index (PostgreSQL may take the foreign key's, on the same column).
    assert "catalog_event_actor" in _plan(events) or "actor_id =" in _plan(events)
    grant_changes = audit._grant_changes(filters).order_by("-occurred_at", "-id")[:51]
    assert "catalog_grant_change_actor" in _plan(grant_changes)
