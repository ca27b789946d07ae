"""Behind a trusted proxy, through the whole app: the CSRF check sees the HTTPS the client
used, /metrics judges the client the proxy relays, the throttle's log lines and gunicorn's
access log name that client, and garbage in the headers is never a 500."""

from __future__ import annotations

import logging

import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.test import Client, RequestFactory

pytestmark = pytest.mark.django_db

PROXY = "10.0.0.9"


@pytest.fixture(autouse=True)
def a_trusted_proxy(settings) -> None:
    settings.TRUSTED_PROXIES = [PROXY, "127.0.0.1"]
    settings.ALLOWED_HOSTS = ["testserver", "lakeview.example.com"]


def sign_in_over_https(sender: str, editor) -> int:
    """Posts the login form from the page's https:// origin, with its CSRF token, as a
    browser behind a TLS proxy does; the status of the answer."""
    browser = Client(
        enforce_csrf_checks=True,
        REMOTE_ADDR=sender,
        HTTP_HOST="lakeview.example.com",
        HTTP_X_FORWARDED_FOR="198.51.100.7",
        HTTP_X_FORWARDED_PROTO="https",
    )
    browser.get("/login/")
    token = browser.cookies["csrftoken"].value
    response = browser.post(
        "/login/",
        {"username": "erin", "password": "erin-password", "csrfmiddlewaretoken": token},
        HTTP_ORIGIN="https://lakeview.example.com",
    )
    return response.status_code


def test_a_form_posted_over_https_through_a_trusted_proxy_passes_the_csrf_check(editor):
    assert sign_in_over_https(PROXY, editor) == 302


def test_a_sender_that_is_not_a_trusted_proxy_cannot_claim_https(editor):
    # The app sees plain HTTP from it, so an https:// origin is another origin: refused.
    assert sign_in_over_https("203.0.113.9", editor) == 403


def test_metrics_judge_the_client_a_trusted_proxy_relays_not_the_proxy(settings):
    # The default networks: loopback only. A proxy on loopback must not open them to all.
    relayed = Client().get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.9")
    local = Client().get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert (relayed.status_code, local.status_code) == (404, 200)

    settings.METRICS_ALLOWED_NETWORKS = ["203.0.113.0/24"]
    scraper = Client().get("/metrics", REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="203.0.113.9")
    forger = Client().get("/metrics", REMOTE_ADDR="192.0.2.1", HTTP_X_FORWARDED_FOR="203.0.113.9")
    assert (scraper.status_code, forger.status_code) == (200, 404)


def test_a_refused_sign_in_is_logged_with_the_client_a_trusted_proxy_relays(settings, caplog):
    settings.LOGIN_FAILURES_ALLOWED = 1
    relayed = Client(REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="198.51.100.7")
    relayed.post("/api/token/", {"username": "erin", "password": "wrong"})

    with caplog.at_level(logging.INFO, logger="catalog.throttle"):
        response = relayed.post("/api/token/", {"username": "erin", "password": "wrong"})

    assert response.status_code == 429
    assert "from 198.51.100.7" in caplog.text
    assert PROXY not in caplog.text
    assert "erin" not in caplog.text  # a user name may be a password typed in the wrong box


@pytest.mark.parametrize(
    "headers",
    [
        {"HTTP_X_FORWARDED_FOR": "<script>, ::::, 999.1.1.1", "HTTP_X_FORWARDED_PROTO": "gopher"},
        {"HTTP_FORWARDED": 'for="[::1;proto=https, for=\\"'},
        {"HTTP_FORWARDED": "for=" + "9" * 5000, "HTTP_X_FORWARDED_FOR": ","},
    ],
)
def test_garbage_in_the_forwarded_headers_is_ignored_never_a_500(editor, headers):
    sent = Client(REMOTE_ADDR=PROXY, raise_request_exception=False, **headers)

    token = sent.post("/api/token/", {"username": "erin", "password": "erin-password"})
    config = sent.get("/iceberg/v1/config")
    page = sent.get("/login/", HTTP_HOST="lakeview.example.com")

    assert token.status_code == 200, token.content
    assert config.status_code == 401  # no token: the catalog's own answer
    assert page.status_code == 200


def test_gunicorns_access_log_sees_the_client_in_the_wsgi_environ():
    """gunicorn logs `%(h)s` from environ["REMOTE_ADDR"] after the response, and Django's
    request.META is that environ: the client's address is what it finds there."""
    environ = RequestFactory()._base_environ(
        PATH_INFO="/healthz", REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="198.51.100.7"
    )

    WSGIHandler()(environ, lambda status, headers: None)

    assert environ["REMOTE_ADDR"] == "198.51.100.7"
    assert environ["lakeview.socket_address"] == PROXY
