"""How engines and people sign in: HTTP Basic client authentication (DuckDB's only way),
revocation that a token exchange cannot outrun, scan reports from read-only engines, and
failed sign-ins throttled on every door."""

from __future__ import annotations

import base64
from urllib.parse import quote_plus

import pytest
from django.test import Client

from catalog import services
from catalog.services.credentials import create_client
from tests.integration.test_iceberg_rest import (
    BASE,
    SCHEMA,
    TOKEN_EXCHANGE,
    Iceberg,
    request_token,
    token_for,
)

pytestmark = pytest.mark.django_db


def basic(client_id: str, secret: str) -> str:
    pair = f"{quote_plus(client_id)}:{quote_plus(secret)}".encode()
    return "Basic " + base64.b64encode(pair).decode()


def test_client_credentials_sent_as_http_basic_get_a_token(editor):
    client, secret = create_client(name="duckdb", user=editor)

    response = Client().post(
        f"{BASE}/oauth/tokens",
        {"grant_type": "client_credentials"},
        headers={"Authorization": basic(client.client_id, secret)},
    )

    assert response.status_code == 200, response.content
    token = response.json()["access_token"]
    assert Iceberg(token).get("/namespaces").status_code == 200


@pytest.mark.parametrize(
    "header",
    ["Basic !!!notbase64", "Basic " + base64.b64encode(b"no-colon").decode(),
     "Basic " + base64.b64encode(b"\xff\xfe:x").decode(),
     "Basic " + base64.b64encode(b"id\x00:secret").decode()],
)  # fmt: skip
def test_malformed_basic_credentials_are_refused_in_json(header):
    response = Client().post(
        f"{BASE}/oauth/tokens",
        {"grant_type": "client_credentials"},
        headers={"Authorization": header},
    )
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"


@pytest.mark.parametrize(
    "form",
    [
        {"grant_type": "client_credentials"},
        {"grant_type": "client_credentials", "client_id": "a\x00", "client_secret": "b"},
        {"grant_type": TOKEN_EXCHANGE, "subject_token": "t\x00"},
        {"grant_type": "x\x00"},
    ],
)
def test_a_token_request_without_credentials_or_with_nul_is_a_json_4xx(form):
    response = Client().post(f"{BASE}/oauth/tokens", form)
    assert 400 <= response.status_code < 500
    assert "error" in response.json()


def test_a_revoked_clients_token_cannot_be_exchanged_for_a_new_one(editor):
    client, secret = create_client(name="spark", user=editor)
    token = request_token(client.client_id, secret).json()["access_token"]
    assert Iceberg(token).get("/namespaces").status_code == 200  # now trusted for a while
    client.active = False
    client.save()

    response = Client().post(
        f"{BASE}/oauth/tokens", {"grant_type": TOKEN_EXCHANGE, "subject_token": token}
    )

    assert response.status_code == 401


def test_a_read_only_engine_may_send_scan_reports(editor, viewer):
    services.create_namespace(name="ns")
    services.create_table(namespace="ns", name="t", schema=SCHEMA)
    reader = Iceberg(token_for(viewer))

    response = reader.post("/namespaces/ns/tables/t/metrics", {"report-type": "scan-report"})

    assert response.status_code == 204
    assert reader.post("/namespaces/ns/tables/t", {"updates": []}).status_code == 403


@pytest.fixture
def three_failures_allowed(settings):
    settings.LOGIN_FAILURES_ALLOWED = 3
    settings.LOGIN_FAILURE_WINDOW_SECONDS = 300


def test_failed_engine_sign_ins_slow_the_wrong_secret_but_not_the_right_one(
    three_failures_allowed, editor
):
    client, secret = create_client(name="spark", user=editor)
    for _ in range(3):
        assert request_token(client.client_id, "wrong").status_code == 401

    wrong = request_token(client.client_id, "wrong")
    right = request_token(client.client_id, secret)

    assert wrong.status_code == 429
    assert int(wrong["Retry-After"]) > 0
    assert "Too many failed sign-ins" in wrong.json()["error_description"]
    assert right.status_code == 200


def test_failed_api_token_requests_are_throttled(three_failures_allowed, editor):
    api = Client()
    for _ in range(3):
        refused = api.post("/api/token/", {"username": "erin", "password": "nope"})
        assert refused.status_code == 400

    response = api.post("/api/token/", {"username": "erin", "password": "erin-password"})

    assert response.status_code == 429
    assert "Too many failed sign-ins" in response.json()["error"]


def test_failed_page_logins_are_throttled_and_other_addresses_are_not(
    three_failures_allowed, editor
):
    for _ in range(3):
        Client().post("/login/", {"username": "erin", "password": "nope"})

    blocked = Client().post("/login/", {"username": "erin", "password": "erin-password"})
    elsewhere = Client(REMOTE_ADDR="10.9.9.9").post(
        "/login/", {"username": "someone", "password": "whatever"}
    )

    assert blocked.status_code == 429
    assert b"Too many failed sign-ins" in blocked.content
    assert elsewhere.status_code == 200  # the form again, with its own error


def test_a_client_secret_is_stored_salted_and_hashed_and_checked_without_a_password_hash(editor):
    from catalog.models import CatalogClient
    from catalog.services import credentials as auth

    client, secret = create_client(name="spark", user=editor)
    other, _ = create_client(name="trino", user=editor)
    stored = CatalogClient.objects.get(pk=client.pk).secret_hash
    assert stored.startswith(auth.SECRET_HASH_PREFIX) and secret not in stored
    assert stored != auth.hash_secret(secret), "salted: the same secret hashes differently"
    assert auth.secret_matches(secret, stored)
    assert not auth.secret_matches(secret + "x", stored)
    assert not auth.secret_matches(secret, other.secret_hash)
    assert auth.issue_token(client_id=client.client_id, client_secret=secret).access_token
    with pytest.raises(auth.InvalidCredentials):
        auth.issue_token(client_id=client.client_id, client_secret=secret[:-1])


def test_a_secret_stored_as_a_password_hash_before_still_works_and_moves_to_the_new_form(editor):
    from django.contrib.auth.hashers import make_password

    from catalog.models import CatalogClient
    from catalog.services import credentials as auth

    client, secret = create_client(name="spark", user=editor)
    CatalogClient.objects.filter(pk=client.pk).update(secret_hash=make_password(secret))
    with pytest.raises(auth.InvalidCredentials):
        auth.issue_token(client_id=client.client_id, client_secret="wrong")
    assert not CatalogClient.objects.get(pk=client.pk).secret_hash.startswith(
        auth.SECRET_HASH_PREFIX
    ), "a wrong secret changes nothing"

    assert auth.issue_token(client_id=client.client_id, client_secret=secret).access_token
    moved = CatalogClient.objects.get(pk=client.pk).secret_hash
    assert moved.startswith(auth.SECRET_HASH_PREFIX)
    assert auth.issue_token(client_id=client.client_id, client_secret=secret).access_token


def test_the_refresh_workers_credential_is_stored_in_the_new_form_and_re_keyed_from_an_old_one():
    from django.contrib.auth.hashers import make_password

    from catalog.models import CatalogClient
    from catalog.services import credentials as auth
    from runtime import credentials

    client_id, _, secret = credentials.service_credential().partition(":")
    assert CatalogClient.objects.get(client_id=client_id).secret_hash.startswith(
        auth.SECRET_HASH_PREFIX
    )
    CatalogClient.objects.filter(client_id=client_id).update(secret_hash=make_password(secret))
    assert credentials.service_credential() == f"{client_id}:{secret}"
    stored = CatalogClient.objects.get(client_id=client_id).secret_hash
    assert stored.startswith(auth.SECRET_HASH_PREFIX) and auth.secret_matches(secret, stored)
    assert auth.issue_token(client_id=client_id, client_secret=secret).access_token


@pytest.mark.parametrize(
    "stored",
    ["lakeview-sha256$sélé$00", "lakeview-sha256$", "lakeview-sha256", "pbkdf2_sha256$1$x",
     "", "!"],
)  # fmt: skip
def test_a_client_whose_stored_secret_is_malformed_is_refused_in_json_not_a_500(editor, stored):
    """A hash edited by hand in the database, or cut short: the client cannot sign in, and
    the token request says so (401), for every secret."""
    from catalog.models import CatalogClient

    client, secret = create_client(name="spark", user=editor)
    CatalogClient.objects.filter(pk=client.pk).update(secret_hash=stored)

    for attempt in (secret, "sélé", ""):
        response = request_token(client.client_id, attempt)
        assert response.status_code == 401, (stored, attempt, response.content)
        assert response.json()["error"] == "invalid_client"


@pytest.mark.parametrize(
    "secret",
    ["x" * 2_000_000, "sélé€😀", "%ff%fe", "a$b$c", " ", "\u202e\ufeff", "lakeview-sha256$"],
)
def test_a_wrong_secret_of_any_length_or_characters_is_refused_in_json(editor, secret):
    client, _ = create_client(name="spark", user=editor)
    response = request_token(client.client_id, secret)
    assert response.status_code == 401, response.content[:300]
    assert response.json()["error"] == "invalid_client"
    sent_basic = Client().post(
        f"{BASE}/oauth/tokens",
        {"grant_type": "client_credentials"},
        headers={"Authorization": basic(client.client_id, secret[:1000])},
    )
    assert sent_basic.status_code == 401
