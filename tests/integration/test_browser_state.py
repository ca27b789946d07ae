"""An engine's cookieless request to /iceberg/ passes Django's middleware of a browser's
state (infra/browser_state.py): what it is answered is exactly what the whole chain
answered; any request with a cookie, and every page, still goes through all of it."""

from __future__ import annotations

import pytest
from django.contrib.sessions.middleware import SessionMiddleware
from django.test import Client

from tests.integration.test_iceberg_rest import BASE, create_table

pytestmark = pytest.mark.django_db

TABLE = f"{BASE}/namespaces/ns/tables/t"


@pytest.fixture
def sessions(monkeypatch) -> list[str]:
    """The paths SessionMiddleware saw (the four run together or not at all)."""
    seen: list[str] = []
    original = SessionMiddleware.process_request

    def process_request(self, request):
        seen.append(request.path)
        return original(self, request)

    monkeypatch.setattr(SessionMiddleware, "process_request", process_request)
    return seen


def browser_of(user) -> Client:
    client = Client()
    client.force_login(user)
    client.get("/login/")  # a CSRF cookie too
    assert {"sessionid", "csrftoken"} <= set(client.cookies)
    return client


def test_a_cookieless_load_skips_them_and_is_answered_as_with_a_browsers_cookies(
    api, ns, editor, sessions
):
    create_table(api)
    engine = api.get("/namespaces/ns/tables/t")
    engine_304 = api.client.get(TABLE, headers={**api.headers, "If-None-Match": engine["ETag"]})
    assert sessions == []

    browser = browser_of(editor)
    sessions.clear()
    with_cookies = browser.get(TABLE, headers=api.headers)
    with_cookies_304 = browser.get(TABLE, headers={**api.headers, "If-None-Match": engine["ETag"]})

    assert sessions == [TABLE, TABLE]
    assert (engine.status_code, engine_304.status_code) == (200, 304)
    assert dict(engine.headers) == dict(with_cookies.headers)
    assert dict(engine_304.headers) == dict(with_cookies_304.headers)
    assert engine.content == with_cookies.content
    assert not engine.cookies and not with_cookies.cookies


@pytest.mark.parametrize(
    "path", [f"{BASE}/config", f"{BASE}/namespaces/ns/views/missing", f"{BASE}/no/such/path"]
)
def test_every_catalog_answer_is_the_same_with_or_without_a_browsers_cookies(
    api, ns, editor, sessions, path
):
    engine = api.client.get(path, headers=api.headers)
    assert sessions == []
    browser = browser_of(editor)
    sessions.clear()
    browser = browser.get(path, headers=api.headers)

    assert engine.status_code == browser.status_code
    assert dict(engine.headers) == dict(browser.headers)
    assert engine.content == browser.content
    assert sessions == [path]  # the browser's request only


def test_pages_still_have_sessions_and_csrf(editor, sessions):
    client = Client(enforce_csrf_checks=True)
    refused = client.post("/login/", {"username": "erin", "password": "erin-password"})
    assert refused.status_code == 403  # no CSRF token
    assert sessions == ["/login/"]

    browser = browser_of(editor)
    page = browser.get("/")
    assert page.status_code == 200
    assert page.wsgi_request.user == editor


def test_an_engine_path_with_a_cookie_gets_the_whole_chain(api, ns, sessions):
    # An invalid CSRF cookie is replaced, as Django's CSRF middleware always did.
    api.client.cookies["csrftoken"] = "x"
    response = api.client.get(f"{BASE}/config", headers=api.headers)

    assert response.status_code == 200
    assert sessions == [f"{BASE}/config"]
    assert response.cookies["csrftoken"].value != "x"
