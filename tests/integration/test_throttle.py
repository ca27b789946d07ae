"""Failed sign-ins throttled across the three doors (the login page, /api/token/ and the
engines' OAuth endpoint), counted in the database (catalog/throttle.py)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.contrib.auth.signals import user_login_failed
from django.test import Client
from django.utils import timezone

from catalog.iceberg_rest.auth import create_client
from catalog.models import AccessToken, FailedLogin

pytestmark = pytest.mark.django_db

WINDOW = 300


@pytest.fixture(autouse=True)
def three_failures_allowed(settings) -> None:
    settings.LOGIN_FAILURES_ALLOWED = 3
    settings.LOGIN_FAILURE_WINDOW_SECONDS = WINDOW


@pytest.fixture
def password_checks() -> Iterator[list[dict]]:
    """Every failed `authenticate()` (Django sends user_login_failed for each)."""
    seen: list[dict] = []

    def record(**kwargs: object) -> None:
        seen.append(kwargs)

    user_login_failed.connect(record)
    yield seen
    user_login_failed.disconnect(record)


def from_address(address: str) -> Client:
    return Client(REMOTE_ADDR=address)


def page_login(address: str, username: str, password: str):
    return from_address(address).post("/login/", {"username": username, "password": password})


def api_token(address: str, username: str, password: str):
    return from_address(address).post("/api/token/", {"username": username, "password": password})


def engine_token(address: str, client_id: str, secret: str):
    return from_address(address).post(
        "/iceberg/v1/oauth/tokens",
        {"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret},
    )


def test_failures_at_one_door_count_at_the_others(editor):
    client, secret = create_client(name="spark", user=editor)
    assert page_login("10.0.0.1", "nobody", "x").status_code == 200
    assert api_token("10.0.0.1", "no-one", "x").status_code == 400
    assert engine_token("10.0.0.1", "no-such-client", "x").status_code == 401

    page = page_login("10.0.0.1", "erin", "erin-password")
    api = api_token("10.0.0.1", "erin", "erin-password")
    engine = engine_token("10.0.0.1", client.client_id, secret)

    assert (page.status_code, api.status_code, engine.status_code) == (429, 429, 429)
    for response in (page, api, engine):
        assert 0 < int(response["Retry-After"]) <= WINDOW + 1
    assert "Too many failed sign-ins" in api.json()["error"]
    assert "Too many failed sign-ins" in engine.json()["error_description"]
    assert not AccessToken.objects.exists()


def test_a_throttled_login_page_does_not_check_the_password(editor, password_checks):
    for _ in range(3):
        page_login("10.0.0.1", "erin", "wrong")
    assert len(password_checks) == 3

    wrong = page_login("10.0.0.1", "erin", "still-wrong")
    right = from_address("10.0.0.1")
    answer = right.post("/login/", {"username": "erin", "password": "erin-password"})

    assert (wrong.status_code, answer.status_code) == (429, 429)
    assert len(password_checks) == 3  # neither attempt reached authenticate()
    assert "_auth_user_id" not in right.session
    assert b"Too many failed sign-ins" in answer.content
    assert b'value="erin"' in answer.content  # the form keeps the name, not the password


def test_a_throttled_api_token_request_does_not_check_the_password(editor, password_checks):
    for _ in range(3):
        api_token("10.0.0.1", "erin", "wrong")

    response = api_token("10.0.0.1", "erin", "wrong-again")

    assert response.status_code == 429
    assert response.json()["type"] == "Throttled"
    assert len(password_checks) == 3


def test_an_account_is_throttled_whatever_address_the_guesses_come_from(editor):
    for address in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
        assert api_token(address, "erin", "wrong").status_code == 400

    assert page_login("10.0.0.4", "erin", "erin-password").status_code == 429
    assert page_login("10.0.0.4", "vic", "wrong").status_code == 200  # others may still try


def test_an_engine_client_id_is_throttled_whatever_address_the_guesses_come_from(editor):
    client, secret = create_client(name="spark", user=editor)
    for address in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
        assert engine_token(address, client.client_id, "wrong").status_code == 401

    response = engine_token("10.0.0.4", client.client_id, secret)

    assert response.status_code == 429
    assert response.json()["error"] == "slow_down"


def test_a_success_does_not_clear_failures_from_other_addresses(editor):
    api_token("10.0.0.1", "someone", "x")
    api_token("10.0.0.1", "someone-else", "x")

    assert api_token("10.0.0.2", "erin", "erin-password").status_code == 200
    api_token("10.0.0.1", "a-third", "x")

    assert api_token("10.0.0.1", "erin", "erin-password").status_code == 429


def test_failures_older_than_the_window_no_longer_count_and_are_deleted(editor):
    for _ in range(3):
        api_token("10.0.0.1", "erin", "wrong")
    assert api_token("10.0.0.1", "erin", "erin-password").status_code == 429

    FailedLogin.objects.update(at=timezone.now() - timedelta(seconds=WINDOW + 1))

    assert api_token("10.0.0.1", "erin", "erin-password").status_code == 200
    assert api_token("10.0.0.1", "erin", "wrong").status_code == 400
    # That failure removed the expired rows: only its own two (address, account) remain.
    assert FailedLogin.objects.count() == 2


def test_retry_after_is_when_the_oldest_counted_failure_leaves_the_window(editor):
    for _ in range(3):
        api_token("10.0.0.1", "erin", "wrong")
    FailedLogin.objects.update(at=timezone.now() - timedelta(seconds=200))

    response = api_token("10.0.0.1", "erin", "erin-password")

    assert response.status_code == 429
    assert WINDOW - 200 - 5 <= int(response["Retry-After"]) <= WINDOW - 200 + 1


def test_ten_failures_are_allowed_by_default(settings, editor):
    del settings.LOGIN_FAILURES_ALLOWED
    del settings.LOGIN_FAILURE_WINDOW_SECONDS
    for _ in range(9):
        api_token("10.0.0.1", "erin", "wrong")
    assert api_token("10.0.0.1", "erin", "wrong").status_code == 400  # the tenth failure

    assert api_token("10.0.0.1", "erin", "erin-password").status_code == 429


@pytest.mark.parametrize("body", ["[1, 2]", '"erin"', "null"])
def test_an_api_token_request_whose_body_is_not_an_object_is_a_400(editor, body):
    response = Client(raise_request_exception=False).post(
        "/api/token/", body, content_type="application/json"
    )

    assert response.status_code == 400, response.content
