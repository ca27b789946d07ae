# ruff: noqa: F811 - pytest fixtures imported from other test modules are parameters here
"""A materialized table's expectations on its page in a real browser: the chart draws each
expectation's violating rows over the runs (one line per expectation, the values at a run
shown in its legend when the pointer is on it), and the history shows each run's counts.

No Spark and no worker: the table is made through the console with Spark's analyzer faked
(tests/integration/test_mt_api.py), its runs through the services."""

from __future__ import annotations

from datetime import timedelta

import pytest
from playwright.sync_api import expect

from catalog import services
from refresh import console
from refresh.models import MaterializedTable, RefreshRun
from tests.browser.test_page_widths import WIDE, signed_in
from tests.integration.test_mt_api import (  # noqa: F401
    ORDERS_SCHEMA,
    QUERY,
    dispatched,
    spark,
)
from tests.integration.test_mt_pages import finished

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CREATE = (
    "CREATE MATERIALIZED TABLE checked (\n"
    "  CONSTRAINT positive EXPECT (total > 0) ON VIOLATION DROP ROW,\n"
    "  CONSTRAINT has_day EXPECT (ds IS NOT NULL)\n"
    ")\n"
    "FRESHNESS = INTERVAL '1' HOUR REFRESH_MODE = FULL\n"
    f"AS {QUERY}"
)
#: Each run's counts, oldest first.
COUNTS = [
    {"positive": 1, "has_day": 0},
    {"positive": 4, "has_day": 3},
    {"positive": 2, "has_day": 5},
]


def test_the_page_charts_each_expectations_violating_rows_over_runs_and_the_history_shows_them(
    chromium, live_server, browser_editor, spark, dispatched
):
    services.create_namespace(name="sales", actor=browser_editor)
    services.create_table(
        namespace="sales", name="orders", schema=ORDERS_SCHEMA, actor=browser_editor
    )
    [result] = console.execute(CREATE, namespace="sales", actor=browser_editor)
    assert result.ok, result.message
    mt = MaterializedTable.objects.get(table__name="checked")
    mt.runs.all().delete()
    for index, counts in enumerate(COUNTS):
        run = finished(mt, state="SUCCEEDED", seconds=5, ago=timedelta(hours=len(COUNTS) - index))
        RefreshRun.objects.filter(pk=run.pk).update(expectations=counts)

    context = signed_in(chromium, live_server, browser_editor, WIDE)
    page = context.new_page()
    try:
        page.goto(f"{live_server.url}/namespaces/sales/materialized-tables/checked/")
        chart = page.locator("#chart-expectations")
        expect(chart.locator("canvas")).to_be_visible()
        legend = chart.locator(".u-legend .u-series")
        expect(legend.nth(1)).to_contain_text("positive (rows)")
        expect(legend.nth(2)).to_contain_text("has_day (rows)")

        # The pointer on each run shows that run's counts, oldest to newest.
        over = chart.locator(".u-over")
        over.scroll_into_view_if_needed()
        box = over.bounding_box()
        assert box is not None
        for index, counts in enumerate(COUNTS):
            x = box["x"] + 1 + (box["width"] - 2) * index / (len(COUNTS) - 1)
            page.mouse.move(x, box["y"] + box["height"] / 2, steps=4)
            expect(legend.nth(1).locator(".u-value")).to_have_text(str(counts["positive"]))
            expect(legend.nth(2).locator(".u-value")).to_have_text(str(counts["has_day"]))

        history = page.locator("#runs tr.run")
        expect(history).to_have_count(len(COUNTS))
        newest = history.first.locator(".run-expectation")
        expect(newest).to_have_text(["positive: 2 violated", "has_day: 5 violated"])
        oldest = history.last.locator(".run-expectation")
        expect(oldest).to_have_text(["positive: 1 violated", "has_day: 0 violated"])
    finally:
        context.close()
