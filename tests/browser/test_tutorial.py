"""README's tutorial, followed in Chromium as a newcomer reads it, against the whole stack
(the app, a Celery worker with Spark, celery-beat, a streaming host, Redis) with the sample
data loaded as `make run` loads it. Every click is a bold label of the text, every file, SQL
statement and snippet is the text's own (tests/tutorial.py): when the words on a page or
the behaviour they describe change, this test fails until README says it again."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect
from pyiceberg.catalog.rest import RestCatalog

from tests import tutorial
from tests.live_server import PASSWORD, REPO_ROOT, USERNAME
from tests.refresh_stack import RefreshStack, refresh_stack

pytestmark = [pytest.mark.browser, pytest.mark.spark]

#: Spark's first jobs in a new worker (schemas, a refresh over 800,000 rows, a stream's
#: first load) take a while on two cores.
SPARK_TIMEOUT_MS = 300_000


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefreshStack]:
    with refresh_stack(tmp_path_factory.mktemp("tutorial-stack")) as running:
        loaded = subprocess.run(
            [sys.executable, "manage.py", "load_samples", "--not-if-dropped"],
            cwd=REPO_ROOT,
            env=running.server.env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert loaded.returncode == 0, loaded.stdout + loaded.stderr
        yield running


def counts(catalog: RestCatalog, table: str, key: str, value: str) -> dict:
    rows = catalog.load_table(table).scan().to_arrow().to_pylist()
    return {row[key]: row[value] for row in rows}


def press(page: Page, label: str) -> None:
    """A button or a link with exactly these words."""
    target = page.get_by_role("button", name=label, exact=True).or_(
        page.get_by_role("link", name=label, exact=True)
    )
    target.first.click()


def upload(page: Page, step: tutorial.Step, path: Path, table: str) -> None:
    press(page, step.label("Upload a file"))
    page.get_by_label("File").set_input_files(path)
    page.get_by_label("Table name").fill(table)
    if any(label.startswith("Append to") for label in step.labels):
        page.get_by_label("Mode").select_option(label=step.label("Append to"))
    press(page, step.label("Upload and preview"))
    expect(page.locator("#upload-columns")).to_be_visible()


def test_a_newcomer_follows_the_tutorial_in_the_browser(
    stack: RefreshStack, page: Page, tmp_path: Path, results_dir: Path
) -> None:
    base = stack.server.base_url
    catalog = RestCatalog("lv", uri=stack.server.iceberg_uri, credential=stack.server.credential)
    page.set_default_timeout(30_000)
    page.goto(f"{base}/login/")
    page.get_by_label("Username").fill(USERNAME)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()

    # 1. The samples, and a preview of orders with a filter.
    step = tutorial.step(1)
    page.get_by_role("link", name="samples", exact=True).first.click()
    page.get_by_role("link", name="orders", exact=True).first.click()
    page.get_by_label("Row filter").fill(step.name_after("type the filter"))
    press(page, step.label("Preview"))
    result = page.locator("#preview-result")
    expect(result).to_contain_text("returned")
    expect(result).not_to_contain_text("delivered")

    # 2. A namespace, and a CSV file made a table after its preview.
    step = tutorial.step(2)
    shop = step.name_after("name one")
    page.goto(f"{base}/")
    page.get_by_label("Namespace name").fill(shop)
    press(page, step.label("Create namespace"))
    page.goto(f"{base}/namespaces/{shop}/")
    targets_csv = tmp_path / "targets.csv"
    targets_csv.write_text(step.block("csv"))
    targets = step.name_after("name the table")
    upload(page, step, targets_csv, targets)
    expect(page.locator("#upload-columns")).to_contain_text("target")
    press(page, step.label("Create table"))
    expect(page).to_have_url(re.compile(rf"/namespaces/{shop}/tables/{targets}/"))
    rows = tutorial.csv_rows(step.block("csv"))
    assert counts(catalog, f"{shop}.{targets}", "status", "target") == {
        row["status"]: int(row["target"]) for row in rows
    }

    # 3. The two materialized tables from the console; the FULL one refreshes, and a manual
    # refresh finds nothing to do.
    step = tutorial.step(3)
    press(page, step.label("SQL console"))
    page.locator("#console-namespace").select_option(shop)
    page.locator("#console-sql").fill(step.block("sql"))
    press(page, step.label("Run"))
    for n in (1, 2):
        expect(page.locator(f"#result-{n}")).to_have_class(
            re.compile(r"\bok\b"), timeout=SPARK_TIMEOUT_MS
        )
    page.locator("#result-1 a.result-table").click()
    expect(page.locator("#mt-state")).to_contain_text("ACTIVATED")
    first = page.locator("table#runs tbody tr", has_text="CREATE")
    expect(first.locator(".run-state")).to_have_text("SUCCEEDED", timeout=SPARK_TIMEOUT_MS)
    press(page, step.label("Refresh now"))
    manual = page.locator("table#runs tbody tr", has_text="MANUAL")
    expect(manual.locator(".run-action")).to_have_text("NO_DATA", timeout=120_000)

    # 4. Events appended to the continuous table's source reach it in a micro-batch.
    step = tutorial.step(4)
    continuous = f"{shop}.events_per_kind"
    page.goto(f"{base}/namespaces/{shop}/materialized-tables/events_per_kind/")
    expect(page.locator("#mt-state")).to_contain_text("ACTIVATED")
    stack.wait_for(
        lambda: catalog.load_table(continuous).current_snapshot() is not None,
        timeout=SPARK_TIMEOUT_MS / 1000,
        what="the streaming host to load the continuous table",
    )
    before = counts(catalog, continuous, "kind", "events")
    events_csv = tmp_path / "events.csv"
    events_csv.write_text(step.block("csv"))
    page.goto(f"{base}/namespaces/samples/")
    upload(page, step, events_csv, step.name_after("name the table"))
    press(page, step.label("Append rows"))
    expected = dict(before)
    for row in tutorial.csv_rows(step.block("csv")):
        expected[row["kind"]] += 1
    stack.wait_for(
        lambda: counts(catalog, continuous, "kind", "events") == expected,
        timeout=120,
        what="a micro-batch with the appended events",
    )
    # The micro-batch's row is written just after its commit: the page shows it then.
    batches = page.locator("table#runs tbody tr", has_text="CONTINUOUS")

    def batch_shown() -> bool:
        page.goto(f"{base}/namespaces/{shop}/materialized-tables/events_per_kind/")
        return batches.count() > 0

    stack.wait_for(batch_shown, timeout=60, what="the micro-batch in the table's history")

    # 5. A view, and its lineage down to the samples.
    step = tutorial.step(5)
    view = step.name_after("name it")
    page.goto(f"{base}/namespaces/{shop}/")
    press(page, step.label("New view"))
    page.get_by_label("View name").fill(view)
    page.get_by_label("SQL", exact=True).fill(step.block("sql"))
    press(page, step.label("Create view"))
    expect(page).to_have_url(re.compile(rf"/namespaces/{shop}/views/{view}/"), timeout=120_000)
    press(page, step.label("Lineage"))
    expect(page.locator("body")).to_contain_text("orders")
    page.screenshot(path=str(results_dir / "tutorial-lineage.png"), full_page=True)

    # 6. The view queried in the console: its rows in the grid, with their downloads.
    step = tutorial.step(6)
    press(page, step.label("SQL console"))
    page.locator("#console-namespace").select_option(step.name_after("choose the namespace"))
    page.locator("#console-sql").fill(step.block("sql"))
    press(page, step.label("Run"))
    grid = page.locator(".query-result").first
    expect(grid.locator(".query-state")).to_have_text("SUCCEEDED", timeout=SPARK_TIMEOUT_MS)
    revenue = counts(catalog, f"{shop}.revenue_by_status", "status", "revenue")
    targeted = set(counts(catalog, f"{shop}.{targets}", "status", "target"))
    expect(grid.locator("tbody tr")).to_have_count(len(set(revenue) & targeted))
    expect(grid.locator("thead th").first).to_contain_text("status")
    for download in ("CSV", "Parquet"):
        expect(grid.get_by_role("link", name=step.label(download), exact=True)).to_be_visible()
    page.screenshot(path=str(results_dir / "tutorial-query.png"), full_page=True)

    # 7. A credential, and the text's own pyiceberg and DuckDB snippets with it.
    step = tutorial.step(7)
    press(page, step.label("Engine credentials"))
    page.get_by_label("Client name").fill(step.name_after("client name"))
    press(page, step.label("Create credential"))
    credential = page.locator("#credential").inner_text().strip()
    for code in step.blocks("python"):
        ran = subprocess.run(
            [sys.executable, "-c", tutorial.with_address(code, base, credential)],
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert ran.returncode == 0, ran.stderr
        assert "delivered" in ran.stdout, ran.stdout
