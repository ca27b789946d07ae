# ruff: noqa: F811 - the shared fixtures are imported by name
"""A query result dropped by the per-user bound (QUERY_RESULTS_PER_USER) in a real browser
(issue 47): its page says why it went, once, and offers only Run again; it neither shows
"More rows" nor asks the rows API for rows that are not there. No worker: the results are
stored as a worker stores them, then pruned as celery-beat prunes them."""

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
from tests.integration.grant_fixtures import admin, alice, give  # noqa: F401
from tests.integration.test_owner_rights import ORDERS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def stored(user) -> Query:
    now = timezone.now()
    query = Query.objects.create(
        requested_by=user,
        sql="SELECT * FROM orders",
        namespace="sales",
        state=Query.State.SUCCEEDED,
        started_at=now,
        finished_at=now,
        expires_at=now + timezone.timedelta(hours=1),
        columns=[{"name": "id", "type": "bigint"}],
        result_folder=secrets.token_hex(16),
        reads=[["sales", "orders"]],
    )
    queries._store(query, pa.table({"id": list(range(250))}), {})
    return query


def test_a_result_dropped_for_newer_ones_says_why_once_and_offers_only_run_again(
    live_server, page, admin, alice, settings
):
    services.create_namespace(name="sales", actor=admin)
    services.create_table(namespace="sales", name="orders", schema=ORDERS, actor=admin)
    give(admin, READ_DATA, alice, namespace="sales")
    oldest, _, _ = (stored(alice) for _ in range(3))
    settings.QUERY_RESULTS_PER_USER = 2
    queries.prune()

    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    page.goto(f"{live_server.url}/login/?next=/queries/{oldest.pk}/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("alice-password")
    page.get_by_role("button", name="Log in").click()

    grid = page.locator(".query-result")
    expect(grid.locator(".query-gone")).to_contain_text(
        "only your newest 2 results are kept (QUERY_RESULTS_PER_USER)"
    )
    page.wait_for_timeout(1500)  # the grid's script has run and asked what it would ask
    expect(page.get_by_text("The result is gone")).to_have_count(1)
    expect(grid.locator(".query-more")).to_be_hidden()
    expect(grid.locator(".query-csv")).to_be_hidden()
    expect(grid.locator(".query-parquet")).to_be_hidden()
    expect(page.locator("#query-again")).to_be_visible()
    assert not [url for url in asked if "/rows" in url]
