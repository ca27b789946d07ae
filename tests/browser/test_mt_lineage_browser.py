# ruff: noqa: F811 - pytest fixtures imported from test_mt_api are parameters here
"""A cascade of materialized tables in a real browser (no Spark: the analyzer and the
dispatch are faked, as in the integration tests): orders (table) -> v (view) -> a -> b
(materialized tables). The second table's page draws its lag chart with the freshness line;
the lineage page draws the four objects and the three edges between them."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from catalog import services as catalog_services
from refresh import definitions, runs
from refresh import services as mts
from refresh.core.freshness import Freshness, TimeUnit
from refresh.models import MaterializedTable, RefreshRun
from tests.integration.test_mt_api import dispatched, sales, spark  # noqa: F401 - fixtures

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _finished_runs(mt: MaterializedTable, *, every: timedelta, count: int) -> None:
    """`count` succeeded refreshes, `every` apart, the last one a little late."""
    now = timezone.now()
    for index in range(count):
        end = now - every * (count - index) + timedelta(minutes=2)
        started = end - timedelta(seconds=20 + 5 * index)
        RefreshRun.objects.create(
            materialized_table=mt,
            table_name=str(mt.table),
            trigger=RefreshRun.Trigger.SCHEDULED,
            action=RefreshRun.Action.FULL,
            state=RefreshRun.State.SUCCEEDED,
            schedule_time=end - timedelta(minutes=2),
            queued_at=started,
            started_at=started,
            finished_at=end,
            data_timestamp=started,
            rows_written=10 + index,
            definition_version=mt.current_version,
        )


@pytest.fixture
def cascade(editor, sales) -> dict[str, MaterializedTable]:
    catalog_services.create_view(
        namespace="sales", name="v", sql="SELECT ds, amount FROM orders", actor=editor
    )
    hourly = Freshness(1, TimeUnit.HOUR)
    a = mts.create_materialized_table(
        namespace="sales",
        name="a",
        query="SELECT ds, sum(amount) AS total FROM v GROUP BY ds",
        freshness=hourly,
        actor=editor,
    )
    b = mts.create_materialized_table(
        namespace="sales", name="b", query="SELECT ds, total FROM a", freshness=hourly, actor=editor
    )
    rebuild = definitions.alter_query(
        b, query="SELECT ds, total\nFROM a\nWHERE total > 0", actor=editor
    )
    runs.claim(rebuild.pk, worker="w:1")
    runs.apply_rebuild(rebuild)  # as the worker does once the new rows are committed
    b.refresh_from_db()
    RefreshRun.objects.all().delete()
    _finished_runs(a, every=timedelta(hours=1), count=6)
    _finished_runs(b, every=timedelta(minutes=80), count=6)
    return {"a": a, "b": b}


def test_the_lag_chart_and_the_lineage_of_a_cascade(live_server, page, cascade, results_dir):
    page.goto(f"{live_server.url}/login/")
    page.get_by_label("Username").fill("erin")
    page.get_by_label("Password").fill("erin-password")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Catalog")).to_be_visible()

    # The second table's page: the lag chart, with the freshness as a line of its own.
    page.goto(f"{live_server.url}/namespaces/sales/materialized-tables/b/")
    expect(page.locator("#mt-state")).to_contain_text("ACTIVATED")
    expect(page.locator("#chart-lag canvas")).to_be_visible()
    legend = page.locator("#chart-lag .u-legend")
    expect(legend).to_contain_text("lag (s)")
    expect(legend).to_contain_text("freshness (s)")
    expect(page.locator("#lag")).to_contain_text("late")
    expect(page.locator("#version-log li")).to_have_count(2)
    expect(page.locator("#versions tbody")).to_have_count(2)
    page.locator("#definition-versions").screenshot(path=str(results_dir / "mt-versions.png"))
    page.screenshot(path=str(results_dir / "mt-page.png"), full_page=True)

    # Compare with the previous version; a query naming an unknown table is refused at its
    # line and column.
    page.locator("#version-2 a.compare-previous").click()
    expect(page.locator("#diff tbody")).to_contain_text("WHERE total > 0")
    page.go_back()
    page.locator("#mt-alter").click()
    page.locator("#alter-query").fill("SELECT ds,\n  total FROM nowhere")
    page.locator("#alter-submit").click()
    expect(page.locator("#query-errors")).to_contain_text("line 2, column 14")
    expect(page.locator("#error-position")).to_be_visible()
    page.screenshot(path=str(results_dir / "mt-alter-error.png"), full_page=True)
    page.goto(f"{live_server.url}/namespaces/sales/materialized-tables/b/")

    # The lineage page, from the table's page.
    page.locator("#lineage-link").click()
    expect(page).to_have_url(re.compile(r"/lineage/sales/b/$"))
    graph = page.locator("svg#lineage-graph")
    expect(graph.locator("g.lineage-node")).to_have_count(4)
    expect(graph.locator("path.lineage-edge")).to_have_count(3)
    for node in ("sales.orders", "sales.v", "sales.a", "sales.b"):
        expect(graph.locator(f'g.lineage-node[data-node="{node}"]')).to_be_visible()
    focus = graph.locator('g.lineage-node[data-node="sales.b"]')
    expect(focus).to_have_class(re.compile(r"\bfocus\b"))
    expect(focus).to_contain_text("ACTIVATED")
    expect(graph.locator('g.lineage-node[data-node="sales.a"]')).to_contain_text("lag")

    # Sources left, readers right: one column per level.
    xs = [
        graph.locator(f'g.lineage-node[data-node="{node}"]').bounding_box()["x"]
        for node in ("sales.orders", "sales.v", "sales.a", "sales.b")
    ]
    assert xs == sorted(xs) and len(set(xs)) == 4, xs
    page.screenshot(path=str(results_dir / "mt-lineage.png"), full_page=True)

    # Each node links to its page.
    graph.locator('g.lineage-node[data-node="sales.v"] a').click()
    expect(page).to_have_url(re.compile(r"/namespaces/sales/views/v/$"))


def test_the_lineage_of_a_table_many_views_read_draws_fanout_and_links_the_rest(
    live_server, page, django_user_model, warehouse, results_dir
):
    """60 views read crowd.orders: the graph draws 50 (lineage.FANOUT) and says "+ 10 more"
    under the table's box, a link to the list of its readers, 50 a page."""
    from bench.pages import seed_tables, seed_views, write_shared_metadata
    from catalog.models import Namespace

    view_file, table_file = write_shared_metadata(warehouse)
    crowd = Namespace.objects.create(name="crowd")
    seed_tables(crowd, ["orders"], table_file)
    seed_views(crowd, [f"reader_{i:02d}" for i in range(60)], view_file, reads=["orders"])
    django_user_model.objects.create_superuser("root", password="root-password")
    page.goto(f"{live_server.url}/login/")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill("root-password")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Catalog")).to_be_visible()

    page.goto(f"{live_server.url}/lineage/crowd/orders/")
    graph = page.locator("svg#lineage-graph")
    expect(graph.locator("g.lineage-node")).to_have_count(51)
    more = graph.locator("a.lineage-more")
    expect(more).to_have_count(1)
    expect(more).to_contain_text("+ 10 more")
    expect(page.locator("#lineage-focus-more")).to_have_text("10 more")
    page.screenshot(path=str(results_dir / "lineage-fanout.png"), full_page=True)
    more.click()
    expect(page).to_have_url(re.compile(r"/lineage/crowd/orders/readers/$"))
    expect(page.locator("#reading-views li")).to_have_count(50)
    page.locator("#readers-next").click()
    expect(page.locator("#reading-views li")).to_have_count(10)
