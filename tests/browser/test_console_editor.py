"""The SQL console's editor in Chromium: completion of a table and of its column from the
catalog, Ctrl-Enter running only the selection, the failed statement's line and column
underlined where it sits in the editor, the text kept across a reload, and the plain
textarea when JavaScript is off. No Spark: the failing statement is refused by the parser."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from catalog import services

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "ds", "type": "string", "required": False},
        {"id": 2, "name": "amount", "type": "double", "required": False},
        {"id": 3, "name": "customer_id", "type": "long", "required": False},
    ],
}


@pytest.fixture
def orders(browser_editor):
    services.create_namespace(name="sales", actor=browser_editor)
    services.create_table(namespace="sales", name="orders", schema=SCHEMA, actor=browser_editor)


def log_in(page, live_server) -> None:
    page.goto(f"{live_server.url}/login/")
    page.get_by_label("Username").fill("erin")
    page.get_by_label("Password").fill("erin-password")
    page.get_by_role("button", name="Log in").click()


def text_of(page) -> str:
    # After a post the page is new and the editor's script may not have run yet: the results
    # are in the HTML before it is.
    page.wait_for_function("() => window.lakeviewEditor !== undefined")
    return page.evaluate("window.lakeviewEditor.text()")


def choose(page, label: str) -> None:
    """Click the completion `label` in the editor's list of completions."""
    option = page.locator(".cm-tooltip-autocomplete li").filter(
        has=page.locator(".cm-completionLabel", has_text=re.compile(f"^{label}$"))
    )
    expect(option).to_be_visible()
    option.click()


def test_the_editor_completes_runs_the_selection_underlines_the_error_and_keeps_the_text(
    live_server, page, orders, results_dir
):
    log_in(page, live_server)
    page.goto(f"{live_server.url}/console/?namespace=sales")
    content = page.locator("#console-editor .cm-content")
    expect(content).to_be_visible()
    expect(page.locator("#console-sql")).to_have_attribute("aria-hidden", "true")

    content.click()
    page.keyboard.type("SELECT * FROM ord")
    expect(page.locator(".cm-tooltip-autocomplete")).to_contain_text("table")
    page.screenshot(path=str(results_dir / "console_editor_table.png"))
    choose(page, "orders")
    page.keyboard.press("Enter")
    page.keyboard.type("WHERE amo")
    expect(page.locator(".cm-tooltip-autocomplete")).to_contain_text("double")
    page.screenshot(path=str(results_dir / "console_editor_column.png"))
    choose(page, "amount")
    page.keyboard.type(" > 1;")
    page.keyboard.press("Enter")
    page.keyboard.type("SHOW MATERIALIZED TABLES;")
    page.keyboard.press("Enter")
    page.keyboard.type("ALTER MATERIALIZED TABLE orders")
    page.keyboard.press("Escape")
    page.keyboard.press("Enter")
    page.keyboard.type("FROBNICATE")
    page.keyboard.press("Escape")
    script = text_of(page)
    lines = script.split("\n")
    assert lines[0] == "SELECT * FROM orders" and lines[1].strip() == "WHERE amount > 1;"
    assert lines[2:4] == ["SHOW MATERIALIZED TABLES;", "ALTER MATERIALIZED TABLE orders"]
    assert lines[4].strip() == "FROBNICATE"
    # What the form would post without a selection: the editor's whole text.
    expect(page.locator("#console-sql")).to_have_value(script)

    # The last three lines selected, as with the keyboard, then Ctrl-Enter.
    page.keyboard.press("Shift+ArrowUp")
    page.keyboard.press("Shift+ArrowUp")
    page.keyboard.press("Shift+Home")
    page.keyboard.press("Control+Enter")

    results = page.locator("#console-results .statement-result")
    expect(results).to_have_count(2)
    expect(page.locator("#result-1 .statement-text")).to_have_text("SHOW MATERIALIZED TABLES")
    expect(page.locator("#result-1")).to_have_class(re.compile(r"\bok\b"))
    column = lines[4].index("FROBNICATE") + 1
    # The server counts in the text that ran (the selection): its third line.
    expect(page.locator("#result-2 .error-position")).to_contain_text(
        f"At line 3, column {column} of the script"
    )
    # The editor shows the whole text again, the error underlined on its own line, the fifth.
    assert text_of(page) == script
    underlined = page.locator(".cm-line").nth(4).locator(".cm-lintRange-error")
    expect(underlined).to_have_text("FROBNICATE")
    expect(page.locator(".cm-lintRange-error")).to_have_count(1)
    underlined.hover()
    expect(page.locator(".cm-tooltip-lint")).to_contain_text(f"Line 3, column {column}")
    page.screenshot(path=str(results_dir / "console_editor_error.png"), full_page=True)

    # A new visit: the text is the draft kept in the browser.
    page.goto(f"{live_server.url}/console/?namespace=sales")
    expect(page.locator("#console-editor .cm-content")).to_be_visible()
    assert text_of(page) == script
    expect(page.locator(".cm-lintRange-error")).to_have_count(0)


def test_without_javascript_the_console_is_the_plain_textarea(
    live_server, chromium, orders, results_dir
):
    context = chromium.new_context(
        java_script_enabled=False, viewport={"width": 1280, "height": 900}
    )
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        log_in(page, live_server)
        page.goto(f"{live_server.url}/console/?namespace=sales")
        textarea = page.locator("#console-sql")
        expect(textarea).to_be_visible()
        expect(page.locator(".cm-editor")).to_have_count(0)
        textarea.fill("SHOW MATERIALIZED TABLES")
        page.locator("#console-run").click()
        expect(page.locator("#result-1")).to_have_class(re.compile(r"\bok\b"))
        expect(page.locator("#console-sql")).to_have_value("SHOW MATERIALIZED TABLES")
        page.screenshot(path=str(results_dir / "console_editor_no_js.png"), full_page=True)
    finally:
        context.close()
