"""The app under gunicorn with the production settings (DEBUG off) looks like it does in
development: the CSS loads, the header is styled, the favicon and the 404 page are there."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from playwright.sync_api import expect

from tests.live_server import CatalogServer, catalog_server

pytestmark = pytest.mark.browser

UNSTYLED = ("rgba(0, 0, 0, 0)", "transparent")


@pytest.fixture(scope="module")
def production(tmp_path_factory) -> Iterator[CatalogServer]:
    root: Path = tmp_path_factory.mktemp("production")
    with catalog_server(root, workers=1, threads=2, production=True) as server:
        yield server


def log_in(page, server: CatalogServer) -> None:
    page.goto(f"{server.base_url}/")
    page.get_by_label("Username").fill(server.username)
    page.get_by_label("Password").fill(server.password)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Catalog")).to_be_visible()


def test_pages_are_styled_under_gunicorn_with_the_production_settings(page, production):
    assert "DEBUG" not in production.env or production.env.get("DEBUG") == "0"
    assert production.env["DJANGO_SETTINGS_MODULE"] == "webapp.settings.prod"
    stylesheets: list[tuple[str, int]] = []
    page.on(
        "response",
        lambda response: stylesheets.append((response.url, response.status))
        if response.url.endswith(".css")
        else None,
    )

    # The login page is styled before anyone signs in.
    page.goto(f"{production.base_url}/login/")
    header = page.locator("header.site-header")
    assert header.evaluate("e => getComputedStyle(e).backgroundColor") not in UNSTYLED

    log_in(page, production)
    background = header.evaluate("e => getComputedStyle(e).backgroundColor")
    assert background not in UNSTYLED, background
    # The page's own font, not the browser's default serif.
    font = page.evaluate("getComputedStyle(document.body).fontFamily")
    assert font.strip().lower() != "serif" and "Times" not in font
    assert stylesheets and all(status == 200 for _, status in stylesheets), stylesheets
    assert any("/static/css/app.css" in url for url, _ in stylesheets)

    # The favicon: linked, and the browser's own /favicon.ico request finds it.
    icon = page.locator('link[rel="icon"]').get_attribute("href")
    assert requests.get(f"{production.base_url}{icon}", timeout=30).status_code == 200
    assert requests.get(f"{production.base_url}/favicon.ico", timeout=30).status_code == 200

    # A missing page: the styled 404, with the header and its navigation.
    response = page.goto(f"{production.base_url}/no/such/page/")
    assert response is not None and response.status == 404
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    assert header.evaluate("e => getComputedStyle(e).backgroundColor") not in UNSTYLED

    # The API docs load Swagger UI from the app's own static files.
    page.goto(f"{production.base_url}/api/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text(re.compile("Lakeview"))
