"""Notifications: subscriptions of an email address or a webhook to a materialized table or
a namespace, one message per change of a table's state, deliveries signed, recorded and
retried, and webhooks to internal addresses refused. A real HTTP receiver on 127.0.0.1
(allowed through ALERTS_ALLOWED_NETWORKS in each test that uses it) checks every
signature; each test makes the worker's attempt itself. The guard against internal
addresses with names, redirects and DNS rebinding: test_webhook_guard.py; deliveries through
a real worker and celery-beat: tests/spark/test_mt_end_to_end.py."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.core import mail
from django.db import transaction
from django.utils import timezone
from rest_framework.test import APIClient

from alerts import services as alerts
from alerts.models import Delivery, NotificationState, Subscription
from maintenance.models import MaintenanceRun
from refresh import runs
from refresh import services as refresh_services
from refresh.models import MaterializedTable, RefreshRun, Verification
from tests.integration.test_monitoring import materialized, refreshed
from tests.webhook_receiver import Receiver

pytestmark = pytest.mark.django_db(transaction=False)


@pytest.fixture
def receiver(settings) -> Iterator[Receiver]:
    settings.ALERTS_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    settings.ALERTS_RETRY_BASE_SECONDS = 0
    running = Receiver()
    yield running
    running.stop()


@pytest.fixture
def client(editor) -> APIClient:
    api = APIClient()
    api.force_authenticate(editor)
    return api


def deliver_all() -> list[str]:
    """What a worker does with every delivery due: one attempt each."""
    return [
        alerts.deliver(pk)
        for pk in Delivery.objects.filter(status="PENDING")
        .order_by("pk")
        .values_list("pk", flat=True)
    ]


def end(mt: MaterializedTable, state: str, capture, *, error: str = "boom") -> RefreshRun:
    run = RefreshRun.objects.create(
        materialized_table=mt,
        table_name=str(mt.table),
        trigger=RefreshRun.Trigger.SCHEDULED,
        action=RefreshRun.Action.FULL,
        state=RefreshRun.State.RUNNING,
        started_at=timezone.now() - timedelta(seconds=5),
    )
    with capture(execute=True):
        runs.finish(run, state=state, error=error if state == "FAILED" else "")
    return run


def test_a_failing_run_sends_one_failed_a_second_failure_none_and_a_success_recovered(
    receiver, django_capture_on_commit_callbacks
) -> None:
    mt = materialized("ns", "daily")
    subscription = alerts.create_subscription(
        materialized_table="ns.daily", webhook_url=receiver.url
    )
    first = end(mt, "FAILED", django_capture_on_commit_callbacks, error="division by zero")
    assert deliver_all() == ["DELIVERED"]
    end(mt, "FAILED", django_capture_on_commit_callbacks)
    assert deliver_all() == []
    end(mt, "SUCCEEDED", django_capture_on_commit_callbacks)
    end(mt, "SUCCEEDED", django_capture_on_commit_callbacks)
    assert deliver_all() == ["DELIVERED"]
    assert receiver.events(subscription.secret) == ["FAILED", "RECOVERED"]
    failed = json.loads(receiver.requests[0]["body"])
    assert failed["table"] == "ns.daily"
    assert failed["run"]["id"] == first.pk
    assert failed["run"]["state"] == "FAILED"
    assert failed["run"]["finished_at"]
    assert failed["error"] == "division by zero"
    assert failed["links"]["materialized_table"] == "/namespaces/ns/materialized-tables/daily/"
    assert receiver.requests[0]["path"] == "/hooks/lakeview"
    assert receiver.requests[0]["headers"]["X-Lakeview-Event"] == "FAILED"


def test_a_namespace_subscription_covers_the_tables_of_namespaces_inside_it_and_says_suspended(
    receiver, settings, django_capture_on_commit_callbacks
) -> None:
    settings.MT_FAILURES_BEFORE_SUSPEND = 2
    from catalog import services as catalog_services

    catalog_services.create_namespace(name="sales")
    mt = materialized("sales.eu", "orders")
    subscription = alerts.create_subscription(namespace="sales", webhook_url=receiver.url)
    end(mt, "FAILED", django_capture_on_commit_callbacks)
    end(mt, "FAILED", django_capture_on_commit_callbacks)
    end(mt, "FAILED", django_capture_on_commit_callbacks)
    deliver_all()
    assert receiver.events(subscription.secret) == ["FAILED", "SUSPENDED"]
    suspended = json.loads(receiver.requests[1]["body"])
    assert "Suspended after 2 consecutive failed refreshes" in suspended["message"]


def test_a_run_whose_transaction_rolls_back_leaves_no_message_and_nothing_is_sent(
    receiver, django_capture_on_commit_callbacks
) -> None:
    mt = materialized("ns", "undone")
    alerts.create_subscription(materialized_table="ns.undone", webhook_url=receiver.url)
    run = RefreshRun.objects.create(
        materialized_table=mt, table_name="ns.undone", trigger="MANUAL", state="RUNNING"
    )
    with (
        django_capture_on_commit_callbacks(execute=True) as callbacks,
        pytest.raises(RuntimeError),
        transaction.atomic(),
    ):
        runs.finish(run, state=RefreshRun.State.FAILED, error="boom")
        raise RuntimeError("the caller's transaction fails after the run ended")
    assert callbacks == []
    assert not Delivery.objects.exists()
    assert not NotificationState.objects.exists()


def test_a_message_whose_task_was_never_sent_is_sent_again_by_the_sweep(
    receiver, django_capture_on_commit_callbacks, caplog
) -> None:
    mt = materialized("ns", "lost")
    alerts.create_subscription(materialized_table="ns.lost", webhook_url=receiver.url)
    run = RefreshRun.objects.create(
        materialized_table=mt, table_name="ns.lost", trigger="MANUAL", state="RUNNING"
    )
    with django_capture_on_commit_callbacks(execute=False):  # the broker never heard of it
        runs.finish(run, state=RefreshRun.State.FAILED, error="boom")
    delivery = Delivery.objects.get()
    assert alerts.sweep()["resent"] == 0  # not overdue yet
    Delivery.objects.filter(pk=delivery.pk).update(
        next_attempt_at=timezone.now() - timedelta(minutes=5)
    )
    with caplog.at_level("WARNING", logger="alerts.services"):
        assert alerts.sweep()["resent"] == 1
    assert f"Sent again 1 deliveries whose task was lost: {delivery.pk}" in caplog.text
    assert deliver_all() == ["DELIVERED"]


def test_finished_deliveries_are_kept_for_the_days_set_and_pending_ones_always(
    settings,
) -> None:
    settings.ALERTS_KEEP_DAYS = 30
    materialized("ns", "old")
    subscription = alerts.create_subscription(materialized_table="ns.old", email="a@example.com")
    long_ago = timezone.now() - timedelta(days=31)
    for status in ("DELIVERED", "FAILED", "PENDING"):
        Delivery.objects.create(
            subscription=subscription,
            event="FAILED",
            status=status,
            created_at=long_ago,
            next_attempt_at=timezone.now() + timedelta(minutes=5),
        )
    Delivery.objects.create(subscription=subscription, event="FAILED", status="DELIVERED")
    assert alerts.sweep()["pruned"] == 2
    assert sorted(Delivery.objects.values_list("status", flat=True)) == ["DELIVERED", "PENDING"]


def test_a_webhook_to_an_internal_address_is_refused_with_a_400_naming_the_field(
    client,
) -> None:
    materialized("ns", "daily")
    for url in (
        "http://10.0.0.1/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]:8080/hook",
        "http://[::ffff:10.0.0.1]/hook",
        "http://localhost:8000/hook",
        "ftp://hooks.example.com/",
    ):
        answer = client.post(
            "/api/subscriptions/",
            {"materialized_table": "ns.daily", "webhook_url": url},
            format="json",
        )
        assert answer.status_code == 400, url
        assert answer.json()["field"] == "webhook_url", url
    assert not Subscription.objects.exists()


def test_a_receiver_answering_500_is_tried_again_and_the_attempts_are_recorded(
    receiver, django_capture_on_commit_callbacks
) -> None:
    mt = materialized("ns", "flaky")
    subscription = alerts.create_subscription(
        materialized_table="ns.flaky", webhook_url=receiver.url
    )
    receiver.statuses = [500, 503]
    end(mt, "FAILED", django_capture_on_commit_callbacks)
    assert deliver_all() == ["PENDING"]
    delivery = Delivery.objects.get()
    assert (delivery.attempts, delivery.response_code) == (1, 500)
    assert "answered 500" in delivery.error
    assert deliver_all() == ["PENDING"]
    assert deliver_all() == ["DELIVERED"]
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_code) == ("DELIVERED", 3, 200)
    assert delivery.error == "" and delivery.delivered_at is not None
    assert receiver.events(subscription.secret) == ["FAILED"] * 3
    ids = {json.loads(r["body"])["delivery"] for r in receiver.requests}
    assert ids == {delivery.pk}


def test_retries_stop_once_the_bounded_time_is_over(
    receiver, settings, django_capture_on_commit_callbacks
) -> None:
    settings.ALERTS_RETRY_FOR_SECONDS = 0
    mt = materialized("ns", "down")
    alerts.create_subscription(materialized_table="ns.down", webhook_url=receiver.url)
    receiver.statuses = [500]
    end(mt, "FAILED", django_capture_on_commit_callbacks)
    assert deliver_all() == ["FAILED"]
    assert Delivery.objects.get().response_code == 500


def test_a_4xx_answer_is_not_tried_again(receiver, django_capture_on_commit_callbacks) -> None:
    mt = materialized("ns", "gone")
    alerts.create_subscription(materialized_table="ns.gone", webhook_url=receiver.url)
    receiver.statuses = [410]
    end(mt, "FAILED", django_capture_on_commit_callbacks)
    assert deliver_all() == ["FAILED"]


def test_an_email_subscription_gets_the_failure_through_djangos_mail(
    django_capture_on_commit_callbacks,
) -> None:
    mt = materialized("ns", "mailed")
    alerts.create_subscription(materialized_table="ns.mailed", email="ops@example.com")
    end(mt, "FAILED", django_capture_on_commit_callbacks, error="out of memory")
    assert deliver_all() == ["DELIVERED"]
    [message] = mail.outbox
    assert message.to == ["ops@example.com"]
    assert message.subject == "[Lakeview] FAILED ns.mailed"
    assert "out of memory" in message.body
    assert "/namespaces/ns/materialized-tables/mailed/" in message.body


def test_a_table_late_beyond_the_grace_is_told_once_and_recovered_when_on_time(
    receiver, settings, django_capture_on_commit_callbacks
) -> None:
    settings.ALERTS_LATE_GRACE_SECONDS = 600
    mt = materialized("ns", "slow", freshness=(1, "HOUR"))
    subscription = alerts.create_subscription(
        materialized_table="ns.slow", webhook_url=receiver.url
    )
    refreshed(mt, ago=timedelta(minutes=65))  # over the freshness, within the grace
    with django_capture_on_commit_callbacks(execute=True):
        assert alerts.sweep()["messages"] == 0
    refreshed(mt, ago=timedelta(minutes=71))
    RefreshRun.objects.filter(materialized_table=mt).exclude(
        queued_at__lt=timezone.now() - timedelta(minutes=70)
    ).delete()
    with django_capture_on_commit_callbacks(execute=True):
        assert alerts.sweep()["messages"] == 1
        assert alerts.sweep()["messages"] == 0
    refreshed(mt, ago=timedelta(minutes=1))
    with django_capture_on_commit_callbacks(execute=True):
        assert alerts.sweep()["messages"] == 1
    deliver_all()
    assert receiver.events(subscription.secret) == ["LATE", "RECOVERED"]


def test_a_failed_maintenance_run_and_a_verification_that_differs_are_told_once(
    receiver, django_capture_on_commit_callbacks
) -> None:
    from maintenance import services as maintenance_services

    mt = materialized("ns", "kept")
    subscription = alerts.create_subscription(namespace="ns", webhook_url=receiver.url)
    for _ in range(2):
        run = MaintenanceRun.objects.create(
            table=mt.table,
            table_name="ns.kept",
            action="EXPIRE_SNAPSHOTS",
            trigger="SCHEDULED",
            state="RUNNING",
        )
        with django_capture_on_commit_callbacks(execute=True):
            maintenance_services.finish(run, state="FAILED", error="disk full")
    for _ in range(2):
        with django_capture_on_commit_callbacks(execute=True):
            refresh_services.record_verification(
                mt,
                snapshot_id=1,
                verdict=Verification.Verdict.DIFFERS,
                missing_rows=2,
                extra_rows=1,
            )
    deliver_all()
    assert receiver.events(subscription.secret) == ["MAINTENANCE_FAILED", "VERIFICATION_DIFFERS"]
    differs = json.loads(receiver.requests[1]["body"])
    assert "2 rows missing, 1 extra" in differs["message"]


def test_editors_subscribe_send_a_test_list_deliveries_and_delete_through_the_api(
    client, receiver, django_capture_on_commit_callbacks
) -> None:
    materialized("ns", "daily")
    created = client.post(
        "/api/subscriptions/",
        {"materialized_table": "ns.daily", "webhook_url": receiver.url},
        format="json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["materialized_table"] == "ns.daily" and body["channel"] == "WEBHOOK"
    assert body["secret"].startswith("whsec_")
    listed = client.get("/api/subscriptions/").json()
    assert [s["id"] for s in listed["results"]] == [body["id"]]
    assert "secret" not in listed["results"][0]
    with django_capture_on_commit_callbacks(execute=True):
        tested = client.post(f"/api/subscriptions/{body['id']}/test")
    assert tested.status_code == 202
    deliver_all()
    assert receiver.events(body["secret"]) == ["TEST"]
    deliveries = client.get(f"/api/subscriptions/{body['id']}/deliveries/").json()["results"]
    assert [(d["event"], d["status"], d["attempts"], d["response_code"]) for d in deliveries] == [
        ("TEST", "DELIVERED", 1, 200)
    ]
    assert client.delete(f"/api/subscriptions/{body['id']}/").status_code == 204
    assert client.delete(f"/api/subscriptions/{body['id']}/").status_code == 404
    assert not Delivery.objects.exists()


def test_the_api_names_what_is_wrong_with_a_subscription(client) -> None:
    materialized("ns", "daily")
    cases = [
        ({"webhook_url": "https://example.com/"}, 400, "materialized_table"),
        ({"materialized_table": "ns.nope", "email": "a@example.com"}, 404, "materialized_table"),
        ({"namespace": "nope", "email": "a@example.com"}, 404, "namespace"),
        ({"materialized_table": "ns.daily", "email": "not an address"}, 400, "email"),
        ({"materialized_table": "ns.daily"}, 400, "email"),
    ]
    for data, code, field in cases:
        answer = client.post("/api/subscriptions/", data, format="json")
        assert (answer.status_code, answer.json().get("field")) == (code, field), data


def test_viewers_read_subscriptions_without_webhook_paths_and_cannot_change_them(
    viewer, editor
) -> None:
    materialized("ns", "daily")
    subscription = alerts.create_subscription(
        materialized_table="ns.daily", email="ops@example.com", actor=editor
    )
    hook = Subscription.objects.create(
        materialized_table=subscription.materialized_table,
        channel="WEBHOOK",
        address="https://hooks.example.com/services/T000/B000/secret-token",
        secret="whsec_x",
    )
    api = APIClient()
    api.force_authenticate(viewer)
    listed = api.get("/api/subscriptions/")
    assert listed.status_code == 200
    assert [s["address"] for s in listed.json()["results"]] == [
        "ops@example.com",
        "https://hooks.example.com/...",
    ]
    assert api.get(f"/api/subscriptions/{hook.pk}/").json()["address"].endswith("/...")
    assert all("secret" not in s for s in listed.json()["results"])
    made = api.post(
        "/api/subscriptions/",
        {"materialized_table": "ns.daily", "email": "x@example.com"},
        format="json",
    )
    assert made.status_code == 403
    assert api.delete(f"/api/subscriptions/{subscription.pk}/").status_code == 403
    assert api.post(f"/api/subscriptions/{subscription.pk}/test").status_code == 403


def test_the_admin_refuses_an_internal_webhook_and_gives_a_new_one_a_secret(
    admin_client, settings
) -> None:
    from catalog.models import Namespace

    materialized("ns", "daily")
    namespace = Namespace.objects.get(name="ns")
    form = {"namespace": namespace.pk, "channel": "WEBHOOK", "address": "http://10.0.0.1/h"}
    refused = admin_client.post("/admin/alerts/subscription/add/", form)
    assert refused.status_code == 200
    assert "webhooks may not reach" in refused.content.decode()
    assert not Subscription.objects.exists()
    settings.ALERTS_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    made = admin_client.post("/admin/alerts/subscription/add/", form)
    assert made.status_code == 302
    subscription = Subscription.objects.get()
    assert subscription.secret.startswith("whsec_")
    assert subscription.created_by is not None


def test_the_materialized_tables_page_lists_its_subscriptions_and_editors_subscribe_there(
    editor, viewer, receiver, django_capture_on_commit_callbacks
) -> None:
    from django.test import Client

    materialized("ns", "daily")
    page = "/namespaces/ns/materialized-tables/daily/"
    section = page + "notifications/"
    browser = Client()
    browser.force_login(editor)
    assert f'data-later="{section}"' in browser.get(page).content.decode()
    assert "Nobody is told about this table yet" in browser.get(section).content.decode()

    refused = browser.post(
        section + "subscribe", {"address": "http://169.254.169.254/"}, follow=True
    )
    assert "webhooks may not reach" in refused.content.decode()
    made = browser.post(
        section + "subscribe", {"address": receiver.url + "?token=abc"}, follow=True
    )
    assert "signing secret (shown once): whsec_" in made.content.decode()
    browser.post(section + "subscribe", {"address": "ops@example.com"})
    hook = Subscription.objects.get(channel="WEBHOOK")
    with django_capture_on_commit_callbacks(execute=True):
        browser.post(section + "test", {"subscription": hook.pk})
    deliver_all()
    assert receiver.events(hook.secret) == ["TEST"]
    shown = browser.get(section).content.decode()
    assert "token=abc" in shown and "ops@example.com" in shown and "DELIVERED" in shown

    reader = Client()
    reader.force_login(viewer)
    read = reader.get(section).content.decode()
    assert "token=abc" not in read and "127.0.0.1" in read and "Subscribe" not in read
    assert reader.post(section + "delete", {"subscription": hook.pk}).status_code == 403
    missing = browser.post(section + "delete", {"subscription": "99999"}, follow=True)
    assert "No such subscription of this table" in missing.content.decode()
    browser.post(section + "delete", {"subscription": hook.pk})
    assert list(Subscription.objects.values_list("address", flat=True)) == ["ops@example.com"]


def test_the_section_follows_grants_hidden_unreadable_and_changed_only_by_managers(
    django_user_model, admin_user
) -> None:
    from django.test import Client

    from tests.integration.grant_fixtures import give

    materialized("ns", "daily")
    materialized("other", "kept")
    alerts.create_subscription(materialized_table="ns.daily", email="ops@example.com")
    reader = django_user_model.objects.create_user(username="rita", password="x")
    give(admin_user, "read_data", reader, namespace="ns")
    outsider = django_user_model.objects.create_user(username="otto", password="x")
    give(admin_user, "read_data", outsider, namespace="other")
    section = "/namespaces/ns/materialized-tables/daily/notifications/"

    browser = Client()
    browser.force_login(outsider)
    assert browser.get(section).status_code == 404
    browser.force_login(reader)
    shown = browser.get(section)
    assert shown.status_code == 200 and "ops@example.com" in shown.content.decode()
    assert "Subscribe" not in shown.content.decode()
    assert browser.post(section + "subscribe", {"address": "x@example.com"}).status_code == 403
    assert Subscription.objects.count() == 1


def test_a_stream_failing_on_its_own_is_one_failed_run_and_its_next_micro_batch_a_recovery(
    receiver, django_capture_on_commit_callbacks, monkeypatch
) -> None:
    from types import SimpleNamespace

    from refresh import stream_hosts
    from refresh.core.streaming import StreamPlan
    from refresh.spark.stream_queries import BatchResult
    from refresh.streams import stops
    from refresh.streams.batches import record_batch
    from refresh.streams.state import Running
    from refresh.streams.supervisor import Supervisor

    monkeypatch.setattr("refresh.streams.batches.close_old_connections", lambda: None)
    mt = materialized("ns", "live", freshness=(5, "SECOND"), mode="CONTINUOUS")
    subscription = alerts.create_subscription(namespace="ns", webhook_url=receiver.url)
    supervisor = Supervisor(config=None, host_name="h:1")  # type: ignore[arg-type]
    supervisor.host = stream_hosts.register("h:1")

    def fails(message: str) -> None:
        query = SimpleNamespace(isActive=False, exception=lambda: RuntimeError(message))
        supervisor.running[mt.pk] = Running(mt.pk, query, (), "", StreamPlan("append", (), ()))
        with django_capture_on_commit_callbacks(execute=True):
            stops.ended(supervisor, supervisor.running[mt.pk], mt, held=True)

    fails("Cannot cast 'x' to INT")
    fails("Cannot cast 'x' to INT")  # the retry fails the same way: the same spell

    table = MaterializedTable.objects.get(pk=mt.pk)
    assert (table.stream_status, table.consecutive_failures) == ("FAILED", 0)
    [run] = table.runs.all()
    assert (run.trigger, run.state, run.error) == ("CONTINUOUS", "FAILED", "Cannot cast 'x' to INT")
    assert deliver_all() == ["DELIVERED"]
    assert receiver.events(subscription.secret) == ["FAILED"]

    # The stream starts again and commits a micro-batch: the table recovered.
    MaterializedTable.objects.filter(pk=mt.pk).update(stream_status="RUNNING", stream_error="")
    now = time.time()
    with django_capture_on_commit_callbacks(execute=True):
        record_batch(mt.pk, 1, BatchResult(0, 1, None, None, now - 1, now))
    assert deliver_all() == ["DELIVERED"]
    assert receiver.events(subscription.secret) == ["FAILED", "RECOVERED"]
