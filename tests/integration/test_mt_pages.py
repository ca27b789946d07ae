"""Materialized-table pages through Django's test client: the list, the table's page with
its buttons, the drop confirmation and the SQL console. No Spark and no Celery worker (the
fixtures of test_mt_api fake Spark's analyzer and record what is sent to workers)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from refresh import runs
from refresh.models import MaterializedTable, RefreshRun
from tests.integration.test_mt_api import (  # noqa: F401 - fixtures
    CREATE_DAILY,
    dispatched,
    nothing_was_created,
    sales,
    spark,
)

pytestmark = pytest.mark.django_db

PAGE = "/namespaces/sales/materialized-tables/daily/"


@pytest.fixture
def daily(editor, sales) -> MaterializedTable:  # noqa: F811
    from refresh import console

    [result] = console.execute(CREATE_DAILY, namespace="sales", actor=editor)
    assert result.ok, result.message
    return MaterializedTable.objects.get()


def finished(mt: MaterializedTable, *, state: str, seconds: float, ago: timedelta) -> RefreshRun:
    run = runs.claim(runs.enqueue(mt, trigger="MANUAL").pk, worker="w:1")
    end = timezone.now() - ago
    RefreshRun.objects.filter(pk=run.pk).update(started_at=end - timedelta(seconds=seconds))
    runs.finish(run, state=state, rows_written=3, data_timestamp=end - timedelta(seconds=seconds))
    RefreshRun.objects.filter(pk=run.pk).update(finished_at=end)
    run.refresh_from_db()
    return run


def post_console(client, sql: str, namespace: str = "sales"):
    return client.post(reverse("refresh:console"), {"sql": sql, "namespace": namespace})


# -- reading ----------------------------------------------------------------------------------


def test_a_viewer_sees_the_list_and_the_page_without_buttons(client, viewer, daily):
    client.force_login(viewer)

    listed = client.get("/namespaces/sales/materialized-tables/")
    assert listed.status_code == 200
    assert b'id="mt-daily"' in listed.content and b"ACTIVATED" in listed.content

    page = client.get(PAGE)
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="mt-state"' in html and 'id="query-spark"' in html
    for button in ('id="mt-suspend"', 'id="mt-refresh"', 'id="mt-drop"', "mt-refresh-partition"):
        assert button not in html
    assert 'id="overwrite-note"' in html


def test_an_editor_sees_the_definition_in_spark_and_trino_the_schedule_and_the_buttons(
    client, editor, daily
):
    client.force_login(editor)

    html = client.get(PAGE).content.decode()

    spark_sql = re.search(r'id="query-spark">(.*?)</pre>', html, re.S).group(1)
    trino_sql = re.search(r'id="query-trino">(.*?)</pre>', html, re.S).group(1)
    assert "sum(amount) AS total FROM orders" in spark_sql, "as written"
    assert "SUM(amount) AS total" in trino_sql and "\n" in trino_sql, "transpiled, pretty"
    assert "0 0 * * *" in html and "0 0 0 * * ? *" in html
    for button in ('id="mt-suspend"', 'id="mt-refresh"', 'id="mt-refresh-force"', 'id="mt-drop"'):
        assert button in html
    assert 'id="mt-refresh-partition"' in html and 'data-column="ds"' in html
    assert 'id="mt-resume"' not in html, "an active table offers Suspend only"
    run = daily.runs.get()
    assert f'id="run-{run.pk}"' in html and 'class="run-state' in html
    assert "js/mt_live.js" in html, "a queued run is followed without a reload"


def test_the_page_charts_durations_and_lag_from_finished_runs_and_marks_a_late_table(
    client, viewer, daily
):
    RefreshRun.objects.all().delete()
    finished(daily, state="SUCCEEDED", seconds=12, ago=timedelta(days=3))
    finished(daily, state="FAILED", seconds=4, ago=timedelta(days=2))
    client.force_login(viewer)

    html = client.get(PAGE).content.decode()

    charts = re.search(r'<section class="card" id="charts" data-charts="([^"]+)">', html).group(1)
    assert charts == f"{PAGE}charts"
    data = client.get(charts).json()
    assert [p["seconds"] for p in data["durations"]] == [12.0, 4.0]
    assert len(data["lag"]) == 1 and data["freshness_seconds"] == 86400
    assert 'id="chart-durations"' in html and 'id="chart-lag"' in html
    assert "vendor/uplot/uPlot.iife.min.js" in html and "js/mt_charts.js" in html
    assert "js/mt_live.js" not in html, "nothing to follow"

    listed = client.get("/namespaces/sales/materialized-tables/").content.decode()
    assert 'class="late"' in listed and "badge late" in listed
    assert "3 d 0 h" in listed, "lag is shown for reading at a glance"


def test_the_table_and_namespace_pages_link_to_the_materialized_table(client, viewer, daily):
    client.force_login(viewer)

    table_page = client.get("/namespaces/sales/tables/daily/").content.decode()
    assert 'id="materialized-table-link"' in table_page and PAGE in table_page

    namespace_page = client.get("/namespaces/sales/").content.decode()
    assert "/namespaces/sales/materialized-tables/" in namespace_page
    plain_table = client.get("/namespaces/sales/tables/orders/").content.decode()
    assert 'id="materialized-table-link"' not in plain_table


def test_the_header_links_the_console_and_the_api_docs_and_admin_only_for_staff(
    client, viewer, django_user_model
):
    client.force_login(viewer)
    html = client.get("/").content.decode()
    assert 'id="nav-console"' in html and 'href="/api/docs/"' in html
    assert 'id="nav-admin"' not in html

    staff = django_user_model.objects.create_user("stan", password="pw", is_staff=True)
    client.force_login(staff)
    assert 'id="nav-admin"' in client.get("/").content.decode()


def test_the_headers_badge_says_a_superuser_is_one_and_not_an_editor(
    client, viewer, editor, admin_user
):
    import re

    def badge(user) -> tuple[str, str] | None:
        client.force_login(user)
        html = client.get("/").content.decode()
        found = re.search(r'id="role-badge" title="([^"]*)">([^<]*)<', html)
        return (found[2], found[1]) if found else None

    label, title = badge(admin_user)
    assert label == "superuser" and "every privilege" in title and "whatever the grants" in title
    assert badge(editor)[0] == "editor"
    assert badge(viewer) is None


def test_a_missing_materialized_table_is_a_404(client, viewer, sales):  # noqa: F811
    client.force_login(viewer)
    assert client.get("/namespaces/sales/materialized-tables/nope/").status_code == 404
    assert client.get("/namespaces/nope/materialized-tables/").status_code == 404


# -- the buttons ------------------------------------------------------------------------------


def test_an_editor_suspends_resumes_and_refreshes_from_the_page(
    client,
    editor,
    daily,
    dispatched,  # noqa: F811
):
    client.force_login(editor)

    response = client.post(f"{PAGE}suspend", follow=True)
    assert response.redirect_chain[-1][0] == PAGE
    assert MaterializedTable.objects.get().state == "SUSPENDED"
    assert 'id="mt-resume"' in response.content.decode()
    assert not PeriodicTask.objects.get(pk=daily.periodic_task_id).enabled

    again = client.post(f"{PAGE}suspend", follow=True)
    assert "already suspended" in again.content.decode()

    client.post(f"{PAGE}resume")
    assert MaterializedTable.objects.get().state == "ACTIVATED"

    client.post(f"{PAGE}refresh", {"force": "on"})
    run = RefreshRun.objects.filter(trigger="MANUAL").get()
    assert run.force and run.partition == {} and run.requested_by == editor

    client.post(f"{PAGE}refresh", {"partition_column": ["ds"], "partition_value": ["2024-01-01"]})
    partition_run = RefreshRun.objects.filter(trigger="MANUAL").order_by("-id").first()
    assert partition_run.partition == {"ds": "2024-01-01"} and not partition_run.force


def test_a_partition_form_with_an_unknown_column_shows_the_error_and_queues_nothing(
    client, editor, daily
):
    client.force_login(editor)
    before = RefreshRun.objects.count()

    response = client.post(
        f"{PAGE}refresh",
        {"partition_column": ["region"], "partition_value": ["eu"]},
        follow=True,
    )

    assert "region is not a partition column" in response.content.decode()
    assert RefreshRun.objects.count() == before


def test_a_viewer_cannot_press_the_buttons(client, viewer, daily):
    client.force_login(viewer)
    for action in ("suspend", "resume", "refresh", "drop"):
        assert client.post(f"{PAGE}{action}").status_code == 403
    assert client.get(f"{PAGE}drop").status_code == 403
    assert MaterializedTable.objects.get().state == "ACTIVATED"


def test_dropping_asks_for_confirmation_then_drops_the_table_and_its_schedule(
    client, editor, daily
):
    client.force_login(editor)

    confirm = client.get(f"{PAGE}drop")
    assert confirm.status_code == 200 and b'id="confirm-drop"' in confirm.content
    assert MaterializedTable.objects.exists()

    response = client.post(f"{PAGE}drop")
    assert response.status_code == 302
    assert response["Location"] == "/namespaces/sales/materialized-tables/"
    assert nothing_was_created()


# -- the console -------------------------------------------------------------------------------


def test_the_console_page_runs_statements_and_keeps_the_text(client, editor, sales):  # noqa: F811
    client.force_login(editor)
    page = client.get(reverse("refresh:console") + "?namespace=sales").content.decode()
    assert 'id="console-sql"' in page and 'id="console-run"' in page
    assert '<option value="sales" selected>' in page

    script = f"{CREATE_DAILY};\nSHOW MATERIALIZED TABLES"
    response = post_console(client, script)

    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="result-1"' in html and 'id="result-2"' in html
    assert f'href="{PAGE}"' in html, "the created table is linked"
    run = RefreshRun.objects.get()
    assert f'href="{PAGE}#run-{run.pk}"' in html, "and its first job"
    assert "<td>sales.daily</td>" in html, "SHOW's rows are a table"
    assert "FRESHNESS = INTERVAL &#x27;1&#x27; DAY" in html, "the textarea keeps the script"


def test_the_console_page_shows_an_error_with_its_line_and_column(client, editor, sales):  # noqa: F811
    client.force_login(editor)

    response = post_console(client, "SHOW MATERIALIZED TABLES;\nALTER MATERIALIZED TABLE x FLY")

    assert response.status_code == 400
    html = response.content.decode()
    assert 'class="statement-result error"' in html
    assert re.search(r"At line 2, column \d+ of the script", html)
    assert nothing_was_created()


def test_a_viewer_runs_show_in_the_console_but_not_create(client, viewer, sales):  # noqa: F811
    client.force_login(viewer)

    shown = post_console(client, "SHOW MATERIALIZED TABLES")
    assert shown.status_code == 200 and "0 materialized tables" in shown.content.decode()

    refused = post_console(client, CREATE_DAILY)
    assert refused.status_code == 400
    assert "vic lacks the create privilege on namespace sales" in refused.content.decode()
    assert nothing_was_created()


def test_an_empty_console_script_is_a_form_error(client, editor, sales):  # noqa: F811
    client.force_login(editor)
    response = post_console(client, "")
    assert response.status_code == 400
    assert b"errorlist" in response.content


def test_the_page_asks_for_a_full_refresh_and_the_history_says_why_each_run_did_what_it_did(
    client,
    editor,
    daily,
    dispatched,  # noqa: F811
):
    client.force_login(editor)
    html = client.get(PAGE).content.decode()
    assert 'id="mt-refresh-full"' in html and 'id="mt-refresh-partition-full"' in html

    client.post(f"{PAGE}refresh", {"full": "on"})
    asked = RefreshRun.objects.filter(trigger="MANUAL").get()
    assert asked.full and not asked.force

    run = finished(daily, state="SUCCEEDED", seconds=2, ago=timedelta(minutes=1))
    RefreshRun.objects.filter(pk=run.pk).update(
        action="INCREMENTAL",
        reason="incremental: 3 source snapshots appended 12,000 rows (sales.orders +12,000 in 3)",
    )
    row = client.get(PAGE).content.decode().split(f'id="run-{run.pk}"')[1].split("</tr>")[0]
    assert "INCREMENTAL" in row
    assert "incremental: 3 source snapshots appended 12,000 rows" in row
