"""A query in a real browser against the whole stack (the app, a Celery worker with Spark,
celery-beat, Redis): run from the SQL console, its grid fills in with the columns' types,
its rows, count and duration without a reload; it is listed in the history and run again
from there; and a runaway query is stopped with the grid's Cancel button."""

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

ROWS = 250


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefreshStack]:
    with refresh_stack(tmp_path_factory.mktemp("query-browser-stack")) as running:
        catalog = RestCatalog(
            "lv", uri=running.server.iceberg_uri, credential=running.server.credential
        )
        catalog.create_namespace("shop")
        schema = pa.schema([pa.field("id", pa.int64()), pa.field("item", pa.string())])
        orders = catalog.create_table("shop.orders", schema=schema)
        orders.append(
            pa.table(
                {"id": list(range(ROWS)), "item": [f"item-{i}" for i in range(ROWS)]},
                schema=schema,
            )
        )
        yield running


def test_a_query_fills_its_grid_is_run_again_and_a_runaway_one_is_cancelled(
    stack, page, results_dir
):
    base = stack.server.base_url
    page.set_default_timeout(30_000)
    page.goto(f"{base}/login/?next=/console/")
    page.get_by_label("Username").fill(USERNAME)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()

    page.locator("#console-namespace").select_option("shop")
    page.locator("#console-sql").fill("SELECT id, item FROM orders ORDER BY id")
    page.locator("#console-run").click()
    grid = page.locator(".query-result").first
    # The first worker job starts Spark: the grid fills in once its rows are stored.
    expect(grid.locator(".query-state")).to_have_text("SUCCEEDED", timeout=240_000)
    expect(grid.locator("thead th").first).to_contain_text("id")
    expect(grid.locator("thead th").first).to_contain_text("bigint")
    expect(grid.locator("tbody tr")).to_have_count(200)
    expect(grid.locator("tbody tr").first).to_contain_text("item-0")
    expect(grid.locator(".query-count")).to_have_text("250 rows")
    expect(grid.locator(".query-duration")).to_have_text(re.compile(r"^\d+\.\d\d s$"))
    expect(grid.locator(".query-csv")).to_be_visible()
    grid.locator(".query-more").click()
    expect(grid.locator("tbody tr")).to_have_count(ROWS)
    page.screenshot(path=str(results_dir / "query-grid.png"), full_page=True)

    # The history lists it; Run again puts its text and namespace back in the console.
    page.goto(f"{base}/console/")
    history = page.locator("#query-history tbody tr").first
    expect(history).to_contain_text("SELECT id, item FROM orders ORDER BY id")
    expect(history).to_contain_text("SUCCEEDED")
    history.locator(".query-again").click()
    expect(page.locator("#console-sql")).to_have_value("SELECT id, item FROM orders ORDER BY id")
    expect(page.locator("#console-namespace")).to_have_value("shop")

    # A runaway query: the grid's Cancel stops it (its Spark job group, on the worker).
    page.locator("#console-sql").fill("SELECT sum(id % 7) AS spun FROM range(1000000000000)")
    page.locator("#console-run").click()
    runaway = page.locator(".query-result").first
    expect(runaway.locator(".query-state")).to_have_text("RUNNING", timeout=60_000)
    runaway.locator(".query-cancel").click()
    expect(runaway.locator(".query-state")).to_have_text("CANCELLED", timeout=30_000)
    expect(runaway.locator(".query-cancel")).to_be_hidden()
    page.screenshot(path=str(results_dir / "query-cancelled.png"), full_page=True)
