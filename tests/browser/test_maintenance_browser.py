# ruff: noqa: F811 - pytest fixtures imported from conftest are parameters here
"""A table's maintenance section in a real browser: its health charts (with a run marked),
the switch that turns maintenance on, and "Run maintenance now" queueing every action."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from catalog import services
from maintenance import services as maintenance
from maintenance.core.policy import Action
from tests.integration.test_maintenance import SCHEMA, add_snapshots

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_editor_reads_the_health_charts_turns_maintenance_on_and_runs_it_now(
    live_server, page, browser_editor, results_dir
):
    services.create_namespace(name="ops")
    table = services.create_table(namespace="ops", name="events", schema=SCHEMA).obj
    add_snapshots(table, count=4, age_minutes=20, files=3)
    maintenance.record_sample(table)
    [run] = maintenance.start(table=table, actions=[Action.REWRITE_DATA_FILES])
    maintenance.record_sample(table, run=run)
    maintenance.finish(run, state="SUCCEEDED", files_before=12, files_after=1)
    maintenance.record_sample(table)

    page.goto(f"{live_server.url}/login/")
    page.get_by_label("Username").fill("erin")
    page.get_by_label("Password").fill("erin-password")
    page.get_by_role("button", name="Log in").click()
    page.goto(f"{live_server.url}/namespaces/ops/tables/events/")

    section = page.locator("#maintenance")
    expect(section.locator("#maintenance-state")).to_have_text("Off")
    expect(section.locator("#health-data-files")).to_have_text("12")
    expect(section.locator("#health-snapshots")).to_have_text("4")
    expect(section.locator("#chart-health-files canvas")).to_be_visible()
    expect(section.locator("#chart-health-files .u-legend")).to_contain_text("data files")
    expect(section.locator("#chart-health-metadata .u-legend")).to_contain_text("snapshots kept")
    expect(section.locator("#maintenance-runs tbody tr")).to_have_count(1)

    section.get_by_label("Maintain this table").check()
    section.locator("#maintenance-switch button").click()
    expect(page.locator("#maintenance-state")).to_have_text("On")
    expect(page.locator("#maintenance-policy")).to_contain_text("set on the table")

    page.locator("#maintenance-run-now button").click()
    runs = page.locator("#maintenance-runs tbody tr")
    expect(runs).to_have_count(6)
    expect(page.locator("#maintenance-runs")).to_contain_text("REMOVE_ORPHAN_FILES")
    page.locator("#maintenance").screenshot(path=str(results_dir / "table-maintenance.png"))
