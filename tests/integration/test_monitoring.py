"""One place to watch every table: /monitoring/ and /api/monitoring/ list every materialized
table across namespaces, failing ones first, then late ones, and the refresh and maintenance
history of all tables with filters; the home page links to it with the counts. No Spark:
materialized tables and runs are rows made as tests/integration/test_mt_history.py makes
them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from catalog import services
from catalog.models import Namespace
from maintenance.models import MaintenanceRun
from refresh.models import MaterializedTable, RefreshRun
from refresh.monitoring import filters
from refresh.monitoring import history as run_history
from refresh.monitoring import tables as table_status

pytestmark = pytest.mark.django_db

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}
TABLES_API = "/api/monitoring/tables/"
HISTORY_API = "/api/monitoring/history/"
PAGE = "/monitoring/"


def materialized(
    namespace: str,
    name: str,
    *,
    freshness: tuple[int, str] = (1, "HOUR"),
    mode: str = "FULL",
    state: str = "ACTIVATED",
    **fields,
) -> MaterializedTable:
    if not Namespace.objects.filter(name=namespace).exists():
        services.create_namespace(name=namespace)
    table = services.create_table(namespace=namespace, name=name, schema=SCHEMA).obj
    return MaterializedTable.objects.create(
        table=table,
        query="SELECT id FROM src",
        freshness_value=freshness[0],
        freshness_unit=freshness[1],
        refresh_mode=mode,
        state=state,
        **fields,
    )


def refreshed(
    mt: MaterializedTable, *, ago: timedelta, state: str = "SUCCEEDED", error: str = ""
) -> RefreshRun:
    """A finished refresh whose data is as of `ago` before now."""
    at = timezone.now() - ago
    return RefreshRun.objects.create(
        materialized_table=mt,
        table_name=str(mt.table),
        trigger=RefreshRun.Trigger.MANUAL,
        action=RefreshRun.Action.FULL,
        state=state,
        queued_at=at,
        started_at=at,
        finished_at=at + timedelta(seconds=2),
        data_timestamp=at if state in ("SUCCEEDED", "SKIPPED") else None,
        error=error,
    )


def maintained(
    mt: MaterializedTable,
    *,
    ago: timedelta,
    state: str = "SUCCEEDED",
    action: str = "EXPIRE_SNAPSHOTS",
) -> MaintenanceRun:
    at = timezone.now() - ago
    return MaintenanceRun.objects.create(
        table=mt.table,
        table_name=str(mt.table),
        action=action,
        trigger=MaintenanceRun.Trigger.SCHEDULED,
        state=state,
        queued_at=at,
        started_at=at,
        finished_at=at + timedelta(seconds=5),
    )


@pytest.fixture
def viewer_api(viewer) -> APIClient:
    client = APIClient()
    client.force_authenticate(viewer)
    return client


@pytest.fixture
def fleet() -> dict[str, MaterializedTable]:
    """Tables in two namespaces, of every status."""
    tables = {
        # ok: refreshed within its freshness, or no data yet, or suspended by hand.
        "fresh": materialized("sales", "fresh"),
        "new": materialized("sales", "new", state="INITIALIZING"),
        "paused": materialized("sales", "paused", state="SUSPENDED"),
        # ok: a continuous table whose stream is caught up, although its last batch is old.
        "streaming": materialized(
            "ops",
            "streaming",
            freshness=(30, "SECOND"),
            mode="CONTINUOUS",
            stream_status="RUNNING",
            stream_heartbeat_at=timezone.now() - timedelta(seconds=3),
        ),
        # late: data older than its freshness.
        "behind": materialized("sales", "behind", freshness=(5, "MINUTE")),
        "stale": materialized("ops", "stale", freshness=(1, "DAY")),
        # failing: failures in a row; the last run failed; suspended itself.
        "broken": materialized("sales", "broken", consecutive_failures=2),
        "flaky": materialized("ops", "flaky"),
        "halted": materialized(
            "ops",
            "halted",
            state="SUSPENDED",
            suspended_reason="Suspended after 5 consecutive failed refreshes",
            consecutive_failures=5,
        ),
    }
    refreshed(tables["fresh"], ago=timedelta(minutes=10))
    refreshed(tables["paused"], ago=timedelta(minutes=30))
    refreshed(tables["streaming"], ago=timedelta(hours=2))
    refreshed(tables["behind"], ago=timedelta(minutes=20))
    refreshed(tables["stale"], ago=timedelta(days=3))
    refreshed(tables["broken"], ago=timedelta(minutes=5))
    refreshed(tables["broken"], ago=timedelta(minutes=1), state="FAILED", error="boom")
    refreshed(tables["flaky"], ago=timedelta(minutes=3), state="FAILED", error="bad row")
    return tables


ORDER = [
    ("ops", "flaky"),
    ("ops", "halted"),
    ("sales", "broken"),
    ("ops", "stale"),
    ("sales", "behind"),
    ("ops", "streaming"),
    ("sales", "fresh"),
    ("sales", "new"),
    ("sales", "paused"),
]
STATUS = {
    "flaky": "failing",
    "halted": "failing",
    "broken": "failing",
    "stale": "late",
    "behind": "late",
    "streaming": "ok",
    "fresh": "ok",
    "new": "ok",
    "paused": "ok",
}


# -- the tables -------------------------------------------------------------------------------


def test_failing_tables_come_first_then_late_ones_then_the_rest_by_name(fleet):
    now = timezone.now()
    rows = [table_status.table_row(mt, now) for mt in table_status.tables(now=now)]
    assert [(row["namespace"], row["name"]) for row in rows] == ORDER
    assert {row["name"]: row["status"] for row in rows} == STATUS


def test_the_api_lists_every_table_across_namespaces_in_the_same_order(viewer_api, fleet):
    response = viewer_api.get(TABLES_API)
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == len(ORDER)
    assert [(row["namespace"], row["name"]) for row in body["results"]] == ORDER
    assert {row["name"]: row["status"] for row in body["results"]} == STATUS


def test_each_row_shows_state_freshness_lag_its_ratio_last_refresh_and_failures(viewer_api, fleet):
    rows = {row["name"]: row for row in viewer_api.get(TABLES_API).json()["results"]}

    behind = rows["behind"]
    assert behind["state"] == "ACTIVATED"
    assert behind["freshness"] == {"value": 5, "unit": "MINUTE", "text": "INTERVAL '5' MINUTE"}
    assert behind["freshness_seconds"] == 300
    assert 1199 <= behind["lag_seconds"] <= 1260
    assert 3.9 < behind["lag_ratio"] < 4.3
    assert behind["last_refresh"]["state"] == "SUCCEEDED"
    assert behind["last_refresh"]["url"] == reverse(
        "api:run-detail", kwargs={"run_id": fleet["behind"].runs.get().pk}
    )
    assert behind["url"] == reverse(
        "api:mt-detail", kwargs={"namespace": "sales", "name": "behind"}
    )

    broken = rows["broken"]
    assert broken["consecutive_failures"] == 2 and broken["last_refresh"]["state"] == "FAILED"
    assert broken["lag_seconds"] is not None, "lag runs from the last success"

    assert rows["new"]["lag_seconds"] is None and rows["new"]["last_refresh"] is None
    assert rows["halted"]["suspended_reason"].startswith("Suspended after 5")
    assert rows["streaming"]["lag_seconds"] < 30, "a running stream is caught up"


def test_the_api_filters_tables_by_status_and_namespace(viewer_api, fleet):
    late = viewer_api.get(TABLES_API, {"status": "late"}).json()["results"]
    assert [row["name"] for row in late] == ["stale", "behind"]
    failing_ops = viewer_api.get(TABLES_API, {"status": "failing", "namespace": "ops"}).json()
    assert [row["name"] for row in failing_ops["results"]] == ["flaky", "halted"]


def test_counts_are_the_number_of_late_and_failing_tables(fleet):
    assert table_status.counts() == {"late": 2, "failing": 3}


def test_the_home_page_links_to_monitoring_with_the_number_of_late_and_failing_tables(
    client, viewer, fleet
):
    client.force_login(viewer)
    html = client.get(reverse("catalog:namespace-list")).content.decode()
    link = html[html.index('id="monitoring-link"') :].split("</p>")[0]
    assert f'href="{reverse("refresh:monitoring")}">Monitoring</a>' in link
    assert "2 late" in link and "3 failing" in link


def test_the_home_page_says_zero_late_and_zero_failing_without_tables(client, viewer):
    client.force_login(viewer)
    html = client.get(reverse("catalog:namespace-list")).content.decode()
    assert "0 late" in html and "0 failing" in html


def test_a_viewer_sees_the_page_with_status_badges_and_links_to_each_table(client, viewer, fleet):
    client.force_login(viewer)
    response = client.get(PAGE)
    assert response.status_code == 200
    html = response.content.decode()
    table = html[html.index('id="monitored-tables"') : html.index('id="history"')]
    positions = [table.index(f'id="mt-{ns}.{name}"') for ns, name in ORDER]
    assert positions == sorted(positions), "failing, then late, then ok"
    for ns, name in ORDER:
        row = table[table.index(f'id="mt-{ns}.{name}"') :].split("</tr>")[0]
        assert f'data-status="{STATUS[name]}"' in row
        assert f'href="{reverse("refresh:mt-detail", args=[ns, name])}"' in row
    assert table.count('<span class="badge err">failing</span>') == 3
    assert table.count('<span class="badge late">late</span>') == 2
    assert 'id="monitoring-counts"' in html


def test_the_page_needs_a_sign_in_and_a_role(client, django_user_model):
    assert client.get(PAGE).status_code == 302
    client.force_login(django_user_model.objects.create_user("nobody", password="pw"))
    assert client.get(PAGE).status_code == 403


def test_the_tables_list_is_paginated_fifty_a_page(viewer_api, client, viewer):
    for i in range(53):
        materialized("bulk", f"t{i:02d}")
    body = viewer_api.get(TABLES_API).json()
    assert body["count"] == 53 and len(body["results"]) == 50 and body["next"]
    assert len(viewer_api.get(TABLES_API, {"page": 2}).json()["results"]) == 3

    client.force_login(viewer)
    html = client.get(PAGE).content.decode()
    assert html.count('class="monitored ') == 50 and 'id="page-pages"' in html


def _queries(callable_) -> int:
    callable_()  # what the first request of a user reads once (its groups) is not counted
    with CaptureQueriesContext(connection) as queries:
        callable_()
    return len(queries.captured_queries)


def test_the_tables_list_takes_as_many_queries_for_fifty_tables_as_for_five(
    viewer_api, client, viewer
):
    client.force_login(viewer)

    def add(count: int, start: int) -> None:
        for i in range(start, start + count):
            mt = materialized("many", f"t{i:02d}", consecutive_failures=i % 3 == 0)
            refreshed(mt, ago=timedelta(minutes=i), state="FAILED" if i % 5 == 0 else "SUCCEEDED")
            maintained(mt, ago=timedelta(minutes=i))

    add(5, 0)
    api_few = _queries(lambda: viewer_api.get(TABLES_API))
    page_few = _queries(lambda: client.get(PAGE))
    home_few = _queries(lambda: client.get(reverse("catalog:namespace-list")))

    add(45, 5)
    api_many = _queries(lambda: viewer_api.get(TABLES_API))
    page_many = _queries(lambda: client.get(PAGE))
    home_many = _queries(lambda: client.get(reverse("catalog:namespace-list")))

    assert api_many == api_few
    assert page_many == page_few
    assert home_many == home_few
    assert page_many <= 10


# -- the history ------------------------------------------------------------------------------


@pytest.fixture
def history(fleet) -> dict[str, object]:
    """Maintenance runs beside the fleet's refreshes, one of a dropped table."""
    runs = {
        "compacted": maintained(
            fleet["fresh"], ago=timedelta(minutes=2), action="REWRITE_DATA_FILES"
        ),
        "expiry_failed": maintained(fleet["stale"], ago=timedelta(hours=1), state="FAILED"),
        "old": maintained(fleet["behind"], ago=timedelta(days=10)),
    }
    gone = materialized("ops", "gone")
    runs["gone_refresh"] = refreshed(gone, ago=timedelta(minutes=4))
    gone.table.delete()
    return runs


def _history(client: APIClient, **params) -> list[tuple[str, str, str]]:
    response = client.get(HISTORY_API, params)
    assert response.status_code == 200, response.content
    return [(row["kind"], row["table_name"], row["state"]) for row in response.json()["results"]]


def test_the_history_mixes_refresh_and_maintenance_runs_newest_first(viewer_api, history):
    response = viewer_api.get(HISTORY_API)
    rows = response.json()["results"]
    assert response.json()["count"] == RefreshRun.objects.count() + MaintenanceRun.objects.count()
    assert [row["queued_at"] for row in rows] == sorted(
        (row["queued_at"] for row in rows), reverse=True
    )
    assert [(row["kind"], row["table_name"]) for row in rows[:4]] == [
        ("refresh", "sales.broken"),
        ("maintenance", "sales.fresh"),
        ("refresh", "ops.flaky"),
        ("refresh", "ops.gone"),
    ]
    compacted = rows[1]
    assert compacted["action"] == "REWRITE_DATA_FILES" and compacted["duration_seconds"] == 5
    assert compacted["url"] == reverse(
        "api:maintenance-run", kwargs={"run_id": history["compacted"].pk}
    )
    broken = RefreshRun.objects.get(table_name="sales.broken", state="FAILED")
    assert rows[0]["id"] == broken.pk and rows[0]["error"] == "boom"
    assert rows[0]["url"] == reverse("api:run-detail", kwargs={"run_id": broken.pk})
    gone = rows[3]
    assert gone["namespace"] is None and gone["name"] is None, "a dropped table's runs stay"


def test_the_history_filters_by_kind(viewer_api, history):
    maintenance = _history(viewer_api, kind="maintenance")
    assert {kind for kind, _, _ in maintenance} == {"maintenance"} and len(maintenance) == 3
    refreshes = _history(viewer_api, kind="refresh")
    assert {kind for kind, _, _ in refreshes} == {"refresh"}
    assert len(refreshes) == RefreshRun.objects.count()


def test_the_history_filters_by_state_of_either_kind(viewer_api, history):
    assert sorted(_history(viewer_api, state="FAILED")) == [
        ("maintenance", "ops.stale", "FAILED"),
        ("refresh", "ops.flaky", "FAILED"),
        ("refresh", "sales.broken", "FAILED"),
    ]
    assert _history(viewer_api, state="failed", kind="maintenance") == [
        ("maintenance", "ops.stale", "FAILED")
    ]


def test_the_history_filters_by_namespace_including_dropped_tables(viewer_api, history):
    rows = _history(viewer_api, namespace="ops")
    assert {name for _, name, _ in rows} == {
        "ops.flaky",
        "ops.stale",
        "ops.streaming",
        "ops.gone",
    }
    assert _history(viewer_api, namespace="op") == []


def test_the_history_filters_by_a_part_of_the_table_name(viewer_api, history):
    rows = _history(viewer_api, table="STAL")
    assert sorted(rows) == [
        ("maintenance", "ops.stale", "FAILED"),
        ("refresh", "ops.stale", "SUCCEEDED"),
    ]


def test_the_history_filters_by_a_time_window_or_a_moment(viewer_api, history):
    recent = _history(viewer_api, since="10m")
    assert ("maintenance", "sales.fresh", "SUCCEEDED") in recent
    assert ("refresh", "sales.behind", "SUCCEEDED") not in recent  # 20 minutes ago
    moment = (timezone.now() - timedelta(days=5)).isoformat()
    assert ("maintenance", "sales.behind", "SUCCEEDED") not in _history(viewer_api, since=moment)
    assert ("maintenance", "sales.behind", "SUCCEEDED") in _history(viewer_api, since="30d")
    day = (timezone.now() - timedelta(days=20)).date().isoformat()
    assert len(_history(viewer_api, since=day)) == len(_history(viewer_api))


def test_the_history_is_paginated(viewer_api, history):
    body = viewer_api.get(HISTORY_API, {"page_size": 3}).json()
    assert len(body["results"]) == 3 and body["next"]
    second = viewer_api.get(HISTORY_API, {"page_size": 3, "page": 2}).json()["results"]
    firsts = {(row["kind"], row["id"]) for row in body["results"]}
    assert not firsts & {(row["kind"], row["id"]) for row in second}


def test_the_page_shows_the_history_with_its_filters_as_a_get_form(client, viewer, history):
    client.force_login(viewer)
    html = client.get(PAGE, {"kind": "maintenance", "state": "FAILED"}).content.decode()
    assert '<form method="get"' in html and 'id="history-filters"' in html
    section = html[html.index('id="history-runs"') :]
    assert f'id="maintenance-run-{history["expiry_failed"].pk}"' in section
    assert section.count('class="run"') == 1
    assert '<option value="maintenance" selected>' in html
    assert f'href="{reverse("catalog:table-detail", args=["ops", "stale"])}"' in section

    everything = client.get(PAGE).content.decode()
    runs = everything[everything.index('id="history-runs"') :]
    assert "ops.gone</td>" not in runs and "(dropped)" in runs
    assert f'href="{reverse("refresh:mt-detail", args=["sales", "broken"])}"' in runs


def test_the_page_counts_the_history_up_to_a_bound_and_pages_on_beyond_it(
    client, viewer, history, monkeypatch
):
    """Refresh runs are kept for good: past HISTORY_COUNTED rows (or the page asked for)
    the page says "more than" instead of counting every run, and still pages on."""
    monkeypatch.setattr(filters, "PAGE_SIZE", 2)
    monkeypatch.setattr(run_history, "HISTORY_COUNTED", 3)
    total = RefreshRun.objects.count() + MaintenanceRun.objects.count()
    assert total > 6
    client.force_login(viewer)
    first = client.get(PAGE).content.decode()
    assert 'history <span class="muted small">(more than 3)</span>' in first
    assert "page 1 of more than 2" in first and "?history_page=2" in first
    # A page past the bound counts up to it, and says whether more exist beyond.
    third = client.get(PAGE, {"history_page": 3}).content.decode()
    assert "(more than 6)" in third and "?history_page=4" in third
    last = (total + 1) // 2
    end = client.get(PAGE, {"history_page": last}).content.decode()
    assert f"({total})" in end and 'rel="next"' not in end.split('id="history-runs"')[1]
    assert end.split('id="history-runs"')[1].count('class="run"') == total - (last - 1) * 2


# -- bad filters ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "params", "field"),
    [
        (TABLES_API, {"status": "sideways"}, "status"),
        (HISTORY_API, {"state": "EXPLODED"}, "state"),
        (HISTORY_API, {"kind": "vacuum"}, "kind"),
        (HISTORY_API, {"since": "last tuesday"}, "since"),
        (HISTORY_API, {"since": "2024-13-45"}, "since"),
        (HISTORY_API, {"since": "99999999999d"}, "since"),
        (HISTORY_API, {"since": "0001-01-01T00:00:00+05:00"}, "since"),
    ],
)
def test_a_filter_value_it_cannot_read_is_a_400_naming_the_field(viewer_api, url, params, field):
    response = viewer_api.get(url, params)
    assert response.status_code == 400
    assert response.json()["field"] == field
    assert response.json()["error"]


def test_the_page_shows_a_filter_it_cannot_read_beside_the_form(client, viewer, fleet):
    client.force_login(viewer)
    response = client.get(PAGE, {"since": "soon"})
    assert response.status_code == 400
    html = response.content.decode()
    assert 'id="history-errors"' in html and "Cannot read since=" in html
    assert 'id="monitored-tables"' in html, "the tables are still shown"
