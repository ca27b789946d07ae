"""History stays bounded for months without losing who ran what, when, with what result:
successful commit events older than a day are folded per object, actor, action and hour
into one event with their count (catalog.history.fold_commits), and scheduled refreshes
skipped as NO_DATA older than an hour into one run per table and hour
(refresh.runs.fold_skipped_runs), as micro-batches already are. Failures, conflicts,
other actions, manual refreshes and recent rows are never folded; the pages, the API and
the admin show the counts. Rows are made through the services and back-dated."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from catalog import history, services
from catalog.core.errors import CommitConflict, InvalidInput
from catalog.models import CatalogEvent
from catalog.tasks import fold_commit_events
from refresh import runs, selectors
from refresh.models import MaterializedTable, RefreshRun
from refresh.tasks import fold_skipped_runs

pytestmark = pytest.mark.django_db

SCHEMA = {
    "type": "struct",
    "schema-id": 0,
    "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
}
#: An hour boundary three days back: every row placed after it is past both folding ages.
OLD_HOUR = (timezone.now() - timedelta(days=3)).replace(minute=0, second=0, microsecond=0)


@pytest.fixture(autouse=True)
def first_pass_of_a_process():
    """Each test's periodic passes start as a new process's: reading every old row."""
    history._resume_from.clear()
    yield
    history._resume_from.clear()


@pytest.fixture
def table(editor):
    services.create_namespace(name="lake", actor=editor)
    return services.create_table(namespace="lake", name="events", schema=SCHEMA, actor=editor).obj


def commit(table, *, actor, at, n: int) -> CatalogEvent:
    """A real commit through the catalog's commit path, its event moved to `at`."""
    services.commit_table(
        namespace="lake",
        name="events",
        requirements=[],
        updates=[{"action": "set-properties", "updates": {"n": str(n)}}],
        actor=actor,
    )
    event = CatalogEvent.objects.for_object(table).filter(action="commit_table").first()
    CatalogEvent.objects.filter(pk=event.pk).update(occurred_at=at)
    event.refresh_from_db()
    return event


def event_rows() -> list[tuple]:
    return list(
        CatalogEvent.objects.order_by("id").values_list(
            "id", "action", "actor_id", "result", "count", "occurred_at", "first_occurred_at"
        )
    )


# -- commit events --------------------------------------------------------------------------


def test_old_commits_fold_per_hour_into_the_newest_with_their_count_and_first_time(
    table, editor, django_user_model
):
    other = django_user_model.objects.create_user(username="spark")
    first_hour = [
        commit(table, actor=editor, at=OLD_HOUR + timedelta(minutes=m), n=m) for m in (1, 7, 30, 59)
    ]
    by_other = [
        commit(table, actor=other, at=OLD_HOUR + timedelta(minutes=m), n=m + 100) for m in (2, 3)
    ]
    second_hour = [
        commit(table, actor=editor, at=OLD_HOUR + timedelta(hours=1, minutes=m), n=m + 200)
        for m in (0, 10, 20)
    ]

    folded = history.fold_commits()

    assert folded == 3 + 1 + 2
    commits = list(
        CatalogEvent.objects.for_object(table)
        .filter(action="commit_table")
        .order_by("occurred_at", "actor_id")
    )
    assert [(e.actor, e.count) for e in commits] == [(other, 2), (editor, 4), (editor, 3)]
    by_editor = {e.occurred_at: e for e in commits if e.actor == editor}
    for hour in (first_hour, second_hour):
        kept = by_editor[hour[-1].occurred_at]
        assert kept.pk == hour[-1].pk, "the newest event of the hour is the one kept"
        assert kept.first_occurred_at == hour[0].occurred_at
        assert kept.metadata_location == hour[-1].metadata_location != hour[0].metadata_location
        assert kept.object_name == "lake.events" and kept.result == CatalogEvent.Result.OK
    assert commits[0].first_occurred_at == by_other[0].occurred_at
    assert commits[0].metadata_location == by_other[-1].metadata_location


def test_folding_a_second_time_changes_nothing(table, editor):
    for m in range(5):
        commit(table, actor=editor, at=OLD_HOUR + timedelta(minutes=m * 10), n=m)
    assert history.fold_commits() == 4
    once = event_rows()

    assert history.fold_commits() == 0
    assert event_rows() == once


def test_an_hour_folded_in_part_takes_in_the_rest_of_it_once_that_is_old_enough(table, editor):
    events = [
        commit(table, actor=editor, at=OLD_HOUR + timedelta(minutes=m), n=m)
        for m in (5, 15, 35, 45)
    ]
    # A pass when only the hour's first half is a day old ...
    halfway = OLD_HOUR + timedelta(days=1, minutes=30)
    assert history.fold_commits(now=halfway) == 1
    assert CatalogEvent.objects.filter(action="commit_table").count() == 3

    # ... and one later: one event for the hour, all four counted.
    assert history.fold_commits() == 2
    [kept] = CatalogEvent.objects.filter(action="commit_table")
    assert (kept.pk, kept.count) == (events[-1].pk, 4)
    assert kept.first_occurred_at == events[0].occurred_at


def test_failures_conflicts_and_other_actions_are_never_folded(table, editor):
    at = OLD_HOUR + timedelta(minutes=1)
    for error in (CommitConflict("lost a race"), InvalidInput("bad update")):
        for _ in range(3):
            history.record_failure(
                error,
                actor=editor,
                action="commit_table",
                object_type="table",
                object_name="lake.events",
                object_uuid=table.uuid,
            )
    for action in ("rename_table", "update_table_properties", "grant", "create_table"):
        for _ in range(2):
            history.record_change(table, actor=editor, action=action)
    CatalogEvent.objects.update(occurred_at=at)
    before = event_rows()

    assert history.fold_commits() == 0
    assert event_rows() == before


def test_commits_younger_than_the_folding_age_stay_until_the_setting_says_otherwise(
    table, editor, settings
):
    # Three commits within one hour, two to three hours back.
    recent = (timezone.now() - timedelta(hours=2)).replace(minute=0) - timedelta(minutes=30)
    for m in range(3):
        commit(table, actor=editor, at=recent + timedelta(minutes=m), n=m)
    before = event_rows()

    assert history.fold_commits() == 0
    assert event_rows() == before

    settings.HISTORY_FOLD_COMMITS_AFTER_SECONDS = 3600
    assert history.fold_commits() == 2


def test_the_history_api_the_table_page_and_the_admin_show_a_folded_commits_count(
    table, editor, viewer, client, admin_client
):
    events = [
        commit(table, actor=editor, at=OLD_HOUR + timedelta(minutes=m), n=m) for m in range(6)
    ]
    history.fold_commits()

    api = APIClient()
    api.force_authenticate(editor)
    [shown] = [
        e for e in api.get("/api/history/").json()["results"] if e["action"] == "commit_table"
    ]
    assert shown["count"] == 6
    assert shown["metadata_location"] == events[-1].metadata_location
    assert shown["first_occurred_at"].startswith(
        events[0].occurred_at.strftime("%Y-%m-%dT%H:%M:%S")
    )
    single = [
        e for e in api.get("/api/history/").json()["results"] if e["action"] == "create_table"
    ]
    assert single[0]["count"] == 1 and single[0]["first_occurred_at"] is None

    client.force_login(viewer)
    page = client.get(reverse("catalog:table-detail", args=["lake", "events"])).content.decode()
    assert "commit_table ×6" in page
    assert events[0].occurred_at.strftime("%Y-%m-%d %H:%M:%S") in page

    changelist = admin_client.get(reverse("admin:catalog_catalogevent_changelist"))
    assert "commit_table ×6" in changelist.content.decode()


# -- NO_DATA ticks ----------------------------------------------------------------------------


@pytest.fixture
def idle():
    """A FULL table at one minute whose sources never change."""
    services.create_namespace(name="sales")
    table = services.create_table(namespace="sales", name="daily", schema=SCHEMA).obj
    return MaterializedTable.objects.create(
        table=table,
        query="SELECT id FROM sales.orders",
        freshness_value=1,
        freshness_unit="MINUTE",
        refresh_mode="FULL",
        state="ACTIVATED",
    )


def tick(mt, at, *, trigger="SCHEDULED", state="SKIPPED", action="NO_DATA", **fields) -> RefreshRun:
    """A run of the tick at `at`, finished a moment later, as refresh.runner records it."""
    return RefreshRun.objects.create(
        materialized_table=mt,
        table_name=str(mt.table),
        trigger=trigger,
        action=action,
        state=state,
        schedule_time=at if trigger == "SCHEDULED" else None,
        reason=f"no data: no source changed since run 1 (tick {at:%H:%M})",
        queued_at=at,
        started_at=at + timedelta(seconds=1),
        finished_at=at + timedelta(seconds=2),
        source_snapshots={"sales.orders": 41},
        data_timestamp=at + timedelta(seconds=1) if state in ("SKIPPED", "SUCCEEDED") else None,
        definition_version=1,
        **fields,
    )


def run_rows(mt) -> list[tuple]:
    return list(
        mt.runs.order_by("id").values_list(
            "id", "state", "action", "batches", "queued_at", "started_at", "finished_at"
        )
    )


def test_no_data_ticks_older_than_an_hour_fold_per_table_and_hour_and_recent_ones_stay(idle):
    ticks = [tick(idle, OLD_HOUR + timedelta(minutes=i)) for i in range(120)]
    now = timezone.now().replace(second=0, microsecond=0)
    recent = [tick(idle, now - timedelta(minutes=5 - i)) for i in range(5)]
    as_of = selectors.data_timestamp(idle)

    folded = runs.fold_skipped_runs()

    assert folded == 118
    old = list(idle.runs.filter(batches__gt=1).order_by("queued_at"))
    assert [run.batches for run in old] == [60, 60]
    for run, hour in zip(old, (ticks[:60], ticks[60:]), strict=True):
        assert run.pk == hour[-1].pk, "the hour's newest tick is the one kept"
        assert run.queued_at == hour[0].queued_at and run.started_at == hour[0].started_at
        assert run.finished_at == hour[-1].finished_at
        assert run.schedule_time == hour[-1].schedule_time
        assert run.data_timestamp == hour[-1].data_timestamp and run.reason == hour[-1].reason
    assert sorted(idle.runs.filter(batches=1).values_list("pk", flat=True)) == [
        r.pk for r in recent
    ]
    assert selectors.data_timestamp(idle) == as_of, "lag is measured from the same moment"

    before = run_rows(idle)
    assert runs.fold_skipped_runs() == 0
    assert run_rows(idle) == before, "folding a second time changes nothing"


def test_manual_skips_busy_ticks_failures_and_refreshes_are_never_folded(idle, editor):
    for i in range(3):
        at = OLD_HOUR + timedelta(minutes=10 * i)
        tick(idle, at + timedelta(minutes=1), trigger="MANUAL", requested_by=editor)
        tick(
            idle,
            at + timedelta(minutes=2),
            action="",
            error="Skipped: the previous refresh was still running",
        )
        tick(idle, at + timedelta(minutes=3), state="FAILED", action="FULL", error="boom")
        tick(idle, at + timedelta(minutes=4), state="SUCCEEDED", action="FULL")
        tick(idle, at + timedelta(minutes=5), state="SUCCEEDED", action="INCREMENTAL")
    before = run_rows(idle)

    assert runs.fold_skipped_runs() == 0
    assert run_rows(idle) == before


def test_the_table_page_and_the_apis_show_how_many_ticks_a_folded_run_stands_for(
    idle, viewer, client
):
    for i in range(30):
        tick(idle, OLD_HOUR + timedelta(minutes=2 * i))
    runs.fold_skipped_runs()
    [folded] = idle.runs.all()

    api = APIClient()
    api.force_authenticate(viewer)
    assert api.get(f"/api/refresh-runs/{folded.pk}/").json()["batches"] == 30
    listed = api.get("/api/monitoring/history/").json()["results"]
    assert [(e["id"], e["count"]) for e in listed] == [(folded.pk, 30)]

    client.force_login(viewer)
    page = client.get(reverse("refresh:mt-detail", args=["sales", "daily"])).content.decode()
    assert "×30" in page
    monitoring_page = client.get("/monitoring/").content.decode()
    assert "×30" in monitoring_page


# -- scheduling -------------------------------------------------------------------------------


def test_celery_beat_runs_both_folds_on_any_worker_deployment(table, editor, idle):
    for m in range(3):
        commit(table, actor=editor, at=OLD_HOUR + timedelta(minutes=m), n=m)
        tick(idle, OLD_HOUR + timedelta(minutes=m))
    schedule = django_settings.CELERY_BEAT_SCHEDULE
    assert schedule["fold-commit-events"]["task"] == fold_commit_events.name
    assert schedule["fold-skipped-runs"]["task"] == fold_skipped_runs.name
    assert schedule["fold-skipped-runs"]["schedule"] == django_settings.HISTORY_FOLD_EVERY_SECONDS

    assert fold_commit_events() == 2
    assert fold_skipped_runs() == 2


def test_a_periodic_pass_reads_only_what_the_previous_one_left_after_a_first_full_pass(
    table, editor
):
    for m in range(3):
        commit(table, actor=editor, at=OLD_HOUR + timedelta(minutes=m), n=m)
    assert fold_commit_events() == 2, "a process's first pass folds the backlog"

    # Rows that turn old since the previous pass are folded ...
    a_day_ago = (timezone.now() - timedelta(days=1)).replace(minute=0, second=0, microsecond=0)
    lately = a_day_ago - timedelta(minutes=30)
    for m in range(2):
        commit(table, actor=editor, at=lately + timedelta(seconds=m), n=10 + m)
    # ... while rows placed long before it (never written so in life) are not read again.
    for m in range(2):
        commit(
            table, actor=editor, at=OLD_HOUR - timedelta(days=2) + timedelta(minutes=m), n=20 + m
        )

    assert fold_commit_events() == 1
    assert history.fold_commits() == 1, "a full pass still finds them"
