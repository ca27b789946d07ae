"""Browser tests: Debian's Chromium driven by Playwright's sync API against live_server.

Playwright's sync API runs an event loop in the test's thread, so Django's guard against
ORM calls from async contexts would refuse the test's own database work; it is switched off
for these tests only (the live server itself runs in its own thread)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
RESULTS_DIR = Path(__file__).resolve().parents[2] / "test-results"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Everything under tests/browser needs Chromium, so `-m "not browser"` skips the lot.
    browser_dir = Path(__file__).parent
    for item in items:
        if browser_dir in Path(item.fspath).parents:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def chromium() -> Iterator:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=os.environ.get("PLAYWRIGHT_CHROMIUM_EXECUTABLE", "/usr/bin/chromium"),
            args=CHROMIUM_ARGS,
            headless=True,
        )
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(chromium) -> Iterator:
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        yield page
    finally:
        context.close()


@pytest.fixture
def results_dir() -> Path:
    RESULTS_DIR.mkdir(exist_ok=True)
    return RESULTS_DIR


@pytest.fixture
def browser_editor(django_user_model):
    """An editor that does not depend on the migration's groups still being in the database
    (transactional tests flush it after each test)."""
    from django.contrib.auth.models import Group

    from catalog.roles import EDITOR

    user = django_user_model.objects.create_user(username="erin", password="erin-password")
    user.groups.add(Group.objects.get_or_create(name=EDITOR)[0])
    return user
