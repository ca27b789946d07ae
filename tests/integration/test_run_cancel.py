"""Stopping a refresh run: by hand (runs.cancel_run, the API, the table page) and at its
time limit (REFRESH_TIMEOUT_SECONDS, the table option refresh.timeout-seconds). The worker's
side, Spark cancelling the run's jobs, is tests/spark/test_mt_end_to_end.py's; here the
runner's heartbeat is watched asking for it."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from catalog import services
from catalog.core.errors import InvalidInput
from refresh import definitions, runner, runs, table_state
from refresh import services as mts
from refresh.core.options import run_time_limit
from refresh.models import MaterializedTable, MaterializedTableVersionLogEntry, RefreshRun
from runtime.running import Heartbeat
from tests.integration.test_refresh_decisions import DAILY, ORDERS

pytestmark = pytest.mark.django_db


@pytest.fixture
def mt(editor) -> MaterializedTable:
    services.create_namespace(name="sales")
    services.create_table(namespace="sales", name="orders", schema=ORDERS)
    table = services.create_table(namespace="sales", name="daily", schema=DAILY).obj
    return MaterializedTable.objects.create(
        table=table,
        query="SELECT ds, sum(amount) AS total FROM sales.orders GROUP BY ds",
        freshness_value=1,
        freshness_unit="HOUR",
        refresh_mode="FULL",
        mode_is_explicit=True,
        state="ACTIVATED",
        current_version=1,
    )


def queued(mt: MaterializedTable, trigger: str = "MANUAL") -> RefreshRun:
    return runs.enqueue(mt, trigger=trigger)


def running(mt: MaterializedTable) -> RefreshRun:
    run = runs.claim(queued(mt).pk, worker="w:1")
    assert run is not None and run.state == "RUNNING"
    return run


def api_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_a_queued_run_is_cancelled_at_once_and_no_worker_can_claim_it_after(mt, editor):
    run = runs.cancel_run(queued(mt), actor=editor)
    assert run.state == "CANCELLED" and run.finished_at is not None
    assert run.error == f"Cancelled by {editor.username} before it started"
    assert runs.claim(run.pk, worker="w:1") is None
    # A cancel is neither a failure nor a success of the table's refreshes.
    mt.refresh_from_db()
    assert mt.consecutive_failures == 0


def test_a_running_run_is_asked_to_stop_once_and_its_worker_sees_the_ask(mt, editor):
    run = running(mt)
    assert not runs.cancel_asked(run)
    asked = runs.cancel_run(run, actor=editor)
    assert asked.state == "RUNNING" and asked.cancel_requested_by == editor
    first = asked.cancel_requested_at
    assert first is not None and runs.cancel_asked(run)
    # A second ask changes nothing: the first one's time and author stand.
    again = runs.cancel_run(run, actor=None)
    assert again.cancel_requested_at == first and again.cancel_requested_by == editor


def test_a_finished_run_and_a_continuous_tables_run_cannot_be_cancelled(mt, editor):
    done = running(mt)
    runs.finish(done, state="SUCCEEDED")
    with pytest.raises(
        table_state.InvalidState, match=f"Refresh run {done.pk} already ended SUCCEEDED"
    ):
        runs.cancel_run(done, actor=editor)
    other = queued(mt)
    MaterializedTable.objects.filter(pk=mt.pk).update(refresh_mode="CONTINUOUS")
    with pytest.raises(table_state.InvalidState, match="SUSPEND stops it"):
        runs.cancel_run(other, actor=editor)
    other.refresh_from_db()
    assert other.state == "QUEUED"


def test_a_queued_rebuild_cancelled_leaves_the_definition_and_says_the_change_did_not_apply(
    mt, editor
):
    run = queued(mt, trigger="REBUILD")
    entry = MaterializedTableVersionLogEntry.objects.create(
        materialized_table=mt, version_id=2, operation="alter", run=run, outcome="PENDING"
    )
    runs.cancel_run(run, actor=editor)
    run.refresh_from_db()
    entry.refresh_from_db()
    assert run.state == "CANCELLED"
    assert entry.outcome == "FAILED" and "Cancelled by" in entry.error
    assert definitions.pending_change(mt) is None


def test_the_api_cancels_for_editors_refuses_viewers_and_answers_409_for_a_finished_run(
    mt, editor, viewer
):
    run = queued(mt)
    url = reverse("api:run-cancel", kwargs={"run_id": run.pk})
    refused = api_for(viewer).post(url)
    assert refused.status_code == 403
    run.refresh_from_db()
    assert run.state == "QUEUED"
    answer = api_for(editor).post(url)
    assert answer.status_code == 200, answer.content
    assert answer.json()["state"] == "CANCELLED"
    again = api_for(editor).post(url)
    assert again.status_code == 409 and "already ended CANCELLED" in again.json()["error"]
    missing = api_for(editor).post(reverse("api:run-cancel", kwargs={"run_id": 10**12}))
    assert missing.status_code == 404 and missing["Content-Type"] == "application/json"

    busy = running(mt)
    shown = api_for(editor).post(reverse("api:run-cancel", kwargs={"run_id": busy.pk})).json()
    assert shown["state"] == "RUNNING"
    assert shown["cancel_requested_by"] == editor.username and shown["cancel_requested_at"]


def test_the_table_page_shows_a_cancel_button_to_editors_and_cancels_that_tables_run_only(
    mt, editor, viewer, client
):
    run = queued(mt)
    page = reverse("refresh:mt-detail", kwargs={"namespace": "sales", "name": "daily"})
    cancel = reverse(
        "refresh:mt-run-cancel", kwargs={"namespace": "sales", "name": "daily", "run_id": run.pk}
    )
    client.force_login(viewer)
    assert cancel not in client.get(page).content.decode()
    assert client.post(cancel).status_code == 403
    client.force_login(editor)
    assert cancel in client.get(page).content.decode()
    # Another table's run is not this page's to cancel.
    other = reverse(
        "refresh:mt-run-cancel", kwargs={"namespace": "sales", "name": "orders", "run_id": run.pk}
    )
    assert client.post(other).status_code == 404
    shown = client.post(cancel, follow=True).content.decode()
    assert f"Job {run.pk} cancelled before it started." in shown
    run.refresh_from_db()
    assert run.state == "CANCELLED"


@pytest.mark.parametrize(
    "options, cap, limit",
    [
        ({}, 7200, 7200),
        ({"refresh.timeout-seconds": "60"}, 7200, 60),
        ({"refresh.timeout-seconds": "9000"}, 7200, 7200),  # never past the deployment's
        ({"refresh.timeout-seconds": "60"}, 0, 60),
        ({}, 0, None),
    ],
)
def test_a_runs_time_limit_is_the_tables_option_capped_by_the_deployments(options, cap, limit):
    assert run_time_limit(options, cap=cap) == limit


@pytest.mark.parametrize("value", ["0", "-5", "1.5", "²", "9" * 5000, "", "ten"])
def test_a_time_limit_that_is_not_a_positive_whole_number_is_refused_naming_the_option(mt, value):
    with pytest.raises(InvalidInput, match="'refresh.timeout-seconds' is a whole number"):
        mts.set_options(mt, options={"refresh.timeout-seconds": value})
    mts.set_options(mt, options={"refresh.timeout-seconds": " 30 "})
    mt.refresh_from_db()
    assert run_time_limit(mt.options, cap=7200) == 30
    mts.reset_options(mt, keys=["refresh.timeout-seconds"])
    mt.refresh_from_db()
    assert "refresh.timeout-seconds" not in mt.options


def wait_for(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "the heartbeat did not stop the run in time"
        time.sleep(0.05)


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_stops_the_runs_spark_jobs_on_a_cancel_and_again_at_every_look(
    mt, editor, monkeypatch
):
    cancelled: list[str] = []
    monkeypatch.setattr("runtime.engine.cancel_group", cancelled.append)
    run = running(mt)
    beating = Heartbeat(run, watch="lakeview-run-x", limit=None)
    beating.start()
    try:
        time.sleep(1.5)
        assert cancelled == [] and beating.ended_by is None
        runs.cancel_run(run, actor=editor)
        wait_for(lambda: len(cancelled) >= 2)
    finally:
        beating.stop()
    assert beating.ended_by == "cancel" and set(cancelled) == {"lakeview-run-x"}
    state, message = runner._stopped(run, beating)
    assert state == "CANCELLED" and message.startswith(f"Cancelled by {editor.username} after")


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_stops_a_run_past_its_time_limit_and_fails_it_saying_so(mt, monkeypatch):
    cancelled: list[str] = []
    monkeypatch.setattr("runtime.engine.cancel_group", cancelled.append)
    run = running(mt)
    beating = Heartbeat(run, watch="lakeview-run-y", limit=1.0)
    beating.start()
    try:
        wait_for(lambda: cancelled)
    finally:
        beating.stop()
    assert beating.ended_by == "timeout" and beating.seconds() >= 1.0
    state, message = runner._stopped(run, beating)
    assert state == "FAILED"
    assert (
        message.startswith("Timed out: stopped after 1 s") and "refresh.timeout-seconds" in message
    )
    # It still says the worker is alive meanwhile.
    run.refresh_from_db()
    assert run.heartbeat_at is not None
    assert timezone.now() - run.heartbeat_at < timedelta(seconds=30)


def test_a_run_that_failed_on_its_own_is_not_reported_as_stopped(mt):
    beating = Heartbeat(running(mt), watch="g", limit=None)
    assert runner._stopped(beating.run_row, beating) is None


def _side_by_side(first, second, *, between: float = 0.5) -> tuple[list, list]:
    """Run `first` and `second` on two threads, `second` starting once `first` is inside
    its transaction (the `held` event) and `first` then waiting `between` seconds: what
    each returned or raised, by thread."""
    import threading

    from django.db import connection

    held = threading.Event()
    results: dict[str, list] = {"first": [], "second": []}

    def call(name: str, work) -> None:
        try:
            results[name].append(work(held))
        except Exception as error:  # noqa: BLE001 - the race's outcome is what is asserted
            results[name].append(error)
        finally:
            connection.close()

    one = threading.Thread(target=call, args=("first", first))
    two = threading.Thread(target=call, args=("second", second))
    one.start()
    assert held.wait(10), "the first caller never reached its transaction"
    two.start()
    one.join(30)
    two.join(30)
    return results["first"], results["second"]


@pytest.fixture
def postgres_only() -> None:
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("row-level concurrency is checked on PostgreSQL (make test runs it there)")


@pytest.mark.django_db(transaction=True)
def test_a_cancel_and_a_workers_claim_of_the_same_queued_run_both_end_without_an_error(
    postgres_only, mt, editor, monkeypatch
):
    """claim locks the table and then updates the run; cancel_run, which also locks the
    table (finish -> _count), must take it first too: it locked the run first, and
    PostgreSQL found a deadlock here every time (a 500 for the cancel). One wins and
    neither fails: the run is CANCELLED and not claimed, or RUNNING with the cancel asked."""
    run = queued(mt)
    finish = runs.finish
    held_by_cancel: list = []

    def slow_finish(*args, **kwargs):
        held_by_cancel[0].set()  # the run's row is locked by now
        time.sleep(0.5)
        return finish(*args, **kwargs)

    monkeypatch.setattr(runs, "finish", slow_finish)

    def cancel(held):
        held_by_cancel.append(held)
        return runs.cancel_run(run, actor=editor)

    cancelled, claimed = _side_by_side(cancel, lambda held: runs.claim(run.pk, worker="w:2"))
    assert not isinstance(cancelled[0], Exception), repr(cancelled[0])
    assert not isinstance(claimed[0], Exception), repr(claimed[0])
    run.refresh_from_db()
    if claimed[0] is None:
        assert run.state == "CANCELLED"
    else:
        assert run.state == "RUNNING" and run.cancel_requested_at is not None


@pytest.mark.django_db(transaction=True)
def test_a_cancel_and_the_workers_finish_of_the_same_running_run_both_end_without_an_error(
    postgres_only, mt, editor, monkeypatch
):
    """finish updates the run and then (_count) locks its table; cancel_run locks the table
    and then the run. One wins and neither fails: the run SUCCEEDED (its commit landed; a
    late cancel is a 409) or it is still RUNNING with the cancel asked when finish came."""
    run = running(mt)
    count = runs._count
    held_by_finish: list = []

    def slow_count(*args, **kwargs):
        held_by_finish[0].set()  # the run's row is updated, so locked, by now
        time.sleep(0.5)
        return count(*args, **kwargs)

    monkeypatch.setattr(runs, "_count", slow_count)

    def finish(held):
        held_by_finish.append(held)
        return runs.finish(run, state="SUCCEEDED")

    finished, cancelled = _side_by_side(finish, lambda held: runs.cancel_run(run, actor=editor))
    assert not isinstance(finished[0], Exception), repr(finished[0])
    assert isinstance(cancelled[0], RefreshRun | table_state.InvalidState), repr(cancelled[0])
    run.refresh_from_db()
    assert run.state == "SUCCEEDED"


def test_asking_a_running_run_to_stop_again_records_nothing_more_in_its_tables_history(mt, editor):
    from catalog.models import CatalogEvent

    run = running(mt)
    runs.cancel_run(run, actor=editor)
    recorded = CatalogEvent.objects.count()
    for _ in range(3):
        runs.cancel_run(run, actor=editor)
    assert CatalogEvent.objects.count() == recorded
