"""Failed sign-ins lock out what failed, not bystanders (catalog/throttle.py): a user name's
failures slow that user name with a growing wait, a client id's failures slow that client
id's wrong secrets, and an address only for a spray over many user names, without refusing
the right password of a user who did not fail there. Counted in the database, by the client
address infra/proxies.py decides (behind a trusted proxy, the client it relays)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.contrib.auth.signals import user_login_failed
from django.db.models import F
from django.test import Client

from catalog import throttle
from catalog.models import AccessToken, FailedLogin
from catalog.services.credentials import create_client

pytestmark = pytest.mark.django_db

WINDOW = 3600
LONGEST = 64
PROXY = "10.0.0.9"


@pytest.fixture(autouse=True)
def three_failures_allowed(settings) -> None:
    settings.LOGIN_FAILURES_ALLOWED = 3
    settings.LOGIN_SPRAY_ACCOUNTS = 3
    settings.LOGIN_FAILURE_DELAY_MAX_SECONDS = LONGEST
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


def from_address(address: str, forwarded_for: str | None = None) -> Client:
    """A client at `address`; with `forwarded_for`, a proxy at `address` relaying it."""
    if forwarded_for is None:
        return Client(REMOTE_ADDR=address)
    return Client(REMOTE_ADDR=address, HTTP_X_FORWARDED_FOR=forwarded_for)


def page_login(address: str, username: str, password: str, **via: str):
    client = from_address(address, **via)
    return client.post("/login/", {"username": username, "password": password})


def api_token(address: str, username: str, password: str, **via: str):
    client = from_address(address, **via)
    return client.post("/api/token/", {"username": username, "password": password})


def engine_token(address: str, client_id: str, secret: str, **via: str):
    return from_address(address, **via).post(
        "/iceberg/v1/oauth/tokens",
        {"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret},
    )


def waits_pass(seconds: float = LONGEST + 1) -> None:
    """Every failure so far happened `seconds` earlier."""
    FailedLogin.objects.update(at=F("at") - timedelta(seconds=seconds))


# -- the scenario of issue 47 ---------------------------------------------------------------


@pytest.mark.parametrize(
    "via",
    [{}, {"forwarded_for": "198.51.100.7"}],
    ids=["directly", "through a trusted proxy"],
)
def test_a_stale_engine_retrying_locks_out_neither_a_good_engine_nor_a_user_at_its_address(
    settings, editor, via
):
    # The defaults: ten failures allowed. Through the proxy, every client has its address.
    del settings.LOGIN_FAILURES_ALLOWED
    settings.TRUSTED_PROXIES = [PROXY]
    address = PROXY if via else "198.51.100.7"
    stale, _ = create_client(name="stale-job", user=editor)
    good, secret = create_client(name="good-job", user=editor)

    answers = [engine_token(address, stale.client_id, "old-secret", **via) for _ in range(11)]

    assert [a.status_code for a in answers] == [401] * 10 + [429]
    assert answers[-1].json()["error"] == "slow_down"
    assert int(answers[-1]["Retry-After"]) > 0
    assert engine_token(address, good.client_id, secret, **via).status_code == 200
    assert api_token(address, "erin", "erin-password", **via).status_code == 200
    assert page_login(address, "erin", "erin-password", **via).status_code == 302


def test_behind_a_trusted_proxy_a_sprayers_failures_do_not_hold_back_its_neighbours(
    settings, editor
):
    settings.TRUSTED_PROXIES = [PROXY]
    api_token(PROXY, "erin", "typo", forwarded_for="198.51.100.6")
    for name in ("u1", "u2", "u3", "u4"):
        api_token(PROXY, name, "guess", forwarded_for="203.0.113.5")

    assert api_token(PROXY, "u1", "guess", forwarded_for="203.0.113.5").status_code == 429
    erin = api_token(PROXY, "erin", "erin-password", forwarded_for="198.51.100.6")
    assert erin.status_code == 200


def test_behind_a_proxy_not_trusted_everyone_shares_its_address(settings, editor):
    """What the setting is for: without it, the sprayer's address is the proxy's, and erin,
    who mistyped once through the same proxy, waits with it."""
    settings.TRUSTED_PROXIES = []
    api_token(PROXY, "erin", "typo", forwarded_for="198.51.100.6")
    for name in ("u1", "u2", "u3", "u4"):
        api_token(PROXY, name, "guess", forwarded_for="203.0.113.5")

    assert (
        api_token(PROXY, "erin", "erin-password", forwarded_for="198.51.100.6").status_code == 429
    )


def test_an_untrusted_senders_forged_x_forwarded_for_does_not_change_its_address(
    settings, editor, password_checks
):
    settings.TRUSTED_PROXIES = [PROXY]
    for index, name in enumerate(("u1", "u2", "u3", "u4")):
        forged = f"192.0.2.{index + 1}"
        assert api_token("203.0.113.5", name, "guess", forwarded_for=forged).status_code == 400

    again = api_token("203.0.113.5", "u1", "guess", forwarded_for="192.0.2.200")

    assert again.status_code == 429
    assert len(password_checks) == 4


# -- a spray: many user names from one address ----------------------------------------------


def test_a_guessing_run_over_many_user_names_from_one_address_is_throttled(
    editor, viewer, password_checks
):
    names = [f"user{n}" for n in range(6)]
    first = [
        api_token(
            "10.0.0.1",
            name,
            "Summer2024",
        )
        for name in names
    ]
    second = [page_login("10.0.0.1", name, "Winter2024") for name in names]

    # Each name's first guess is checked (it cannot be refused without refusing the same
    # right password from a neighbour); every second guess waits, unchecked.
    assert [r.status_code for r in first] == [400] * 6
    assert [r.status_code for r in second] == [429] * 6
    assert len(password_checks) == 6
    # The wait grows with the names failed there: 2 s at three names, 16 s at six.
    assert 8 < int(second[-1]["Retry-After"]) <= 16
    # A user who did not fail from that address gets in; elsewhere, the names are tried.
    assert api_token("10.0.0.1", "erin", "erin-password").status_code == 200
    assert api_token("10.0.0.2", "user0", "Autumn2024").status_code == 400


def test_a_user_who_failed_at_a_spraying_address_waits_for_it_and_then_gets_in(editor):
    api_token("10.0.0.1", "erin", "typo")
    for name in ("u1", "u2", "u3"):
        api_token("10.0.0.1", name, "guess")

    assert api_token("10.0.0.1", "erin", "erin-password").status_code == 429
    waits_pass()
    assert api_token("10.0.0.1", "erin", "erin-password").status_code == 200


def test_one_account_failing_many_times_does_not_throttle_its_address(editor):
    for _ in range(5):
        api_token("10.0.0.1", "nobody", "x")

    assert api_token("10.0.0.1", "erin", "erin-password").status_code == 200
    assert api_token("10.0.0.1", "vic", "wrong").status_code == 400


# -- one account, from many addresses -------------------------------------------------------


def test_guesses_at_one_account_from_many_addresses_are_slowed_for_that_account(editor):
    for n in range(3):
        assert api_token(f"10.0.1.{n}", "erin", "wrong").status_code == 400

    waits = []
    for n in range(3, 7):
        refused = api_token(f"10.0.1.{n}", "erin", "erin-password")
        assert refused.status_code == 429
        waits.append(int(refused["Retry-After"]))
        waits_pass()
        assert api_token(f"10.0.1.{n}", "erin", "wrong-again").status_code == 400

    assert waits == [2, 4, 8, 16]  # doubling after each failure past the limit
    assert page_login("10.0.1.9", "vic", "wrong").status_code == 200  # others may still try


def test_the_wait_stops_growing_at_the_longest_and_a_right_password_after_it_gets_in(editor):
    for _ in range(12):
        api_token("10.0.0.1", "erin", "wrong")
        waits_pass()
    api_token("10.0.0.1", "erin", "wrong")

    refused = api_token("10.0.0.1", "erin", "erin-password")
    assert refused.status_code == 429
    assert LONGEST - 2 <= int(refused["Retry-After"]) <= LONGEST
    waits_pass()
    assert api_token("10.0.0.1", "erin", "erin-password").status_code == 200


def test_failures_at_the_login_page_and_the_api_count_for_the_same_user_name(editor):
    assert page_login("10.0.0.1", "erin", "x").status_code == 200
    assert api_token("10.0.0.2", "erin", "x").status_code == 400
    assert page_login("10.0.0.3", "erin", "x").status_code == 200

    page = page_login("10.0.0.4", "erin", "erin-password")
    api = api_token("10.0.0.4", "erin", "erin-password")

    assert (page.status_code, api.status_code) == (429, 429)
    for response in (page, api):
        assert 0 < int(response["Retry-After"]) <= 2
    assert "Too many failed sign-ins" in api.json()["error"]
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


def test_refused_attempts_do_not_lengthen_the_wait(editor):
    for _ in range(3):
        api_token("10.0.0.1", "erin", "wrong")
    for _ in range(5):
        assert api_token("10.0.0.1", "erin", "wrong").status_code == 429

    assert FailedLogin.objects.count() == 3
    waits_pass(3)
    assert api_token("10.0.0.1", "erin", "erin-password").status_code == 200


def test_a_success_forgets_the_accounts_failures_from_its_address_only(editor):
    api_token("10.0.0.1", "erin", "wrong")
    api_token("10.0.0.1", "erin", "wrong")
    api_token("10.0.0.2", "erin", "wrong")
    waits_pass()

    assert api_token("10.0.0.2", "erin", "erin-password").status_code == 200
    api_token("10.0.0.3", "erin", "wrong")  # with the two from 10.0.0.1: three again

    assert api_token("10.0.0.3", "erin", "erin-password").status_code == 429


# -- engines --------------------------------------------------------------------------------


def test_a_client_ids_failures_from_any_address_slow_its_wrong_secrets_not_its_right_one(editor):
    client, secret = create_client(name="spark", user=editor)
    other, other_secret = create_client(name="trino", user=editor)
    for address in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
        assert engine_token(address, client.client_id, "wrong").status_code == 401

    wrong = engine_token("10.0.0.4", client.client_id, "wrong")
    right = engine_token("10.0.0.4", client.client_id, secret)

    assert wrong.status_code == 429
    assert wrong.json()["error"] == "slow_down"
    assert "Too many failed sign-ins" in wrong.json()["error_description"]
    assert 0 < int(wrong["Retry-After"]) <= 4
    assert right.status_code == 200
    assert engine_token("10.0.0.4", other.client_id, other_secret).status_code == 200


def test_client_ids_failing_at_an_address_do_not_make_it_a_spray(editor):
    for n in range(5):
        engine_token("10.0.0.1", f"no-such-client-{n}", "x")
    api_token("10.0.0.1", "erin", "typo")

    assert api_token("10.0.0.1", "erin", "erin-password").status_code == 200


# -- the rows -------------------------------------------------------------------------------


def test_failures_older_than_the_window_no_longer_count_and_are_deleted(editor):
    for _ in range(3):
        api_token("10.0.0.1", "erin", "wrong")
    assert api_token("10.0.0.1", "erin", "erin-password").status_code == 429

    waits_pass(WINDOW + 1)

    assert api_token("10.0.0.2", "erin", "erin-password").status_code == 200
    assert api_token("10.0.0.2", "vic", "wrong").status_code == 400
    # That failure removed the expired rows: only its own remains.
    assert FailedLogin.objects.count() == 1


def test_an_accounts_rows_are_kept_only_as_far_back_as_its_wait_depends_on(editor):
    for _ in range(30):
        api_token("10.0.0.1", "erin", "wrong")
        waits_pass()

    # Three allowed, then doublings up to the longest wait: 2, 4, ... 64 is six of them.
    assert FailedLogin.objects.count() <= 3 + throttle._doublings()
    refused = api_token("10.0.0.1", "erin", "wrong")
    waits_pass(LONGEST - 1)
    assert api_token("10.0.0.1", "erin", "erin-password").status_code == 429  # still waits
    assert refused.status_code == 400


def test_the_table_keeps_at_most_max_rows(monkeypatch, editor):
    monkeypatch.setattr(throttle, "MAX_ROWS", 4)
    for n in range(10):
        api_token(f"10.0.2.{n}", f"user{n}", "wrong")

    assert FailedLogin.objects.count() == 4


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


def test_the_admin_sites_login_is_throttled_with_the_login_page(editor, password_checks):
    editor.is_staff = True
    editor.save()
    admin = from_address("10.0.0.1")
    for _ in range(2):
        wrong = admin.post("/admin/login/", {"username": "erin", "password": "wrong"})
        assert wrong.status_code == 200
    page_login("10.0.0.1", "erin", "wrong")  # the third failure, at the other page

    refused = admin.post("/admin/login/", {"username": "erin", "password": "erin-password"})

    assert refused.status_code == 429
    assert 0 < int(refused["Retry-After"]) <= 2
    assert b"Too many failed sign-ins" in refused.content
    assert len(password_checks) == 3
    waits_pass()
    signed_in = admin.post("/admin/login/", {"username": "erin", "password": "erin-password"})
    assert signed_in.status_code == 302
    assert not FailedLogin.objects.filter(address=throttle._hash("address:10.0.0.1")).exists()
