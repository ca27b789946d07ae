"""What only the API could do, now on the pages: rename a view, add a dialect, register a
view from a metadata file."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_an_editor_renames_a_view_adds_a_dialect_and_registers_a_view_from_its_file(
    live_server, page, browser_editor, results_dir
):
    from catalog import services

    services.create_namespace(name="sales")
    services.create_namespace(name="archive")
    services.create_view(namespace="sales", name="orders", sql="SELECT 1 AS id")
    # A view dropped earlier: its metadata file stays in the warehouse, to be registered.
    dropped = services.create_view(namespace="sales", name="scratch", sql="SELECT 2 AS id")
    services.drop_view(namespace="sales", name="scratch")

    page.goto(f"{live_server.url}/login/?next=/namespaces/sales/views/orders/")
    page.get_by_label("Username").fill("erin")
    page.get_by_label("Password").fill("erin-password")
    page.get_by_role("button", name="Log in").click()

    # Rename, into another namespace.
    page.get_by_role("link", name="Rename").click()
    page.get_by_label("Namespace").fill("archive")
    page.get_by_label("New name").fill("old_orders")
    page.get_by_role("button", name="Rename view").click()
    expect(page.locator(".messages")).to_contain_text("renamed to archive.old_orders")
    expect(page).to_have_url(re.compile(r"/namespaces/archive/views/old_orders/$"))

    # Add a dialect written by hand.
    page.get_by_role("link", name="Add dialect").click()
    page.get_by_label("Dialect").select_option("duckdb")
    page.get_by_label("SQL", exact=True).fill("SELECT 1 AS id")
    page.get_by_role("button", name="Add dialect").click()
    expect(page.locator(".messages")).to_contain_text("duckdb SQL added")
    duckdb = page.locator("#current-sql h3", has_text="duckdb")
    expect(duckdb).to_contain_text("written by hand")
    expect(duckdb).not_to_contain_text("transpiled")
    page.screenshot(path=str(results_dir / "view-with-written-dialect.png"), full_page=True)

    # Register the dropped view's metadata file under a new name.
    page.goto(f"{live_server.url}/namespaces/sales/")
    page.get_by_role("link", name="Register metadata file").click()
    page.get_by_label("Kind").select_option("view")
    page.get_by_label("Name", exact=True).fill("orders_v1")
    page.get_by_label("Metadata file").fill(dropped.metadata_location)
    page.get_by_role("button", name="Register").click()
    expect(page.locator(".messages")).to_contain_text("View sales.orders_v1 registered")
    expect(page.get_by_role("heading", name=re.compile("View sales.orders_v1"))).to_be_visible()

    # A file outside the warehouse is refused beside the field.
    page.goto(f"{live_server.url}/namespaces/sales/register")
    page.get_by_label("Name", exact=True).fill("stolen")
    page.get_by_label("Metadata file").fill("/etc/passwd")
    page.get_by_role("button", name="Register").click()
    expect(page.locator(".errorlist")).to_be_visible()
