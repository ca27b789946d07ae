"""A materialized table's life in a real browser, against the whole stack (the app, a Celery
worker with Spark, celery-beat, Redis): created in the SQL console, its first refresh
watched on its page, suspended, resumed, a partition refreshed, the history and the charts
seen."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pyarrow as pa
import pytest
from playwright.sync_api import expect
from pyiceberg.catalog.rest import RestCatalog

from tests.live_server import PASSWORD, USERNAME
from tests.refresh_stack import RefreshStack, refresh_stack

pytestmark = [pytest.mark.browser, pytest.mark.spark]

CREATE = (
    "-- daily totals, refreshed every hour (no scheduled run between the steps below)\n"
    "CREATE MATERIALIZED TABLE daily\n"
    "PARTITIONED BY (ds)\n"
    "FRESHNESS = INTERVAL '1' HOUR\n"
    "REFRESH_MODE = FULL\n"
    "AS SELECT ds, sum(amount) AS total FROM orders GROUP BY ds"
)

SCHEMA = pa.schema([pa.field("ds", pa.string()), pa.field("amount", pa.float64())])


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefreshStack]:
    with refresh_stack(tmp_path_factory.mktemp("browser-stack")) as running:
        catalog = RestCatalog(
            "lv", uri=running.server.iceberg_uri, credential=running.server.credential
        )
        catalog.create_namespace("shop")
        orders = catalog.create_table("shop.orders", schema=SCHEMA)
        orders.append(
            pa.table(
                {"ds": ["2024-01-01", "2024-01-01", "2024-01-02"], "amount": [1.0, 2.0, 4.0]},
                schema=SCHEMA,
            )
        )
        yield running


def test_editor_creates_watches_suspends_resumes_and_refreshes_a_partition(
    stack, page, results_dir
):
    base = stack.server.base_url
    page.set_default_timeout(30_000)
    page.goto(f"{base}/login/")
    page.get_by_label("Username").fill(USERNAME)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()

    # The console: one statement, its result beside it.
    page.locator("#nav-console").click()
    page.locator("#console-namespace").select_option("shop")
    page.locator("#console-sql").fill(CREATE)
    page.locator("#console-run").click()
    result = page.locator("#result-1")
    expect(result).to_have_class(re.compile(r"\bok\b"), timeout=240_000)
    expect(result).to_contain_text("Materialized table shop.daily created")

    # Its page shows the first refresh finish without a reload.
    result.locator("a.result-table").click()
    expect(page.locator("#mt-state")).to_contain_text("ACTIVATED")
    first_run = page.locator("table#runs tbody tr", has_text="CREATE")
    expect(first_run.locator(".run-state")).to_have_text("SUCCEEDED", timeout=180_000)
    # One refresh: the duration chart says its value instead of drawing one point.
    page.reload()
    expect(page.locator("#chart-durations.chart-value")).to_contain_text("duration")

    # Suspend, then resume.
    page.locator("#mt-suspend").click()
    expect(page.locator("#mt-state")).to_contain_text("SUSPENDED")
    page.locator("#mt-resume").click()
    expect(page.locator("#mt-state")).to_contain_text("ACTIVATED")

    # New rows in the source, then a refresh of one partition; its run appears in the
    # history and finishes.
    catalog = RestCatalog("lv", uri=stack.server.iceberg_uri, credential=stack.server.credential)
    catalog.load_table("shop.orders").append(
        pa.table({"ds": ["2024-01-02"], "amount": [8.0]}, schema=SCHEMA)
    )
    form = page.locator("#mt-refresh-partition")
    form.locator("[data-column=ds]").fill("2024-01-02")
    page.locator("#mt-refresh-partition-submit").click()
    partition_run = page.locator("table#runs tbody tr", has_text="PARTITION")
    expect(partition_run).to_be_visible(timeout=120_000)
    expect(partition_run.locator(".run-state")).to_have_text("SUCCEEDED", timeout=120_000)
    expect(partition_run).to_contain_text("2024-01-02")
    rows = catalog.load_table("shop.daily").scan().to_arrow().to_pylist()
    assert {row["ds"]: row["total"] for row in rows} == {"2024-01-01": 3.0, "2024-01-02": 12.0}
    # The history and both charts, drawn now that there are two refreshes.
    page.reload()
    expect(page.locator("#chart-durations canvas")).to_be_visible()
    expect(page.locator("#chart-lag canvas")).to_be_visible()
    page.screenshot(path=str(results_dir / "mt-detail.png"), full_page=True)


def test_editor_cancels_a_runaway_refresh_from_its_page(stack, page):
    # Hours of Spark's time over three rows: the refresh nobody meant.
    created = stack.statements(
        "CREATE MATERIALIZED TABLE runaway FRESHNESS = INTERVAL '1' HOUR REFRESH_MODE = FULL "
        "AS SELECT o.ds, sum(r.id % 7) AS spun FROM orders o CROSS JOIN range(1000000000000) r "
        "GROUP BY o.ds",
        namespace="shop",
    )
    assert created.status_code == 200, created.text
    base = stack.server.base_url
    page.set_default_timeout(30_000)
    page.goto(f"{base}/login/?next=/namespaces/shop/materialized-tables/runaway/")
    page.get_by_label("Username").fill(USERNAME)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()

    run = page.locator("table#runs tbody tr", has_text="CREATE")
    expect(run.locator(".run-state")).to_have_text("RUNNING", timeout=120_000)
    page.reload()  # the Cancel button of a running run (the live update changes the state only)
    run.get_by_role("button", name="Cancel").click()
    expect(page.locator(".messages")).to_contain_text("is being stopped")
    # The page follows the run until it ends, then reloads with its outcome.
    expect(run.locator(".run-state")).to_have_text("CANCELLED", timeout=60_000)
    expect(run.locator(".run-error")).to_contain_text("Cancelled by")
    catalog = RestCatalog("lv", uri=stack.server.iceberg_uri, credential=stack.server.credential)
    assert catalog.load_table("shop.runaway").current_snapshot() is None
