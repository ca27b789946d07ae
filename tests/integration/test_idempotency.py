"""`Idempotency-Key` on the Iceberg REST catalog (Iceberg 1.10's open-api spec,
`components/parameters/idempotency-key`; catalog/iceberg_rest/idempotency.py): a retry with
the key gets the first answer without the work being done again, across clients and
processes (the answers are rows), per principal; another request with the key is a 422; a
key that is not a UUID a 400; 5xx answers are not kept; two requests with one key at once
do the work once; keys past their lifetime are deleted by the hourly sweep."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from catalog import services
from catalog.iceberg_rest import idempotency
from catalog.models import CatalogEvent, IdempotencyKey, Namespace, Table, View
from catalog.roles import EDITOR
from catalog.tasks import purge_expired_tokens
from tests.integration.test_iceberg_rest import (
    BASE,
    SCHEMA,
    Iceberg,
    assert_error,
    create_table,
    create_view,
    create_view_request,
    metadata_files,
    pointer,
    token_for,
)
from tests.live_server import catalog_server

pytestmark = pytest.mark.django_db


def key() -> str:
    return str(uuid.uuid4())


def send(api: Iceberg, method: str, path: str, body: Any = None, *, idempotency_key: str):
    """A request as an engine that sends Idempotency-Key sends it."""
    headers = {**api.headers, "Idempotency-Key": idempotency_key}
    call = getattr(api.client, method.lower())
    if method in ("GET", "DELETE"):
        return call(BASE + path, headers=headers)
    data = json.dumps(body if body is not None else {})
    return call(BASE + path, data=data, content_type="application/json", headers=headers)


def events(action: str, name: str) -> int:
    return CatalogEvent.objects.filter(action=action, object_name=name).count()


@pytest.fixture
def other_editor(django_user_model):
    user = django_user_model.objects.create_user(username="edgar", password="edgar-password")
    user.groups.add(Group.objects.get_or_create(name=EDITOR)[0])
    return user


# -- the advertisement ---------------------------------------------------------------------


def test_the_config_advertises_the_idempotency_key_lifetime(api):
    assert api.get("/config").json()["idempotency-key-lifetime"] == "PT30M"


def test_the_advertised_lifetime_is_the_setting(api, settings):
    settings.ICEBERG_IDEMPOTENCY_KEY_LIFETIME = "PT24H"

    assert api.get("/config").json()["idempotency-key-lifetime"] == "PT24H"
    assert idempotency.lifetime() == timedelta(hours=24)


@pytest.mark.parametrize("text", ["30m", "PT", "P", "P1M", "PT-5M", "PT0S", "1800", ""])
def test_a_lifetime_that_is_not_a_positive_iso_duration_of_days_to_seconds_is_refused(text):
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured):
        idempotency.parse_lifetime(text)


def test_iso_durations_of_days_hours_minutes_and_seconds_are_read():
    assert idempotency.parse_lifetime("PT30M") == timedelta(minutes=30)
    assert idempotency.parse_lifetime("P1DT12H") == timedelta(days=1, hours=12)
    assert idempotency.parse_lifetime("PT90.5S") == timedelta(seconds=90.5)


# -- replays -------------------------------------------------------------------------------


def test_a_retried_create_table_after_a_lost_answer_gets_the_first_answer_not_already_exists(
    api, ns, warehouse
):
    k = key()
    body = {"name": "t", "schema": SCHEMA}
    first = send(api, "POST", "/namespaces/ns/tables", body, idempotency_key=k)
    assert first.status_code == 200, first.content
    files = metadata_files(warehouse)

    # The first answer never reached the client; it retries, from another connection.
    retry = send(
        Iceberg(api.headers["Authorization"][7:]),
        "POST",
        "/namespaces/ns/tables",
        body,
        idempotency_key=k,
    )

    assert retry.status_code == 200, retry.content
    assert retry.content == first.content
    assert retry["ETag"] == first["ETag"]
    assert metadata_files(warehouse) == files
    assert events("create_table", "ns.t") == 1
    # Without the key the same request is a second create, which the name refuses.
    assert_error(api.post("/namespaces/ns/tables", body), 409, "AlreadyExistsException")


def add_column_commit(table: dict) -> dict:
    """A commit that cannot be applied twice: it asserts the schema it replaces."""
    schema = {
        **SCHEMA,
        "schema-id": 1,
        "fields": [*SCHEMA["fields"], {"id": 4, "name": "n", "type": "int", "required": False}],
    }
    return {
        "requirements": [
            {"type": "assert-table-uuid", "uuid": table["metadata"]["table-uuid"]},
            {"type": "assert-current-schema-id", "current-schema-id": 0},
        ],
        "updates": [
            {"action": "add-schema", "schema": schema},
            {"action": "set-current-schema", "schema-id": -1},
        ],
    }


def test_a_retried_commit_gets_the_first_answer_not_a_conflict_and_commits_once(api, ns, warehouse):
    table = create_table(api)
    commit = add_column_commit(table)
    k = key()
    first = send(api, "POST", "/namespaces/ns/tables/t", commit, idempotency_key=k)
    assert first.status_code == 200, first.content
    after_first = pointer("ns", "t")
    files = metadata_files(warehouse)

    retry = send(api, "POST", "/namespaces/ns/tables/t", commit, idempotency_key=k)

    assert retry.status_code == 200, retry.content
    assert retry.content == first.content
    assert retry["ETag"] == first["ETag"]
    assert pointer("ns", "t") == after_first
    assert metadata_files(warehouse) == files
    assert events("commit_table", "ns.t") == 1
    # Without the key the retry would have been refused: its requirement no longer holds.
    assert_error(api.post("/namespaces/ns/tables/t", commit), 409, "CommitFailedException")


def test_a_body_serialized_in_another_key_order_is_the_same_request(api, ns):
    k = key()
    headers = {**api.headers, "Idempotency-Key": k}
    url = BASE + "/namespaces"
    first = api.client.post(
        url,
        '{"namespace": ["a"], "properties": {"x": "1", "y": "2"}}',
        "application/json",
        headers=headers,
    )
    again = api.client.post(
        url,
        '{"properties":{"y":"2","x":"1"},"namespace":["a"]}',
        "application/json",
        headers=headers,
    )

    assert first.status_code == again.status_code == 200
    assert again.content == first.content


@pytest.mark.parametrize(
    "method,path,body,status",
    [
        ("DELETE", "/namespaces/ns/tables/t", None, 204),
        ("DELETE", "/namespaces/ns/views/v", None, 204),
        (
            "POST",
            "/tables/rename",
            {
                "source": {"namespace": ["ns"], "name": "t"},
                "destination": {"namespace": ["ns"], "name": "t2"},
            },
            204,
        ),
        (
            "POST",
            "/views/rename",
            {
                "source": {"namespace": ["ns"], "name": "v"},
                "destination": {"namespace": ["ns"], "name": "v2"},
            },
            204,
        ),
        ("POST", "/namespaces/ns/views", create_view_request("v3"), 200),
        ("POST", "/namespaces/ns/properties", {"updates": {"a": "1"}, "removals": ["owner"]}, 200),
        ("POST", "/namespaces", {"namespace": ["other"]}, 200),
        ("DELETE", "/namespaces/empty", None, 204),
    ],
)
def test_every_mutation_the_spec_lists_answers_a_retry_with_its_first_answer(
    api, ns, method, path, body, status
):
    create_table(api)
    create_view(api)
    assert api.post("/namespaces", {"namespace": ["empty"]}).status_code == 200
    k = key()
    first = send(api, method, path, body, idempotency_key=k)
    assert first.status_code == status, first.content

    retry = send(api, method, path, body, idempotency_key=k)

    # Done twice, each of these would fail the second time (missing, or already there) or
    # answer otherwise (a property no longer there to remove).
    assert retry.status_code == status, retry.content
    assert retry.content == first.content
    assert IdempotencyKey.objects.get().status == status


def test_a_retried_register_and_view_commit_and_transaction_are_answered_once(api, ns):
    dropped = create_table(api, "dropped")
    assert api.delete("/namespaces/ns/tables/dropped").status_code == 204  # its files stay
    registration = {"name": "r", "metadata-location": dropped["metadata-location"]}
    k = key()
    first = send(api, "POST", "/namespaces/ns/register", registration, idempotency_key=k)
    assert first.status_code == 200, first.content
    retry = send(api, "POST", "/namespaces/ns/register", registration, idempotency_key=k)
    assert retry.content == first.content

    assert Table.objects.filter(name="r").count() == 1

    gone = create_view(api, "gone")
    assert api.delete("/namespaces/ns/views/gone").status_code == 204  # its file stays
    registration = {"name": "rv", "metadata-location": gone["metadata-location"]}
    k = key()
    first = send(api, "POST", "/namespaces/ns/register-view", registration, idempotency_key=k)
    assert first.status_code == 200, first.content
    retry = send(api, "POST", "/namespaces/ns/register-view", registration, idempotency_key=k)
    assert retry.content == first.content
    assert View.objects.filter(name="rv").count() == 1

    table = create_table(api)
    view = create_view(api)
    replace = {
        "requirements": [{"type": "assert-view-uuid", "uuid": view["metadata"]["view-uuid"]}],
        "updates": [{"action": "set-properties", "updates": {"comment": "c"}}],
    }
    k = key()
    first = send(api, "POST", "/namespaces/ns/views/v", replace, idempotency_key=k)
    assert first.status_code == 200, first.content
    location = View.objects.get(name="v").metadata_location
    retry = send(api, "POST", "/namespaces/ns/views/v", replace, idempotency_key=k)
    assert retry.content == first.content
    assert View.objects.get(name="v").metadata_location == location

    change = {"identifier": {"namespace": ["ns"], "name": "t"}, **add_column_commit(table)}
    k = key()
    commit = {"table-changes": [change]}
    assert send(api, "POST", "/transactions/commit", commit, idempotency_key=k).status_code == 204
    moved = pointer("ns", "t")
    assert send(api, "POST", "/transactions/commit", commit, idempotency_key=k).status_code == 204
    assert pointer("ns", "t") == moved
    assert events("commit_table", "ns.t") == 1


# -- what is kept, and for whom ------------------------------------------------------------


def test_a_409_is_final_and_replayed_even_after_the_state_changed(api, ns):
    k = key()
    conflict = send(api, "POST", "/namespaces", {"namespace": ["ns"]}, idempotency_key=k)
    assert_error(conflict, 409, "AlreadyExistsException")
    assert api.delete("/namespaces/ns").status_code == 204

    retry = send(api, "POST", "/namespaces", {"namespace": ["ns"]}, idempotency_key=k)

    assert retry.status_code == 409
    assert retry.content == conflict.content
    assert not Namespace.objects.filter(name="ns").exists()


def test_a_server_error_is_not_kept_and_a_retry_does_the_work(api, monkeypatch):
    real = services.create_namespace
    calls = []

    def fails_once(**kwargs):
        calls.append(kwargs)
        if len(calls) == 1:
            raise RuntimeError("the database went away")
        return real(**kwargs)

    monkeypatch.setattr(services, "create_namespace", fails_once)
    k = key()
    api.client.raise_request_exception = False
    failed = send(api, "POST", "/namespaces", {"namespace": ["sales"]}, idempotency_key=k)
    assert failed.status_code == 500
    assert not IdempotencyKey.objects.exists()

    retry = send(api, "POST", "/namespaces", {"namespace": ["sales"]}, idempotency_key=k)

    assert retry.status_code == 200, retry.content
    assert len(calls) == 2
    assert Namespace.objects.filter(name="sales").count() == 1


def test_a_failure_after_the_commit_rolls_the_commit_back_with_its_answer(api, ns, monkeypatch):
    """The answer is written in the work's transaction: a request that fails after the
    kernel's swap (here while its answer is built) leaves no table and no key behind."""
    from catalog.iceberg_rest import objects

    real = objects.load_result
    failures = []

    def fails_once(*args, **kwargs):
        if not failures:
            failures.append(1)
            raise OSError("the answer could not be read")
        return real(*args, **kwargs)

    monkeypatch.setattr(objects, "load_result", fails_once)
    api.client.raise_request_exception = False
    k = key()
    body = {"name": "t", "schema": SCHEMA}
    assert send(api, "POST", "/namespaces/ns/tables", body, idempotency_key=k).status_code == 500
    assert not Table.objects.filter(name="t").exists()
    assert not IdempotencyKey.objects.exists()

    retry = send(api, "POST", "/namespaces/ns/tables", body, idempotency_key=k)

    assert retry.status_code == 200, retry.content
    assert Table.objects.filter(name="t").count() == 1


def test_a_refusal_that_depends_on_the_moment_is_not_kept(viewer, api, ns):
    viewer_api = Iceberg(token_for(viewer))
    k = key()
    refused = send(
        viewer_api,
        "POST",
        "/namespaces/ns/tables",
        {"name": "t", "schema": SCHEMA},
        idempotency_key=k,
    )
    assert refused.status_code == 403
    assert not IdempotencyKey.objects.exists()


def test_the_same_key_with_a_different_body_is_a_422_naming_the_problem(api, ns):
    k = key()
    assert (
        send(api, "POST", "/namespaces", {"namespace": ["a"]}, idempotency_key=k).status_code == 200
    )

    other = send(api, "POST", "/namespaces", {"namespace": ["b"]}, idempotency_key=k)

    error = assert_error(other, 422, "UnprocessableEntityException")
    assert k in error["message"] and "different request" in error["message"]
    assert not Namespace.objects.filter(name="b").exists()


def test_the_same_key_on_another_path_is_a_422(api, ns):
    k = key()
    assert (
        send(api, "POST", "/namespaces", {"namespace": ["a"]}, idempotency_key=k).status_code == 200
    )

    assert_error(
        send(api, "DELETE", "/namespaces/a", idempotency_key=k), 422, "UnprocessableEntityException"
    )
    assert Namespace.objects.filter(name="a").exists()


def test_another_principal_with_the_same_key_is_not_answered_from_the_first(api, other_editor):
    k = key()
    first = send(api, "POST", "/namespaces", {"namespace": ["shared"]}, idempotency_key=k)
    assert first.status_code == 200

    other = send(
        Iceberg(token_for(other_editor)),
        "POST",
        "/namespaces",
        {"namespace": ["shared"]},
        idempotency_key=k,
    )

    # Its own request: the namespace is there now.
    assert_error(other, 409, "AlreadyExistsException")
    assert IdempotencyKey.objects.filter(key=k).count() == 2


@pytest.mark.parametrize(
    "bad", ["not-a-uuid", "12345", "017F22E279B07CC398C4DC0C0C07398F", "{" + "0" * 34 + "}"]
)
def test_a_key_that_is_not_a_uuid_is_a_400_that_says_what_a_key_must_be(api, bad):
    response = send(api, "POST", "/namespaces", {"namespace": ["a"]}, idempotency_key=bad)

    error = assert_error(response, 400, "BadRequestException")
    assert "Idempotency-Key" in error["message"] and "UUID" in error["message"]
    assert not Namespace.objects.filter(name="a").exists()


def test_a_uuidv7_in_capitals_as_the_spec_shows_it_is_a_key(api):
    k = "017F22E2-79B0-7CC3-98C4-DC0C0C07398F"
    first = send(api, "POST", "/namespaces", {"namespace": ["a"]}, idempotency_key=k)
    retry = send(api, "POST", "/namespaces", {"namespace": ["a"]}, idempotency_key=k.lower())

    assert first.status_code == retry.status_code == 200
    assert IdempotencyKey.objects.get().key == uuid.UUID(k)


def test_a_request_without_the_key_keeps_nothing_and_costs_no_query_for_it(api, ns):
    with CaptureQueriesContext(connection) as queries:
        assert api.post("/namespaces", {"namespace": ["a"]}).status_code == 200
    assert not IdempotencyKey.objects.exists()
    assert not any("idempotencykey" in q["sql"].lower() for q in queries.captured_queries)


def test_reads_ignore_the_key(api, ns):
    assert send(api, "GET", "/namespaces/ns", idempotency_key="x").status_code == 200
    assert not IdempotencyKey.objects.exists()


# -- lifetime ------------------------------------------------------------------------------


def test_a_key_past_its_lifetime_is_a_new_request(api):
    k = key()
    assert (
        send(api, "POST", "/namespaces", {"namespace": ["a"]}, idempotency_key=k).status_code == 200
    )
    IdempotencyKey.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    again = send(api, "POST", "/namespaces", {"namespace": ["a"]}, idempotency_key=k)

    assert_error(again, 409, "AlreadyExistsException")


def test_the_hourly_sweep_deletes_keys_past_their_lifetime_and_keeps_live_ones(api, settings):
    assert settings.CELERY_BEAT_SCHEDULE["purge-expired-tokens"]["schedule"] <= 3600
    for name in ("old", "live"):
        send(api, "POST", "/namespaces", {"namespace": [name]}, idempotency_key=key())
    old = IdempotencyKey.objects.order_by("pk").first()
    IdempotencyKey.objects.filter(pk=old.pk).update(expires_at=timezone.now() - timedelta(1))

    purge_expired_tokens()

    assert list(IdempotencyKey.objects.values_list("pk", flat=True)) != [old.pk]
    assert IdempotencyKey.objects.count() == 1


def test_a_key_lives_for_the_configured_lifetime_from_its_first_use(api, settings):
    settings.ICEBERG_IDEMPOTENCY_KEY_LIFETIME = "PT2H"
    before = timezone.now()
    send(api, "POST", "/namespaces", {"namespace": ["a"]}, idempotency_key=key())
    row = IdempotencyKey.objects.get()
    assert before + timedelta(hours=2) <= row.expires_at <= timezone.now() + timedelta(hours=2)


# -- requests with one key at once ---------------------------------------------------------


def test_a_request_whose_key_is_still_in_progress_elsewhere_gets_a_503_with_retry_after(
    api, editor, monkeypatch
):
    monkeypatch.setattr(idempotency, "IN_PROGRESS_WAIT_SECONDS", 0.2)
    k = key()
    body = {"namespace": ["a"]}
    # The key's row as a request running in another process leaves it: claimed, no answer.
    first = send(api, "POST", "/namespaces", body, idempotency_key=k)
    IdempotencyKey.objects.update(status=None, body=b"", claimed_at=timezone.now())
    Namespace.objects.filter(name="a").delete()

    waiting = send(api, "POST", "/namespaces", body, idempotency_key=k)

    assert first.status_code == 200
    assert_error(waiting, 503, "ServiceUnavailableException")
    assert waiting["Retry-After"] == "1"
    assert not Namespace.objects.filter(name="a").exists()


def test_a_claim_left_by_a_dead_process_is_taken_over(api):
    k = key()
    body = {"namespace": ["a"]}
    send(api, "POST", "/namespaces", body, idempotency_key=k)
    stale = timezone.now() - timedelta(seconds=idempotency.STALE_CLAIM_SECONDS + 1)
    IdempotencyKey.objects.update(status=None, body=b"", claimed_at=stale)
    Namespace.objects.filter(name="a").delete()

    retry = send(api, "POST", "/namespaces", body, idempotency_key=k)

    assert retry.status_code == 200, retry.content
    assert Namespace.objects.filter(name="a").exists()
    assert IdempotencyKey.objects.get().status == 200


@pytest.mark.postgres  # SQLite's in-memory test database locks whole tables across threads
@pytest.mark.django_db(transaction=True)
def test_two_requests_with_one_key_at_once_do_the_work_once_and_get_one_answer(editor, monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite's in-memory test database locks whole tables across threads")
    token = token_for(editor)
    real = services.create_namespace
    calls = []
    started = threading.Event()

    def slow(**kwargs):
        calls.append(kwargs)
        started.set()
        threading.Event().wait(0.5)  # the second request arrives meanwhile
        return real(**kwargs)

    monkeypatch.setattr(services, "create_namespace", slow)
    k = key()
    answers: dict[str, Any] = {}

    def request(name: str) -> None:
        try:
            if name == "second":
                started.wait(5)
            api = Iceberg(token)
            answers[name] = send(
                api, "POST", "/namespaces", {"namespace": ["a"]}, idempotency_key=k
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=request, args=(n,)) for n in ("first", "second")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert len(calls) == 1
    assert answers["first"].status_code == answers["second"].status_code == 200
    assert answers["second"].content == answers["first"].content
    assert events("create_namespace", "a") <= 1
    assert Namespace.objects.filter(name="a").count() == 1


def test_a_replay_is_answered_from_the_database_by_any_client_of_the_principal(api, ns):
    k = key()
    body = {"namespace": ["a"]}
    first = send(api, "POST", "/namespaces", body, idempotency_key=k)
    row = IdempotencyKey.objects.get()
    assert (row.status, bytes(row.body)) == (200, first.content)
    # A new test client (another process after a restart, as far as the app can tell).
    fresh = Iceberg(api.headers["Authorization"].removeprefix("Bearer "))
    fresh.client = Client()
    assert send(fresh, "POST", "/namespaces", body, idempotency_key=k).content == first.content


def test_requests_with_one_key_at_once_to_several_web_processes_create_one_table(tmp_path):
    """The app as deployed (gunicorn, two processes of four threads, its own database file):
    six copies of one create sent at once, with one key, all get the first answer."""
    import requests

    with catalog_server(tmp_path / "app", workers=2, threads=4) as server:
        http = server.iceberg_session()
        base = f"{server.iceberg_uri}/v1"
        assert http.post(f"{base}/namespaces", json={"namespace": ["ns"]}).status_code == 200
        k = key()
        headers = {**http.headers, "Idempotency-Key": k}
        start = threading.Barrier(6)
        answers: list[requests.Response] = []

        def create() -> None:
            start.wait()
            with requests.Session() as session:
                answers.append(
                    session.post(
                        f"{base}/namespaces/ns/tables",
                        json={"name": "t", "schema": SCHEMA},
                        headers=headers,
                        timeout=60,
                    )
                )

        threads = [threading.Thread(target=create) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(90)
        http.close()

    assert [a.status_code for a in answers] == [200] * 6, [a.text[:200] for a in answers]
    assert len({a.content for a in answers}) == 1
    assert len({a.headers["ETag"] for a in answers}) == 1
    assert len(list((server.warehouse / "ns" / "t" / "metadata").glob("*.metadata.json"))) == 1
