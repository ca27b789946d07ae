"""An attached table in a real browser: an editor attaches a folder that pyiceberg wrote
(three snapshots, the last after a column was added), sees where it is read from, previews
it as it was at its first snapshot (the old rows, the old columns) with a filter, and reads
the pruning figures."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.integration.test_table_browse_pages import write_orders

pytestmark = pytest.mark.browser


@pytest.fixture
def external(tmp_path, settings):
    folder = tmp_path / "external"
    folder.mkdir()
    settings.ATTACH_LOCATIONS = [str(folder)]
    return folder


def log_in(page, base: str) -> None:
    page.goto(f"{base}/")
    page.get_by_label("Username").fill("erin")
    page.get_by_label("Password").fill("erin-password")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Catalog")).to_be_visible()


def test_an_editor_attaches_a_table_and_previews_it_at_an_older_snapshot_with_pruning(
    live_server, page, browser_editor, external, results_dir
):
    orders = write_orders(external / "orders")
    first_snapshot = str(orders.snapshots[0])
    log_in(page, live_server.url)

    page.get_by_label("Namespace name").fill("shop")
    page.get_by_role("button", name="Create namespace").click()
    page.get_by_role("link", name="Attach a table").click()
    page.get_by_label("Table name").fill("orders")
    page.get_by_label("Location").fill(str(orders.folder))
    page.get_by_role("button", name="Attach read-only").click()

    # The table's page says it is attached, from where, and which file it reads.
    expect(page.get_by_role("heading", name="Table shop.orders")).to_be_visible()
    expect(page.locator("#attached-badge")).to_have_text("attached · read-only")
    expect(page.locator("#attached-folder")).to_have_text(str(orders.folder))
    expect(page.locator("#attached-metadata-file")).to_contain_text("v5.metadata.json")
    expect(page.locator("#snapshot-chart canvas").first).to_be_visible()
    expect(page.locator("#partition-spec")).to_contain_text("Partitioned by region")
    page.screenshot(path=str(results_dir / "attached-table-page.png"), full_page=True)

    # Back to the first snapshot: its schema had no `note` column, so the column choice
    # follows it, and the filter reads one region only.
    form = page.locator("#preview-form")
    expect(form.get_by_label("Columns")).to_contain_text("note")
    form.get_by_label("Snapshot").select_option(first_snapshot)
    expect(form.get_by_label("Columns")).not_to_contain_text("note")
    form.get_by_label("Row filter").fill("region = 'eu'")
    form.get_by_role("button", name="Preview").click()

    expect(page).to_have_url(re.compile(rf"snapshot_id={first_snapshot}"))
    rows = page.locator("#preview-rows tbody tr")
    expect(rows).to_have_count(2)
    headings = page.locator("#preview-rows thead th")
    expect(headings).to_have_count(3)  # id, region, amount: no note back then
    expect(page.locator("#preview-rows")).not_to_contain_text("note")
    ids = sorted(int(rows.nth(i).locator("td").first.inner_text()) for i in range(2))
    assert ids == [1, 2]  # the rows of the first snapshot in eu; id 4 came later
    expect(page.locator("#pruning")).to_contain_text(
        "2 data files in the table, 1 scanned, 1 skipped by partition, "
        "0 skipped by column statistics, 0 delete files applied"
    )
    expect(page.locator("#preview-snapshot")).to_have_text(first_snapshot)
    expect(page.locator("#read-by")).to_contain_text("read by pyiceberg")
    page.screenshot(path=str(results_dir / "attached-table-preview.png"), full_page=True)

    # The address is shareable: opened afresh it shows the same preview.
    address = page.url
    page.goto(address)
    expect(page.locator("#preview-rows tbody tr")).to_have_count(2)
    expect(page.locator("#pruning")).to_contain_text("1 skipped by partition")
