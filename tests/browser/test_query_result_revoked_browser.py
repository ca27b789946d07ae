# ruff: noqa: F811 - the shared fixtures are imported by name
"""A kept query result in a real browser after a revoke (issue 39: revocation takes effect on
the next request): the result's page shows its rows while its user may read what the query
read; once a grant on a table it read is revoked, the next rows asked for (More rows) are a
403 whose message the grid shows, its rows and downloads gone, and it stops asking. No
worker: the result is stored as a worker stores it."""

from __future__ import annotations

import secrets

import pyarrow as pa
import pytest
from django.utils import timezone
from playwright.sync_api import expect

from catalog import services
from catalog.core.access import READ_DATA
from refresh import queries
from refresh.models import Query
from tests.integration.grant_fixtures import admin, alice, give, take  # noqa: F401
from tests.integration.test_owner_rights import ORDERS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ROWS = 250
REFUSED = "Reading sales.customers needs the read_data privilege"


@pytest.fixture
def kept(admin, alice) -> Query:
    """alice's query over sales.orders and sales.customers, its 250 rows kept."""
    services.create_namespace(name="sales", actor=admin)
    for name in ("orders", "customers"):
        services.create_table(namespace="sales", name=name, schema=ORDERS, actor=admin)
        give(admin, READ_DATA, alice, namespace="sales", name=name)
    now = timezone.now()
    query = Query.objects.create(
        requested_by=alice,
        sql="SELECT * FROM orders JOIN customers USING (ds)",
        namespace="sales",
        state=Query.State.SUCCEEDED,
        started_at=now,
        finished_at=now,
        expires_at=now + timezone.timedelta(hours=1),
        columns=[{"name": "id", "type": "bigint"}],
        result_folder=secrets.token_hex(16),
        reads=[["sales", "orders"], ["sales", "customers"]],
    )
    queries._store(query, pa.table({"id": list(range(ROWS))}), {})
    return query


def test_after_a_revoke_the_grid_shows_why_and_no_rows(live_server, page, admin, alice, kept):
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    page.goto(f"{live_server.url}/login/?next=/queries/{kept.pk}/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("alice-password")
    page.get_by_role("button", name="Log in").click()
    grid = page.locator(".query-result")
    expect(grid.locator("tbody tr")).to_have_count(200)  # 100 from the server, 100 fetched
    expect(grid.locator(".query-more")).to_be_visible()

    take(admin, READ_DATA, alice, namespace="sales", name="customers")
    grid.locator(".query-more").click()

    expect(grid.locator(".query-error")).to_have_text(REFUSED)
    expect(grid.locator("tbody tr")).to_have_count(0)
    expect(grid.locator(".query-more")).to_be_hidden()
    expect(grid.locator(".query-csv")).to_be_hidden()
    refused = len([url for url in asked if "/rows" in url])
    page.wait_for_timeout(3000)  # a failed fetch is asked again after 2 s; a refusal is not
    assert len([url for url in asked if "/rows" in url]) == refused

    page.goto(f"{live_server.url}/queries/{kept.pk}/")  # the page itself says so too
    expect(page.locator(".query-error")).to_have_text(REFUSED)
    expect(page.locator(".query-result tbody tr")).to_have_count(0)
