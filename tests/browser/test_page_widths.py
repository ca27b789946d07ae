# ruff: noqa: F811 - pytest fixtures imported from other test modules are parameters here
"""Every kind of page at a phone's width (390 px) and a wide screen's (1,400 px): the
document never scrolls sideways, nothing sticks out of its card (wide tables scroll inside
it), the navigation's links can be reached on the phone, and a chart with one point shows
its value instead of a time axis stretched over years.

No Spark and no worker: the materialized tables are made through the console with Spark's
analyzer faked (tests/integration/test_mt_api.py), their runs and maintenance runs through
the services."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from playwright.sync_api import expect

from catalog import services
from catalog.models import SparkJob
from maintenance import services as maintenance
from maintenance.core.policy import Action
from refresh import console
from refresh.models import MaterializedTable, RefreshRun
from tests.integration.test_maintenance import add_snapshots
from tests.integration.test_mt_api import CREATE_DAILY, dispatched, spark  # noqa: F401
from tests.integration.test_mt_pages import finished

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = 390
WIDE = 1400

# Long names and many columns: what makes tables wide in real catalogs.
ORDERS_SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "ds", "type": "string", "required": False},
        {"id": 2, "name": "amount", "type": "double", "required": False},
        *(
            {"id": i, "name": f"customer_attribute_with_a_long_name_{i}", "type": "string",
             "required": False}
            for i in range(3, 15)
        ),
    ],
}  # fmt: skip
LONG_ERROR = (
    "org.apache.spark.sql.AnalysisException: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, "
    "variable, or function parameter with name `amount_in_a_currency_nobody_has` cannot be "
    "resolved. Did you mean one of the following? [`amount`, `ds`]; line 1 pos 7;\n"
    + "\tat org.apache.spark.sql.catalyst.analysis.package$AnalysisErrorAt.failAnalysis"
    "(package.scala:52)\n" * 8
)
# An upload's review page shows every column and the first rows.
WIDE_CSV = (
    ",".join(f"customer_attribute_with_a_long_name_{i}" for i in range(12))
    + "\n"
    + "\n".join(",".join(f"a rather long value {row}.{i}" for i in range(12)) for row in range(5))
    + "\n"
).encode()
CREATE_FRESH = (
    "CREATE MATERIALIZED TABLE fresh FRESHNESS = INTERVAL '1' HOUR REFRESH_MODE = FULL "
    "AS SELECT ds, sum(amount) AS total FROM orders GROUP BY ds"
)


def add_spark_snapshots(table: Any, *, count: int) -> None:
    """`count` appends as Spark commits them: snapshot ids of 19 digits, and every figure
    and entry Spark's Iceberg writes in a summary, at a large table's sizes."""
    now = int(timezone.now().timestamp() * 1000)
    parent = None
    for i in range(count):
        snapshot_id = 8_765_432_109_876_543_200 + i
        summary = {
            "operation": "append",
            "spark.app.id": "local-1765100000000",
            "added-data-files": "48",
            "added-records": "123456789",
            "added-files-size": "9876543210",
            "changed-partition-count": "31",
            "total-records": str(123456789 * (i + 1)),
            "total-files-size": str(9876543210 * (i + 1)),
            "total-data-files": str(48 * (i + 1)),
            "total-delete-files": "0",
            "total-position-deletes": "0",
            "total-equality-deletes": "0",
            "engine-version": "3.5.8",
            "app-id": "local-1765100000000",
            "engine-name": "spark",
            "iceberg-version": "Apache Iceberg 1.10.2 (commit 8e4a4a0d5c3f1b6c0d2e9f7a6b5c4"
            "d3e2f1a0b9c)",
        }
        snapshot = {
            "snapshot-id": snapshot_id,
            **({"parent-snapshot-id": parent} if parent else {}),
            "sequence-number": i + 1,
            "timestamp-ms": now - (count - i) * 3_600_000,
            "manifest-list": f"{table.location}/metadata/snap-{snapshot_id}-1-c0ffee.avro",
            "summary": summary,
            "schema-id": 0,
        }
        services.commit_table(
            namespace=table.namespace.name,
            name=table.name,
            requirements=[],
            updates=[
                {"action": "add-snapshot", "snapshot": snapshot},
                {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
                 "snapshot-id": snapshot_id},
            ],
        )  # fmt: skip
        parent = snapshot_id


def make_site(editor: Any) -> dict[str, str]:
    """A catalog with one of everything; the pages to visit, by kind."""
    services.create_namespace(name="sales", actor=editor)
    orders = services.create_table(
        namespace="sales", name="orders", schema=ORDERS_SCHEMA, actor=editor
    ).obj
    add_spark_snapshots(orders, count=6)
    customers = services.create_table(
        namespace="sales", name="customers", schema=ORDERS_SCHEMA, actor=editor
    ).obj
    add_snapshots(customers, count=1, age_minutes=5, files=4)
    services.create_view(
        namespace="sales",
        name="orders_by_customer_attribute_with_a_long_view_name",
        sql="SELECT ds, customer_attribute_with_a_long_name_3, sum(amount) AS total_amount "
        "FROM orders GROUP BY ds, customer_attribute_with_a_long_name_3",
        actor=editor,
    )
    for statement in (CREATE_DAILY, CREATE_FRESH):
        [result] = console.execute(statement, namespace="sales", actor=editor)
        assert result.ok, result.message

    daily = MaterializedTable.objects.get(table__name="daily")
    daily.runs.all().delete()
    for day in range(6, 0, -1):
        run = finished(daily, state="SUCCEEDED", seconds=30 + day, ago=timedelta(days=day))
        # Every column filled as a scheduled incremental run fills it, at its widest.
        RefreshRun.objects.filter(pk=run.pk).update(
            trigger="SCHEDULED", action="INCREMENTAL", schedule_time=run.finished_at,
            partition={"ds": "2026-11-27"}, rows_written=123_456_789,
            bytes_written=987_654_321, snapshot_id=8765432109876543200 + day,
            reason="sources appended rows since the last refresh: sales.orders",
        )  # fmt: skip
    failed = finished(daily, state="FAILED", seconds=4, ago=timedelta(hours=3))
    failed.error = LONG_ERROR
    failed.save(update_fields=["error"])
    table = daily.table
    maintenance.record_sample(table)
    for action in (Action.EXPIRE_SNAPSHOTS, Action.REWRITE_DATA_FILES):
        [run] = maintenance.start(table=table, actions=[action], actor=editor)
        run = maintenance.claim(run.pk, worker="w1")
        maintenance.record_sample(table, run=run)
        maintenance.finish(
            run, state="SUCCEEDED", files_before=120, files_after=4, bytes_before=10**9,
            bytes_after=10**9, snapshots_expired=17, files_deleted=116, orphans_removed=3,
        )  # fmt: skip
    [broken] = maintenance.start(table=table, actions=[Action.REMOVE_ORPHAN_FILES], actor=editor)
    maintenance.finish(maintenance.claim(broken.pk, worker="w1"), state="FAILED", error=LONG_ERROR)
    maintenance.record_sample(table)

    fresh = MaterializedTable.objects.get(table__name="fresh")
    fresh.runs.all().delete()
    finished(fresh, state="SUCCEEDED", seconds=3.5, ago=timedelta(minutes=5))
    maintenance.record_sample(fresh.table)

    job = SparkJob.objects.create(
        kind="statements",
        arguments={"sql": CREATE_DAILY, "namespace": "sales", "start": 0},
        summary="A console script: CREATE MATERIALIZED TABLE daily_by_customer_attribute ...",
        requested_by=editor,
        state=SparkJob.State.FAILED,
        status=400,
        error={"message": LONG_ERROR, "line": 1, "column": 8},
    )
    return {
        "home": "/",
        "search": "/search/?q=orders",
        "namespace": "/namespaces/sales/",
        "view": "/namespaces/sales/views/orders_by_customer_attribute_with_a_long_view_name/",
        "table": "/namespaces/sales/tables/orders/",
        "materialized-tables": "/namespaces/sales/materialized-tables/",
        "materialized-table": "/namespaces/sales/materialized-tables/daily/",
        "new-materialized-table": "/namespaces/sales/materialized-tables/fresh/",
        "monitoring": "/monitoring/",
        "lineage": "/lineage/sales/daily/",
        "console": "/console/",
        "credentials": "/credentials/",
        "job": f"/jobs/{job.pk}/",
        "upload": "/namespaces/sales/upload",
    }


#: Signed-out pages.
PUBLIC = {"login": "/login/", "admin-login": "/admin/login/"}

# What the browser measures on a page: how far the document scrolls sideways, and every
# element that sticks out of its card (left or right) without a scrolling box around it
# inside the card. Elements inside a box that clips or scrolls are that box's business.
MEASURE = """(wide) => {
  const root = document.documentElement;
  const out = [];
  const stuck = [];
  const name = (el) => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "")
    + (el.classList.length ? "." + [...el.classList].join(".") : "");
  for (const card of document.querySelectorAll(".card")) {
    const box = card.getBoundingClientRect();
    for (const el of card.querySelectorAll("*")) {
      let clipped = false;
      for (let up = el.parentElement; up && up !== card; up = up.parentElement) {
        if (getComputedStyle(up).overflowX !== "visible") { clipped = true; break; }
      }
      if (clipped) { continue; }
      const r = el.getBoundingClientRect();
      if (!r.width && !r.height) { continue; }
      if (r.right > box.right + 1 || r.left < box.left - 1) {
        if (stuck.some((outer) => outer.contains(el))) { continue; }  // its box is named
        stuck.push(el);
        const span = (b) => Math.round(b.left) + ".." + Math.round(b.right);
        out.push(name(el) + " in " + name(card) + ": " + span(r) + " outside " + span(box));
      }
    }
  }
  // On a wide screen a table fits its card: no box around it scrolls. Except a table of a
  // table's rows (a preview, an upload's first rows), which has as many columns as the data.
  if (wide) {
    for (const table of document.querySelectorAll(".card table:not(.rows):not(#upload-rows)")) {
      for (let up = table; up && !up.classList.contains("card"); up = up.parentElement) {
        if (getComputedStyle(up).overflowX !== "visible" && up.scrollWidth > up.clientWidth + 1) {
          out.push(name(table) + " scrolls in " + name(up) + ": " + up.scrollWidth + " px wide in "
            + up.clientWidth);
          break;
        }
      }
    }
  }
  return {scrollWidth: root.scrollWidth, clientWidth: root.clientWidth, outside: out.slice(0, 8)};
}"""


def problems_of(page: Any, kind: str, width: int) -> list[str]:
    measured = page.evaluate(MEASURE, width >= WIDE)
    found = []
    if measured["scrollWidth"] > measured["clientWidth"]:
        found.append(
            f"{kind} at {width} px scrolls sideways: {measured['scrollWidth']} px wide "
            f"in {measured['clientWidth']}"
        )
    found.extend(f"{kind} at {width} px: {problem}" for problem in measured["outside"])
    return found


def signed_in(chromium: Any, live_server: Any, user: Any, width: int) -> Any:
    """A browser context of this width with the user's session (made by Django's client:
    the login form itself is one of the public pages)."""
    client = Client()
    client.force_login(user)
    context = chromium.new_context(viewport={"width": width, "height": 900})
    context.add_cookies(
        [{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}]
    )
    return context


@pytest.fixture
def shots(results_dir: Path) -> Path:
    """Where the screenshots of every page at both widths go, to be looked at."""
    folder = results_dir / "widths"
    folder.mkdir(exist_ok=True)
    return folder


@pytest.fixture
def staff_editor(browser_editor):
    # Staff too, so that the header has every link it can have.
    browser_editor.is_staff = True
    browser_editor.save(update_fields=["is_staff"])
    return browser_editor


@pytest.mark.parametrize("width", [PHONE, WIDE])
def test_no_page_scrolls_sideways_or_sticks_out_of_its_cards(
    chromium, live_server, staff_editor, spark, dispatched, shots, settings, tmp_path, width
):
    settings.UPLOAD_DIR = str(tmp_path / "uploads")
    pages = make_site(staff_editor)
    found: list[str] = []
    context = signed_in(chromium, live_server, staff_editor, width)
    anonymous = chromium.new_context(viewport={"width": width, "height": 900})

    def check(page: Any, kind: str) -> None:
        page.wait_for_load_state("load")
        # Sections a page fetches once loaded (static/js/later.js: the table's snapshots,
        # permissions) are measured too, once they have taken their placeholders' place.
        page.wait_for_function("!document.querySelector('[data-later]')")
        page.screenshot(path=str(shots / f"{kind}-{width}.png"), full_page=True)
        found.extend(problems_of(page, kind, width))

    try:
        for browser_context, kinds in ((context, pages), (anonymous, PUBLIC)):
            page = browser_context.new_page()
            for kind, path in kinds.items():
                response = page.goto(f"{live_server.url}{path}")
                assert response is not None and response.status == 200, (kind, path)
                check(page, kind)
        # The upload's second step: its columns and first rows, before anything is written.
        page = context.new_page()
        page.goto(f"{live_server.url}{pages['upload']}")
        page.get_by_label("File").set_input_files(
            files=[{"name": "wide.csv", "mimeType": "text/csv", "buffer": WIDE_CSV}]
        )
        page.get_by_label("Table name").fill("wide_upload")
        page.locator("#upload-submit").click()
        page.wait_for_url("**/upload/*/")
        check(page, "upload-review")
    finally:
        context.close()
        anonymous.close()
    assert not found, "\n".join(found)


def test_on_a_phone_the_navigation_collapses_and_every_link_can_be_reached(
    chromium, live_server, staff_editor, shots
):
    context = signed_in(chromium, live_server, staff_editor, PHONE)
    page = context.new_page()
    try:
        page.goto(f"{live_server.url}/")
        links = page.locator("#site-nav a")
        expect(links.first).to_be_hidden()
        header = page.locator("header.site-header").bounding_box()
        assert header is not None and header["height"] < 80, "one row when closed"

        page.get_by_text("Menu", exact=True).click()
        page.screenshot(path=str(shots / f"menu-{PHONE}.png"))

        assert links.count() == 6
        for index in range(links.count()):
            link = links.nth(index)
            expect(link).to_be_visible()
            box = link.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE
            link.click(trial=True)  # nothing covers it
        expect(page.get_by_role("button", name="Log out")).to_be_visible()
        page.locator("#nav-monitoring").click()
        expect(page).to_have_url(f"{live_server.url}/monitoring/")
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE
    finally:
        context.close()


def test_on_a_wide_screen_the_navigation_is_shown_without_a_menu(
    chromium, live_server, staff_editor
):
    context = signed_in(chromium, live_server, staff_editor, WIDE)
    page = context.new_page()
    try:
        page.goto(f"{live_server.url}/")
        expect(page.locator("#site-nav a")).to_have_count(6)
        for index in range(6):
            expect(page.locator("#site-nav a").nth(index)).to_be_visible()
        expect(page.get_by_text("Menu", exact=True)).to_be_hidden()
        expect(page.get_by_role("button", name="Log out")).to_be_visible()
    finally:
        context.close()


def test_a_chart_with_one_point_shows_its_value_instead_of_a_time_axis(
    chromium, live_server, staff_editor, spark, dispatched, shots
):
    make_site(staff_editor)
    context = signed_in(chromium, live_server, staff_editor, WIDE)
    page = context.new_page()
    try:
        page.goto(f"{live_server.url}/namespaces/sales/materialized-tables/fresh/")
        durations = page.locator("#chart-durations")
        expect(durations).to_contain_text("3.5")
        expect(durations).to_contain_text("UTC")
        expect(durations.locator("canvas")).to_have_count(0)
        lag = page.locator("#chart-lag")
        expect(lag).to_contain_text("lag")
        expect(lag).to_contain_text("3,600 s")  # the freshness, an hour
        expect(lag.locator("canvas")).to_have_count(0)
        health = page.locator("#chart-health-files")
        expect(health).to_contain_text("data files")
        expect(health.locator("canvas")).to_have_count(0)
        page.screenshot(path=str(shots / "one-point-charts.png"), full_page=True)

        page.goto(f"{live_server.url}/namespaces/sales/tables/customers/")
        snapshots = page.locator("#snapshot-chart")
        expect(snapshots).to_contain_text("data files")
        expect(snapshots).to_contain_text("4")
        expect(snapshots).to_contain_text("UTC")
        expect(snapshots.locator("canvas")).to_have_count(0)

        # Two points or more are a chart, as before.
        page.goto(f"{live_server.url}/namespaces/sales/materialized-tables/daily/")
        expect(page.locator("#chart-durations canvas").first).to_be_visible()
        expect(page.locator("#chart-lag canvas").first).to_be_visible()
    finally:
        context.close()
