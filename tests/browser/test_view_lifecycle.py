"""A view's life through the web pages, in a real browser."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from catalog.core.view_metadata import read_view_metadata

pytestmark = pytest.mark.browser

FIRST_SQL = "SELECT 1 AS order_id, 'open' AS status"
SECOND_SQL = "SELECT 2 AS order_id, 'closed' AS status, 10.5 AS amount"


def test_editor_creates_replaces_and_rolls_back_a_view(
    live_server, page, browser_editor, warehouse, results_dir
):
    # Log in through the login page.
    page.goto(f"{live_server.url}/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/$"))
    page.get_by_label("Username").fill("erin")
    page.get_by_label("Password").fill("erin-password")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Catalog")).to_be_visible()

    # A namespace.
    page.get_by_label("Namespace name").fill("sales")
    page.get_by_role("button", name="Create namespace").click()
    expect(page.get_by_role("heading", name="Namespace sales")).to_be_visible()

    # A view, through the form.
    page.get_by_role("link", name="New view").click()
    page.get_by_label("View name").fill("orders")
    page.get_by_label("SQL", exact=True).fill(FIRST_SQL)
    page.get_by_label("View comment").fill("Open orders")
    page.get_by_role("button", name="Create view").click()
    expect(page.locator(".messages")).to_contain_text("created (version 1)")
    expect(page.locator("#view-comment")).to_have_text("Open orders")

    # Replace it with new SQL; the form starts from the current SQL.
    page.get_by_role("link", name="Replace", exact=True).click()
    sql = page.get_by_label("SQL", exact=True)
    expect(sql).to_have_value(re.compile(r"'open' AS status"))
    sql.fill(SECOND_SQL)
    page.get_by_role("button", name="Replace view").click()
    expect(page.locator(".messages")).to_contain_text("now version 2")
    expect(page.locator("#schema")).to_contain_text("amount")

    # Roll back to version 1 through the confirmation page.
    page.get_by_role("link", name="Roll back to v1").click()
    expect(
        page.get_by_role("heading", name=re.compile("Roll back .* to version 1"))
    ).to_be_visible()
    page.get_by_role("button", name="Roll back to version 1").click()
    expect(page.locator(".messages")).to_contain_text("rolled back to version 1")

    # The version log, newest first: v1 (a rollback), v2, v1.
    entries = page.locator("#version-log li")
    expect(entries).to_have_count(3)
    versions = [entries.nth(i).get_attribute("data-version-id") for i in range(3)]
    assert versions[::-1] == ["1", "2", "1"]
    expect(entries.nth(0)).to_contain_text("rollback")
    expect(entries.nth(2)).not_to_contain_text("rollback")
    page.screenshot(path=str(results_dir / "view-page.png"), full_page=True)

    # One metadata file per change, each valid view metadata.
    files = sorted((warehouse / "sales" / "orders" / "metadata").glob("*.metadata.json"))
    assert len(files) == 3
    metadata = [read_view_metadata(str(path)) for path in files]
    assert [m.current_version_id for m in metadata] == [1, 2, 1]
    assert [e.version_id for e in metadata[-1].version_log] == [1, 2, 1]

    # The diff of the two versions.
    page.get_by_role("button", name="Show diff").click()
    expect(page.locator("#diff")).to_contain_text("closed")
    expect(page.locator("#diff")).to_contain_text("open")
    page.screenshot(path=str(results_dir / "diff-page.png"), full_page=True)

    # The search box finds the view by its SQL, including versions that are not current.
    page.get_by_role("link", name="Lakeview").click()
    page.get_by_label("Search views").fill("closed")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#search-results")).to_contain_text("sales.orders")
    page.screenshot(path=str(results_dir / "namespace-list.png"), full_page=True)


def test_sql_that_does_not_parse_is_shown_beside_the_sql_field(
    live_server, page, browser_editor, warehouse, results_dir
):
    from catalog import services

    services.create_namespace(name="sales")
    page.goto(f"{live_server.url}/login/?next=/namespaces/sales/views/new")
    page.get_by_label("Username").fill("erin")
    page.get_by_label("Password").fill("erin-password")
    page.get_by_role("button", name="Log in").click()
    page.get_by_label("View name").fill("broken")
    page.get_by_label("SQL", exact=True).fill("SELECT id,\nFROM orders WHERE")
    page.get_by_role("button", name="Create view").click()
    expect(page.locator("#field-sql .field-errors")).to_contain_text("line 2, column")
    expect(page.locator("#field-name .field-errors")).to_have_count(0)
    page.screenshot(path=str(results_dir / "view-form-error.png"), full_page=True)
    assert not [path for path in warehouse.rglob("*") if path.is_file()]
