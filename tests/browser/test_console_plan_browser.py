# ruff: noqa: F811 - pytest fixtures imported from test_mt_pipelines are parameters here
"""The SQL console's Plan in a real browser (no Spark: the analyzer and the dispatch are
faked, as in the integration tests): a script of definitions is planned (create, alter with
its change, nothing, refused at its line and column) and nothing changes; Run then applies
it, and SHOW CREATE's text pasted back plans as nothing."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from refresh.models import MaterializedTable
from tests.integration.test_mt_pipelines import (  # noqa: F401 - fixtures
    DAILY,
    counts,
    dispatched,
    sales,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WEEKLY = (
    "CREATE OR ALTER MATERIALIZED TABLE weekly FRESHNESS = INTERVAL '1' DAY AS\n"
    "SELECT ds, sum(total) AS total FROM daily GROUP BY ds"
)
BROKEN = "CREATE MATERIALIZED TABLE broken FRESHNESS = INTERVAL '1' DAY AS\n  SELECT x FROM nowhere"


def test_the_console_plans_a_script_without_changing_anything_then_runs_it(
    live_server, page, editor, sales, results_dir
):
    page.goto(f"{live_server.url}/login/")
    page.get_by_label("Username").fill("erin")
    page.get_by_label("Password").fill("erin-password")
    page.get_by_role("button", name="Log in").click()
    page.goto(f"{live_server.url}/console/?namespace=sales")

    script = f"{DAILY};\n{WEEKLY};\n{BROKEN}"
    page.locator("#console-sql").fill(script)
    before = counts()
    page.locator("#console-plan").click()

    plans = page.locator(".plan-result")
    expect(plans).to_have_count(3)
    expect(page.locator("#plan-1 .plan-action")).to_have_text("create")
    expect(page.locator("#plan-2 .plan-action")).to_have_text("create")
    expect(page.locator("#plan-3 .plan-action")).to_have_text("refused")
    expect(page.locator("#plan-3 .result-message")).to_contain_text(
        "Table or view not found: sales.nowhere"
    )
    line = script.count("\n")  # the last line of the script holds the unknown table
    expect(page.locator("#plan-3 .error-position")).to_contain_text(
        f"At line {line + 1}, column 17"
    )
    page.screenshot(path=str(results_dir / "console_plan.png"), full_page=True)
    assert counts() == before and not MaterializedTable.objects.exists()
    # The script is still in the box to run as planned.
    expect(page.locator("#console-sql")).to_have_value(script)

    page.locator("#console-sql").fill(f"{DAILY};\n{WEEKLY}")
    page.locator("#console-run").click()
    expect(page.locator("#console-results .statement-result.ok")).to_have_count(2)
    assert MaterializedTable.objects.count() == 2

    # SHOW CREATE's text, planned back: nothing to do; an edit: alter, with the change.
    page.locator("#console-sql").fill("SHOW CREATE MATERIALIZED TABLE daily")
    page.locator("#console-run").click()
    shown = page.locator("pre.show-create").inner_text()
    edited = shown.replace("INTERVAL '1' HOUR", "INTERVAL '2' HOUR")
    page.locator("#console-sql").fill(f"{shown};\n{edited}")
    page.locator("#console-plan").click()
    expect(page.locator("#plan-1 .plan-action")).to_have_text("nothing")
    expect(page.locator("#plan-2 .plan-action")).to_have_text("alter")
    expect(page.locator("#plan-2 .plan-changes")).to_contain_text(
        "FRESHNESS: INTERVAL '1' HOUR -> INTERVAL '2' HOUR"
    )
    page.screenshot(path=str(results_dir / "console_plan_alter.png"), full_page=True)
    daily = MaterializedTable.objects.get(table__name="daily")
    assert str(daily.freshness) == "INTERVAL '1' HOUR"
